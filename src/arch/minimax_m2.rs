//! MiniMax-M2: query and key norms over the whole projections, NeoX rotation of part of each
//! head, and experts in every layer (as wide as the FFN) routed by the file's gating function
//! with a selection bias, the picked weights normalised; its own output head.

use super::created::{layered, EXPERTS, HEAD};
use super::{attention_tensors, head_tensors, llama};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct MinimaxM2;

impl ArchSpec for MinimaxM2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "minimax-m2",
            about: "Whole-projection head norms, partial rotation, experts with a selection bias.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                &["expert_feed_forward_length", "expert_gating_func"],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_head_sizes_partial_rotation(hp)?;
        super::check_experts(hp)?;
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        hp.n_ff_exp = hp.n_ff[0];
        // llama.cpp has no gating of its own here: the file must say.
        let gating = meta.u32(&hp.key("expert_gating_func"))?;
        if Gating::from_llama(gating).is_none() {
            return Err(Error::NotImplemented("minimax-m2 with that expert gating function"));
        }
        hp.expert_gating_func = gating;
        hp.size_label = if hp.n_layer == 62 { "230B.A10B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        minimax_m2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        let (e, ff, ne) = (hp.n_embd, hp.n_ff_exp, hp.n_expert);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let (q, k) = (hp.n_embd_head_k * hp.n_head[il], hp.n_embd_head_k * hp.n_head_kv[il]);
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[q], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[k], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("ffn_gate_inp.weight"), &[e, ne], true));
            specs.push(TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, ff, ne], true));
            specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ff, ne], true));
            specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[ff, e, ne], true));
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[ne], true));
        }
        specs
    }
}

/// MiniMax-M2's: the projections first, whole-projection query and key norms, experts with the
/// router's selection bias last.
fn minimax_m2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("QKV attn_output.weight attn_norm.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {EXPERTS} exp_probs_b.bias")
    })
}

impl Decoder for MinimaxM2 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let variant = llama::Variant {
            qk_norm_whole: true,
            moe: Some(Moe {
                gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Sigmoid),
                normalize: true,
                ..Moe::BASE
            }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
