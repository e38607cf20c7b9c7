//! Granite 4.0 hybrid ("granitehybrid"): Granite's decoder in which the layers without key/value
//! heads are Mamba-2 layers; the context keeps a KV cache for the attention layers and recurrent
//! state for the others.

use super::created::{layered, EXPERTS, GATED_BIASED, HEAD, SHARED_GUD};
use super::mamba::MAMBA2;
use super::{attention_tensors, ffn_tensors, head_tensors, llama, mamba};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec};

pub struct GraniteHybrid;

impl ArchSpec for GraniteHybrid {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "granitehybrid",
            about: "Granite 4.0, a hybrid: Mamba-2 layers among attention layers.",
            read_keys: &[
                super::READS_SSM,
                super::READS_RMS_EPS,
                &[
                    "expert_shared_feed_forward_length",
                    "logit_scale",
                    "residual_scale",
                    "embedding_scale",
                    "attention.scale",
                    "ssm.group_count",
                ],
            ],
            saved_rules: &[super::granite::ROTATES_BY_DEFAULT],
            memory: Memory::Hybrid,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        mamba::load_mamba2(meta, hp)?;
        if hp.ssm_d_inner != 2 * hp.n_embd {
            return Err(Error::model(
                "granitehybrid: only an expansion factor of 2 is supported",
            ));
        }
        hp.logit_scale = meta.f32_opt(&hp.key("logit_scale"))?.unwrap_or(0.0);
        hp.residual_scale = meta.f32_opt(&hp.key("residual_scale"))?.unwrap_or(0.0);
        hp.embedding_scale = meta.f32_opt(&hp.key("embedding_scale"))?.unwrap_or(0.0);
        hp.attn_scale = meta.f32_opt(&hp.key("attention.scale"))?.unwrap_or(0.0);
        hp.rope = meta.bool_opt(&hp.key("rope.scaling.finetuned"))?.unwrap_or(true);
        // A layer without key/value heads is a Mamba-2 layer.
        hp.recurrent_layers = hp.n_head_kv.iter().map(|&h| h == 0).collect();
        hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
        if meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0) > 0 {
            return Err(Error::NotImplemented("granitehybrid with shared experts"));
        }
        if hp.n_embd_head_k != hp.n_embd_head_v {
            return Err(Error::model("granitehybrid needs equal key and value head sizes"));
        }
        hp.size_label = match hp.n_embd {
            768 => "350M",
            1536 if hp.n_ff.first() == Some(&512) => "7B.A1B",
            1536 => "1B",
            2048 | 2560 => "3B",
            4096 => "32B.A9B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        granite_hybrid(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        super::rope_factor_tensors(hp, &mut specs);
        for il in 0..hp.n_layer as usize {
            let e = hp.n_embd;
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            if hp.is_recurrent(il) {
                mamba::mamba2_tensors(hp, il, false, &mut specs);
            } else {
                attention_tensors(hp, il, &mut specs);
                specs.push(TensorSpec::new(b("attn_output.bias"), &[e], false));
            }
            ffn_tensors(hp, il, true, &mut specs);
            if hp.n_expert == 0 {
                super::ffn_bias_tensors(hp, il, &mut specs);
            }
        }
        specs
    }
}

/// Granite 4's hybrid: Mamba-2 layers or attention layers with an output bias, then Granite's FFN
/// (with `rope_freqs`): experts (and a shared one) or a dense FFN with biases.
fn granite_hybrid(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = if hp.is_recurrent(il) {
            MAMBA2
        } else {
            "QKV attn_output.weight attn_output.bias"
        };
        let ffn = if hp.n_expert == 0 {
            GATED_BIASED.to_string()
        } else if hp.n_ff_shexp > 0 {
            format!("{EXPERTS} {SHARED_GUD}")
        } else {
            EXPERTS.to_string()
        };
        format!("attn_norm.weight {mixer} ffn_norm.weight ROPE_FREQS {ffn}")
    })
}

impl Decoder for GraniteHybrid {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        llama::decoder(b, llama::Variant::BASE)
    }
}
