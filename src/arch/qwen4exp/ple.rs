//! Qwen4-exp's n-gram hash embeddings (PLE). Each token's n-grams (itself and the tokens before
//! it in its sequence, found in the cache's cells; an end-of-sequence token cuts the window) are
//! hashed on the host (ggml has neither 64-bit integers nor xor) to rows of a shared table; in
//! the one layer that has them, a gate from the embeddings' key against each residual stream
//! scales their value into the streams, and a causal convolution dilated by the n-gram size (its
//! history in the recurrent state) adds the rest.

use crate::error::{Error, Result};
use crate::ggml::{row_size, TensorRef};
use crate::graph::{set_i32, Builder, GraphInput, UbatchView};
use crate::kv::{KvCache, TokenPlace};
use crate::model::hparams::Ple;
use std::collections::HashMap;

/// The PLE table rows input, I32 [n_heads * n_tokens].
struct PleRows(TensorRef);

impl GraphInput for PleRows {
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let ple = ub
            .hp
            .ple
            .as_ref()
            .ok_or_else(|| Error::Internal("PLE rows without PLE".into()))?;
        set_i32(self.0, &rows(ple, ub.kv, ub.places)?)
    }
}

/// Per token ([n_tokens][n_heads]), the table rows of its n-gram hashes. The cache must hold the
/// ubatch's own cells already (its tokens are read back from them like the earlier ones).
fn rows(ple: &Ple, kv: &KvCache, places: &[TokenPlace]) -> Result<Vec<i32>> {
    let (n_gram, per) = (ple.ngram as usize, ple.heads_per_ngram as usize);
    let n_heads = ple.n_heads() as usize;
    let eos = i64::from(ple.eos);
    let mut history: HashMap<usize, Vec<(i32, usize, i32)>> = HashMap::new();
    let mut out = Vec::with_capacity(places.len() * n_heads);
    for t in places {
        if t.seqs.iter().nth(1).is_some() {
            return Err(Error::invalid(
                "n-gram embeddings need each token in one sequence (its history would be ambiguous)",
            ));
        }
        let cells = history
            .entry(t.primary_seq)
            .or_insert_with(|| sequence_cells(kv, t.primary_seq));
        // The token, then its predecessors: EOS from the first missing one or EOS on.
        let mut ctx = vec![i64::from(t.ext.tok); n_gram];
        let mut cut = false;
        for (s, c) in ctx.iter_mut().enumerate().skip(1) {
            let prev = if cut {
                None
            } else {
                token_at_or_before(cells, t.pos - s as i32)
            };
            cut = cut || prev.is_none_or(|p| p < 0 || i64::from(p) == eos);
            *c = if cut { eos } else { i64::from(prev.unwrap_or_default()) };
        }
        for n in 2..=n_gram {
            let mixed = ctx[..n]
                .iter()
                .zip(&ple.multipliers)
                .fold(0u64, |m, (&c, &mul)| m ^ (c as u64).wrapping_mul(mul));
            for h in (n - 2) * per..(n - 1) * per {
                let row = mixed % u64::from(ple.vocab_sizes[h]) + u64::from(ple.offsets[h]);
                out.push(row as i32);
            }
        }
    }
    Ok(out)
}

/// `seq`'s cells as (position, cell, token), in position then cell order.
fn sequence_cells(kv: &KvCache, seq: usize) -> Vec<(i32, usize, i32)> {
    let cells = kv.stream(kv.stream_of(seq));
    let mut held: Vec<(i32, usize, i32)> = (0..cells.size())
        .filter_map(|j| {
            let p = cells.pos(j).filter(|_| cells.seqs(j).contains(seq))?;
            Some((p, j, cells.ext(j).tok))
        })
        .collect();
    held.sort_unstable();
    held
}

/// The token of the cell at the highest position at or before `p` (of several there, the last
/// cell's), as llama.cpp's cells answer it; None when there is none.
fn token_at_or_before(cells: &[(i32, usize, i32)], p: i32) -> Option<i32> {
    let n = cells.partition_point(|&(q, _, _)| q <= p);
    n.checked_sub(1).map(|i| cells[i].2)
}

