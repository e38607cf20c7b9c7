//! Gemma 3n: Gemma 3's attention inside AltUp (four copies of the residual stream: the active one
//! goes through the layer, a router's coefficients predict all four before it and correct them
//! after), LAuReL (a low-rank residual beside the attention), per-layer embeddings (a token table
//! and a projection of the embeddings, gated into every layer's streams), a Gaussian top-k on the
//! first FFNs' gates, and layers past the twentieth attending over an earlier layer's cache.

use super::created::{layered, ATTN};
use crate::error::Result;
use crate::ggml::{row_size, TensorRef};
use crate::graph::{is_sliding, Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Gemma3n;

// llama.cpp's fixed values, which no file key changes.
/// Copies of the residual stream, and the one the layers compute.
const N_ALTUP: i64 = 4;
const ACTIVE: usize = 0;
const LAUREL_RANK: u32 = 64;
/// Width of a layer's per-layer embedding.
const N_EMBD_ALTUP: u32 = 256;
/// Layers that keep keys and values; the later ones attend over the last sliding or the last
/// full-attention layer among those.
const KV_LAYERS: usize = 20;
/// Layers whose FFN gates keep only the values above a cutoff (activation sparsity), and the
/// cutoff in standard deviations above the mean (the normal distribution's 95th percentile).
const SPARSE_LAYERS: usize = 10;
const SPARSITY_STD_MUL: f32 = 1.644_853_4;
/// llama.cpp's default final logit cap, which it does not read from Gemma 3n files.
const LOGIT_CAP: f32 = 30.0;
/// Without an explicit pattern, every fifth layer attends globally.
const DEFAULT_SWA_PERIOD: u32 = 5;

impl ArchSpec for Gemma3n {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "gemma3n",
            about: "Gemma 3n: Gemma 3's layers inside AltUp (four residual streams predicted and corrected \
                around each layer), LAuReL, per-layer embeddings, activation sparsity in the first \
                FFNs, and its last layers attending over earlier layers' caches.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, super::READS_SLIDING],
            saved: false,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let window = meta.u32(&hp.key("attention.sliding_window"))?;
        // Sliding layers rotate with llama.cpp's defaults: base 10000, unscaled.
        super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, 10000.0, 1.0)?;
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.kv_layers = (0..hp.n_layer as usize).map(|il| il < KV_LAYERS).collect();
        hp.final_logit_softcap = LOGIT_CAP;
        hp.attn_scale = 1.0;
        hp.size_label = match hp.n_layer {
            30 => "E2B",
            35 => "E4B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, a, n) = (hp.n_embd, N_EMBD_ALTUP, hp.n_layer);
        let stacks = N_ALTUP as u32 - 1;
        let mut specs = super::gemma3::tensors(hp, true);
        // Stacks of matrices, which no repacking buffer multiplies (llama.cpp keeps them plain).
        specs.push(TensorSpec::new("altup_proj.weight", &[e, e, stacks], true));
        specs.push(TensorSpec::new("altup_unembd_proj.weight", &[e, e, stacks], true));
        per_layer_tensors(hp, a, &mut specs);
        let alt = N_ALTUP as u32;
        for il in 0..n as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.extend([
                TensorSpec::matmul(b("inp_gate.weight"), &[e, a], true),
                TensorSpec::matmul(b("proj.weight"), &[a, e], true),
                TensorSpec::new(b("post_norm.weight"), &[e], true),
                TensorSpec::matmul(b("altup_correct_coef.weight"), &[alt, alt], true),
                TensorSpec::new(b("altup_correct_scale.weight"), &[e], true),
                TensorSpec::matmul(b("altup_predict_coef.weight"), &[alt, alt * alt], true),
                TensorSpec::matmul(b("altup_router.weight"), &[e, alt], true),
                TensorSpec::new(b("altup_router_norm.weight"), &[e], true),
                TensorSpec::matmul(b("laurel_l.weight"), &[e, LAUREL_RANK], true),
                TensorSpec::matmul(b("laurel_r.weight"), &[LAUREL_RANK, e], true),
                TensorSpec::new(b("laurel_post_norm.weight"), &[e], true),
            ]);
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let head = "output.weight token_embd.weight altup_proj.weight altup_unembd_proj.weight \
            per_layer_token_embd.weight per_layer_model_proj.weight per_layer_proj_norm.weight output_norm.weight";
        layered(hp, head, |_| {
            format!(
                "{ATTN} attn_q_norm.weight attn_k_norm.weight post_attention_norm.weight ffn_norm.weight \
                 ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight inp_gate.weight proj.weight \
                 post_norm.weight altup_correct_coef.weight altup_correct_scale.weight altup_predict_coef.weight \
                 altup_router.weight altup_router_norm.weight laurel_l.weight laurel_r.weight laurel_post_norm.weight"
            )
        })
    }
}

