//! The KV cache: per layer a K and a V tensor of cells, and the cells' bookkeeping. As in
//! llama.cpp, the cells are split into streams: one for all sequences when the context is
//! "unified", otherwise one per sequence, each with its own range of rows in the tensors. Which row
//! a token's keys land in decides the order attention sums them in, so placement follows
//! llama.cpp's exactly and results stay bit-identical.

mod cells;
mod state;

use cells::Undo;
pub use cells::{CellExt, Cells, SeqSet, MAX_SEQ};
pub(crate) use state::{i32_of, u32_of, u64_of};
pub use state::{read_string, write_string, Layout, ReadHook, Sink, SliceSource, Source, WriteHook};

use crate::error::{Error, Result};
use crate::ggml::{row_size, tensor_read, tensor_write, Arena, OwnedBuffer, RawType, TensorRef};
use crate::model::hparams::{HParams, Swa};

/// Attention looks at the first `n_kv` cells, rounded up to this so graphs keep their shape.
pub const N_KV_PAD: usize = 256;

/// One token of a ubatch as the cache sees it.
#[derive(Debug, Clone, Copy)]
pub struct TokenPlace {
    pub pos: i32,
    pub seqs: SeqSet,
    /// The sequence whose cells the token attends to (llama.cpp uses the first of its ids).
    pub primary_seq: usize,
    /// What the cell keeps besides (the token, and for M-RoPE its 2D position).
    pub ext: CellExt,
}

#[cfg(test)]
impl TokenPlace {
    /// A token of sequence `seq` alone at `pos` (for tests).
    pub fn at(seq: usize, pos: i32) -> TokenPlace {
        TokenPlace {
            pos,
            seqs: SeqSet::single(seq),
            primary_seq: seq,
            ext: CellExt::default(),
        }
    }
}

pub struct KvCache {
    /// The cells of each stream; stream `s` owns rows `s * stream_size ..` of the tensors.
    streams: Vec<Cells>,
    /// (K, V) per layer, each [n_embd_gqa, stream_size * n_stream]; no V when the values are read
    /// from the keys (`HParams::kv_latent`). A model with a lightning indexer has as many more
    /// after them, each layer's indexer keys (empty where the layer keeps none; with an unused V for
    /// MiniMax-M3's): llama.cpp keeps those in a second cache over the same cells, and so they are
    /// written in the state.
    layers: Vec<(TensorRef, Option<TensorRef>)>,
    /// The model's layers: `layers` past these are the indexer's.
    n_layer: usize,
    /// The tensors' memory and descriptions; None for a cache without layers (a context on a
    /// vocab-only model).
    storage: Option<(OwnedBuffer, Arena)>,
}

/// Where a ubatch went: per token its row in the cache tensors, and what takes it back.
pub struct Placement {
    pub rows: Vec<usize>,
    /// The streams the ubatch touched, first and count (its tokens are grouped by stream).
    pub streams: (usize, usize),
    undo: Vec<(usize, Undo)>,
}

impl KvCache {
    pub fn new(hp: &HParams, stream_size: usize, n_stream: usize, type_k: RawType, type_v: RawType) -> Result<KvCache> {
        let n_layer = hp.n_layer as usize;
        let rows = stream_size.saturating_mul(n_stream) as i64;
        let indexed = hp.indexer.head_size > 0;
        let mut arena = Arena::new(if indexed { 4 } else { 2 } * n_layer).map_err(Error::Ggml)?;
        let mut layers = Vec::with_capacity(if indexed { 2 } else { 1 } * n_layer);
        for il in 0..n_layer {
            // Layers that keep no keys and values get empty tensors.
            let heads = if hp.has_kv(il) { hp.n_head_kv[il] } else { 0 };
            let k_width = i64::from(hp.n_embd_head_k * heads);
            let v_width = i64::from(hp.n_embd_head_v * heads);
            let k = arena.new_tensor(type_k, &[k_width, rows], &format!("cache_k_l{il}"));
            let k = k.map_err(Error::invalid)?;
            let v = if hp.kv_latent() {
                None
            } else {
                let v = arena.new_tensor(type_v, &[v_width, rows], &format!("cache_v_l{il}"));
                Some(v.map_err(Error::invalid)?)
            };
            layers.push((k, v));
        }
        if indexed {
            for il in 0..n_layer {
                let width = if hp.has_kv(il) && hp.indexer.keeps(il) {
                    i64::from(hp.indexer.head_size)
                } else {
                    0
                };
                let k = arena.new_tensor(type_k, &[width, rows], &format!("cache_lid_k_l{il}"));
                let v = match hp.indexer.values {
                    true => {
                        let width = if width > 0 { i64::from(hp.n_embd_head_v) } else { 0 };
                        let v = arena.new_tensor(type_v, &[width, rows], &format!("cache_lid_v_l{il}"));
                        Some(v.map_err(Error::invalid)?)
                    }
                    false => None,
                };
                layers.push((k.map_err(Error::invalid)?, v));
            }
        }
        let buffer = OwnedBuffer::for_arena_cpu(&arena).map_err(|e| Error::Ggml(format!("KV cache: {e}")))?;
        // Freshly allocated memory may hold NaN patterns; masked cells must still read as numbers.
        buffer.clear(0);
        crate::log_info!(
            "kv: {n_stream} stream(s) of {stream_size} cells, {n_layer} layers, {:.2} MiB",
            buffer.size() as f64 / (1024.0 * 1024.0)
        );
        Ok(KvCache {
            streams: vec![Cells::new(stream_size); n_stream.max(1)],
            layers,
            n_layer,
            storage: Some((buffer, arena)),
        })
    }

