//! GroveMoE: Qwen3-MoE's layers (head norms, NeoX rotation, experts in every layer) whose experts
//! are picked by the sigmoid of the router's logits and weighted by their softmax (normalised),
//! followed by "chunk" experts, one per group of `experts_per_group` experts: the first experts'
//! output goes through the chunk experts of the picked groups, weighted by the softmax of the
//! group's index (as llama.cpp's graph reads it), and is added back scaled by
//! `expert_group_scale`.

use super::created::{layered, ATTN, EXPERTS, HEAD, KQ_NORMS};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct GroveMoe;

const MOE: Moe = Moe {
    normalize: true,
    pick_by_sigmoid: true,
    ..Moe::BASE
};

impl ArchSpec for GroveMoe {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "grovemoe",
            about: "GroveMoE: Qwen3-MoE's layers, experts picked by sigmoid and weighted by softmax, then chunk \
                experts per group of experts over their output.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                &[
                    "expert_feed_forward_length",
                    "expert_chunk_feed_forward_length",
                    "expert_group_scale",
                    "experts_per_group",
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
        if hp.n_ff_exp == 0 {
            hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used;
        }
        let chunk = meta.u32_opt(&hp.key("expert_chunk_feed_forward_length"))?.unwrap_or(0);
        hp.n_ff_chexp = if chunk > 0 { chunk } else { hp.n_embd_head_k };
        hp.expert_group_scale = meta.f32(&hp.key("expert_group_scale"))?;
        hp.n_group_experts = meta.u32(&hp.key("experts_per_group"))?;
        let groups = hp.n_group_experts;
        // The chunk experts' sums read as many of them as the model's experts per token.
        if groups == 0 || !hp.n_expert.is_multiple_of(groups) || hp.n_expert_used > hp.n_expert / groups {
            return Err(Error::model(format!(
                "grovemoe: {} experts in groups of {groups} cannot give {} chunk experts per token",
                hp.n_expert, hp.n_expert_used
            )));
        }
        hp.size_label = if hp.n_layer == 48 { "30B.A3B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        grovemoe(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = super::qwen3::tensors(hp, true);
        let (e, x, n) = (hp.n_embd, hp.n_ff_chexp, hp.n_expert / hp.n_group_experts.max(1));
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.extend([
                TensorSpec::matmul(b("ffn_gate_chexps.weight"), &[e, x, n], true),
                TensorSpec::matmul(b("ffn_up_chexps.weight"), &[e, x, n], true),
                TensorSpec::matmul(b("ffn_down_chexps.weight"), &[x, e, n], true),
            ]);
        }
        specs
    }
}

/// GroveMoE's: Qwen 3's attention, routed experts and chunked ones.
fn grovemoe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} {KQ_NORMS} ffn_norm.weight {EXPERTS} ffn_gate_chexps.weight ffn_down_chexps.weight ffn_up_chexps.weight")
    })
}

impl Decoder for GroveMoe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = b.head_normed_attention(il, cur, kq_scale, None)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = grove_ffn(b, il, cur)?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// Layer `il`'s experts, then its chunk experts over their output, added back scaled.
fn grove_ffn(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = b.hp;
    let logits = b.router_logits(il, cur)?;
    let experts = b.moe_ffn_from_logits(il, cur, logits, MOE)?;
    // The chunk experts: picked as the experts are (as many, at most all of them), then each
    // pick divided down to its group, whose weight is read at the group's index.
    let n_chunk = i64::from(hp.n_expert / hp.n_group_experts);
    let n_pick = b.moe_pick_count(MOE).min(n_chunk);
    let selection = b.g.sigmoid(logits)?;
    let mut picked = b.g.argsort_top_k(selection, n_pick)?;
    if hp.n_group_experts > 1 {
        let f = b.g.cast(picked, ggml_sys::ggml_type_GGML_TYPE_F32)?;
        let f = b.scale(f, 1.0 / hp.n_group_experts as f32)?;
        picked = b.g.cast(f, ggml_sys::ggml_type_GGML_TYPE_I32)?;
    }
    let probs = b.moe_probs(il, logits, MOE)?;
    let weights = b.moe_weights(il, probs, picked, MOE)?;
    let chunks = b.moe_experts(il, experts, picked, weights, MOE, "_chexps")?;
    let chunks = b.scale(chunks, hp.expert_group_scale)?;
    let out = b.add(experts, chunks)?;
    Ok(b.name(out, "ffn_final_moe_out", Some(il)))
}
