//! The KV cache: per layer a K and a V tensor of `size` cells, and the cells' bookkeeping. One pool
//! of cells serves every sequence; the attention mask keeps sequences apart. When the context is not
//! "unified", each sequence is limited to its share of the cells, as llama.cpp's per-sequence
//! streams are.

mod cells;
mod state;

pub use cells::{Cells, SeqSet, Undo, MAX_SEQ};
pub use state::{read_string, write_string, Layout, SliceSource, Source};

use crate::error::{Error, Result};
use crate::ggml::{Arena, OwnedBuffer, RawType, TensorRef};
use crate::model::hparams::HParams;

/// Attention looks at the first `n_kv` cells, rounded up to this so graphs keep their shape.
pub const N_KV_PAD: usize = 256;

/// One token of a ubatch as the cache sees it.
#[derive(Debug, Clone, Copy)]
pub struct TokenPlace {
    pub pos: i32,
    pub seqs: SeqSet,
    /// The sequence whose cells the token attends to (llama.cpp uses the first of its ids).
    pub primary_seq: usize,
}

pub struct KvCache {
    pub cells: Cells,
    /// (K, V) per layer, each [n_embd_gqa, size].
    layers: Vec<(TensorRef, TensorRef)>,
    /// The tensors' memory and descriptions; None for a cache without layers (a context on a
    /// vocab-only model).
    storage: Option<(OwnedBuffer, Arena)>,
    /// Cells one sequence may hold (all of them in a unified cache).
    seq_capacity: usize,
}

impl KvCache {
    pub fn new(hp: &HParams, size: usize, type_k: RawType, type_v: RawType, seq_capacity: usize) -> Result<KvCache> {
        let n_layer = hp.n_layer as usize;
        let mut arena = Arena::new(2 * n_layer).map_err(Error::Ggml)?;
        let mut layers = Vec::with_capacity(n_layer);
        for il in 0..n_layer {
            let k_width = i64::from(hp.n_embd_head_k * hp.n_head_kv[il]);
            let v_width = i64::from(hp.n_embd_head_v * hp.n_head_kv[il]);
            let k = arena.new_tensor(type_k, &[k_width, size as i64], &format!("cache_k_l{il}"));
            let v = arena.new_tensor(type_v, &[v_width, size as i64], &format!("cache_v_l{il}"));
            let (k, v) = (k.map_err(Error::invalid)?, v.map_err(Error::invalid)?);
            layers.push((k, v));
        }
        let buffer = OwnedBuffer::for_arena_cpu(&arena).map_err(|e| Error::Ggml(format!("KV cache: {e}")))?;
        // Freshly allocated memory may hold NaN patterns; masked cells must still read as numbers.
        buffer.clear(0);
        crate::log_info!(
            "kv: {size} cells, {n_layer} layers, {:.2} MiB",
            buffer.size() as f64 / (1024.0 * 1024.0)
        );
        Ok(KvCache {
            cells: Cells::new(size),
            layers,
            storage: Some((buffer, arena)),
            seq_capacity,
        })
    }

    /// A cache with cells but no layers: what a context on a vocab-only model holds.
    pub fn without_layers(size: usize) -> KvCache {
        KvCache {
            cells: Cells::new(size),
            layers: Vec::new(),
            storage: None,
            seq_capacity: size,
        }
    }

    pub fn k(&self, il: usize) -> TensorRef {
        self.layers[il].0
    }

    pub fn v(&self, il: usize) -> TensorRef {
        self.layers[il].1
    }

    pub fn size(&self) -> usize {
        self.cells.size()
    }

    /// Bytes held per buffer type (one CPU buffer, or none without layers).
    pub fn memory_breakdown(&self) -> Vec<(crate::ggml::BufferTypeId, usize)> {
        self.storage.iter().map(|(b, _)| (b.buffer_type(), b.size())).collect()
    }

    pub fn bytes(&self) -> usize {
        self.storage.as_ref().map_or(0, |(b, _)| b.size())
    }

    /// Cells attention must cover for the current contents, padded so graphs keep their shape.
    pub fn n_kv(&self) -> usize {
        self.cells
            .used_max_p1()
            .div_ceil(N_KV_PAD)
            .max(1)
            .saturating_mul(N_KV_PAD)
            .min(self.size())
    }

    /// Find cells for `tokens` and occupy them. None (nothing changed) when there is no room,
    /// including when a sequence would exceed its share of a non-unified cache.
    pub fn place(&mut self, tokens: &[TokenPlace]) -> Option<(Vec<usize>, Undo)> {
        if self.seq_capacity < self.size() {
            let mut present = SeqSet::default();
            tokens
                .iter()
                .for_each(|t| t.seqs.iter().for_each(|s| present.insert(s)));
            for s in present.iter() {
                let new = tokens.iter().filter(|t| t.seqs.contains(s)).count();
                if self.cells.n_cells_of(s) + new > self.seq_capacity {
                    return None;
                }
            }
        }
        let slots = self.cells.find_slots(tokens.len())?;
        let pos: Vec<i32> = tokens.iter().map(|t| t.pos).collect();
        let seqs: Vec<SeqSet> = tokens.iter().map(|t| t.seqs).collect();
        let undo = self.cells.place(&slots, &pos, &seqs);
        Some((slots, undo))
    }

    /// The attention mask for `tokens` over the first `n_kv` cells, row-major [n_tokens][n_kv]:
    /// 0 where a token may attend to a cell, -inf elsewhere. `window` limits attention to the last
    /// `window` positions (sliding-window layers).
    pub fn mask(&self, tokens: &[TokenPlace], n_kv: usize, causal: bool, window: Option<u32>) -> Vec<f32> {
        let mut out = vec![f32::NEG_INFINITY; tokens.len() * n_kv];
        for (t, row) in tokens.iter().zip(out.chunks_exact_mut(n_kv)) {
            for (j, m) in row.iter_mut().enumerate() {
                let Some(p0) = self.cells.pos(j) else { continue };
                if !self.cells.seqs(j).contains(t.primary_seq) {
                    continue;
                }
                if causal && p0 > t.pos {
                    continue;
                }
                if window.is_some_and(|w| t.pos.saturating_sub(p0) >= w as i32) {
                    continue;
                }
                *m = 0.0;
            }
        }
        out
    }

    /// Forget everything; with `data`, also zero the tensors.
    pub fn clear(&mut self, data: bool) {
        self.cells.clear();
        if let (true, Some((buffer, _))) = (data, &self.storage) {
            buffer.clear(0);
        }
    }
}
