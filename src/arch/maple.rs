//! Maple: Qwen3-MoE's layers (per-head query and key norms before rotation, softmax-routed
//! experts, the picked weights normalised) where only the sliding-window layers (an array in the
//! file) rotate, with each layer's SwiGLU limit on the experts and its own output head.

use super::{llama, qwen3};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Maple;

impl ArchSpec for Maple {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "maple",
            about: "Mellum's layers, only the sliding ones rotating, per-layer clamped SwiGLU experts.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &[
                    "expert_feed_forward_length",
                    "swiglu_clamp_exp",
                    "attention.sliding_window_pattern",
                ],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        super::check_experts(hp)?;
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        super::load_sliding_window_array(meta, hp)?;
        let clamp = hp.key("swiglu_clamp_exp");
        hp.swiglu_clamp_exp = meta
            .f32_per_layer(&clamp, hp.n_layer as usize)?
            .ok_or_else(|| Error::model(format!("key '{clamp}' is missing")))?;
        hp.swiglu_clamp_fused = true;
        hp.size_label = if hp.n_layer == 24 { "20B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        super::qwen3moe::llada_moe(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = qwen3::tensors(hp, true);
        super::require_output(&mut specs);
        specs
    }
}

impl Decoder for Maple {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            qk_norm: true,
            rope_sliding_only: true,
            moe: Some(Moe {
                normalize: true,
                ..Moe::BASE
            }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