/// The PLE rows' embeddings, [head_dim * n_heads, n_tokens] (made before the layers).
pub(super) fn ple_embeddings(bd: &mut Builder) -> Result<Option<TensorRef>> {
    let Some(ple) = bd.hp.ple.as_ref() else {
        return Ok(None);
    };
    let n_heads = i64::from(ple.n_heads());
    let nt = bd.shape.n_tokens as i64;
    let rows =
        bd.g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[n_heads * nt], "inp_ple_rows")?;
    bd.inputs.add(PleRows(rows));
    let table = bd.weight("per_layer_token_embd.weight")?;
    let emb = bd.g.get_rows(table, rows)?;
    let emb = bd.g.reshape(emb, &[i64::from(ple.head_dim) * n_heads, nt])?;
    Ok(Some(bd.name(emb, "ple_embd", None)))
}

/// The residual streams `hidden` ([n_embd, hc, n_tokens]) of layer `il` with the embeddings
/// `emb` added through the gate and the convolution.
pub(super) fn ple_layer(bd: &mut Builder, il: usize, emb: TensorRef, hidden: TensorRef) -> Result<TensorRef> {
    let hp = bd.hp;
    let ple = hp
        .ple
        .as_ref()
        .ok_or_else(|| Error::Internal("no PLE in this model".into()))?;
    let (e, hc) = (i64::from(hp.n_embd), i64::from(hp.hc_count));
    let nt = bd.shape.n_tokens as i64;
    let l = Some(il);
    let key = bd.layer_matmul(il, "ple_key.weight", emb)?;
    let value = bd.layer_matmul(il, "ple_value.weight", emb)?;
    let key = stream_norm(bd, il, key, "ple_norm_key.weight")?;
    let query = stream_norm(bd, il, hidden, "ple_norm_query.weight")?;

    // Per stream, the signed square root of the scaled dot product, through a sigmoid.
    let s = bd.g.mul(key, query)?;
    let s = bd.g.sum_rows(s)?;
    let s = bd.scale(s, 1.0 / (e as f32).sqrt())?;
    let mag = bd.g.abs(s)?;
    let mag = bd.g.clamp(mag, 1e-6, f32::INFINITY)?;
    let mag = bd.g.sqrt(mag)?;
    let sign = bd.g.sgn(s)?;
    let gate = bd.g.mul(sign, mag)?;
    let gate = bd.g.sigmoid(gate)?;
    let gate = bd.name(gate, "ple_gate", l);

    let v = bd.g.reshape(value, &[e, 1, nt])?;
    let v = bd.g.repeat(v, [e, hc, nt, 1])?;
    let gated = bd.g.mul(v, gate)?;
    let gated = bd.name(gated, "ple_gated_value", l);

    let normed = stream_norm(bd, il, gated, "ple_norm_conv.weight")?;
    let conv = ple_conv(bd, il, ple, normed)?;
    let conv = bd.name(conv, "ple_conv_out", l);
    let added = bd.add(gated, conv)?;
    bd.add(hidden, added)
}

/// RMS norm of each stream of `x` ([n_embd * hc, ...]) times layer `il`'s [n_embd, hc]
/// weight `name`: [n_embd, hc, n_tokens].
fn stream_norm(bd: &mut Builder, il: usize, x: TensorRef, name: &str) -> Result<TensorRef> {
    let (e, hc) = (i64::from(bd.hp.n_embd), i64::from(bd.hp.hc_count));
    let x = bd.g.reshape(x, &[e, hc, bd.shape.n_tokens as i64])?;
    let w = bd.layer_weight(il, name)?;
    let w = bd.g.reshape(w, &[e, hc])?;
    bd.rms_norm(x, w)
}

