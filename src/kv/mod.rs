//! The KV cache: per layer a K and a V tensor of cells, and the cells' bookkeeping. As in
//! llama.cpp, the cells are split into streams: one for all sequences when the context is
//! "unified", otherwise one per sequence, each with its own range of rows in the tensors. A model
//! with sliding-window layers has a second set of cells for those, placed on their own as
//! llama.cpp's separate sliding cache is. Which row a token's keys land in decides the order
//! attention sums them in, so placement follows llama.cpp's exactly and results stay bit-identical.

mod cells;
pub mod compressed;
mod edits;
pub mod kpool;
mod state;

use cells::Undo;
pub use cells::{CellExt, Cells, SeqSet, MAX_SEQ};
pub use edits::Split;
pub(crate) use state::{i32_of, u32_of, u64_of};
pub use state::{read_string, write_string, Layout, ReadHook, Sink, SliceSource, Source, WriteHook};

use crate::error::{Error, Result};
use crate::ggml::{row_size, tensor_read, tensor_write, BufferType, Placed, PlacedBuffers, RawType, TensorRef};
use crate::model::hparams::{HParams, Swa};
use std::borrow::Cow;

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

/// The cache's state for one ubatch beyond its cells, which its graph's inputs are filled from
/// (llama.cpp's memory context): the k-pool step, the compressed caches' plans.
#[derive(Clone, Copy, Default)]
pub struct UbatchMemory<'a> {
    pub kpool: Option<&'a kpool::Step>,
    pub comp: Option<[&'a compressed::Plan; 3]>,
}

impl UbatchMemory<'_> {
    pub fn shape(&self) -> MemoryShape {
        MemoryShape {
            kpool: self.kpool.map(kpool::Step::shape),
            comp: self.comp.map(|c| c.map(compressed::Plan::shape)),
        }
    }
}

/// What the cache plans for each of a batch's ubatches before any runs: the compressed caches'
/// plans (none without such caches).
pub struct BatchStates(Option<[Vec<compressed::Plan>; 3]>);

impl BatchStates {
    /// Ubatch `k`'s part.
    pub fn of(&self, k: usize) -> UbatchPlans<'_> {
        UbatchPlans(self.0.as_ref().map(|c| [&c[0][k], &c[1][k], &c[2][k]]))
    }
}

/// One ubatch's part of its batch's `BatchStates`.
#[derive(Clone, Copy)]
pub struct UbatchPlans<'a>(Option<[&'a compressed::Plan; 3]>);

impl<'a> UbatchPlans<'a> {
    /// The ubatch's whole state, with the `step` the cache made when it was placed
    /// (`KvCache::placed_step`).
    pub fn with_step(self, step: Option<&'a kpool::Step>) -> UbatchMemory<'a> {
        UbatchMemory {
            kpool: step,
            comp: self.0,
        }
    }
}

/// The sequences of a ubatch's tokens in id order: their index is their row of pooled embeddings.
pub fn sequences_of(places: &[TokenPlace]) -> Vec<usize> {
    let mut seqs: Vec<usize> = places.iter().flat_map(|p| p.seqs.iter()).collect();
    seqs.sort_unstable();
    seqs.dedup();
    seqs
}

/// What the cache's per-ubatch state decides of a graph's structure (part of its `Shape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MemoryShape {
    /// The k-pool indexer's pools the graph scores and pools.
    pub kpool: Option<kpool::KpoolShape>,
    /// Each compressed cache's plan sizes (`compressed::Kind` order).
    pub comp: Option<[compressed::PlanShape; 3]>,
}

/// Cells placed on their own, in streams of equal size.
#[derive(Clone)]
struct CellSet {
    streams: Vec<Cells>,
    /// The sliding-window layers' set: their window, whose passed cells are taken again.
    window: Option<Swa>,
}

impl CellSet {
    fn new(size: usize, n_stream: usize, window: Option<Swa>) -> CellSet {
        CellSet {
            streams: vec![Cells::new(size); n_stream.max(1)],
            window,
        }
    }

    fn stream_size(&self) -> usize {
        self.streams[0].size()
    }
}

