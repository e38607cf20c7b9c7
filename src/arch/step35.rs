//! Step-3.5: per-layer head counts, optional per-head query and key norms, a sigmoid gate per
//! head on the attention's output; sliding-window layers (from the file's array, with their own
//! base) rotate whole heads as NeoX does, the full-attention ones half of the rotary dimensions
//! with the model's frequency factors. Each layer a dense FFN or, where it has a router, experts
//! (sigmoid-routed unless the file names another gating) beside a shared expert, SwiGLU clamped
//! per layer where the file says. Its keys cannot be shifted (llama.cpp's K-shift assumes one
//! rotary width) and llama.cpp's saver refuses it; multi-token-prediction layers are refused.

use super::created::{layered, HEAD};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, rope_factors, Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::{HParams, RopeScaling};
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Step35;

/// The rotary dimensions of layer `il`: the full-attention layers rotate half of the model's.
fn n_rot_of(hp: &HParams, il: usize) -> u32 {
    if is_sliding(hp, il) {
        hp.n_rot
    } else {
        hp.n_rot / 2
    }
}

impl ArchSpec for Step35 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "step35",
            about: "Step-3.5: per-layer heads with optional head norms and a sigmoid gate per head; sliding layers \
                from an array rotating whole heads, full ones half of them with frequency factors; dense or \
                sigmoid-routed expert layers beside a shared expert, SwiGLU clamped per layer; keys not shiftable and \
                not saved, as in llama.cpp.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_GATING,
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &[
                    "expert_feed_forward_length",
                    "expert_shared_feed_forward_length",
                    "swiglu_clamp_exp",
                    "swiglu_clamp_shexp",
                    "expert_weights_scale",
                    "attention.sliding_window_pattern",
                ],
            ],
            saved: false,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("step35.{k}");
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        super::refuse_mtp(meta, hp)?;
        super::check_head_sizes_partial_rotation(hp)?;
        meta.u32(&key("expert_feed_forward_length"))?;
        hp.n_ff_shexp = meta.u32_opt(&key("expert_shared_feed_forward_length"))?.unwrap_or(0);
        super::load_sigmoid_routing(meta, hp)?;
        // The sliding layers' base defaults to llama.cpp's fixed 10000, not the model's.
        let pattern = key("attention.sliding_window_pattern");
        if super::layer_flags(meta, hp, &pattern, false)?.is_none() {
            return Err(Error::model(format!("step35 needs the per-layer array '{pattern}'")));
        }
        let window = meta.u32(&key("attention.sliding_window"))?;
        super::load_sliding_window(meta, hp, window, 0, 10000.0, 1.0)?;
        let n = hp.n_layer as usize;
        hp.swiglu_clamp_exp = meta.f32_per_layer(&key("swiglu_clamp_exp"), n)?.unwrap_or_default();
        hp.swiglu_clamp_shexp = meta.f32_per_layer(&key("swiglu_clamp_shexp"), n)?.unwrap_or_default();
        hp.fixed_keys = true;
        hp.size_label = if hp.n_layer == 45 { "196B.A11B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        // One table of frequency factors for the widest rotation of any layer.
        let widest = (0..hp.n_layer as usize)
            .map(|il| n_rot_of(hp, il))
            .max()
            .unwrap_or(hp.n_rot);
        let factors: &[&str] = match hp.rope_scaling {
            RopeScaling::LongRope => &["rope_factors_long.weight", "rope_factors_short.weight"],
            _ => &["rope_freqs.weight"],
        };
        for name in factors {
            specs.push(TensorSpec::new(*name, &[widest / 2], false));
        }
        let (e, hk, ff) = (hp.n_embd, hp.n_embd_head_k, hp.n_ff[0]);
        let (n_expert, ffe, sh) = (hp.n_expert, hp.n_ff_exp, hp.n_ff_shexp);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("attn_q_norm.weight"), &[hk], false),
                TensorSpec::new(b("attn_k_norm.weight"), &[hk], false),
            ]);
            super::attention_tensors(hp, il, &mut specs);
            specs.extend([
                TensorSpec::matmul(b("attn_gate.weight"), &[e, hp.n_head[il]], false),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], false),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], false),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], false),
                TensorSpec::new(b("ffn_gate_inp.weight"), &[e, n_expert], false),
                TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, ffe, n_expert], false),
                TensorSpec::matmul(b("ffn_down_exps.weight"), &[ffe, e, n_expert], false),
                TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ffe, n_expert], false),
                TensorSpec::new(b("exp_probs_b.bias"), &[n_expert], false),
                TensorSpec::matmul(b("ffn_gate_shexp.weight"), &[e, sh], false),
                TensorSpec::matmul(b("ffn_up_shexp.weight"), &[e, sh], false),
                TensorSpec::matmul(b("ffn_down_shexp.weight"), &[sh, e], false),
            ]);
        }
        specs
    }

    /// Every layer's tensors may be there (all optional but the norms and attention), in the
    /// loader's order.
    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let experts = if hp.n_expert > 0 {
            "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight exp_probs_b.bias"
        } else {
            ""
        };
        let shared = if hp.n_ff_shexp > 0 {
            "ffn_gate_shexp.weight ffn_up_shexp.weight ffn_down_shexp.weight"
        } else {
            ""
        };
        layered(hp, HEAD, |_| {
            format!(
                "attn_norm.weight attn_q_norm.weight attn_k_norm.weight ROPE QKV attn_output.weight \
                 attn_gate.weight ffn_norm.weight ffn_gate.weight ffn_down.weight ffn_up.weight {experts} {shared}"
            )
        })
    }
}