/// The layer whose cache layer `il` reads: itself, or past the leading layers that keep keys and
/// values, the last of those that attends as it does (through the window or globally; llama.cpp
/// takes the last two to be a sliding and a global one). Gemma 4's too.
pub(super) fn cache_layer(hp: &HParams, il: usize) -> usize {
    if hp.has_kv(il) {
        return il;
    }
    let kv_layers = hp.kv_layers.iter().take_while(|&&kv| kv).count();
    kv_layers.saturating_sub(if is_sliding(hp, il) { 2 } else { 1 })
}

impl Decoder for Gemma3n {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let e = i64::from(hp.n_embd);
        let x = super::gemma3::scaled_embeddings(b, true)?;
        let per_layer = per_layer_inputs(b, N_EMBD_ALTUP)?;
        let per_layer = project_per_layer_inputs(b, x, per_layer, N_EMBD_ALTUP)?;

        // The other streams: the embeddings projected, at the embeddings' magnitude.
        let nt = b.shape.n_tokens as i64;
        let target = magnitude(b, x)?;
        let repeated = b.g.repeat(x, [e, nt, N_ALTUP - 1, 1])?;
        let proj = b.weight("altup_proj.weight")?;
        let added = b.g.mul_mat(proj, repeated)?;
        let added = rescaled(b, added, target)?;
        let mut x = b.g.concat(x, added, 2)?;
        x = b.name(x, "inp_stacked", None);

        for il in 0..hp.n_layer as usize {
            x = layer(b, il, x, per_layer)?;
        }