pub struct KvCache {
    /// The full-attention layers' cells (a lightning indexer's keys share them), then, in a model
    /// with sliding-window layers, theirs: llama.cpp keeps those in a cache of their own, as
    /// large as the other with `swa_full`, else sized for the window, whose cells are taken again
    /// once the window has passed them. Stream `s` of a set owns rows `s * stream_size ..` of its
    /// layers' tensors.
    sets: Vec<CellSet>,
    /// (K, V) per layer, each [n_embd_gqa, stream_size * n_stream] of the layer's set; no V when
    /// the values are read from the keys (`HParams::kv_latent`). A model with a lightning indexer
    /// has as many more after them, each layer's indexer keys (empty where the layer keeps none;
    /// with an unused V where the indexer's cache has one): llama.cpp keeps those in a second cache over the same
    /// cells, and so they are written in the state.
    layers: Vec<(TensorRef, Option<TensorRef>)>,
    /// The set (index into `sets`) of each of `layers`.
    layer_set: Vec<usize>,
    /// The model's layers: `layers` past these are the indexer's.
    n_layer: usize,
    /// The tensors' memory and descriptions; None for a cache without layers (a context on a
    /// vocab-only model).
    storage: Option<PlacedBuffers>,
    /// The k-pool indexer's pool size (0: none) and which of its cached pooled keys are stale.
    kpool: usize,
    stale: kpool::Stale,
    /// Compressed caches beside the sliding-window cells.
    comp: Option<compressed::Store>,
    /// The model layers' values are kept transposed (a stream's cells adjacent for each
    /// dimension, every layer as wide as the widest), as llama.cpp keeps them without flash
    /// attention: attention then multiplies by them in place, without a transposed copy.
    v_trans: bool,
    /// Each layer's value width (elements), whatever its tensor's width.
    v_width: Vec<usize>,
    /// Positions are 2D as well (M-RoPE): at an equal position, cells later in an image's grid
    /// are hidden (llama.cpp's `is_2d_gt`).
    pos_2d: bool,
}

/// Where a ubatch went: per token its row in the cache tensors, and what takes it back.
pub struct Placement {
    /// Rows in the full-attention layers' tensors.
    pub rows: Vec<usize>,
    /// Rows in the sliding-window layers' tensors (empty without such layers).
    pub sliding_rows: Vec<usize>,
    /// The streams the ubatch touched, first and count (its tokens are grouped by stream).
    pub streams: (usize, usize),
    /// Per set and stream touched, what undoes it.
    undo: Vec<(usize, usize, Undo)>,
}

impl Placement {
    /// The cells taken, per set and stream.
    fn slots(&self) -> Slots {
        Slots(
            self.undo
                .iter()
                .map(|(set, s, undo)| (*set, *s, undo.slots().to_vec()))
                .collect(),
        )
    }
}

/// The cells chosen for a ubatch in each set and stream (in `place`'s order).
pub struct Slots(Vec<(usize, usize, Vec<usize>)>);

/// The streams a plan let go of cells in, as they were before it (see `KvCache::plan`).
#[derive(Default)]
pub struct Planned(Vec<(usize, usize, Cells)>);

/// The sliding-window layers' cells: `n_swa` per sequence sharing the stream, plus a ubatch,
/// padded to 256 (after the bound, as llama.cpp pads it); the full size with `swa_full`.
pub fn sliding_size(hp: &HParams, full: usize, swa_full: bool, seqs_per_stream: usize, n_ubatch: usize) -> usize {
    if swa_full {
        return full;
    }
    let want = (hp.n_swa as usize)
        .saturating_mul(seqs_per_stream)
        .saturating_add(n_ubatch);
    full.min(want).next_multiple_of(N_KV_PAD)
}