    /// A cache with cells but no layers: what a context on a vocab-only model holds.
    pub fn without_layers(size: usize) -> KvCache {
        KvCache {
            streams: vec![Cells::new(size)],
            layers: Vec::new(),
            n_layer: 0,
            storage: None,
        }
    }

    pub fn k(&self, il: usize) -> TensorRef {
        self.layers[il].0
    }

    /// Layer `il`'s indexer keys, in a model with a lightning indexer.
    pub fn indexer_k(&self, il: usize) -> Option<TensorRef> {
        self.layers.get(self.n_layer + il).map(|l| l.0)
    }

    /// Layer `il`'s values; None when they are read from the keys.
    pub fn v(&self, il: usize) -> Option<TensorRef> {
        self.layers[il].1
    }

    pub fn n_stream(&self) -> usize {
        self.streams.len()
    }

    /// Cells per stream.
    pub fn stream_size(&self) -> usize {
        self.streams[0].size()
    }

    /// Cells in all streams.
    pub fn size(&self) -> usize {
        self.stream_size() * self.n_stream()
    }

    pub fn used(&self) -> usize {
        self.streams.iter().map(Cells::used).sum()
    }

    /// The stream holding sequence `seq`.
    pub fn stream_of(&self, seq: usize) -> usize {
        seq.min(self.n_stream() - 1)
    }

    /// The cells of stream `s`.
    pub fn stream(&self, s: usize) -> &Cells {
        &self.streams[s]
    }

    fn stream_mut(&mut self, s: usize) -> &mut Cells {
        &mut self.streams[s]
    }

    fn cells_of(&mut self, seq: usize) -> &mut Cells {
        let s = self.stream_of(seq);
        &mut self.streams[s]
    }

    /// Bytes held per buffer type (one CPU buffer, or none without layers).
    pub fn memory_breakdown(&self) -> Vec<(crate::ggml::BufferTypeId, usize)> {
        self.storage.iter().map(|(b, _)| (b.buffer_type(), b.size())).collect()
    }

    pub fn bytes(&self) -> usize {
        self.storage.as_ref().map_or(0, |(b, _)| b.size())
    }

    /// Cells attention must cover in the streams `first..first + n`: the most any of them uses,
    /// padded so graphs keep their shape.
    pub fn n_kv(&self, (first, n): (usize, usize)) -> usize {
        self.streams[first..first + n]
            .iter()
            .map(|c| {
                c.used_max_p1()
                    .div_ceil(N_KV_PAD)
                    .max(1)
                    .saturating_mul(N_KV_PAD)
                    .min(c.size())
            })
            .max()
            .unwrap_or(N_KV_PAD.min(self.stream_size()))
    }

