//! Mellum: Qwen3-MoE's decoder (per-head query and key norms, softmax-routed experts with their
//! weights' scales) with its own output head and, when the file has a window, sliding layers
//! (three of each four by default) that rotate with the context's base, unscaled, without YaRN.

use super::{llama, qwen3};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Mellum;

/// Without a pattern in the file, the last layer of each four attends globally.
const DEFAULT_SWA_PERIOD: u32 = 4;

impl ArchSpec for Mellum {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "mellum",
            about: "Qwen3-MoE's layers with plainly rotating sliding layers.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["expert_feed_forward_length"],
            ],
            saved_rules: &[super::HELD_SWA_BASE_IF_WINDOW],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        super::check_experts(hp)?;
        // llama.cpp requires the key, and reads 0 as the FFN width shared by the used experts.
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        if hp.n_ff_exp == 0 {
            hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used;
        }
        let window = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
        let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
        super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, base, scale)?;
        hp.size_label = if hp.n_layer == 28 { "12B.A2.5B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        super::qwen3moe::qwen3moe(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = qwen3::tensors(hp, true);
        super::require_output(&mut specs);
        specs
    }
}

impl Decoder for Mellum {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            qk_norm: true,
            swa_rope: llama::SwaRope::Plain,
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
