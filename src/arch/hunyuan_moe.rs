//! Hunyuan-MoE: Hunyuan's layers (query and key norms after NeoX rotation) whose FFN is a shared
//! expert (as wide as `expert_shared_feed_forward_length`, else the FFN) plus softmax-routed
//! experts as wide as the FFN, without the weights' scales.

use super::created::{layered, ATTN, EXPERTS, HEAD, KQ_NORMS, SHARED_GUD};
use super::llama;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct HunyuanMoe;

impl ArchSpec for HunyuanMoe {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "hunyuan-moe",
            about: "Experts beside a shared expert.",
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
        super::check_equal_head_sizes(hp)?;
        super::check_experts(hp)?;
        // Required by llama.cpp's loader, though its experts are as wide as the FFN.
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        hp.n_ff_exp = hp.n_ff[0];
        let shared = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?;
        hp.n_ff_shexp = shared.filter(|&n| n > 0).unwrap_or(hp.n_ff[0]);
        hp.size_label = if hp.n_layer == 32 { "A13B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        hunyuan_moe(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = llama::tensors(hp);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hp.n_embd_head_k], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hp.n_embd_head_k], true));
            super::shared_expert_tensors(hp, il, &mut specs);
        }
        specs
    }
}

/// Hunyuan MoE's: Qwen 3's attention, routed and shared experts.
fn hunyuan_moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} {KQ_NORMS} ffn_norm.weight {EXPERTS} {SHARED_GUD}")
    })
}

impl Decoder for HunyuanMoe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            qk_norm_after_rope: true,
            moe: Some(Moe {
                normalize: true,
                ..Moe::BASE
            }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
