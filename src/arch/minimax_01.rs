//! MiniMax-01 (MiniMax-Text-01): lightning attention layers (`minimax_01/lightning.rs`) with a softmax
//! attention layer every few layers (NeoX rotation of the first `n_rot` dimensions), each
//! followed by softmax-routed experts. Both residuals are the scaled *normed* input
//! (`residual_scale`), not the layer's input, as llama.cpp's graph adds them.

mod lightning;

use super::created::{layered, EXPERTS, HEAD};
use super::{attention_tensors, head_tensors};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NEOX};

pub struct Minimax01;

impl ArchSpec for Minimax01 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "minimax-01",
            about: "MiniMax-Text-01: lightning attention (linear attention with per-head decays, a [head, head] \
                state per head) around softmax attention layers, residuals of the scaled normed input, \
                softmax-routed experts.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, &["residual_scale", "attention.recurrent_layers"]],
            layer_members: &[("attn_gate.weight", "wg")],
            memory: Memory::Hybrid,
            // The lightning layers' output gate is llama.cpp's member `wg`, not `wqkv_gate`.
            unscaled_weights: &["attn_gate"],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.residual_scale = meta.f32(&hp.key("residual_scale"))?;
        let n = hp.n_layer as usize;
        hp.recurrent_layers = match meta.bool_per_layer(&hp.key("attention.recurrent_layers"), n)? {
            Some(r) => r,
            None => {
                let interval = meta.u32_opt(&hp.key("full_attention_interval"))?.unwrap_or(8).max(1) as usize;
                (0..n).map(|il| (il + 1) % interval != 0).collect()
            }
        };
        hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
        super::check_experts(hp)?;
        let n_head = hp.n_head[0];
        if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_head.iter().any(|&h| h != n_head) {
            return Err(Error::model(
                "minimax-01 needs equal key and value head sizes and one head count for every layer",
            ));
        }
        // The lightning layers' state per head is [head, head]; they keep no convolution.
        hp.ssm_d_state = hp.n_embd_head_k;
        hp.ssm_d_inner = hp.n_embd_head_k * n_head;
        hp.size_label = if hp.n_layer == 80 { "456B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, ff, ne) = (hp.n_embd, hp.n_ff[0], hp.n_expert);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let inner = hp.n_embd_head_k * hp.n_head[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            if hp.is_recurrent(il) {
                specs.extend([
                    TensorSpec::new(b("attn_norm_2.weight"), &[inner], true),
                    TensorSpec::matmul(b("attn_qkv.weight"), &[e, 3 * inner], true),
                    TensorSpec::matmul(b("attn_gate.weight"), &[e, inner], true),
                    TensorSpec::matmul(b("attn_output.weight"), &[inner, e], true),
                ]);
            } else {
                attention_tensors(hp, il, &mut specs);
            }
            specs.extend([
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::new(b("ffn_gate_inp.weight"), &[e, ne], true),
                TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, ff, ne], false),
                TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ff, ne], true),
                TensorSpec::matmul(b("ffn_down_exps.weight"), &[ff, e, ne], true),
            ]);
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        minimax_01(hp)
    }
}

/// MiniMax-01's: lightning attention layers (a norm of the mixed heads, the fused projection, an
/// output gate) or softmax attention layers, then experts.
fn minimax_01(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = match hp.is_recurrent(il) {
            true => "attn_norm_2.weight attn_qkv.weight attn_gate.weight",
            false => "QKV",
        };
        format!("attn_norm.weight {mixer} attn_output.weight ffn_norm.weight {EXPERTS}")
    })
}

impl Decoder for Minimax01 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let (hd, scale) = (i64::from(hp.n_embd_head_k), hp.residual_scale);
        let moe = Moe {
            normalize: true,
            ..Moe::BASE
        };
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = if hp.is_recurrent(il) {
                lightning::lightning_layer(b, il, cur)?
            } else {
                let nt = cur.ne()[1];
                let (q, k, v) = b.qkv(il, cur, false)?;
                let (nh, nkv) = (i64::from(hp.n_head[il]), i64::from(hp.n_head_kv[il]));
                let q = b.g.reshape(q, &[hd, nh, nt])?;
                let k = b.g.reshape(k, &[hd, nkv, nt])?;
                let v = b.g.reshape(v, &[hd, nkv, nt])?;
                let q = b.rope(q, il, None)?;
                let k = b.rope(k, il, None)?;
                let att = b.attention(il, q, k, v, 1.0 / (hd as f32).sqrt(), false)?;
                let wo = b.layer_weight(il, "attn_output.weight")?;
                b.linear(wo, None, att)?
            };
            let (att, normed) = b.last_layer_rows(il, att, cur)?;
            let residual = b.g.scale(normed, scale)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.moe_ffn(il, cur, moe)?;
            let residual = b.g.scale(cur, scale)?;
            x = b.add(ffn, residual)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