impl KvCache {
    /// A cache of `stream_size` cells per stream for the full-attention layers and `sliding_size`
    /// for the sliding-window ones (see `sliding_size`), layer `il`'s tensors in `buft_of(il)`.
    pub fn new(
        hp: &HParams,
        stream_size: usize,
        sliding_size: usize,
        n_stream: usize,
        (type_k, type_v): (RawType, RawType),
        v_trans: bool,
        buft_of: &dyn Fn(usize) -> BufferType,
    ) -> Result<KvCache> {
        let n_layer = (hp.n_layer + hp.n_layer_cache_only) as usize;
        let mut sets = vec![CellSet::new(stream_size, n_stream, None)];
        if hp.has_sliding_layers() {
            sets.push(CellSet::new(sliding_size, n_stream, Some(hp.swa())));
        }
        let set_of = |il: usize| usize::from(sets.len() > 1 && hp.swa_layers.get(il).copied().unwrap_or(false));
        let rows_of = |set: usize| (sets[set].stream_size().saturating_mul(n_stream)) as i64;
        let indexed = hp.indexer.head_size > 0;
        let mut arena = Placed::new(if indexed { 4 } else { 2 } * n_layer);
        let mut layers = Vec::with_capacity(if indexed { 2 } else { 1 } * n_layer);
        let mut layer_set = Vec::with_capacity(layers.capacity());
        let mut v_widths = Vec::with_capacity(layers.capacity());
        let heads_of = |il: usize| if hp.has_kv(il) { hp.n_head_kv[il] } else { 0 };
        let v_max = (0..n_layer).map(|il| i64::from(hp.head_v(il) * heads_of(il))).max();
        for il in 0..n_layer {
            let rows = rows_of(set_of(il));
            // Layers that keep no keys and values get empty tensors.
            let heads = heads_of(il);
            let k_width = i64::from(hp.head_k(il) * heads);
            let v_width = i64::from(hp.head_v(il) * heads);
            v_widths.push(v_width as usize);
            let v_stored = match v_trans && heads > 0 {
                true => v_max.unwrap_or(v_width),
                false => v_width,
            };
            let k = arena.new_tensor(buft_of(il), type_k, &[k_width, rows], &format!("cache_k_l{il}"));
            let k = k.map_err(|e| Error::invalid(e.to_string()))?;
            let v = if hp.kv_latent() {
                None
            } else {
                let v = arena.new_tensor(buft_of(il), type_v, &[v_stored, rows], &format!("cache_v_l{il}"));
                Some(v.map_err(|e| Error::invalid(e.to_string()))?)
            };
            layers.push((k, v));
            layer_set.push(set_of(il));
        }
        if indexed {
            let rows = rows_of(0);
            for il in 0..n_layer {
                let width = if hp.has_kv(il) && hp.indexer.keeps(il) {
                    i64::from(hp.indexer.row_width())
                } else {
                    0
                };
                let k = arena.new_tensor(buft_of(il), type_k, &[width, rows], &format!("cache_lid_k_l{il}"));
                let v_width = if width > 0 { i64::from(hp.n_embd_head_v) } else { 0 };
                v_widths.push(v_width as usize);
                let v = match hp.indexer.values {
                    true => {
                        let width = v_width;
                        let v = arena.new_tensor(buft_of(il), type_v, &[width, rows], &format!("cache_lid_v_l{il}"));
                        Some(v.map_err(|e| Error::invalid(e.to_string()))?)
                    }
                    false => None,
                };
                layers.push((k.map_err(|e| Error::invalid(e.to_string()))?, v));
                layer_set.push(0);
            }
        }
        let buffer = arena.allocate().map_err(|e| Error::Ggml(format!("KV cache: {e}")))?;
        let sliding = match sets.get(1) {
            Some(s) => format!(" (sliding-window layers: {} cells per stream)", s.stream_size()),
            None => String::new(),
        };
        crate::log_info!(
            "kv: {n_stream} stream(s) of {stream_size} cells{sliding}, {n_layer} layers, {:.2} MiB",
            buffer.size() as f64 / (1024.0 * 1024.0)
        );
        Ok(KvCache {
            sets,
            layers,
            layer_set,
            n_layer,
            storage: Some(buffer),
            kpool: hp.indexer.kpool as usize,
            stale: kpool::Stale::default(),
            comp: None,
            v_trans,
            v_width: v_widths,
            pos_2d: hp.n_pos_per_embd() >= 3,
        })
    }

    /// A cache with cells but no layers: what a context on a vocab-only model holds.
    pub fn without_layers(size: usize) -> KvCache {
        KvCache {
            sets: vec![CellSet::new(size, 1, None)],
            layers: Vec::new(),
            layer_set: Vec::new(),
            n_layer: 0,
            storage: None,
            kpool: 0,
            stale: kpool::Stale::default(),
            comp: None,
            v_trans: false,
            v_width: Vec::new(),
            pos_2d: false,
        }
    }

    /// Keep compressed caches beside the cells.
    pub fn attach_compressed(&mut self, store: compressed::Store) {
        self.comp = Some(store);
    }

    pub fn compressed(&self) -> Option<&compressed::Store> {
        self.comp.as_ref()
    }

    pub fn k(&self, il: usize) -> TensorRef {
        self.layers[il].0
    }

    /// Whether the cells keep a lightning indexer's keys (not where they are compressed).
    pub fn has_indexer_cache(&self) -> bool {
        self.layers.len() > self.n_layer
    }

    /// Layer `il`'s indexer keys, in a model with a lightning indexer.
    pub fn indexer_k(&self, il: usize) -> Option<TensorRef> {
        self.layers.get(self.n_layer + il).map(|l| l.0)
    }

    /// Whether the model layers' values are kept transposed (`KvCache::v_trans`).
    pub fn v_transposed(&self) -> bool {
        self.v_trans
    }

    /// Whether layer `il`'s value tensor is transposed (the model's layers, not an indexer's).
    fn v_transposed_at(&self, il: usize) -> bool {
        self.v_trans && il < self.n_layer
    }

    /// The indices a ubatch's values are stored by, its tokens' `rows` (of the full layers'
    /// cells, or with `sliding` of the sliding ones'): the rows themselves, or with transposed
    /// values each token's every element (token by token, as its values are laid out), as
    /// llama.cpp's value indices.
    pub fn value_indices(&self, sliding: bool, rows: &[usize]) -> Vec<i64> {
        let width = self.value_indices_per_token();
        if width == 1 {
            return rows.iter().map(|&r| r as i64).collect();
        }
        let size = self.set(sliding).stream_size();
        let mut out = Vec::with_capacity(rows.len() * width);
        for &r in rows {
            let (stream, cell) = (r / size, r % size);
            out.extend((0..width).map(|j| ((stream * width + j) * size + cell) as i64));
        }
        out
    }