/// The depthwise causal convolution of `x` ([n_embd, hc, n_tokens]) by layer `il`'s
/// `ple_conv1d` ([kernel, n_embd * hc]), dilated by the n-gram size, as a sum of shifted
/// copies (llama.cpp's op order), with SiLU: [n_embd, hc, n_tokens].
fn ple_conv(bd: &mut Builder, il: usize, ple: &Ple, x: TensorRef) -> Result<TensorRef> {
    let (e, hc) = (i64::from(bd.hp.n_embd), i64::from(bd.hp.hc_count));
    let width = e * hc;
    let rs = bd.recurrent_shape()?;
    let n_seqs = rs.n_seqs as i64;
    let nt = bd.shape.n_tokens as i64;
    let nst = nt / n_seqs;
    let (kern, dil) = (i64::from(ple.conv_kernel), i64::from(ple.ngram));
    let hist = (kern - 1) * dil;
    let states = bd
        .rs
        .and_then(|r| r.ple(il))
        .ok_or_else(|| Error::Internal(format!("layer {il} keeps no PLE history")))?;
    let x = bd.g.reshape(x, &[width, nst, n_seqs])?;
    let k = bd.rs.map_or(0, |r| r.n_rs_seq()) + 1;
    let padded = bd.conv_history(states, x, hist, width, k, true)?;
    let w = bd.layer_weight(il, "ple_conv1d.weight")?;
    let pnb = padded.nb();
    let mut out: Option<TensorRef> = None;
    for tap in 0..kern {
        let start = hist - (kern - 1 - tap) * dil;
        let view = bd.g.view(
            padded,
            &[nst, width, n_seqs],
            &[pnb[1], pnb[2]],
            row_size(padded.ggml_type(), start),
        )?;
        let shifted = bd.g.transpose(view)?;
        let shifted = bd.g.cont(shifted)?;
        let wk = bd.g.view(w, &[1, width], &[w.nb()[1]], tap as usize * w.nb()[0])?;
        let wk = bd.g.cont(wk)?;
        let mut wk = bd.g.reshape(wk, &[width])?;
        if wk.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_F32 {
            wk = bd.g.cast(wk, ggml_sys::ggml_type_GGML_TYPE_F32)?;
        }
        let term = bd.g.mul(shifted, wk)?;
        out = Some(match out {
            Some(o) => bd.add(o, term)?,
            None => term,
        });
    }
    let out = out.ok_or_else(|| Error::model("a PLE convolution of no taps"))?;
    let out = bd.g.silu(out)?;
    let out = bd.g.cont(out)?;
    bd.g.reshape(out, &[e, hc, nt]).map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(seq: usize, pos: i32, tok: i32) -> TokenPlace {
        let mut t = TokenPlace::at(seq, pos);
        t.ext.tok = tok;
        t
    }

    fn ple() -> Ple {
        Ple {
            layer: 0,
            ngram: 3,
            heads_per_ngram: 1,
            conv_kernel: 2,
            eos: 0,
            image_token: 0,
            head_dim: 4,
            multipliers: vec![1, 3, 5],
            offsets: vec![0, 100],
            vocab_sizes: vec![100, 50],
        }
    }

    #[test]
    fn ngrams_hash_the_tokens_before_and_stop_at_eos() {
        let mut kv = KvCache::without_layers(8);
        let toks = [token(0, 0, 7), token(0, 1, 9), token(0, 2, 11)];
        kv.place(&toks).expect("room");
        let r = rows(&ple(), &kv, &toks).unwrap();
        // Position 0: both predecessors missing (EOS, 0): 7 and 7 ^ 0 ^ 0.
        assert_eq!(&r[..2], [7, 107]);
        // Position 2: 11 ^ 9*3 = 11 ^ 27 = 16; then ^ 7*5 = 16 ^ 35 = 51.
        assert_eq!(&r[4..], [16, 101]);
        // An EOS before cuts everything at and before it.
        let mut kv = KvCache::without_layers(8);
        let toks = [token(0, 0, 7), token(0, 1, 0), token(0, 2, 11)];
        kv.place(&toks).expect("room");
        let r = rows(&ple(), &kv, &toks).unwrap();
        assert_eq!(&r[4..], [11, 111]);
        // Another sequence's cells are not a token's history.
        let mut kv = KvCache::without_layers(8);
        let toks = [token(0, 0, 7), token(1, 0, 9), token(0, 1, 11)];
        kv.place(&toks).expect("room");
        let r = rows(&ple(), &kv, &toks).unwrap();
        // 11 ^ 7*3 = 11 ^ 21 = 30; then ^ 0*5 (EOS before position 0) = 30.
        assert_eq!(&r[4..], [30, 130]);
    }
}
