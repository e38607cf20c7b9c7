//! DeepSeek-OCR's language model (`deepseek2-ocr`): DeepSeek V2's layers (leading dense layers,
//! then softmax-routed experts beside shared ones) with plain multi-head attention in place of
//! latent attention. llama.cpp builds it with DeepSeek 2's graph, which rotates its queries and
//! keys as NeoX does at the context's base frequency alone (no scaling, no YaRN), though the
//! model's rotation type, which a K-shift uses, is the normal one.

use super::created::{layered, HEAD, SHARED_GDU};
use super::deepseek2::{ffn_block, load_shared_experts, pre_scaled_kq};
use crate::error::{Error, Result};
use crate::ggml::{TensorRef, ROPE_NEOX};
use crate::graph::{Builder, Decoder, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct DeepSeek2Ocr;

/// The only base frequency llama.cpp's graph accepts for it (it stops the process on another).
const FREQ_BASE: f32 = 10000.0;

impl ArchSpec for DeepSeek2Ocr {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "deepseek2-ocr",
            about: "DeepSeek-OCR's language model: DeepSeek V2's leading dense layers and softmax-routed experts \
                beside shared ones, under plain multi-head attention rotated as NeoX does at the base frequency 10000 \
                only.",
            read_keys: &[super::READS_SHARED_MOE, super::READS_GATING, super::READS_RMS_EPS],
            saved_rules: &[super::HELD_GATING],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("deepseek2-ocr.{k}");
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        hp.n_layer_dense_lead = meta.u32_opt(&key("leading_dense_block_count"))?.unwrap_or(0);
        load_shared_experts(meta, hp)?;
        hp.expert_weights_scale = meta.f32_opt(&key("expert_weights_scale"))?.unwrap_or(0.0);
        hp.expert_weights_norm = meta.bool_opt(&key("expert_weights_norm"))?.unwrap_or(false);
        // No gating named (or "none") is softmax.
        hp.expert_gating_func = match meta.u32_opt(&key("expert_gating_func"))?.unwrap_or(0) {
            0 => 1,
            g if Gating::from_llama(g).is_some() => g,
            g => {
                return Err(Error::model(format!(
                    "deepseek2-ocr: unknown expert gating function {g}"
                )))
            }
        };
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }
        // Its graph takes every head as wide as the embedding split among the heads, keys and
        // values alike, one KV head per query head, all rotated.
        let head = hp.n_embd / hp.n_head[0].max(1);
        let square = hp
            .n_head
            .iter()
            .zip(&hp.n_head_kv)
            .all(|(&q, &kv)| q == kv && q * head == hp.n_embd);
        if !square || hp.n_embd_head_k != head || hp.n_embd_head_v != head || hp.n_rot != head {
            return Err(Error::model(format!(
                "deepseek2-ocr needs as many KV heads as query heads, each n_embd / n_head ({head}) wide for keys, \
                 values and rotation (got {}, {}, {})",
                hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot
            )));
        }
        hp.size_label = if hp.n_layer == 12 { "3B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        for il in 0..hp.n_layer as usize {
            specs.push(TensorSpec::new(
                format!("blk.{il}.attn_norm.weight"),
                &[hp.n_embd],
                true,
            ));
            super::attention_tensors(hp, il, &mut specs);
            if il < hp.n_layer_dense_lead as usize {
                super::ffn_tensors(hp, il, false, &mut specs);
            } else {
                specs.push(TensorSpec::new(format!("blk.{il}.ffn_norm.weight"), &[hp.n_embd], true));
                specs.push(TensorSpec::new(
                    format!("blk.{il}.exp_probs_b.bias"),
                    &[hp.n_expert],
                    false,
                ));
                super::routed_expert_tensors(hp, il, &mut specs);
            }
        }
        specs
    }

    /// Its loader's order: the attention, both norms (the FFN's first), then the dense FFN (down,
    /// up, gate) or the experts with the router's selection bias, fused gate and up projections
    /// and shared experts.
    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts =
            format!("ffn_gate_inp.weight exp_probs_b.bias ffn_down_exps.weight ffn_gate_up_exps.weight {shared}");
        layered(hp, HEAD, |il| {
            let ffn = if il < hp.n_layer_dense_lead as usize {
                "ffn_down.weight ffn_up.weight ffn_gate.weight"
            } else {
                &experts
            };
            format!("QKV attn_output.weight ffn_norm.weight attn_norm.weight {ffn}")
        })
    }
}

impl Decoder for DeepSeek2Ocr {
    /// Only the output head is a plain product in llama.cpp's graph.
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        stem == "output"
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let base = b.params.rope.freq_base;
        if (base - FREQ_BASE).abs() >= 1e-4 {
            return Err(Error::invalid(format!(
                "deepseek2-ocr rotates at the base frequency {FREQ_BASE} only (the context asks for {base})"
            )));
        }
        let kq_scale = pre_scaled_kq(b, hp.n_embd_head_k);
        let moe = Moe::silu(hp.expert_gating_func, Gating::Softmax, hp.expert_weights_norm, false);
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q = rotate(b, q)?;
            let k = rotate(b, k)?;
            let (q, k) = (b.name(q, "q_pe", l), b.name(k, "k_pe", l));
            let att = b.attention(il, q, k, v, kq_scale, false)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let att = b.name(att, "attn_out", l);
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            x = ffn_block(b, il, att, residual, moe)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// `x` ([head, n_head, n_tokens]) rotated by the token positions over whole heads as NeoX does,
/// at the base frequency without scaling or YaRN, as llama.cpp's graph rotates this model.
fn rotate(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    let pos = b.positions()?;
    let n_rot = b.hp.n_rot as i32;
    b.g.rope(
        x,
        pos,
        None,
        n_rot,
        ROPE_NEOX,
        None,
        0,
        b.params.rope.freq_base,
        1.0,
        0.0,
        1.0,
        0.0,
        0.0,
    )
    .map_err(Error::from)
}
