//! MiMo-V2 (Xiaomi): per-layer head counts, value heads that may be narrower than key heads,
//! NeoX rotation of part of each head (sliding layers with their own base), a sliding window on
//! the layers the file's array marks, optional per-head attention sinks, projections whose weights'
//! scales and biases llama.cpp leaves out (the output projection's scale kept), the attention's
//! output optionally scaled (`attention.value_scale`); per layer a dense FFN or experts
//! routed by sigmoid with an optional selection bias, their weights normalised. Multi-token
//! prediction layers are refused.

use super::created::{layered, GATED, HEAD};
use super::head_tensors;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Mimo2;

impl ArchSpec for Mimo2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "mimo2",
            about: "MiMo-V2: per-layer heads, value heads narrower than keys, partial rotation, sliding layers from \
                an array, sinks, a scaled attention output, dense or sigmoid-routed expert layers.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &[
                    "expert_feed_forward_length",
                    "attention.sliding_window_pattern",
                    "attention.value_scale",
                ],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        if hp.n_rot > hp.n_embd_head_k {
            return Err(Error::model(format!(
                "mimo2 rotates {} dimensions of heads of {}",
                hp.n_rot, hp.n_embd_head_k
            )));
        }
        super::refuse_mtp(meta, hp)?;
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        super::load_sliding_window_array(meta, hp)?;
        // Unscaled unless the file gives a scale other than 1.
        let value_scale = meta.f32_opt(&hp.key("attention.value_scale"))?.unwrap_or(0.0);
        hp.attn_value_scale = if value_scale == 1.0 { 0.0 } else { value_scale };
        hp.expert_gating_func = 2;
        hp.expert_weights_norm = true;
        hp.size_label = if hp.n_layer == 48 { "310B.A15B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        mimo2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        let e = hp.n_embd;
        let (hk, hv) = (hp.n_embd_head_k, hp.n_embd_head_v);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let (n_head, n_kv) = (hp.n_head[il], hp.n_head_kv[il]);
            let (q, k, v) = (hk * n_head, hk * n_kv, hv * n_kv);
            let qkv = b("attn_qkv.weight");
            specs.push(TensorSpec::matmul(&qkv, &[e, q + k + v], false));
            specs.push(TensorSpec::matmul(b("attn_q.weight"), &[e, q], true).unless(&qkv));
            specs.push(TensorSpec::matmul(b("attn_k.weight"), &[e, k], true).unless(&qkv));
            specs.push(TensorSpec::matmul(b("attn_v.weight"), &[e, v], true).unless(&qkv));
            // Biases llama.cpp loads and leaves out.
            for (name, width) in [("attn_qkv", q + k + v), ("attn_q", q), ("attn_k", k), ("attn_v", v)] {
                specs.push(TensorSpec::new(b(&format!("{name}.bias")), &[width], false));
            }
            specs.push(TensorSpec::matmul(b("attn_output.weight"), &[hv * n_head, e], true));
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("attn_sinks.weight"), &[n_head], false));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            // A layer has a dense FFN or experts (a router and its stacks).
            let router = b("ffn_gate_inp.weight");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true).unless(&router));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true).unless(&router));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true).unless(&router));
            let (n, x) = (hp.n_expert, hp.n_ff_exp);
            specs.push(TensorSpec::new(&router, &[e, n], false));
            specs.push(TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, x, n], false));
            specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, x, n], false));
            specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[x, e, n], false));
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[n], false));
        }
        specs
    }
}

/// MiMo-V2's: attention sinks; the dense FFN where the layer has a width for it, and experts in
/// every layer of a model with experts (all optional, all made without a file).
fn mimo2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let dense = if hp.n_ff[il] > 0 { GATED } else { "" };
        let experts = if hp.n_expert > 0 {
            "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight exp_probs_b.bias"
        } else {
            ""
        };
        format!("QKV attn_output.weight attn_norm.weight attn_sinks.weight ffn_norm.weight {dense} {experts}")
    })
}

impl Decoder for Mimo2 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = projections(b, il, cur)?;
            let q = b.rope(q, il, None)?;
            let k = b.rope(k, il, None)?;
            let att = b.attention(il, q, k, v, kq_scale, is_sliding(hp, il))?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let mut att = b.linear(wo, None, att)?;
            if hp.attn_value_scale != 0.0 {
                att = b.scale(att, hp.attn_value_scale)?;
            }
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if b.layer_weight_opt(il, "ffn_gate_inp.weight").is_some() {
                let moe = Moe {
                    gating: Gating::Sigmoid,
                    normalize: true,
                    ..Moe::BASE
                };
                b.moe_ffn(il, cur, moe)?
            } else {
                b.gated_ffn(il, cur, Ffn::default())?
            };
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// Layer `il`'s queries, keys and values per head, from the fused projection or the separate
/// ones, without their weights' scales or biases (as llama.cpp's graph reads them).
fn projections(b: &mut Builder, il: usize, cur: TensorRef) -> Result<(TensorRef, TensorRef, TensorRef)> {
    let hp = b.hp;
    if let Some(w) = b.layer_weight_opt(il, "attn_qkv.weight") {
        let qkv = b.weight_mm(w, cur)?;
        return b.split_qkv(il, qkv, true);
    }
    let mut out = Vec::with_capacity(3);
    for (name, head, n) in [
        ("attn_q.weight", hp.n_embd_head_k, hp.n_head[il]),
        ("attn_k.weight", hp.n_embd_head_k, hp.n_head_kv[il]),
        ("attn_v.weight", hp.n_embd_head_v, hp.n_head_kv[il]),
    ] {
        let w = b.layer_weight(il, name)?;
        let t = b.weight_mm(w, cur)?;
        out.push(b.heads(t, head, n)?);
    }
    Ok((out[0], out[1], out[2]))
}