    /// Find cells for a ubatch's `tokens` and occupy them. Tokens of different streams must come
    /// grouped by stream. None (nothing changed) when a stream has no room, or when a token belongs
    /// to sequences of different streams.
    pub fn place(&mut self, tokens: &[TokenPlace]) -> Option<Placement> {
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, t) in tokens.iter().enumerate() {
            let s = self.stream_of(t.primary_seq);
            if t.seqs.iter().any(|q| self.stream_of(q) != s) {
                return None;
            }
            match groups.last_mut() {
                Some((gs, members)) if *gs == s => members.push(i),
                _ => groups.push((s, vec![i])),
            }
        }
        let mut placement = Placement {
            rows: vec![0; tokens.len()],
            streams: (groups.first().map_or(0, |g| g.0), groups.len()),
            undo: Vec::with_capacity(groups.len()),
        };
        let stream_size = self.stream_size();
        for (s, members) in groups {
            let Some(slots) = self.streams[s].find_slots(members.len()) else {
                self.rollback(placement);
                return None;
            };
            let pos: Vec<i32> = members.iter().map(|&i| tokens[i].pos).collect();
            let seqs: Vec<SeqSet> = members.iter().map(|&i| tokens[i].seqs).collect();
            let ext: Vec<CellExt> = members.iter().map(|&i| tokens[i].ext).collect();
            let undo = self.streams[s].place(&slots, &pos, &seqs, &ext);
            for (&i, &c) in members.iter().zip(&slots) {
                placement.rows[i] = s * stream_size + c;
            }
            placement.undo.push((s, undo));
        }
        Some(placement)
    }

    /// Take a placement back: its cells are empty again, as before `place`.
    pub fn rollback(&mut self, placement: Placement) {
        for (s, undo) in placement.undo.into_iter().rev() {
            self.streams[s].rollback(undo);
        }
    }

    /// The attention mask for `tokens` over the first `n_kv` cells of each token's stream,
    /// row-major [n_tokens][n_kv]: 0 (with `alibi`, minus the distance between the positions)
    /// where a token may attend to a cell, -inf elsewhere. `window` limits attention as a
    /// sliding-window layer's is limited.
    pub fn mask(&self, tokens: &[TokenPlace], n_kv: usize, causal: bool, window: Option<Swa>, alibi: bool) -> Vec<f32> {
        let mut out = vec![f32::NEG_INFINITY; tokens.len() * n_kv];
        for (t, row) in tokens.iter().zip(out.chunks_exact_mut(n_kv)) {
            let cells = &self.streams[self.stream_of(t.primary_seq)];
            for (j, m) in row.iter_mut().enumerate() {
                let Some(p0) = cells.pos(j) else { continue };
                if !cells.seqs(j).contains(t.primary_seq) {
                    continue;
                }
                if causal && p0 > t.pos {
                    continue;
                }
                if window.is_some_and(|w| w.hides(t.pos, p0)) {
                    continue;
                }
                *m = if alibi { -(p0.abs_diff(t.pos) as f32) } else { 0.0 };
            }
        }
        out
    }

    /// Forget everything; with `data`, also zero the tensors.
    pub fn clear(&mut self, data: bool) {
        self.streams.iter_mut().for_each(Cells::clear);
        if let (true, Some((buffer, _))) = (data, &self.storage) {
            buffer.clear(0);
        }
    }

    /// Remove `seq` (every sequence when None) from positions [p0, p1).
    pub fn seq_rm(&mut self, seq: Option<usize>, p0: i32, p1: i32) {
        match seq {
            Some(s) => self.cells_of(s).seq_rm(Some(s), p0, p1),
            None => self.streams.iter_mut().for_each(|c| c.seq_rm(None, p0, p1)),
        }
    }

    /// Give `dst` the cells of `src` in [p0, p1). Within a stream the cells are shared; across
    /// streams (a split cache) `dst`'s stream becomes a copy of `src`'s, data included, which
    /// llama.cpp allows only for whole sequences.
    pub fn seq_cp(&mut self, src: usize, dst: usize, p0: i32, p1: i32) -> Result<()> {
        let (s0, s1) = (self.stream_of(src), self.stream_of(dst));
        if s0 == s1 {
            if src != dst {
                self.streams[s0].seq_cp(src, dst, p0, p1);
            }
            return Ok(());
        }
        let size = self.stream_size() as i64;
        let partial = |p: i32| p > 0 && i64::from(p) + 1 < size;
        if partial(p0) || partial(p1) {
            return Err(Error::invalid(format!(
                "copying positions [{p0}, {p1}) of sequence {src} to sequence {dst}: with kv_unified = false \
                 the sequences have separate caches and only whole sequences (p0 = p1 = -1) can be copied"
            )));
        }
        let from = self.streams[s0].clone();
        self.streams[s1].copy_sequence(&from, src, dst);
        let rows = self.stream_size();
        for il in 0..self.layers.len() {
            for t in std::iter::once(self.k(il)).chain(self.v(il)) {
                let row = row_size(t.ggml_type(), t.ne()[0]);
                let mut data = vec![0u8; rows * row];
                tensor_read(t, s0 * rows * row, &mut data).map_err(Error::Ggml)?;
                tensor_write(t, s1 * rows * row, &data).map_err(Error::Ggml)?;
            }
        }
        Ok(())
    }

    /// Keep only `seq` in its stream (other streams are left alone, as in llama.cpp).
    pub fn seq_keep(&mut self, seq: usize) {
        self.cells_of(seq).seq_keep(seq);
    }

    pub fn seq_add(&mut self, seq: usize, p0: i32, p1: i32, delta: i32) {
        self.cells_of(seq).seq_add(seq, p0, p1, delta);
    }

    pub fn seq_div(&mut self, seq: usize, p0: i32, p1: i32, d: i32) {
        self.cells_of(seq).seq_div(seq, p0, p1, d);
    }

    /// The highest position any cell holds.
    pub fn pos_max(&self) -> Option<i32> {
        self.streams
            .iter()
            .flat_map(|c| (0..c.size()).filter_map(|j| c.pos(j)))
            .max()
    }

    pub fn seq_pos_min(&self, seq: usize) -> Option<i32> {
        self.streams[self.stream_of(seq)].seq_pos_min(seq)
    }

    pub fn seq_pos_max(&self, seq: usize) -> Option<i32> {
        self.streams[self.stream_of(seq)].seq_pos_max(seq)
    }

    /// Pending K-shift per row of the tensors, if positions moved since the keys were computed.
    pub fn pending_shift(&self) -> Option<Vec<i32>> {
        if self.streams.iter().all(|c| c.pending_shift().is_none()) {
            return None;
        }
        let n = self.stream_size();
        Some(
            self.streams
                .iter()
                .flat_map(|c| c.pending_shift().map_or_else(|| vec![0; n], <[i32]>::to_vec))
                .collect(),
        )
    }

    pub fn shift_applied(&mut self) {
        self.streams.iter_mut().for_each(Cells::shift_applied);
    }
}
