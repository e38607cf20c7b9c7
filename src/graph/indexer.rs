//! The lightning indexer of sparse attention: a cheap scorer that picks, per token, the cached
//! cells its attention may see. Small query heads from the queries' low-rank latent and one key
//! per token (layer-normed) are rotated by RoPE over their first dimensions and by a
//! Hadamard matrix, the key kept in the indexer's cache; each cell's score is the per-head ReLU
//! of query times key, weighted per head, summed. The best `top_k` cells stay unmasked.

use super::inputs::Rotated;
use super::Builder;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;

impl Builder<'_> {
    /// Layer `il`'s picked cells for the ubatch's tokens, I32 [top_k, n_tokens / n_streams, 1,
    /// n_streams], from the normed layer input `cur` ([n_embd, n_tokens]) and the queries'
    /// normed latent `qr` ([q_lora_rank, n_tokens]). Stores the tokens' indexer keys.
    pub fn lightning_top_k(&mut self, il: usize, cur: TensorRef, qr: TensorRef) -> Result<TensorRef> {
        let ix = &self.hp.indexer;
        let (head, n_head, top_k) = (i64::from(ix.head_size), i64::from(ix.n_head), i64::from(ix.top_k));
        let l = Some(il);
        let nt = self.shape.n_tokens as i64;
        let cache = self
            .kv
            .indexer_k(il)
            .filter(|_| ix.keeps(il))
            .ok_or_else(|| Error::Internal(format!("layer {il} has no indexer cache")))?;
        let rot = self.rotation(Rotated::IndexerKeys)?;

        let q = self.layer_matmul(il, "indexer.attn_q_b.weight", qr)?;
        let q = self.g.reshape(q, &[head, n_head, nt])?;
        let q = self.rope_indexer(q)?;
        let q = self.name(q, "indexer_q", l);
        let k = self.layer_matmul(il, "indexer.attn_k.weight", cur)?;
        let (w, b) = (
            self.layer_weight(il, "indexer.k_norm.weight")?,
            self.layer_weight(il, "indexer.k_norm.bias")?,
        );
        let k = self.layer_norm(k, w, b)?;
        let k = self.g.reshape(k, &[head, 1, nt])?;
        let k = self.rope_indexer(k)?;
        // A plain product, not the fast Walsh-Hadamard transform: llama.cpp multiplies here.
        let (q, k) = match rot {
            Some(rot) => (self.g.mul_mat(rot, q)?, self.g.mul_mat(rot, k)?),
            None => (q, k),
        };
        let k = self.name(k, "indexer_k", l);

        // Write first: the scores below read the cache, including these rows.
        let rows = self.kv_rows()?;
        let k2 = self.g.reshape(k, &[head, nt])?;
        let stored = self.g.set_rows(cache, k2, rows)?;
        self.g.expand(stored);

        let weights = self.layer_matmul(il, "indexer.proj.weight", cur)?;
        // Scaled before the scores, not the much larger scores after (as llama.cpp).
        let weights = self.g.scale(weights, 1.0 / ((head * n_head) as f32).sqrt())?;

        let ns = self.shape.n_streams.max(1) as i64;
        let (tps, n_kv) = (nt / ns, self.shape.n_kv as i64);
        let row = |n: i64| crate::ggml::row_size(cache.ggml_type(), n);
        let stream = row(head * self.kv.stream_size() as i64);
        let keys = self.g.view(
            cache,
            &[head, 1, n_kv, ns],
            &[row(head), row(head), stream],
            stream * self.shape.first_stream,
        )?;
        let q = self.g.reshape(q, &[head, n_head, tps, ns])?;
        let weights = self.g.reshape(weights, &[n_head, tps, 1, ns])?;
        let mask = self.mask(false)?;
        // The indexer takes its mask in F16 (0 and -inf convert exactly).
        let mask = match mask.ggml_type() {
            ggml_sys::ggml_type_GGML_TYPE_F16 => mask,
            _ => self.g.cast(mask, ggml_sys::ggml_type_GGML_TYPE_F16)?,
        };
        let mask = self.g.reshape(mask, &[n_kv, tps, 1, ns])?;
        let scores = self.g.lightning_indexer(q, keys, weights, mask)?;
        let scores = self.name(scores, "indexer_score", l);
        let picks = self.g.top_k(scores, top_k.min(n_kv))?;
        Ok(self.name(picks, "top_k", l))
    }

    /// The attention mask ([n_kv, n_tokens]) with only the cells of `picks` (as
    /// `lightning_top_k` returns them) left as they are, every other one -inf.
    pub fn sparse_mask(&mut self, picks: TensorRef) -> Result<TensorRef> {
        let mask = self.mask(false)?;
        let (n_kv, nt) = (self.shape.n_kv as i64, self.shape.n_tokens as i64);
        let k = picks.ne()[0];
        let closed = self.g.fill(mask, f32::NEG_INFINITY)?;
        // One-element rows, so that each picked cell is a row set_rows can open.
        let closed = self.g.reshape(closed, &[1, n_kv, nt, 1])?;
        let zeros = self.g.filled(ggml_sys::ggml_type_GGML_TYPE_F32, &[1, k, nt], 0.0)?;
        let picks = self.g.reshape(picks, &[k, nt, 1, 1])?;
        let opened = self.g.set_rows(closed, zeros, picks)?;
        let opened = self.g.reshape(opened, &[n_kv, nt])?;
        self.g.add(opened, mask).map_err(Error::from)
    }

    /// The indexer's rotation of `x` ([head, n_head, n_tokens]) over its first (or last) `n_rot`
    /// dimensions by the positions, with the context's frequencies.
    fn rope_indexer(&mut self, x: TensorRef) -> Result<TensorRef> {
        let p = self.params.rope;
        let pos = self.positions()?;
        let ix = &self.hp.indexer;
        let (n_rot, trailing) = (self.hp.n_rot as i32, ix.rope_trailing);
        let offset = ix.head_size as i32 - n_rot;
        let rotated = self.g.rope(
            x,
            pos,
            None,
            self.hp.n_rot as i32,
            self.hp.indexer.rope_mode,
            None,
            p.n_ctx_orig as i32,
            p.freq_base,
            p.freq_scale,
            p.ext_factor,
            p.attn_factor,
            p.beta_fast,
            p.beta_slow,
        )?;
        match trailing {
            true => self.g.rope_offset(rotated, offset, n_rot).map_err(Error::from),
            false => Ok(rotated),
        }
    }
}
