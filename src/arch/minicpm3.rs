//! MiniCPM3: multi-head latent attention kept decompressed in the cache. Queries come through a
//! normed low-rank projection; keys and values from one normed latent per token (`attn_kv_b`
//! widening it per head) plus a rotated part shared by all heads; each key head is its unrotated
//! part then the shared rotated one, and queries rotate only their trailing dimensions (NeoX, with
//! LongRoPE's optional factors). Embeddings scaled by 12, each block's attention and FFN outputs
//! by 1.4/√n_layer, and the hidden state by 256/n_embd before the head, as llama.cpp fixes them.

use super::created::{layered, FFN, HEAD};
use super::head_tensors;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{rope_factors, Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct MiniCpm3;

/// llama.cpp's fixed scales: of the embeddings, of the residual depth, and the base width the
/// head's input is scaled to.
const SCALE_EMBD: f32 = 12.0;
const SCALE_DEPTH: f32 = 1.4;
const N_EMBD_BASE: f32 = 256.0;

impl ArchSpec for MiniCpm3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "minicpm3",
            about: "Latent attention kept decompressed: low-rank queries, keys and values from one latent, keys \
                rotating their trailing dimensions; llama.cpp's fixed scales.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                &["attention.q_lora_rank", "attention.kv_lora_rank"],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.n_lora_q = meta.u32(&hp.key("attention.q_lora_rank"))?;
        hp.n_lora_kv = meta.u32(&hp.key("attention.kv_lora_rank"))?;
        if hp.n_rot > hp.n_embd_head_k || !hp.n_rot.is_multiple_of(2) {
            return Err(Error::model(format!(
                "minicpm3 rotates {} dimensions of key heads of {}",
                hp.n_rot, hp.n_embd_head_k
            )));
        }
        if hp.n_head.iter().zip(&hp.n_head_kv).any(|(q, kv)| q != kv) {
            return Err(Error::model("minicpm3 needs as many KV heads as query heads"));
        }
        hp.size_label = if hp.n_layer == 62 { "4B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        minicpm3(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, hk, hv, rot) = (hp.n_embd, hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot);
        let (q_rank, kv_rank) = (hp.n_lora_q, hp.n_lora_kv);
        for name in ["rope_factors_long.weight", "rope_factors_short.weight"] {
            specs.push(TensorSpec::new(name, &[rot / 2], false));
        }
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let (n_head, ff) = (hp.n_head[il], hp.n_ff[il]);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("attn_q_a_norm.weight"), &[q_rank], true),
                TensorSpec::new(b("attn_kv_a_norm.weight"), &[kv_rank], true),
                TensorSpec::matmul(b("attn_q_a.weight"), &[e, q_rank], true),
                TensorSpec::matmul(b("attn_q_b.weight"), &[q_rank, n_head * hk], true),
                TensorSpec::matmul(b("attn_kv_a_mqa.weight"), &[e, kv_rank + rot], true),
                TensorSpec::matmul(b("attn_kv_b.weight"), &[kv_rank, n_head * (hk - rot + hv)], true),
                TensorSpec::matmul(b("attn_output.weight"), &[n_head * hv, e], true),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
            ]);
        }
        specs
    }
}