        // Back to one stream: the others projected to the active one's magnitude, all averaged.
        let active = slice(b, x, ACTIVE)?;
        let target = magnitude(b, active)?;
        let rest = rest_of(b, x)?;
        let unembd = b.weight("altup_unembd_proj.weight")?;
        let rest = b.g.mul_mat(unembd, rest)?;
        let rest = rescaled(b, rest, target)?;
        let rest = b.name(rest, "altup_unembd", None);
        let mut cur = slice(b, x, 0)?;
        for i in 0..N_ALTUP as usize - 1 {
            let s = slice(b, rest, i)?;
            cur = b.add(cur, s)?;
        }
        let cur = b.scale(cur, 1.0 / N_ALTUP as f32)?;
        let cur = b.name(cur, "unembd_merged", None);
        let cur = b.select_outputs(cur)?;
        let logits = b.output_head(cur)?;
        let logits = b.soft_cap(logits, 1.0, hp.final_logit_softcap)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// One layer over the streams `x` ([n_embd, n_tokens, 4]); `per_layer` is [256, n_tokens,
/// n_layer].
fn layer(b: &mut Builder, il: usize, x: TensorRef, per_layer: TensorRef) -> Result<TensorRef> {
    let l = Some(il);
    let predictions = altup_predict(b, il, x)?;
    let active = slice(b, predictions, ACTIVE)?;
    let active = b.name(active, "active_prediction", l);
    let cur = b.layer_rms_norm(il, active, "attn_norm.weight", "attn_norm")?;
    let laurel = laurel(b, il, cur)?;

    let att = attention(b, il, cur)?;
    let wo = b.layer_weight(il, "attn_output.weight")?;
    let att = b.linear(wo, None, att)?;
    let att = b.layer_rms_norm(il, att, "post_attention_norm.weight", "attn_post_norm")?;
    let att = b.add(att, active)?;
    let att = b.name(att, "attn_gated", l);
    let att_laurel = b.add(att, laurel)?;
    let att_laurel = b.scale(att_laurel, 1.0 / 2f32.sqrt())?;
    let att_laurel = b.name(att_laurel, "attn_laurel", l);

    let cur = b.layer_rms_norm(il, att_laurel, "ffn_norm.weight", "ffn_norm")?;
    let up = b.layer_matmul(il, "ffn_up.weight", cur)?;
    let mut gate = b.layer_matmul(il, "ffn_gate.weight", cur)?;
    if il < SPARSE_LAYERS {
        gate = gaussian_top_k(b, gate)?;
    }
    let gate = b.g.gelu(gate)?;
    let cur = b.g.mul(up, gate)?;
    let cur = b.layer_matmul(il, "ffn_down.weight", cur)?;
    let cur = b.name(cur, "ffn_out", l);
    let cur = super::gemma3::post_ffw_norm(b, il, cur)?;
    let out = b.add(cur, att_laurel)?;
    let out = b.name(out, "attn_ffw_laurel_gated", l);

    let corrected = altup_correct(b, il, predictions, out)?;
    // The active stream, gated by the layer's per-layer embedding, is added to the others.
    let first = slice(b, corrected, ACTIVE)?;
    let scale = b.layer_weight(il, "altup_correct_scale.weight")?;
    let first = b.g.mul(first, scale)?;
    let first = b.layer_matmul(il, "inp_gate.weight", first)?;
    let first = b.g.gelu(first)?;
    let first = b.name(first, "first_prediction_gated", l);
    let this_layer = slice(b, per_layer, il)?;
    let first = b.g.mul(first, this_layer)?;
    let first = b.name(first, "first_prediction_scaled", l);
    let first = b.layer_matmul(il, "proj.weight", first)?;
    let first = b.layer_rms_norm(il, first, "post_norm.weight", "first_prediction_out")?;
    let head = slice(b, corrected, 0)?;
    let rest = rest_of(b, corrected)?;
    let rest = b.add(rest, first)?;
    let x = b.g.concat(head, rest, 2)?;
    b.layer_out(x, il)
}

/// Layer `il`'s attention over the normed `cur`, before the output projection: its own keys and
/// values, or (past the layers that keep them) the queries alone over an earlier layer's cache.
fn attention(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = b.hp;
    let l = Some(il);
    let src = cache_layer(hp, il);
    let att = if src == il {
        let (q, k, v) = b.qkv(il, cur, true)?;
        let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
        let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
        let v = b.g.rms_norm(v, hp.rms_eps)?;
        let v = b.name(v, "Vcur_normed", l);
        let q = b.rope(q, il, None)?;
        let k = b.rope(k, il, None)?;
        let (q, k) = (b.name(q, "Qcur_pos", l), b.name(k, "Kcur_pos", l));
        b.attention(il, q, k, v, 1.0, is_sliding(hp, il))?
    } else {
        let q = match b.layer_weight_opt(il, "attn_qkv.weight") {
            // The fused projection's query part.
            Some(w) => {
                let qkv = b.weight_mm(w, cur)?;
                let width = i64::from(hp.n_embd_head_k * hp.n_head[il]);
                let q = b.g.view(qkv, &[width, qkv.ne()[1]], &[qkv.nb()[1]], 0)?;
                b.g.cont(q)?
            }
            None => b.layer_matmul(il, "attn_q.weight", cur)?,
        };
        let q = b.name(q, "Qcur", l);
        let q = b.heads(q, hp.n_embd_head_k, hp.n_head[il])?;
        let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
        let q = b.rope(q, il, None)?;
        let q = b.name(q, "Qcur_pos", l);
        b.attention_shared(il, src, q, 1.0)?
    };
    Ok(b.name(att, "kqv_out", l))
}

/// The per-layer embeddings' tables, each layer's slice `width` wide: the token table, the
/// projection of the embeddings and its norm. Gemma 4's too.
pub(super) fn per_layer_tensors(hp: &HParams, width: u32, specs: &mut Vec<TensorSpec>) {
    let all = width * hp.n_layer;
    specs.push(TensorSpec::new("per_layer_token_embd.weight", &[all, hp.n_vocab], true));
    specs.push(TensorSpec::matmul(
        "per_layer_model_proj.weight",
        &[hp.n_embd, all],
        true,
    ));
    specs.push(TensorSpec::new("per_layer_proj_norm.weight", &[width], true));
}

/// The token rows of the per-layer table (the first row's for embeddings given as input), each
/// layer's slice `width` wide, times √width: [width, n_layer, n_tokens or 1]. Gemma 4's too.
pub(super) fn per_layer_inputs(b: &mut Builder, width: u32) -> Result<TensorRef> {
    let (a, n) = (i64::from(width), i64::from(b.hp.n_layer));
    let table = b.weight("per_layer_token_embd.weight")?;
    let scale = (width as f32).sqrt();
    if b.takes_embeddings() {
        let first = b.g.view(table, &[a * n], &[], 0)?;
        let first = b.g.cast(first, ggml_sys::ggml_type_GGML_TYPE_F32)?;
        let first = b.scale(first, scale)?;
        let first = b.g.reshape(first, &[a, n, 1])?;
        return Ok(b.name(first, "inp_per_layer_multimodal", None));
    }
    let tokens = b.token_ids()?;
    let rows = b.g.get_rows(table, tokens)?;
    let rows = b.g.reshape(rows, &[a, n, b.shape.n_tokens as i64])?;
    let rows = b.scale(rows, scale)?;
    Ok(b.name(rows, "inp_per_layer_selected", None))
}

/// The per-layer inputs: the embeddings `x` projected per layer and normed, plus the table's
/// rows, over √2; [width, n_tokens, n_layer].
pub(super) fn project_per_layer_inputs(
    b: &mut Builder,
    x: TensorRef,
    rows: TensorRef,
    width: u32,
) -> Result<TensorRef> {
    let (a, n) = (i64::from(width), i64::from(b.hp.n_layer));
    let proj = b.weight("per_layer_model_proj.weight")?;
    let p = b.g.mul_mat(proj, x)?;
    let p = b.scale(p, 1.0 / (b.hp.n_embd as f32).sqrt())?;
    let p = b.g.reshape(p, &[a, n, b.shape.n_tokens as i64])?;
    let norm = b.weight("per_layer_proj_norm.weight")?;
    let p = b.g.rms_norm(p, b.hp.rms_eps)?;
    let p = b.name(p, "norm", None);
    let p = b.g.mul(p, norm)?;
    let p = b.name(p, "per_layer_proj", None);
    let p = b.add(p, rows)?;
    let p = b.scale(p, 1.0 / 2f32.sqrt())?;
    let p = b.name(p, "inp_per_layer", None);
    let p = b.g.permute(p, [0, 2, 1, 3])?;
    b.g.cont(p).map_err(Into::into)
}

/// LAuReL: `cur` plus its normed low-rank projection.
fn laurel(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let t = b.layer_matmul(il, "laurel_l.weight", cur)?;
    let t = b.layer_matmul(il, "laurel_r.weight", t)?;
    let t = b.layer_rms_norm(il, t, "laurel_post_norm.weight", "laurel_post_norm")?;
    let t = b.add(t, cur)?;
    Ok(b.name(t, "laurel_out", Some(il)))
}

/// Activation sparsity: `x` less its row's mean plus `SPARSITY_STD_MUL` standard deviations
/// (the sample's), negatives zeroed.
fn gaussian_top_k(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    let mean = b.g.mean(x)?;
    let dev = b.g.sub(x, mean)?;
    let sq = b.g.sqr(dev)?;
    let var = b.g.sum_rows(sq)?;
    let var = b.scale(var, 1.0 / (x.ne()[0] - 1) as f32)?;
    let std = b.g.sqrt(var)?;
    let std = b.scale(std, SPARSITY_STD_MUL)?;
    let cutoff = b.add(mean, std)?;
    let y = b.g.sub(x, cutoff)?;
    b.g.relu(y).map_err(Into::into)
}

/// The router's modalities of `x` ([n_embd, n_tokens]): tanh of its normed, scaled projection,
/// [4, n_tokens].
fn router_modalities(b: &mut Builder, il: usize, x: TensorRef) -> Result<TensorRef> {
    let r = b.layer_rms_norm(il, x, "altup_router_norm.weight", "altup_router_norm")?;
    let r = b.scale(r, 1.0 / b.hp.n_embd as f32)?;
    let w = b.layer_weight(il, "altup_router.weight")?;
    let r = b.g.mul_mat(w, r)?;
    b.tanh(r)
}

/// The streams `x` plus their mix by coefficients the active stream's modalities predict.
fn altup_predict(b: &mut Builder, il: usize, x: TensorRef) -> Result<TensorRef> {
    let l = Some(il);
    let nt = b.shape.n_tokens as i64;
    let active = slice(b, x, ACTIVE)?;
    let modalities = router_modalities(b, il, active)?;
    let modalities = b.name(modalities, "modalities", l);
    let coefs = b.layer_matmul(il, "altup_predict_coef.weight", modalities)?;
    let coefs = b.name(coefs, "all_coefs", l);
    let coefs = b.g.reshape(coefs, &[N_ALTUP, N_ALTUP, nt])?;
    // [4, n_embd, n_tokens] times the coefficients: [n_embd, 4, n_tokens].
    let streams = b.g.permute(x, [1, 2, 0, 3])?;
    let streams = b.g.cont(streams)?;
    let p = b.g.mul_mat(streams, coefs)?;
    let p = b.g.permute(p, [0, 2, 1, 3])?;
    let p = b.g.cont(p)?;
    let p = b.add(p, x)?;
    Ok(b.name(p, "predictions", l))
}

/// The predictions corrected by the layer's output `activated` ([n_embd, n_tokens]): each stream
/// plus the active prediction's error times a coefficient (plus one) from the output's
/// modalities.
fn altup_correct(b: &mut Builder, il: usize, predictions: TensorRef, activated: TensorRef) -> Result<TensorRef> {
    let l = Some(il);
    let (e, nt) = (i64::from(b.hp.n_embd), b.shape.n_tokens as i64);
    let modalities = router_modalities(b, il, activated)?;
    let modalities = b.name(modalities, "modalities", l);
    let active = slice(b, predictions, ACTIVE)?;
    let innovation = b.g.sub(activated, active)?;
    let innovation = b.name(innovation, "innovation", l);
    let coefs = b.layer_matmul(il, "altup_correct_coef.weight", modalities)?;
    let coefs = b.g.scale_bias(coefs, 1.0, 1.0)?;
    let coefs = b.name(coefs, "all_coefs", l);
    let coefs = b.g.transpose(coefs)?;
    let coefs = b.g.cont(coefs)?;
    let coefs = b.g.reshape(coefs, &[1, nt, N_ALTUP])?;
    let innovation = b.g.repeat(innovation, [e, nt, N_ALTUP, 1])?;
    let corrected = b.g.mul(innovation, coefs)?;
    let corrected = b.add(corrected, predictions)?;
    Ok(b.name(corrected, "corrected", l))
}

/// sqrt of the sum of squares of each row of `x`.
fn magnitude(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    let sq = b.g.sqr(x)?;
    let sum = b.g.sum_rows(sq)?;
    b.g.sqrt(sum).map_err(Into::into)
}

/// `x` scaled from its rows' magnitudes to `target`'s.
fn rescaled(b: &mut Builder, x: TensorRef, target: TensorRef) -> Result<TensorRef> {
    let own = magnitude(b, x)?;
    let y = b.g.mul(x, target)?;
    b.g.div(y, own).map_err(Into::into)
}

/// Stream `i` of `x` ([n, n_tokens, k]), a view [n, n_tokens] (Gemma 4's layer inputs too).
pub(super) fn slice(b: &mut Builder, x: TensorRef, i: usize) -> Result<TensorRef> {
    let [n, nt, _, _] = x.ne();
    let t = x.ggml_type();
    let offset = i * row_size(t, n * nt);
    b.g.view(x, &[n, nt], &[row_size(t, n)], offset).map_err(Into::into)
}

/// Every stream of `x` ([n_embd, n_tokens, 4]) but the first, a view [n_embd, n_tokens, 3].
fn rest_of(b: &mut Builder, x: TensorRef) -> Result<TensorRef> {
    let [n, nt, k, _] = x.ne();
    let t = x.ggml_type();
    let plane = row_size(t, n * nt);
    b.g.view(x, &[n, nt, k - 1], &[row_size(t, n), plane], plane)
        .map_err(Into::into)
}
