//! AFMoE (Arcee's Trinity): embeddings scaled by √n_embd; per-head query and key norms, NeoX
//! rotation except on the last layer of every four, a sliding window on three layers of four (as
//! the file's pattern says), a full-width sigmoid gate read from the attention's input before the
//! output projection; norms before and after both attention and the FFN; leading dense layers,
//! then experts routed by sigmoid (unless the file says otherwise) with a selection bias, beside
//! optional shared experts.

use super::created::{dense_lead, layered, HEAD, SHARED_GDU};
use super::head_tensors;
use super::muse_glimmer::GATED_ATTN;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Afmoe;

/// Without a pattern in the file, the last layer of each four attends globally; llama.cpp's
/// graph also leaves that layer unrotated (its default `n_no_rope_layer_step`).
const PERIOD: u32 = 4;

impl ArchSpec for Afmoe {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "afmoe",
            about: "Arcee Trinity: scaled embeddings, head norms, a sigmoid attention gate, norms around attention \
                and FFN, sliding layers, every fourth layer unrotated, experts with a selection bias beside \
                shared experts.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_RMS_EPS,
                super::READS_SLIDING,
            ],
            saved_rules: &[super::HELD_GATING, super::HELD_SWA_BASE_IF_WINDOW],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        hp.n_layer_dense_lead = meta.u32_opt(&hp.key("leading_dense_block_count"))?.unwrap_or(0);
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        let shared = meta.u32(&hp.key("expert_shared_count"))?;
        hp.n_ff_shexp = hp.n_ff_exp * shared;
        super::load_sigmoid_routing(meta, hp)?;
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }
        let window = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
        let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
        super::load_sliding_window(meta, hp, window, PERIOD, base, scale)?;
        hp.size_label = match hp.n_layer {
            56 => "6B",
            32 => "26B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        afmoe(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, hk) = (hp.n_embd, hp.n_embd_head_k);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            super::attention_tensors(hp, il, &mut specs);
            for norm in ["attn_norm", "post_attention_norm", "post_ffw_norm"] {
                specs.push(TensorSpec::new(b(&format!("{norm}.weight")), &[e], true));
            }
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hk], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hk], true));
            specs.push(TensorSpec::matmul(
                b("attn_gate.weight"),
                &[e, hk * hp.n_head[il]],
                true,
            ));
            super::biased_expert_tensors(hp, il, &mut specs);
        }
        specs
    }
}

/// AFMoE's: Muse Glimmer's attention, dense leading layers, then experts with the router's
/// selection bias and shared ones where the model has them.
fn afmoe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts = format!("ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {shared}");
        format!("{GATED_ATTN} {}", dense_lead(hp, il, &experts))
    })
}

impl Decoder for Afmoe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let x = b.embed_tokens()?;
        let mut x = b.scale(x, (hp.n_embd as f32).sqrt())?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let gate = b.layer_matmul(il, "attn_gate.weight", cur)?;
            let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
            let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
            let (q, k) = if (il + 1) % PERIOD as usize != 0 {
                (b.rope(q, il, None)?, b.rope(k, il, None)?)
            } else {
                (q, k)
            };
            let att = b.attention(il, q, k, v, kq_scale, is_sliding(hp, il))?;
            let gate = b.g.sigmoid(gate)?;
            let gated = b.gate_heads(il, att, gate)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, gated)?;
            let att = b.layer_rms_norm(il, att, "post_attention_norm.weight", "attn_post_norm")?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if il < hp.n_layer_dense_lead as usize {
                b.gated_ffn(il, cur, Ffn::default())?
            } else {
                experts(b, il, cur)?
            };
            let ffn = b.layer_rms_norm(il, ffn, "post_ffw_norm.weight", "ffn_post_norm")?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// Layer `il`'s routed experts over `cur` (sigmoid-routed unless the file says otherwise), plus
/// its shared experts where it has them (AFMoE's and Laguna's).
pub(super) fn experts(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = b.hp;
    let moe = Moe {
        gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Sigmoid),
        normalize: hp.expert_weights_norm,
        ..Moe::BASE
    };
    let routed = b.moe_ffn(il, cur, moe)?;
    if hp.n_ff_shexp == 0 {
        return Ok(routed);
    }
    let shared = b.gated_ffn_named(il, cur, Ffn::default(), "_shexp")?;
    let shared = b.name(shared, "ffn_shexp", Some(il));
    b.add(routed, shared)
}