/// MiniCPM3's: compressed queries, keys and values, LongRoPE's factors always.
fn minicpm3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight attn_q_a_norm.weight attn_kv_a_norm.weight attn_q_a.weight attn_q_b.weight attn_kv_a_mqa.weight attn_kv_b.weight attn_output.weight {FFN} ROPE_LONG_SHORT")
    })
}

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`).
const WITHOUT_ADAPTERS: &[&str] = &["attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_kv_b"];

impl Decoder for MiniCpm3 {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let hk = i64::from(hp.n_embd_head_k);
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let scale_res = SCALE_DEPTH / (hp.n_layer as f32).sqrt();
        let factors = rope_factors(b.model, &b.params);
        let x = b.embed_tokens()?;
        let mut x = b.scale(x, SCALE_EMBD)?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let n_head = i64::from(hp.n_head[il]);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let q = b.layer_matmul(il, "attn_q_a.weight", cur)?;
            let q = b.layer_rms_norm(il, q, "attn_q_a_norm.weight", "q")?;
            let q = b.layer_matmul(il, "attn_q_b.weight", q)?;
            let q = b.g.reshape(q, &[hk, n_head, q.ne()[1]])?;
            let (latent, k_pe) = latent_kv(b, il, cur, factors)?;
            let att = decompressed_attention(b, il, q, latent, k_pe, kq_scale, factors)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let att = b.scale(att, scale_res)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.gated_ffn(il, cur, Ffn::default())?;
            let ffn = b.scale(ffn, scale_res)?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let norm = b.weight("output_norm.weight")?;
        let normed = b.rms_norm(x, norm)?;
        let scaled = b.scale(normed, N_EMBD_BASE / hp.n_embd as f32)?;
        let logits = b.output_head_unnormed(scaled)?;
        // The embeddings are the normed states, before the head's scaling.
        b.name(scaled, "lmhead_scaling", None);
        let normed = b.name(normed, "result_norm", None);
        b.set_hidden(normed);
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// Layer `il`'s latent keys and values from the normed `cur`: the compressed latent, normed
/// ([n_lora_kv, n_tokens]), and the part of the key shared by the heads, rotated where the model
/// rotates ([n_rot, 1, n_tokens]).
pub(super) fn latent_kv(
    b: &mut Builder,
    il: usize,
    cur: TensorRef,
    factors: Option<TensorRef>,
) -> Result<(TensorRef, TensorRef)> {
    latent_kv_normed(b, il, cur, factors, false)
}

/// `latent_kv`, the shared key part RMS-normed by `attn_k_norm` before its rotation where
/// `k_norm` (dots.llm3).
pub(super) fn latent_kv_normed(
    b: &mut Builder,
    il: usize,
    cur: TensorRef,
    factors: Option<TensorRef>,
    k_norm: bool,
) -> Result<(TensorRef, TensorRef)> {
    let (rot, kv_rank) = (i64::from(b.hp.n_rot), i64::from(b.hp.n_lora_kv));
    let kv_pe = b.layer_matmul(il, "attn_kv_a_mqa.weight", cur)?;
    let nt = kv_pe.ne()[1];
    let nb1 = kv_pe.nb()[1];
    let offset = crate::ggml::row_size(kv_pe.ggml_type(), kv_rank);
    let latent = b.g.view(kv_pe, &[kv_rank, nt], &[nb1], 0)?;
    let k_pe = b.g.view(kv_pe, &[rot, 1, nt], &[nb1, nb1], offset)?;
    let k_pe = match k_norm {
        true => b.layer_rms_norm(il, k_pe, "attn_k_norm.weight", "k_pe")?,
        false => k_pe,
    };
    let k_pe = if b.hp.rope { b.rope(k_pe, il, factors)? } else { k_pe };
    let latent = b.layer_rms_norm(il, latent, "attn_kv_a_norm.weight", "kv_compressed")?;
    Ok((latent, k_pe))
}

/// Latent attention decompressed into the cache: each head's key is its unrotated part widened
/// from the `latent` by `attn_kv_b` then the shared rotated `k_pe`, its value widened the same
/// way; the queries `q` ([head_k, n_head, n_tokens]) rotate their trailing dimensions and are
/// scaled by attention temperature tuning where the model has it.
pub(super) fn decompressed_attention(
    b: &mut Builder,
    il: usize,
    q: TensorRef,
    latent: TensorRef,
    k_pe: TensorRef,
    kq_scale: f32,
    factors: Option<TensorRef>,
) -> Result<TensorRef> {
    let hp = b.hp;
    let (hk, hv, rot) = (
        i64::from(hp.n_embd_head_k),
        i64::from(hp.n_embd_head_v),
        i64::from(hp.n_rot),
    );
    let nope = hk - rot;
    let (n_head, nt) = (q.ne()[1], q.ne()[2]);
    let kv = b.layer_matmul(il, "attn_kv_b.weight", latent)?;
    let krow = |n: i64| crate::ggml::row_size(kv.ggml_type(), n);
    let (head_row, token_row) = (krow(nope + hv), krow((nope + hv) * n_head));
    let k_nope = b.g.view(kv, &[nope, n_head, nt], &[head_row, token_row], 0)?;
    let v = b.g.view(kv, &[hv, n_head, nt], &[head_row, token_row], krow(nope))?;
    let v = b.g.cont(v)?;
    let q = b.rope(q, il, factors)?;
    let q = b.g.rope_offset(q, nope as i32, rot as i32)?;
    let k_pe = b.g.repeat(k_pe, [rot, n_head, nt, 1])?;
    let k = b.g.concat(k_nope, k_pe, 0)?;
    let q = b.temperature_tuned(q)?;
    b.attention(il, q, k, v, kq_scale, false)
}
