//! Qwen2: the Llama decoder with attention biases, an output bias and NeoX rotation; Qwen2-VL's
//! language model (M-RoPE) and Qwen2-MoE.

use super::created::{layered, plain, ATTN, EXPERTS, HEAD};
use super::llama;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_MROPE, ROPE_NEOX};

pub struct Qwen2;

impl ArchSpec for Qwen2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "qwen2",
            about: "Qwen2: the Llama graph with attention biases.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        // Size labels as llama.cpp derives them from the layer count, for llama_model_desc.
        hp.size_label = match hp.n_layer {
            24 if hp.n_embd == 1024 => "0.5B",
            24 => "1B",
            28 if hp.n_embd == 1536 => "1.5B",
            28 => "7B",
            32 => "7B",
            36 => "3B",
            40 if hp.n_head[0] == 20 => "4B",
            40 => "13B",
            48 => "14B",
            64 => "32B",
            80 => "70B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = llama::tensors(hp);
        specs.push(TensorSpec::new("output.bias", &[hp.n_vocab], false));
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        qwen2(hp)
    }
}

/// Qwen 2's (and Qwen2-VL's, Dream's): the plain decoder with an output bias.
pub(super) fn qwen2(hp: &HParams) -> Vec<String> {
    plain(hp, &format!("{HEAD} output.bias"))
}

impl Decoder for Qwen2 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        llama::decoder(b, llama::Variant::BASE)
    }
}

/// Qwen2-VL's language model: Qwen2 with M-RoPE (four positions per token in sections of the
/// head), its head bias and rotary factors loaded but left out.
pub struct Qwen2Vl;

impl ArchSpec for Qwen2Vl {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "qwen2vl",
            about: "Qwen2-VL's language model: M-RoPE.",
            rope_type: ROPE_MROPE,
            read_keys: &[&["rope.dimension_sections"]],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        // llama.cpp never reads this architecture's norm epsilon: its norms add 0.
        hp.rms_eps = 0.0;
        super::load_rope_sections(meta, hp)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        qwen2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        Qwen2.tensors(hp)
    }
}

impl Decoder for Qwen2Vl {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            no_output_bias: true,
            no_rope_factors: true,
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}

/// Qwen2-MoE: Qwen2's attention, softmax-routed experts (weights not normalised, no scales)
/// beside a shared expert scaled by silu(g)/g of its gate's output g.
pub struct Qwen2Moe;

impl ArchSpec for Qwen2Moe {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "qwen2moe",
            about: "Qwen2 with experts and a gated shared expert.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                &["expert_feed_forward_length", "expert_shared_feed_forward_length"],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        if hp.n_expert == 0 || hp.n_expert_used == 0 {
            return Err(crate::Error::model("qwen2moe needs expert_count and expert_used_count"));
        }
        if hp.n_ff_exp == 0 {
            hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used;
        }
        hp.n_ff_shexp = meta
            .u32_opt(&hp.key("expert_shared_feed_forward_length"))?
            .unwrap_or(hp.n_ff[0]);
        hp.size_label = match hp.n_layer {
            24 => "A2.7B",
            28 => "57B.A14B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        qwen2moe(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = llama::tensors(hp);
        let e = hp.n_embd;
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("ffn_gate_inp_shexp.weight"), &[e], true));
            super::shared_expert_tensors(hp, il, &mut specs);
        }
        specs
    }
}

/// Qwen2-MoE's: routed experts and a gated shared expert.
fn qwen2moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight {EXPERTS} ffn_gate_inp_shexp.weight ffn_gate_shexp.weight ffn_down_shexp.weight ffn_up_shexp.weight")
    })
}

impl Decoder for Qwen2Moe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            moe: Some(Moe { ..Moe::BASE }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
