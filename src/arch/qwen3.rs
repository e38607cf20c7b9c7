//! Qwen3: the Llama decoder without biases, with per-head query and key norms and NeoX rotation.
//! Qwen3-VL's language model: the same with interleaved M-RoPE and no FFN scales.

use super::created::{layered, ATTN, FFN, HEAD, KQ_NORMS};
use super::{common_tensors, llama};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_IMROPE, ROPE_NEOX};

pub struct Qwen3;

impl ArchSpec for Qwen3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "qwen3",
            about: "Qwen3: per-head query and key norms.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        // Qwen3's rerankers score with a softmax over their labels.
        hp.rank_softmax = true;
        super::check_equal_head_sizes(hp)?;
        // Size labels as llama.cpp derives them, for llama_model_desc.
        hp.size_label = match hp.n_layer {
            28 if hp.n_embd == 1024 => "0.6B",
            28 => "1.7B",
            36 if hp.n_embd == 2560 => "4B",
            36 => "8B",
            40 => "14B",
            64 => "32B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = tensors(hp, false);
        // A reranker's classifier head.
        specs.push(TensorSpec::matmul(
            "cls.output.weight",
            &[hp.n_embd, hp.n_cls_out()],
            false,
        ));
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        qwen3(hp, &format!("{HEAD} cls.output.weight"))
    }
}

/// Qwen 3's (and Maincoder's, Hunyuan's dense ones): key and query norms after the attention
/// output, with `head`.
pub(super) fn qwen3(hp: &HParams, head: &str) -> Vec<String> {
    layered(hp, head, |_| format!("{ATTN} {KQ_NORMS} {FFN}"))
}

/// The language model of Qwen3-VL; Qwen3-TTS's talker is the same model under its own name
/// (whose rerankers, llama.cpp says, score without a softmax).
pub struct Qwen3Vl {
    facts: Facts,
    rank_softmax: bool,
    /// Qwen3-TTS's talker ends in a codec head of `CODEC_LOGITS` logits, not the vocabulary's.
    codec_head: bool,
}

/// What Qwen3-VL's language models read.
pub(super) const READS_VL: &[&str] = &[
    "n_deepstack_layers",
    "attention.layer_norm_rms_epsilon",
    "rope.dimension_sections",
];

pub const QWEN3VL: Qwen3Vl = Qwen3Vl {
    facts: Facts {
        name: "qwen3vl",
        about: "Qwen3-VL's language model: interleaved M-RoPE; deepstack layers add image features to the first \
            layers' outputs.",
        rope_type: ROPE_IMROPE,
        read_keys: &[READS_VL],
        ..Facts::BASE
    },
    rank_softmax: true,
    codec_head: false,
};
pub const QWEN3TTS: Qwen3Vl = Qwen3Vl {
    facts: Facts {
        name: "qwen3tts",
        about: "Qwen3-TTS's talker: Qwen3-VL's model under its own name, with its codec head (logits padded with \
            -inf to the vocabulary, as llama.cpp pads them).",
        rope_type: ROPE_IMROPE,
        read_keys: &[READS_VL],
        ..Facts::BASE
    },
    rank_softmax: false,
    codec_head: true,
};

impl ArchSpec for Qwen3Vl {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        // Its rerankers, as Qwen3's, score with a softmax over their labels.
        hp.rank_softmax = self.rank_softmax;
        super::check_equal_head_sizes(hp)?;
        load_vl(meta, hp)?;
        hp.size_label = match hp.n_layer {
            28 => "1.7B",
            36 if hp.n_embd == 2560 => "4B",
            36 => "8B",
            64 => "32B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        qwen3(hp, &format!("{HEAD} cls.output.weight"))
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Qwen3.tensors(hp);
        if self.codec_head {
            for s in specs.iter_mut().filter(|s| s.name == "output.weight") {
                s.shape = vec![hp.n_embd.into(), CODEC_LOGITS];
            }
        }
        specs
    }
}

impl Decoder for Qwen3Vl {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            qk_norm: true,
            ..llama::Variant::BASE
        };
        match llama::decoder(b, variant)? {
            Some(logits) => codec_padded(b, logits).map(Some),
            None => Ok(None),
        }
    }
}

/// The logits of Qwen3-TTS's codec head.
const CODEC_LOGITS: u64 = 3072;

/// Logits of a head narrower than the vocabulary (Qwen3-TTS's codec head) with -inf before them
/// for the rest, as llama.cpp pads them: 0 times one value of the output norm plus -inf, repeated.
fn codec_padded(b: &mut Builder, logits: TensorRef) -> Result<TensorRef> {
    let [n_out, n_rows, ..] = logits.ne();
    let pad = i64::from(b.hp.n_vocab) - n_out;
    if pad <= 0 {
        return Ok(logits);
    }
    let norm = b.weight("output_norm.weight")?;
    let one = b.g.view(norm, &[1], &[], 0)?;
    let neg_inf = b.g.scale_bias(one, 0.0, f32::NEG_INFINITY)?;
    let neg_inf = b.g.repeat(neg_inf, [pad, n_rows, 1, 1])?;
    b.g.concat(neg_inf, logits, 0).map_err(Error::from)
}

/// What Qwen3-VL's language models read beyond Qwen3's: the rotary sections (required) and the
/// number of "deepstack" layers, to whose outputs image features are added (all but the last:
/// the last layer keeps only the output rows, which the features are not cut to).
pub(super) fn load_vl(meta: &Meta, hp: &mut HParams) -> Result<()> {
    super::load_rope_sections(meta, hp)?;
    let key = hp.key("n_deepstack_layers");
    hp.n_deepstack = meta.u32_opt(&key)?.unwrap_or(0);
    if hp.n_deepstack >= hp.n_layer {
        return Err(Error::model(format!(
            "'{key}' is {}: deepstack layers must be fewer than the {} layers",
            hp.n_deepstack, hp.n_layer
        )));
    }
    Ok(())
}

/// Qwen3's tensors: the common decoder's (with `experts`, as Qwen3-MoE has them) and the per-head
/// query and key norms.
pub(super) fn tensors(hp: &HParams, experts: bool) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    common_tensors(hp, experts, &mut specs);
    for il in 0..hp.n_layer as usize {
        let head = hp.n_embd_head_k;
        specs.push(TensorSpec::new(format!("blk.{il}.attn_q_norm.weight"), &[head], true));
        specs.push(TensorSpec::new(format!("blk.{il}.attn_k_norm.weight"), &[head], true));
    }
    specs
}

/// Qwen3's decoder (query and key norms), its layers' FFNs dense or experts as the file has them.
pub(super) fn build(b: &mut Builder) -> Result<Option<TensorRef>> {
    let variant = llama::Variant {
        qk_norm: true,
        ffn_scales: true,
        ..llama::Variant::BASE
    };
    llama::decoder(b, variant)
}

impl Decoder for Qwen3 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        build(b)
    }
}