    /// How many value indices each token has: 1, or with transposed values the width every
    /// model layer's value tensor has.
    pub fn value_indices_per_token(&self) -> usize {
        let width = (0..self.n_layer)
            .filter_map(|il| self.v(il))
            .map(|t| t.ne()[0] as usize)
            .max();
        match width {
            Some(w) if self.v_trans && w > 0 => w,
            _ => 1,
        }
    }

    /// The types of the layers' value caches.
    pub fn value_types(&self) -> impl Iterator<Item = RawType> + '_ {
        self.layers.iter().filter_map(|l| l.1).map(TensorRef::ggml_type)
    }

    /// Layer `il`'s values; None when they are read from the keys.
    pub fn v(&self, il: usize) -> Option<TensorRef> {
        self.layers[il].1
    }

    /// Whether the sliding-window layers have cells of their own (a model with such layers).
    pub fn has_sliding(&self) -> bool {
        self.sets.len() > 1
    }

    /// Whether cache layer `il` is a sliding-window layer, in the sliding set's cells.
    pub fn sliding_layer(&self, il: usize) -> bool {
        self.layer_set.get(il).is_some_and(|&s| s > 0)
    }

    /// The sliding layers' cells (`sliding`, where the model has them) or the full layers'.
    fn set(&self, sliding: bool) -> &CellSet {
        match sliding {
            true => self.sets.last().unwrap_or(&self.sets[0]),
            false => &self.sets[0],
        }
    }

    pub fn n_stream(&self) -> usize {
        self.sets[0].streams.len()
    }

    /// Cells per stream (of the full layers).
    pub fn stream_size(&self) -> usize {
        self.sets[0].stream_size()
    }

    /// Cells per stream of the full layers, or with `sliding` of the sliding ones.
    pub fn stream_size_of(&self, sliding: bool) -> usize {
        self.set(sliding).stream_size()
    }

    /// Cells per stream of the set holding cache layer `il`.
    pub fn layer_stream_size(&self, il: usize) -> usize {
        self.stream_size_of(self.sliding_layer(il))
    }

    /// Cells in all streams (of the full layers, or with `sliding` of the sliding ones).
    pub fn size(&self, sliding: bool) -> usize {
        let set = self.set(sliding);
        set.stream_size() * set.streams.len()
    }

    /// Cells in use (of the full layers).
    pub fn used(&self) -> usize {
        self.sets[0].streams.iter().map(Cells::used).sum()
    }

    /// Whether cached keys may be moved to new positions as llama.cpp allows it: not when the
    /// sliding layers' cells are fewer (its `get_can_shift`).
    pub fn sizes_match(&self) -> bool {
        self.sets.iter().all(|s| s.stream_size() == self.stream_size())
    }

    /// The stream holding sequence `seq`.
    pub fn stream_of(&self, seq: usize) -> usize {
        seq.min(self.n_stream() - 1)
    }

    /// The cells of stream `s` (of the full layers).
    pub fn stream(&self, s: usize) -> &Cells {
        &self.sets[0].streams[s]
    }

    /// Bytes held per buffer type (none without layers).
    pub fn memory_breakdown(&self) -> Vec<(crate::ggml::BufferTypeId, usize)> {
        let comp = self.comp.as_ref().map(compressed::Store::buffers);
        self.storage
            .iter()
            .chain(comp)
            .flat_map(PlacedBuffers::memory_breakdown)
            .collect()
    }

    pub fn bytes(&self) -> usize {
        self.storage.as_ref().map_or(0, PlacedBuffers::size) + self.comp.as_ref().map_or(0, |c| c.buffers().size())
    }

    /// Cells attention must cover in the streams `first..first + n` (of the full layers, or with
    /// `sliding` of the sliding ones): the most any of them uses, padded so graphs keep their
    /// shape.
    pub fn n_kv(&self, sliding: bool, (first, n): (usize, usize)) -> usize {
        let set = self.set(sliding);
        set.streams[first..first + n]
            .iter()
            .map(|c| {
                c.used_max_p1()
                    .div_ceil(N_KV_PAD)
                    .max(1)
                    .saturating_mul(N_KV_PAD)
                    .min(c.size())
            })
            .max()
            .unwrap_or(N_KV_PAD.min(set.stream_size()))
    }

    /// Find cells for a ubatch's `tokens` and occupy them, in every set. Tokens of different
    /// streams must come grouped by stream. None (nothing changed) when a stream has no room, or
    /// when a token belongs to sequences of different streams.
    pub fn place(&mut self, tokens: &[TokenPlace]) -> Option<Placement> {
        self.place_in(tokens, 0..self.sets.len(), None)
    }

    /// Occupy the cells `plan` chose for `tokens` (see `plan`).
    pub fn place_planned(&mut self, tokens: &[TokenPlace], plan: &Slots) -> Option<Placement> {
        self.place_in(tokens, 0..self.sets.len(), Some(plan))
    }

    /// `place` in the cell sets `sets` only, in the cells `plan` chose where given.
    fn place_in(
        &mut self,
        tokens: &[TokenPlace],
        sets: std::ops::Range<usize>,
        plan: Option<&Slots>,
    ) -> Option<Placement> {
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
            sliding_rows: vec![0; if sets.end > 1 { tokens.len() } else { 0 }],
            streams: (groups.first().map_or(0, |g| g.0), groups.len()),
            undo: Vec::with_capacity(groups.len() * self.sets.len()),
        };
        let mut planned = plan.map(|p| p.0.iter());
        for set in sets {
            let (window, stream_size) = (self.sets[set].window, self.sets[set].stream_size());
            for (s, members) in &groups {
                let slots = match planned.as_mut() {
                    Some(it) => it
                        .next()
                        .filter(|(ps, pst, slots)| (*ps, *pst, slots.len()) == (set, *s, members.len()))
                        .map(|(_, _, slots)| slots.clone()),
                    None => self.sets[set].streams[*s].find_slots(members.len(), window),
                };
                let Some(slots) = slots else {
                    self.rollback(placement);
                    return None;
                };
                let pos: Vec<i32> = members.iter().map(|&i| tokens[i].pos).collect();
                let seqs: Vec<SeqSet> = members.iter().map(|&i| tokens[i].seqs).collect();
                let ext: Vec<CellExt> = members.iter().map(|&i| tokens[i].ext).collect();
                let undo = self.sets[set].streams[*s].place(&slots, &pos, &seqs, &ext);
                let rows = if set == 0 {
                    &mut placement.rows
                } else {
                    &mut placement.sliding_rows
                };
                for (&i, &c) in members.iter().zip(&slots) {
                    rows[i] = s * stream_size + c;
                }
                placement.undo.push((set, *s, undo));
            }
        }
        Some(placement)
    }

    /// Take a placement back: its cells are as before `place`.
    pub fn rollback(&mut self, placement: Placement) {
        for (set, s, undo) in placement.undo.into_iter().rev() {
            self.sets[set].streams[s].rollback(undo);
        }
    }

    /// Choose cells for a batch's ubatches before running any, as llama.cpp's `prepare` does: each
    /// ubatch is placed in turn, then the chosen cells are given back their old contents, while
    /// what the placing let go of (a sliding window's passed positions) stays gone: llama.cpp does
    /// not put those back, and the ubatches then attend without them. Also returns the streams
    /// that lost cells so, as they were, for `undo_plan`. None when a ubatch finds no room; the
    /// cells are then as they were.
    pub fn plan<T: AsRef<[TokenPlace]>>(&mut self, ubatches: &[T]) -> Option<(Vec<Slots>, Planned)> {
        let mut placed = Vec::with_capacity(ubatches.len());
        let mut fits = true;
        for tokens in ubatches {
            match self.place(tokens.as_ref()) {
                Some(p) => placed.push(p),
                None => {
                    fits = false;
                    break;
                }
            }
        }
        let slots = placed.iter().map(Placement::slots).collect();
        // A stream that lost cells, as before the batch: as before its first placement that let
        // go of any, with the earlier placements' (into free cells) taken out again.
        let undos: Vec<&(usize, usize, Undo)> = placed.iter().flat_map(|p| &p.undo).collect();
        let mut before: Vec<(usize, usize, Cells)> = Vec::new();
        for (k, &(set, s, undo)) in undos.iter().enumerate() {
            let Some(cells) = undo.cells_before() else { continue };
            if before.iter().any(|b| (b.0, b.1) == (*set, *s)) {
                continue;
            }
            let mut cells = cells.clone();
            for (_, _, earlier) in undos[..k].iter().rev().filter(|u| (u.0, u.1) == (*set, *s)) {
                cells.vacate(earlier);
            }
            before.push((*set, *s, cells));
        }
        for p in placed.into_iter().rev() {
            for (set, s, undo) in p.undo.into_iter().rev() {
                self.sets[set].streams[s].give_back(undo);
            }
        }
        let planned = Planned(before);
        if !fits {
            self.undo_plan(planned);
            return None;
        }
        Some((slots, planned))
    }

    /// Put back what a plan let go of, once the batch's placements are taken back (a batch that
    /// failed): the cells are then as before the plan.
    pub fn undo_plan(&mut self, planned: Planned) {
        for (set, s, cells) in planned.0 {
            self.sets[set].streams[s] = cells;
        }
    }

    /// The attention mask for `tokens` over the first `n_kv` cells of each token's stream (of the
    /// full layers, or with `sliding` of the sliding ones, hiding what their window hides),
    /// row-major [n_tokens][n_kv]: 0 (with `alibi`, minus the distance between the positions)
    /// where a token may attend to a cell, -inf elsewhere.
    pub fn mask(&self, tokens: &[TokenPlace], n_kv: usize, causal: bool, sliding: bool, alibi: bool) -> Vec<f32> {
        let set = self.set(sliding);
        let mut out = vec![f32::NEG_INFINITY; tokens.len() * n_kv];
        for (t, row) in tokens.iter().zip(out.chunks_exact_mut(n_kv)) {
            let cells = &set.streams[self.stream_of(t.primary_seq)];
            for (j, m) in row.iter_mut().enumerate() {
                let Some(p0) = cells.pos(j) else { continue };
                if !cells.seqs(j).contains(t.primary_seq) {
                    continue;
                }
                if causal && p0 > t.pos {
                    continue;
                }
                if causal && self.pos_2d && p0 == t.pos && cells.ext(j).is_2d_after(t.ext) {
                    continue;
                }
                if set.window.is_some_and(|w| w.hides(t.pos, p0)) {
                    continue;
                }
                *m = if alibi { -(p0.abs_diff(t.pos) as f32) } else { 0.0 };
            }
        }
        out
    }

    /// Every stream of every set.
    fn all_cells(&mut self) -> impl Iterator<Item = &mut Cells> {
        self.sets.iter_mut().flat_map(|set| set.streams.iter_mut())
    }

    /// The stream holding `seq` in every set.
    fn cells_of(&mut self, seq: usize) -> impl Iterator<Item = &mut Cells> {
        let s = self.stream_of(seq);
        self.sets.iter_mut().map(move |set| &mut set.streams[s])
    }

    /// Forget every cell; with `data`, also zero the tensors.
    fn clear_cells(&mut self, data: bool) {
        self.stale.mark(None, 0);
        self.all_cells().for_each(Cells::clear);
        if let (true, Some(buffer)) = (data, &self.storage) {
            buffer.clear(0);
        }
    }

    /// Remove `seq` (every sequence when None) from positions [p0, p1) of the cells.
    fn remove_cells(&mut self, seq: Option<usize>, p0: i32, p1: i32) {
        let stale_from = kpool::Stale::edit_pos(seq, p0, seq.and_then(|s| self.seq_pos_min(s)));
        match seq {
            Some(s) => self.cells_of(s).for_each(|c| c.seq_rm(Some(s), p0, p1)),
            None => self.all_cells().for_each(|c| c.seq_rm(None, p0, p1)),
        }
        self.stale.mark(seq, stale_from);
        // Removing a sequence can end a sharing of cells the survivor's layout still records.
        self.stale.mark_all_if_shared();
    }

    /// Give `dst` the cells of `src` in [p0, p1). Within a stream the cells are shared; across
    /// streams (a split cache) `dst`'s stream becomes a copy of `src`'s, data included, which
    /// llama.cpp allows only for whole sequences.
    fn copy_cells(&mut self, src: usize, dst: usize, p0: i32, p1: i32) -> Result<()> {
        // Shared cells cannot hold two poolings: both sides pool again.
        self.stale.mark(Some(src), 0);
        self.stale.mark(Some(dst), 0);
        let (s0, s1) = (self.stream_of(src), self.stream_of(dst));
        if s0 == s1 {
            if src != dst {
                self.sets
                    .iter_mut()
                    .for_each(|set| set.streams[s0].seq_cp(src, dst, p0, p1));
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
        for set in &mut self.sets {
            let from = set.streams[s0].clone();
            set.streams[s1].copy_sequence(&from, src, dst);
        }
        for il in 0..self.layers.len() {
            let rows = self.layer_stream_size(il);
            for t in std::iter::once(self.k(il)).chain(self.v(il)) {
                let row = row_size(t.ggml_type(), t.ne()[0]);
                let mut data = vec![0u8; rows * row];
                tensor_read(t, s0 * rows * row, &mut data)?;
                tensor_write(t, s1 * rows * row, &data)?;
            }
        }
        Ok(())
    }

    /// Keep only `seq` in its stream's cells (other streams are left alone, as in llama.cpp).
    fn keep_cells(&mut self, seq: usize) {
        self.stale.mark(None, 0);
        self.cells_of(seq).for_each(|c| c.seq_keep(seq));
    }

    pub fn seq_add(&mut self, seq: usize, p0: i32, p1: i32, delta: i32) {
        // A shift down moves cells below p0 too.
        let edit = if delta < 0 { p0.saturating_add(delta) } else { p0 };
        let stale_from = kpool::Stale::edit_pos(Some(seq), edit, self.seq_pos_min(seq));
        self.cells_of(seq).for_each(|c| c.seq_add(seq, p0, p1, delta));
        self.stale.mark(Some(seq), stale_from);
    }

    pub fn seq_div(&mut self, seq: usize, p0: i32, p1: i32, d: i32) {
        self.cells_of(seq).for_each(|c| c.seq_div(seq, p0, p1, d));
        self.stale.mark(Some(seq), 0);
    }

    /// A state restore rewrote `seq`'s cells (every sequence's with None) behind the k-pool
    /// layout's back.
    pub fn kpool_restored(&mut self, seq: Option<usize>) {
        self.stale.mark(seq, 0);
        self.stale.mark_all_if_shared();
    }

    /// The state the cache makes once a ubatch is placed at `places`: the k-pool layout after it,
    /// and what its graph pools (None without a k-pool indexer).
    pub fn placed_step(&mut self, places: &[TokenPlace]) -> Option<kpool::Step> {
        (self.kpool > 0).then(|| kpool::Step::new(self.kpool, &self.sets[0].streams, &mut self.stale, places))
    }

    /// The first ubatch of a batch was computed: the k-pools that were stale are pooled again.
    pub fn first_ubatch_computed(&mut self) {
        self.stale.clear();
    }

    /// Where a ubatch's keys are written: at its tokens, or with compressed per-sequence
    /// caches and tokens of several sequences, once per sequence (sequence by sequence, each token
    /// then of that sequence alone), as llama.cpp's "raw write" ubatch; each sequence must then
    /// hold as many of the ubatch's tokens.
    pub fn writes<'p>(&self, places: &'p [TokenPlace]) -> Result<Cow<'p, [TokenPlace]>> {
        let shared = places.iter().any(|p| p.seqs.iter().nth(1).is_some());
        if !shared || self.compressed().is_none() || self.n_stream() == 1 {
            return Ok(Cow::Borrowed(places));
        }
        let mut out = Vec::new();
        let mut count = None;
        for s in sequences_of(places) {
            let mine: Vec<TokenPlace> = places
                .iter()
                .filter(|p| p.seqs.contains(s))
                .map(|p| TokenPlace {
                    seqs: SeqSet::single(s),
                    primary_seq: s,
                    ..*p
                })
                .collect();
            if *count.get_or_insert(mine.len()) != mine.len() {
                return Err(Error::invalid(
                    "decode: tokens of several sequences in one ubatch must belong to the same sequences \
                     (compressed caches write them once per sequence, as llama.cpp does)",
                ));
            }
            out.extend(mine);
        }
        Ok(Cow::Owned(out))
    }

    /// What the cache plans for a batch's ubatches (each its tokens' places and its count of
    /// equal runs, one sequence each) before any runs: the compressed caches' plans; the
    /// sequences' pending rollbacks are consumed.
    pub fn plan_states(&mut self, ubatches: &[(&[TokenPlace], usize)]) -> Result<BatchStates> {
        let simple = self.n_stream() == 1;
        let Some(store) = self.comp.as_mut() else {
            return Ok(BatchStates(None));
        };
        let tokens: Vec<Vec<compressed::Token>> = ubatches
            .iter()
            .map(|(places, _)| {
                places
                    .iter()
                    .map(|p| compressed::Token {
                        pos: p.pos,
                        seqs: p.seqs,
                        primary: p.primary_seq,
                    })
                    .collect()
            })
            .collect();
        let seqs: Vec<Vec<usize>> = ubatches.iter().map(|(p, _)| sequences_of(p)).collect();
        let views: Vec<compressed::Ubatch> = tokens
            .iter()
            .zip(&seqs)
            .zip(ubatches)
            .map(|((t, s), (_, n_groups))| compressed::Ubatch {
                tokens: t,
                seqs: s,
                // A simple split counts one token per sequence, as llama.cpp's does.
                n_seq_tokens: if simple { 1 } else { t.len() / (*n_groups).max(1) },
            })
            .collect();
        store.plan_batch(&views).map(|p| BatchStates(Some(p)))
    }

    /// The per-ubatch state of the largest ubatch of `n_tokens` tokens the context may run with
    /// `n_seq_max` sequences (what the compute buffers are reserved for).
    pub fn worst_case_shape(&self, n_tokens: usize, n_seq_max: usize) -> MemoryShape {
        MemoryShape {
            kpool: (self.kpool > 0).then(|| kpool::worst_case(self.kpool, self.stream_size(), n_seq_max)),
            comp: self
                .compressed()
                .map(|c| compressed::Kind::ALL.map(|k| compressed::worst_case(n_tokens, 1, k, c.geometry(k)))),
        }
    }

    /// The k-pool size (0: none).
    pub fn kpool(&self) -> usize {
        self.kpool
    }

    /// The highest position any cell of the full layers holds.
    pub fn pos_max(&self) -> Option<i32> {
        self.sets[0]
            .streams
            .iter()
            .flat_map(|c| (0..c.size()).filter_map(|j| c.pos(j)))
            .max()
    }

    /// The lowest position `seq` holds, as llama.cpp answers it: from the sliding layers' cells
    /// where the model has them (their window may have let the oldest go).
    pub fn seq_pos_min(&self, seq: usize) -> Option<i32> {
        self.set(true).streams[self.stream_of(seq)].seq_pos_min(seq)
    }

    pub fn seq_pos_max(&self, seq: usize) -> Option<i32> {
        self.set(true).streams[self.stream_of(seq)].seq_pos_max(seq)
    }

    /// Pending K-shift per row of the full layers' tensors (with `sliding`, of the sliding
    /// ones'), if positions moved there since the keys were computed.
    pub fn pending_shift(&self, sliding: bool) -> Option<Vec<i32>> {
        let set = self.set(sliding);
        if sliding && !self.has_sliding() || set.streams.iter().all(|c| c.pending_shift().is_none()) {
            return None;
        }
        let n = set.stream_size();
        Some(
            set.streams
                .iter()
                .flat_map(|c| c.pending_shift().map_or_else(|| vec![0; n], <[i32]>::to_vec))
                .collect(),
        )
    }

    /// The keys of the full layers (with `sliding`, of the sliding ones) now have their cells'
    /// positions.
    pub fn shift_applied(&mut self, sliding: bool) {
        let set = if sliding { self.sets.len() - 1 } else { 0 };
        self.sets[set].streams.iter_mut().for_each(Cells::shift_applied);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache of cells only: 8 full-attention cells and 4 sliding ones with a window of 2.
    fn sliding_cells() -> KvCache {
        KvCache {
            sets: vec![CellSet::new(8, 1, None), CellSet::new(4, 1, Some(Swa::Window(2)))],
            layers: Vec::new(),
            layer_set: Vec::new(),
            n_layer: 0,
            storage: None,
            kpool: 0,
            stale: kpool::Stale::default(),
            comp: None,
            v_trans: false,
            v_width: Vec::new(),
            pos_2d: false,
        }
    }

    /// With 2D positions (M-RoPE) an image's rows share a temporal position: causally, each
    /// sees the cells before it in the grid (row, then column), not the ones after.
    #[test]
    fn an_image_grid_is_causal_in_two_dimensions() {
        let mut kv = KvCache {
            pos_2d: true,
            ..sliding_cells()
        };
        let grid = |y: i32, x: i32| TokenPlace {
            ext: CellExt { x, y, tok: -1 },
            ..TokenPlace::at(0, 3)
        };
        let image = [grid(0, 0), grid(0, 1), grid(1, 0)];
        kv.place(&image).expect("room");
        let visible = |m: &[f32]| m.iter().map(|v| v.is_finite()).collect::<Vec<_>>();
        let mask = kv.mask(&image, 8, true, false, false);
        assert_eq!(visible(&mask[..3]), [true, false, false]);
        assert_eq!(visible(&mask[8..11]), [true, true, false]);
        assert_eq!(visible(&mask[16..19]), [true, true, true]);
        // Without 2D positions (or not causal) the three see each other.
        kv.pos_2d = false;
        assert_eq!(
            visible(&kv.mask(&image, 8, true, false, false)[..3]),
            [true, true, true]
        );
    }

    /// A plan leaves gone what its placing let go of, as llama.cpp's `prepare` does, and
    /// `undo_plan` brings it back; the planned cells are the ones the ubatch then occupies.
    #[test]
    fn a_plan_keeps_what_it_let_go_until_undone() {
        let mut kv = sliding_cells();
        let first: Vec<TokenPlace> = [1, 0, 2, 3].map(|p| TokenPlace::at(0, p)).to_vec();
        kv.place(&first).expect("room");
        let next = [TokenPlace::at(0, 4)];
        let (slots, planned) = kv.plan(&[next.to_vec()]).expect("room");
        let sliding = |kv: &KvCache| (0..4).map(|i| kv.sets[1].streams[0].pos(i)).collect::<Vec<_>>();
        // Cell 0 (position 1) is passed: taking it let position 0 go, which stays gone.
        assert_eq!(sliding(&kv), [Some(1), None, Some(2), Some(3)]);
        assert_eq!(kv.seq_pos_min(0), Some(1));
        let placed = kv.place_planned(&next, &slots[0]).expect("planned cells");
        assert_eq!(
            (placed.rows.as_slice(), placed.sliding_rows.as_slice()),
            (&[4][..], &[0][..])
        );
        kv.rollback(placed);
        kv.undo_plan(planned);
        assert_eq!(sliding(&kv), [Some(1), Some(0), Some(2), Some(3)]);
        assert_eq!((kv.sets[1].streams[0].used(), kv.used()), (4, 4));
        // Without room, nothing changes.
        let two = [TokenPlace::at(1, 0), TokenPlace::at(1, 1)];
        assert!(kv.plan(&[two.to_vec(), two.to_vec(), two.to_vec()]).is_none());
        assert_eq!(sliding(&kv), [Some(1), Some(0), Some(2), Some(3)]);
    }
}
