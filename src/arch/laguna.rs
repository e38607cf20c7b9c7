//! Laguna (poolside): per-layer head counts, per-head query and key norms, NeoX rotation (on the
//! sliding layers with their own base, unscaled and without YaRN), an optional sliding window on
//! three layers of four (the first of each four global), a softplus gate read from the
//! attention's input (one value per head or per element, as the file's gate is shaped) before the
//! output projection; leading dense layers, then experts routed by sigmoid (unless the file says
//! otherwise) with a selection bias beside an always-on shared expert.

use super::created::{layered, ATTN, HEAD};
use super::{afmoe, head_tensors};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Laguna;

/// The first layer of each four attends globally (when the file has a window but no pattern).
const SWA_PERIOD: u32 = 4;

impl ArchSpec for Laguna {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "laguna",
            about: "Per-layer heads, a softplus attention gate per head or per element, sliding layers rotating \
                plainly with their own base; rotated dimensions of their own refused.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["expert_shared_feed_forward_length"],
            ],
            saved_rules: &[
                super::HELD_SWA_BASE_IF_WINDOW,
                ("expert_shared_count", Rule::U32(1)),
                super::HELD_GATING,
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        hp.n_layer_dense_lead = meta.u32(&hp.key("leading_dense_block_count"))?;
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        // One shared expert unless the file says otherwise, as wide as the file says.
        let shared = meta.u32_opt(&hp.key("expert_shared_count"))?.unwrap_or(1);
        let width = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0);
        hp.n_ff_shexp = if width > 0 { width } else { hp.n_ff_exp * shared };
        super::load_sigmoid_routing(meta, hp)?;
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }
        // The sliding layers rotate unscaled (llama.cpp fixes their scale at 1).
        let window = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
        let base = hp.rope_freq_base;
        super::load_sliding_window_dense_first(meta, hp, window, SWA_PERIOD, base, 1.0)?;
        hp.size_label = match hp.n_layer {
            40 => "30B.A3B",
            48 => "118B.A8B",
            70 => "230B.A10B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        laguna(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, hk) = (hp.n_embd, hp.n_embd_head_k);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let n_head = hp.n_head[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            super::attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hk], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hk], true));
            specs.push(TensorSpec::matmul(b("attn_gate.weight"), &[e, n_head], true).or_shape(&[e, hk * n_head]));
            super::biased_expert_tensors(hp, il, &mut specs);
        }
        specs
    }
}

/// Laguna's: attention with query and key norms and a gate (per head without a file); dense
/// layers first (gate, up, down), then experts with the router's selection bias and a shared
/// expert.
fn laguna(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let ffn = match il >= hp.n_layer_dense_lead as usize {
            true => {
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_up_exps.weight ffn_down_exps.weight \
                     ffn_gate_shexp.weight ffn_up_shexp.weight ffn_down_shexp.weight"
            }
            false => "ffn_gate.weight ffn_up.weight ffn_down.weight",
        };
        format!("{ATTN} attn_q_norm.weight attn_k_norm.weight attn_gate.weight ffn_norm.weight {ffn}")
    })
}

impl Decoder for Laguna {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let sliding = is_sliding(hp, il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let gate = b.layer_matmul(il, "attn_gate.weight", cur)?;
            let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
            let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
            let (q, k) = if sliding {
                let base = hp.rope_freq_base_swa;
                (
                    b.rope_ext(q, base, 1.0, 0.0, 1.0, None)?,
                    b.rope_ext(k, base, 1.0, 0.0, 1.0, None)?,
                )
            } else {
                (b.rope(q, il, None)?, b.rope(k, il, None)?)
            };
            let att = b.attention(il, q, k, v, kq_scale, sliding)?;
            let gate = b.g.softplus(gate)?;
            let gated = b.gate_heads(il, att, gate)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, gated)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if il < hp.n_layer_dense_lead as usize {
                b.gated_ffn(il, cur, Ffn::default())?
            } else {
                afmoe::experts(b, il, cur)?
            };
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