impl Decoder for Step35 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let (hk, hv) = (i64::from(hp.n_embd_head_k), i64::from(hp.n_embd_head_v));
        let kq_scale = 1.0 / (hk as f32).sqrt();
        let moe = Moe::silu(hp.expert_gating_func, Gating::Sigmoid, hp.expert_weights_norm, false);
        let nt = b.shape.n_tokens as i64;
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let (n_head, n_head_kv) = (i64::from(hp.n_head[il]), i64::from(hp.n_head_kv[il]));
            // llama.cpp's graph renames each layer's input (the embeddings, then each `l_out`).
            let x_in = b.name(x, "attn_norm_in", l);
            let cur = b.layer_rms_norm(il, x_in, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, false)?;
            let mut q = b.g.reshape(q, &[hk, n_head, nt])?;
            let mut k = b.g.reshape(k, &[hk, n_head_kv, nt])?;
            let v = b.g.reshape(v, &[hv, n_head_kv, nt])?;
            if b.layer_weight_opt(il, "attn_q_norm.weight").is_some() {
                q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
            }
            if b.layer_weight_opt(il, "attn_k_norm.weight").is_some() {
                k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
            }
            let sliding = is_sliding(hp, il);
            let factors = match sliding {
                true => None,
                false => rope_factors(b.model, &b.params),
            };
            let q = b.rope_dims(q, il, n_rot_of(hp, il), factors)?;
            let k = b.rope_dims(k, il, n_rot_of(hp, il), factors)?;
            let (q, k) = (b.name(q, "Qcur_pos", l), b.name(k, "Kcur_pos", l));
            let mut att = b.attention(il, q, k, v, kq_scale, sliding)?;
            if b.layer_weight_opt(il, "attn_gate.weight").is_some() {
                let gate = b.layer_matmul(il, "attn_gate.weight", cur)?;
                let gate = b.g.sigmoid(gate)?;
                let gate = b.g.reshape(gate, &[1, n_head, nt])?;
                let heads = b.g.reshape(att, &[hv, n_head, nt])?;
                let gated = b.g.mul(heads, gate)?;
                att = b.g.reshape(gated, &[hv * n_head, nt])?;
            }
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let h = b.add(att, x_in)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if b.layer_weight_opt(il, "ffn_gate_inp.weight").is_some() {
                let routed = b.moe_ffn(il, cur, moe)?;
                let shared = b.gated_ffn_named(il, cur, Ffn::default(), "_shexp")?;
                b.add(routed, shared)?
            } else {
                b.gated_ffn(il, cur, Ffn::default())?
            };
            let ffn = b.name(ffn, "ffn_out", l);
            let out = b.add(ffn, h)?;
            x = b.layer_out(out, il)?;
        }
        // Every row runs through the last layer; the requested ones are picked for the head.
        let logits = b.output_head_selecting(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
