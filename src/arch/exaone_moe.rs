//! EXAONE-MoE: per-head query and key norms, NeoX rotation on the sliding-window layers only
//! (with the context's base and scale, as the global layers would), leading dense layers, then
//! experts routed by the file's gating function (optional selection bias, weights normalised and
//! scaled as the file says) beside a shared expert; its own output head. Multi-token-prediction
//! layers are refused.

use super::created::{self, layered, BIASED_EXPERTS, HEAD};
use super::{dense_lead, llama, qwen3};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct ExaoneMoe;

/// Without a pattern in the file, the last layer of each four attends globally.
const DEFAULT_SWA_PERIOD: u32 = 4;

impl ArchSpec for ExaoneMoe {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "exaone-moe",
            about: "Head norms, only sliding layers rotating, leading dense layers, experts beside a shared expert; \
                multi-token-prediction layers refused.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["expert_shared_feed_forward_length"],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        super::refuse_mtp(meta, hp)?;
        let window = meta.u32(&hp.key("attention.sliding_window"))?;
        let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
        super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, base, scale)?;
        hp.n_layer_dense_lead = meta.u32_opt(&hp.key("leading_dense_block_count"))?.unwrap_or(0);
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        let shared = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0);
        hp.n_ff_shexp = if shared > 0 { shared } else { hp.n_ff_exp };
        hp.expert_weights_scale = meta.f32_opt(&hp.key("expert_weights_scale"))?.unwrap_or(0.0);
        hp.expert_weights_norm = meta.bool_opt(&hp.key("expert_weights_norm"))?.unwrap_or(false);
        let gating = meta.u32(&hp.key("expert_gating_func"))?;
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
            if Gating::from_llama(gating).is_none() {
                return Err(Error::NotImplemented("exaone-moe with that expert gating function"));
            }
        }
        hp.expert_gating_func = gating;
        hp.size_label = match hp.n_layer {
            32 => "30B.A3B",
            48 => "235B.A22B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        exaone_moe(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = qwen3::tensors(hp, true);
        dense_lead(hp, &mut specs, |d| qwen3::tensors(d, false));
        super::rope_factor_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        for il in hp.n_layer_dense_lead as usize..hp.n_layer as usize {
            let name = format!("blk.{il}.exp_probs_b.bias");
            specs.push(TensorSpec::new(name, &[hp.n_expert], false));
            super::shared_expert_tensors(hp, il, &mut specs);
        }
        specs
    }
}

/// EXAONE MoE's: the projections, `rope_freqs`, then the norms; dense leading layers.
fn exaone_moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        format!(
            "QKV attn_output.weight ROPE_FREQS attn_norm.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {}",
            created::dense_lead(hp, il, BIASED_EXPERTS)
        )
    })
}

impl Decoder for ExaoneMoe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let variant = llama::Variant {
            qk_norm: true,
            rope_sliding_only: true,
            swa_rope: llama::SwaRope::Global,
            moe: Some(Moe {
                gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Softmax),
                normalize: hp.expert_weights_norm,
                ..Moe::BASE
            }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
