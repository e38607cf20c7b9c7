//! Compressed caches, as llama.cpp's `llama_kv_cache_dsv4` keeps them beside the
//! raw sliding-window cache: every `ratio` positions of a sequence are compressed into one key
//! row (CSA, ratio 4, with a lightning indexer's keys compressed alike; HCA, ratio 128), from a
//! ring of per-token compressor states per sequence. The graph does all the data work; this
//! module plans it per ubatch (`plan`): which ring rows the tokens persist, which rows each
//! completed block reads and where its compressed row goes, which rows each token may attend
//! to, and the rollback snapshots kept of the ring (`n_rs_seq` planes after the live one).
//! `Store` holds the tensors: per compressing layer its cache rows and its ring (key and score
//! planes), one stream per sequence.

use super::state::{i32_of, u32_of, u64_of, Sink, Source};
use crate::error::{Error, Result};
use crate::ggml::{row_size, tensor_read, tensor_write, BufferType, Placed, PlacedBuffers, RawType, TensorRef};
use std::collections::BTreeMap;

/// Cells attention covers are padded to this (and at least this many), so graphs repeat.
const N_KV_PAD: usize = 256;

/// The three compressed caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Compressed sparse attention: ratio 4, overlapping windows.
    Csa,
    /// Heavily compressed attention: ratio 128.
    Hca,
    /// The lightning indexer's keys of the CSA layers: ratio 4, overlapping.
    Lid,
}

impl Kind {
    /// In llama.cpp's order (of its state and its graph inputs).
    pub const ALL: [Kind; 3] = [Kind::Csa, Kind::Hca, Kind::Lid];

    pub fn ratio(self) -> usize {
        match self {
            Kind::Hca => 128,
            Kind::Csa | Kind::Lid => 4,
        }
    }

    /// Each block also reads the previous window (and the ring holds two windows of two halves).
    pub fn overlap(self) -> bool {
        self != Kind::Hca
    }

    /// Ring rows per sequence.
    pub fn state_size(self) -> usize {
        if self.overlap() {
            2 * self.ratio()
        } else {
            self.ratio()
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Csa => "csa",
            Kind::Hca => "hca",
            Kind::Lid => "lid",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// A compressed cache's cells per stream for a context of `kv_size` cells per sequence.
pub fn cache_size(kv_size: usize, kind: Kind) -> usize {
    kv_size.div_ceil(kind.ratio()).max(1).next_multiple_of(N_KV_PAD)
}

/// One token of a ubatch as the plans see it.
#[derive(Debug, Clone, Copy)]
pub struct Token {
    pub pos: i32,
    pub seqs: super::SeqSet,
    /// The sequence llama.cpp reads first among `seqs`.
    pub primary: usize,
}

/// A ubatch: its tokens in order, its distinct sequences ascending, and its tokens per sequence
/// (1 for a simple split, as llama.cpp counts one).
pub struct Ubatch<'a> {
    pub tokens: &'a [Token],
    pub seqs: &'a [usize],
    pub n_seq_tokens: usize,
}

impl Ubatch<'_> {
    fn coupled(&self) -> bool {
        self.tokens.iter().any(|t| t.seqs.iter().nth(1).is_some())
    }

    /// Attention groups of the graph: one per sequence with per-sequence streams, unless tokens
    /// are shared (their state is one).
    pub fn graph_streams(&self, n_stream: usize) -> usize {
        if n_stream <= 1 || self.seqs.len() <= 1 || self.coupled() {
            1
        } else {
            self.seqs.len()
        }
    }
}

/// The cache's layout: ring rows and cache cells per stream, streams, rollback planes.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub kv_size: usize,
    pub n_stream: usize,
    pub n_rs: usize,
}

/// One ubatch's recipe for one compressed cache (llama.cpp's `comp_plan`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Per token, its place in the window (pos % ratio): the row of the positional bias.
    pub state_pos: Vec<i32>,
    /// Ring rows the ubatch leaves: from which of its tokens, to which ring row.
    pub persist_src: Vec<i32>,
    pub persist_dst: Vec<i32>,
    /// A pending rollback's snapshot plane copied onto the live ring (fixed width).
    pub restore_src: Vec<i32>,
    pub restore_dst: Vec<i32>,
    /// Snapshots of the ring as it is `d` tokens before the ubatch's end, per plane d.
    pub snapshot_src: Vec<i32>,
    pub snapshot_dst: Vec<i32>,
    /// Rows of [ring | ubatch | zero row] each completed block reads (with overlap: every
    /// block's previous halves, then every block's current halves).
    pub read: Vec<i32>,
    /// Each completed block's row in the compressed cache, and its position.
    pub write: Vec<i64>,
    pub write_pos: Vec<i32>,
    /// Per token, the compressed rows it may attend to.
    pub n_visible: Vec<i32>,
    /// Attention groups of the graph, and the stream of the first (the ubatch's lowest
    /// sequence's).
    pub n_stream: usize,
    pub first_stream: usize,
    /// Compressed rows attention covers.
    pub n_kv: usize,
}

/// What decides a plan's graph: its lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PlanShape {
    pub n_tokens: usize,
    pub n_state_pos: usize,
    pub n_persist: usize,
    pub n_restore: usize,
    pub n_snapshot: usize,
    pub n_read: usize,
    pub n_write: usize,
    pub n_kv: usize,
    pub n_stream: usize,
    pub first_stream: usize,
}

impl Plan {
    pub fn shape(&self) -> PlanShape {
        PlanShape {
            n_tokens: self.n_visible.len(),
            n_state_pos: self.state_pos.len(),
            n_persist: self.persist_dst.len(),
            n_restore: self.restore_dst.len(),
            n_snapshot: self.snapshot_dst.len(),
            n_read: self.read.len(),
            n_write: self.write.len(),
            n_kv: self.n_kv,
            n_stream: self.n_stream,
            first_stream: self.first_stream,
        }
    }

    /// Per token, 0 for the rows it sees and -inf for the others, [n_kv, n_tokens].
    pub fn mask(&self) -> Vec<f32> {
        let mut m = Vec::with_capacity(self.n_kv * self.n_visible.len());
        for &v in &self.n_visible {
            m.extend((0..self.n_kv).map(|j| {
                if (j as i64) < i64::from(v) {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            }));
        }
        m
    }
}

/// The first row of stream `seq` in a layout of `size` rows per stream.
fn stream_off(n_stream: usize, seq: usize, size: usize) -> Result<usize> {
    if n_stream <= 1 {
        return Ok(0);
    }
    if seq >= n_stream {
        return Err(Error::invalid(format!(
            "sequence {seq} outside the {n_stream} compressed streams"
        )));
    }
    Ok(seq * size)
}

fn idx(v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| Error::invalid(format!("compressed-cache row {v} out of range")))
}

/// The plan of `ub` for cache `kind`, with the pending rollback of each sequence `rs_idx` (0:
/// none; d: restore the ring as it was d tokens back).
pub fn plan(ub: &Ubatch, kind: Kind, g: Geometry, rs_idx: &[u32]) -> Result<Plan> {
    let (ratio, overlap, state_size) = (kind.ratio(), kind.overlap(), kind.state_size());
    let n_tokens = ub.tokens.len();
    if g.n_stream <= 1 && ub.seqs.len() > 1 {
        return Err(Error::invalid("one compressed stream cannot serve several sequences"));
    }
    let mut p = Plan {
        n_visible: vec![0; n_tokens],
        n_stream: ub.graph_streams(g.n_stream),
        first_stream: if g.n_stream > 1 {
            ub.seqs.first().copied().unwrap_or(0)
        } else {
            0
        },
        ..Plan::default()
    };
    let state_rows = state_size * g.n_stream;
    // The ubatch's own token at (sequence, position), the last one given.
    let mut current: BTreeMap<(usize, i32), usize> = BTreeMap::new();
    for (i, t) in ub.tokens.iter().enumerate() {
        for s in t.seqs.iter() {
            current.insert((s, t.pos), i);
        }
    }
    // A position's ring row: the ubatch's token if it has it, else the ring's; before the first
    // position, the zero row after the ubatch's.
    let source = |seq: usize, pos: i32| -> Result<i32> {
        if pos < 0 {
            return idx(state_rows + n_tokens);
        }
        if let Some(&i) = current.get(&(seq, pos)) {
            return idx(state_rows + i);
        }
        idx(stream_off(g.n_stream, seq, state_size)? + pos as usize % state_size)
    };
    // (ring row, token, position): the latest token of each ring row.
    let mut persist: Vec<(usize, usize, i32)> = Vec::new();
    let (mut prev_reads, mut cur_reads) = (Vec::new(), Vec::new());
    let mut writes: BTreeMap<usize, usize> = BTreeMap::new();
    let mut n_kv = 0usize;
    for (i, t) in ub.tokens.iter().enumerate() {
        let pos = t.pos;
        if pos < 0 {
            continue;
        }
        let upos = pos as usize;
        p.state_pos.push((upos % ratio) as i32);
        let visible = (upos + 1) / ratio;
        p.n_visible[i] = idx(visible)?;
        n_kv = n_kv.max(visible);
        for seq in t.seqs.iter() {
            let row = stream_off(g.n_stream, seq, state_size)? + upos % state_size;
            match persist.iter_mut().find(|r| r.0 == row) {
                None => persist.push((row, i, pos)),
                Some(r) if pos > r.2 => (r.1, r.2) = (i, pos),
                Some(_) => {}
            }
            if !(upos + 1).is_multiple_of(ratio) {
                continue;
            }
            let start = pos + 1 - ratio as i32;
            p.write
                .push((stream_off(g.n_stream, seq, g.kv_size)? + upos / ratio) as i64);
            p.write_pos.push(start);
            *writes.entry(seq).or_default() += 1;
            let reads = |from: i32, out: &mut Vec<i32>| -> Result<()> {
                for j in 0..ratio as i32 {
                    out.push(source(seq, from + j)?);
                }
                Ok(())
            };
            if overlap {
                reads(start - ratio as i32, &mut prev_reads)?;
                reads(start, &mut cur_reads)?;
            } else {
                reads(start, &mut p.read)?;
            }
        }
    }
    let first_live = |seq: Option<usize>| {
        ub.tokens
            .iter()
            .position(|t| t.pos >= 0 && seq.is_none_or(|s| t.seqs.contains(s)))
    };
    // A block that writes a cell never attended to, so the graph keeps its shape.
    let dummy = |p: &mut Plan, seq: usize, i: usize, prev: &mut Vec<i32>, cur: &mut Vec<i32>| -> Result<()> {
        let src = source(seq, ub.tokens[i].pos)?;
        p.write
            .push((stream_off(g.n_stream, seq, g.kv_size)? + g.kv_size - 1) as i64);
        p.write_pos.push(0);
        if overlap {
            prev.extend(std::iter::repeat_n(src, ratio));
            cur.extend(std::iter::repeat_n(src, ratio));
        } else {
            p.read.extend(std::iter::repeat_n(src, ratio));
        }
        Ok(())
    };
    let first_seq = |i: usize| ub.tokens[i].primary;
    if !p.state_pos.is_empty() {
        if kind.overlap() {
            // Every sequence's stream is padded to the same block count.
            if ub.coupled() {
                if p.write.is_empty() {
                    if let Some(i) = first_live(None) {
                        dummy(&mut p, first_seq(i), i, &mut prev_reads, &mut cur_reads)?;
                    }
                }
            } else {
                let n_blocks = ub.n_seq_tokens.max(1).div_ceil(ratio);
                for &seq in ub.seqs {
                    let n = writes.get(&seq).copied().unwrap_or(0);
                    if n >= n_blocks {
                        continue;
                    }
                    if n + 1 != n_blocks {
                        return Err(Error::invalid(format!(
                            "sequence {seq}'s positions in the ubatch are not contiguous (compressed attention needs them so)"
                        )));
                    }
                    if let Some(i) = first_live(Some(seq)) {
                        dummy(&mut p, seq, i, &mut prev_reads, &mut cur_reads)?;
                    }
                }
            }
        } else if p.write.is_empty() {
            if let Some(i) = first_live(None) {
                dummy(&mut p, first_seq(i), i, &mut prev_reads, &mut cur_reads)?;
            }
        }
    }
    if overlap {
        p.read.extend(prev_reads);
        p.read.extend(cur_reads);
    }
    p.n_kv = n_kv.next_multiple_of(N_KV_PAD).max(N_KV_PAD);
    persist.sort_by_key(|r| r.0);
    for (row, i, _) in persist {
        p.persist_src.push(idx(i)?);
        p.persist_dst.push(idx(row)?);
    }
    if g.n_rs > 0 {
        rollback_rows(&mut p, ub, state_size, g, rs_idx)?;
    }
    Ok(p)
}

/// The restore and snapshot rows of every stream (no-ops for streams the ubatch leaves alone,
/// so that the graph's inputs keep their size).
fn rollback_rows(p: &mut Plan, ub: &Ubatch, state_size: usize, g: Geometry, rs_idx: &[u32]) -> Result<()> {
    let state_rows = state_size * g.n_stream;
    let scratch = state_rows * (1 + g.n_rs);
    for stream in 0..g.n_stream {
        let seq = if g.n_stream == 1 {
            ub.seqs.first().copied()
        } else {
            ub.seqs.iter().copied().find(|&s| s == stream)
        };
        let off = stream * state_size;
        let rollback = seq.and_then(|s| rs_idx.get(s)).copied().unwrap_or(0) as usize;
        let src_plane = if (1..=g.n_rs).contains(&rollback) {
            rollback * state_rows
        } else {
            0
        };
        for r in 0..state_size {
            p.restore_src.push(idx(src_plane + off + r)?);
            p.restore_dst.push(idx(off + r)?);
        }
        let tokens: Vec<usize> = match seq {
            Some(s) => (0..ub.tokens.len())
                .filter(|&i| ub.tokens[i].seqs.contains(s))
                .collect(),
            None => Vec::new(),
        };
        let n = tokens.len();
        for d in 1..=g.n_rs {
            let dst_plane = d * state_rows;
            let prefix = n.saturating_sub(d);
            for r in 0..state_size {
                let mut src = off + r;
                for &i in &tokens[..prefix] {
                    let pos = ub.tokens[i].pos;
                    if pos >= 0 && pos as usize % state_size == r {
                        src = scratch + i;
                    }
                }
                if n == 0 {
                    src = dst_plane + off + r;
                }
                p.snapshot_src.push(idx(src)?);
                p.snapshot_dst.push(idx(dst_plane + off + r)?);
            }
        }
    }
    Ok(())
}

/// The plans of a batch's ubatches, each consuming the rollbacks of the sequences it holds.
pub fn plans(ubatches: &[Ubatch], kind: Kind, g: Geometry, rs_idx: &[u32]) -> Result<Vec<Plan>> {
    let mut rs = rs_idx.to_vec();
    let mut out = Vec::with_capacity(ubatches.len());
    for ub in ubatches {
        out.push(plan(ub, kind, g, &rs)?);
        for &s in ub.seqs {
            if let Some(r) = rs.get_mut(s) {
                *r = 0;
            }
        }
    }
    Ok(out)
}

/// The largest plan a ubatch of `n_tokens` tokens in `n_seqs` sequences can have (what the
/// compute buffers are reserved for).
pub fn worst_case(n_tokens: usize, n_seqs: usize, kind: Kind, g: Geometry) -> PlanShape {
    let (ratio, state_size) = (kind.ratio(), kind.state_size());
    let n_blocks = n_tokens / ratio + n_seqs.max(1);
    let state_rows = state_size * g.n_stream;
    PlanShape {
        n_tokens,
        n_state_pos: n_tokens,
        n_persist: n_tokens.min(state_rows),
        n_restore: if g.n_rs > 0 { state_rows } else { 0 },
        n_snapshot: g.n_rs * state_rows,
        n_read: if kind.overlap() { 2 } else { 1 } * ratio * n_blocks,
        n_write: n_blocks,
        n_kv: g.kv_size,
        n_stream: 1,
        first_stream: 0,
    }
}

/// One compressing layer's tensors in one cache: the compressed rows [width, size * n_stream]
/// and the ring's keys and scores [2 * width or width, state_size, n_stream * (1 + n_rs)].
#[derive(Clone, Copy)]
pub struct Parts {
    pub cache: TensorRef,
    pub kv: TensorRef,
    pub score: TensorRef,
}

/// The compressed caches' tensors and the pending rollbacks.
pub struct Store {
    /// Per kind, per model layer: its parts where the layer compresses so.
    parts: [Vec<Option<Parts>>; 3],
    geometry: [Geometry; 3],
    /// Per kind, the ring's row width (written in the state even without such layers).
    state_width: [usize; 3],
    rs_idx: Vec<u32>,
    storage: PlacedBuffers,
}

impl Store {
    /// Per layer its compression ratio (0, 4 or 128); `head` the key width, `index_head` the
    /// indexer's; `kv_size` cells per sequence, `n_seq_max` streams, `n_rs` rollback planes;
    /// layer `il`'s tensors in `buft_of(il)`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ratios: &[u32],
        head: usize,
        index_head: usize,
        type_k: RawType,
        kv_size: usize,
        n_seq_max: usize,
        n_rs: usize,
        buft_of: &dyn Fn(usize) -> BufferType,
    ) -> Result<Store> {
        let f32t = ggml_sys::ggml_type_GGML_TYPE_F32;
        let mut arena = Placed::new(ratios.len() * 9);
        let geometry = Kind::ALL.map(|kind| Geometry {
            kv_size: cache_size(kv_size, kind),
            n_stream: n_seq_max,
            n_rs,
        });
        let state_width = Kind::ALL.map(|kind| match kind {
            Kind::Csa => 2 * head,
            Kind::Hca => head,
            Kind::Lid => 2 * index_head,
        });
        let mut parts: [Vec<Option<Parts>>; 3] = Default::default();
        for (il, &ratio) in ratios.iter().enumerate() {
            for kind in Kind::ALL {
                let keeps = match kind {
                    Kind::Csa | Kind::Lid => ratio == 4,
                    Kind::Hca => ratio == 128,
                };
                let part = if keeps {
                    let width = if kind == Kind::Lid { index_head } else { head } as i64;
                    let g = geometry[kind.index()];
                    let sw = state_width[kind.index()] as i64;
                    let planes = (n_seq_max * (1 + n_rs)) as i64;
                    let ss = kind.state_size() as i64;
                    let mut t = |ty: RawType, ne: &[i64], what: &str| {
                        arena
                            .new_tensor(buft_of(il), ty, ne, &format!("dsv4_{}_{what}_l{il}", kind.name()))
                            .map_err(|e| Error::invalid(e.to_string()))
                    };
                    Some(Parts {
                        cache: t(type_k, &[width, (g.kv_size * n_seq_max) as i64], "k")?,
                        kv: t(f32t, &[sw, ss, planes], "state_kv")?,
                        score: t(f32t, &[sw, ss, planes], "state_score")?,
                    })
                } else {
                    None
                };
                parts[kind.index()].push(part);
            }
        }
        // Rows never written are still read (masked): they must be numbers (allocate clears).
        let buffer = arena
            .allocate()
            .map_err(|e| Error::Ggml(format!("compressed caches: {e}")))?;
        crate::log_info!(
            "kv: compressed caches of {} (CSA) and {} (HCA) cells per sequence, {n_rs} rollback plane(s), {:.2} MiB",
            geometry[0].kv_size,
            geometry[1].kv_size,
            buffer.size() as f64 / (1024.0 * 1024.0)
        );
        Ok(Store {
            parts,
            geometry,
            state_width,
            rs_idx: vec![0; n_seq_max],
            storage: buffer,
        })
    }

    /// Layer `il`'s tensors in cache `kind`, where it compresses so.
    pub fn parts(&self, kind: Kind, il: usize) -> Option<Parts> {
        self.parts[kind.index()].get(il).copied().flatten()
    }

    pub fn geometry(&self, kind: Kind) -> Geometry {
        self.geometry[kind.index()]
    }

    pub fn buffers(&self) -> &PlacedBuffers {
        &self.storage
    }

    /// The plans of a batch's ubatches per kind; the sequences' pending rollbacks are consumed.
    pub fn plan_batch(&mut self, ubatches: &[Ubatch]) -> Result<[Vec<Plan>; 3]> {
        let mut out: [Vec<Plan>; 3] = Default::default();
        for kind in Kind::ALL {
            out[kind.index()] = plans(ubatches, kind, self.geometry(kind), &self.rs_idx)?;
        }
        for ub in ubatches {
            for t in ub.tokens {
                for s in t.seqs.iter() {
                    if let Some(r) = self.rs_idx.get_mut(s) {
                        *r = 0;
                    }
                }
            }
        }
        Ok(out)
    }

    /// The rollback pending for `seq` (0: none).
    pub fn rollback(&self, seq: usize) -> u32 {
        self.rs_idx.get(seq).copied().unwrap_or(0)
    }

    /// Roll `seq`'s rings back by `d` tokens at its next ubatch.
    pub fn set_rollback(&mut self, seq: usize, d: u32) {
        if let Some(r) = self.rs_idx.get_mut(seq) {
            *r = d;
        }
    }

    pub fn n_rs(&self) -> usize {
        self.geometry[0].n_rs
    }

    fn tensors(&self) -> impl Iterator<Item = (Kind, Parts)> + '_ {
        Kind::ALL
            .into_iter()
            .flat_map(move |k| self.parts[k.index()].iter().flatten().map(move |p| (k, *p)))
    }

    /// Zero `seq`'s compressed rows and rings, every plane (every sequence's when None), and
    /// forget its pending rollback.
    pub fn clear(&mut self, seq: Option<usize>) -> Result<()> {
        let Some(s) = seq else {
            self.storage.clear(0);
            self.rs_idx.fill(0);
            return Ok(());
        };
        let n_stream = self.geometry[0].n_stream;
        for (kind, p) in self.tensors() {
            let rows = self.geometry(kind).kv_size;
            let row = row_size(p.cache.ggml_type(), p.cache.ne()[0]);
            zero(p.cache, s * rows * row, rows * row)?;
            for t in [p.kv, p.score] {
                let plane = t.nb()[2];
                for d in 0..=self.n_rs() {
                    zero(t, (d * n_stream + s) * plane, plane)?;
                }
            }
        }
        self.set_rollback(s, 0);
        Ok(())
    }

    /// `dst` becomes a copy of `src`: its compressed rows and its live ring (its snapshots
    /// zeroed, no rollback pending).
    pub fn seq_cp(&mut self, src: usize, dst: usize) -> Result<()> {
        if src == dst {
            return Ok(());
        }
        self.clear(Some(dst))?;
        for (kind, p) in self.tensors() {
            let rows = self.geometry(kind).kv_size;
            let row = row_size(p.cache.ggml_type(), p.cache.ne()[0]);
            copy(p.cache, src * rows * row, dst * rows * row, rows * row)?;
            for t in [p.kv, p.score] {
                let plane = t.nb()[2];
                copy(t, src * plane, dst * plane, plane)?;
            }
        }
        Ok(())
    }

    /// Append the compressed caches of `seq` (every sequence when None) as llama.cpp writes
    /// them: unless `partial`, each cache's first rows (a sequence's used ones, up to the block
    /// of `pos_max`), then the three rings, a sequence's at its pending rollback's plane.
    pub fn state_write(
        &self,
        seq: Option<usize>,
        pos_max: Option<i32>,
        partial: bool,
        out: &mut dyn Sink,
    ) -> Result<()> {
        let n_stream = self.geometry[0].n_stream;
        let streams: Vec<usize> = match seq {
            Some(s) => vec![s],
            None => (0..n_stream).collect(),
        };
        if !partial {
            for kind in Kind::ALL {
                let g = self.geometry(kind);
                let n_rows = match (seq, pos_max) {
                    (None, _) => g.kv_size,
                    (Some(_), None) => 0,
                    (Some(_), Some(p)) => ((p as usize + 1) / kind.ratio()).min(g.kv_size),
                };
                out.put(&2u32.to_le_bytes());
                put_u32(out, n_rows)?;
                put_u32(out, streams.len())?;
                let layers = self.layers(kind);
                put_u32(out, layers.len())?;
                for (il, p) in layers {
                    put_u32(out, il)?;
                    let row = row_size(p.cache.ggml_type(), p.cache.ne()[0]);
                    tensor_header(out, p.cache, n_rows, row);
                    if n_rows > 0 {
                        for &s in &streams {
                            out.tensor(p.cache, s * g.kv_size * row, n_rows * row)?;
                        }
                    }
                }
            }
        }
        for kind in Kind::ALL {
            let ss = kind.state_size();
            let layers = self.layers(kind);
            let width = self.state_width[kind.index()];
            out.put(&1u32.to_le_bytes());
            put_u32(out, kind.ratio())?;
            put_u32(out, ss)?;
            put_u32(out, width)?;
            put_u32(out, streams.len())?;
            put_u32(out, layers.len())?;
            for (il, p) in layers {
                put_u32(out, il)?;
                for t in [p.kv, p.score] {
                    let row = row_size(t.ggml_type(), t.ne()[0]);
                    tensor_header(out, t, ss, row);
                    for &s in &streams {
                        let plane = self.rollback(s) as usize * n_stream + s;
                        out.tensor(t, plane * t.nb()[2], ss * row)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Read what `state_write` wrote into `seq`'s streams (every stream when None). Checked
    /// first, then applied: on error nothing changed.
    pub fn state_read(&mut self, seq: Option<usize>, partial: bool, src: &mut dyn Source) -> Result<()> {
        let n_stream = self.geometry[0].n_stream;
        let streams: Vec<usize> = match seq {
            Some(s) => vec![s],
            None => (0..n_stream).collect(),
        };
        // (tensor, byte offset, bytes) to write once all is read.
        let mut writes: Vec<(TensorRef, usize, Vec<u8>)> = Vec::new();
        if !partial {
            for kind in Kind::ALL {
                let g = self.geometry(kind);
                let version = u32_of(src)?;
                let n_rows = u32_of(src)? as usize;
                if version != 1 && version != 2 || n_rows > g.kv_size || (version == 1 && n_rows != g.kv_size) {
                    return Err(bad(format!("{} cache: version {version}, {n_rows} rows", kind.name())));
                }
                check_streams(u32_of(src)? as usize, streams.len())?;
                let layers = self.layers(kind);
                if u32_of(src)? as usize != layers.len() {
                    return Err(bad(format!("{} cache: layer count differs", kind.name())));
                }
                for (il, p) in layers {
                    if u32_of(src)? as usize != il {
                        return Err(bad(format!("{} cache: layer ids differ", kind.name())));
                    }
                    let row = row_size(p.cache.ggml_type(), p.cache.ne()[0]);
                    check_header(src, p.cache, n_rows, row)?;
                    for &s in &streams {
                        let data = src.take(n_rows * row)?.to_vec();
                        writes.push((p.cache, s * g.kv_size * row, data));
                    }
                }
            }
        }
        for kind in Kind::ALL {
            let ss = kind.state_size();
            let layers = self.layers(kind);
            let width = self.state_width[kind.index()];
            let head = [u32_of(src)?, u32_of(src)?, u32_of(src)?, u32_of(src)?];
            if head != [1, kind.ratio() as u32, ss as u32, width as u32] {
                return Err(bad(format!(
                    "{} compressor state: metadata {head:?} differs",
                    kind.name()
                )));
            }
            check_streams(u32_of(src)? as usize, streams.len())?;
            if u32_of(src)? as usize != layers.len() {
                return Err(bad(format!("{} compressor state: layer count differs", kind.name())));
            }
            for (il, p) in layers {
                if u32_of(src)? as usize != il {
                    return Err(bad(format!("{} compressor state: layer ids differ", kind.name())));
                }
                for t in [p.kv, p.score] {
                    let row = row_size(t.ggml_type(), t.ne()[0]);
                    check_header(src, t, ss, row)?;
                    for &s in &streams {
                        let data = src.take(ss * row)?.to_vec();
                        writes.push((t, s * t.nb()[2], data));
                    }
                }
            }
        }
        if !partial {
            for &s in &streams {
                self.clear(Some(s))?;
            }
        }
        for (t, off, data) in writes {
            tensor_write(t, off, &data)?;
        }
        match seq {
            Some(s) => self.set_rollback(s, 0),
            None => self.rs_idx.fill(0),
        }
        Ok(())
    }

    /// The layers compressing into `kind`, with their parts, in order.
    fn layers(&self, kind: Kind) -> Vec<(usize, Parts)> {
        self.parts[kind.index()]
            .iter()
            .enumerate()
            .filter_map(|(il, p)| p.map(|p| (il, p)))
            .collect()
    }
}

fn bad(msg: String) -> Error {
    Error::invalid(format!(
        "state data does not fit this context's compressed caches: {msg}"
    ))
}

fn check_streams(got: usize, want: usize) -> Result<()> {
    match got == want {
        true => Ok(()),
        false => Err(bad(format!("{got} streams, {want} expected"))),
    }
}

fn put_u32(out: &mut dyn Sink, v: usize) -> Result<()> {
    let v = u32::try_from(v).map_err(|_| Error::invalid(format!("state value {v} out of range")))?;
    out.put(&v.to_le_bytes());
    Ok(())
}

/// A tensor section's header: type, row width, rows, row bytes.
fn tensor_header(out: &mut dyn Sink, t: TensorRef, rows: usize, row: usize) {
    out.put(&(t.ggml_type() as i32).to_le_bytes());
    out.put(&(t.ne()[0] as u64).to_le_bytes());
    out.put(&(rows as u64).to_le_bytes());
    out.put(&(row as u64).to_le_bytes());
}

fn check_header(src: &mut dyn Source, t: TensorRef, rows: usize, row: usize) -> Result<()> {
    let ty = i32_of(src)?;
    let got = [u64_of(src)?, u64_of(src)?, u64_of(src)?];
    if ty != t.ggml_type() as i32 || got != [t.ne()[0] as u64, rows as u64, row as u64] {
        return Err(bad(format!(
            "a tensor is type {ty} {got:?}, expected type {} [{}, {rows}, {row}]",
            t.ggml_type(),
            t.ne()[0]
        )));
    }
    Ok(())
}

fn zero(t: TensorRef, off: usize, n: usize) -> Result<()> {
    tensor_write(t, off, &vec![0u8; n]).map_err(Error::from)
}

fn copy(t: TensorRef, from: usize, to: usize, n: usize) -> Result<()> {
    let mut data = vec![0u8; n];
    tensor_read(t, from, &mut data)?;
    tensor_write(t, to, &data).map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::SeqSet;

    fn tokens(seq: usize, pos: std::ops::Range<i32>) -> Vec<Token> {
        pos.map(|p| at(seq, p)).collect()
    }

    fn at(seq: usize, pos: i32) -> Token {
        Token {
            pos,
            seqs: SeqSet::single(seq),
            primary: seq,
        }
    }

    const ONE: Geometry = Geometry {
        kv_size: 256,
        n_stream: 1,
        n_rs: 0,
    };

    #[test]
    fn a_completed_csa_block_reads_its_previous_and_current_window() {
        let t = tokens(0, 0..8);
        let ub = Ubatch {
            tokens: &t,
            seqs: &[0],
            n_seq_tokens: 1,
        };
        let p = plan(&ub, Kind::Csa, ONE, &[0]).unwrap();
        // Blocks end at positions 3 and 7, in cache rows 0 and 1, rotated at their starts.
        assert_eq!(p.write, vec![0, 1]);
        assert_eq!(p.write_pos, vec![0, 4]);
        // Ring rows 0..8 then the ubatch's 8 tokens (8..16), the zero row at 16.
        assert_eq!(&p.read[..8], &[16, 16, 16, 16, 8, 9, 10, 11]);
        assert_eq!(&p.read[8..], &[8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(p.state_pos, vec![0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(p.n_visible, vec![0, 0, 0, 1, 1, 1, 1, 2]);
        assert_eq!((p.n_kv, p.n_stream), (256, 1));
        assert_eq!(p.persist_dst, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn a_ubatch_completing_no_block_writes_a_dummy_row() {
        let t = tokens(0, 5..6);
        let ub = Ubatch {
            tokens: &t,
            seqs: &[0],
            n_seq_tokens: 1,
        };
        let csa = plan(&ub, Kind::Csa, ONE, &[0]).unwrap();
        assert_eq!((csa.write.clone(), csa.write_pos.clone()), (vec![255], vec![0]));
        assert_eq!(csa.read, vec![8; 8]);
        let hca = plan(&ub, Kind::Hca, ONE, &[0]).unwrap();
        assert_eq!(hca.write, vec![255]);
        assert_eq!(hca.read, vec![128; 128]);
        // The earlier positions come from the ring.
        let t = tokens(0, 7..8);
        let ub = Ubatch {
            tokens: &t,
            seqs: &[0],
            n_seq_tokens: 1,
        };
        let csa = plan(&ub, Kind::Csa, ONE, &[0]).unwrap();
        assert_eq!(csa.read, vec![0, 1, 2, 3, 4, 5, 6, 8]);
    }

    #[test]
    fn streams_of_several_sequences_are_padded_to_one_block_count() {
        let mut t = tokens(0, 2..4);
        t.extend(tokens(1, 0..2));
        let ub = Ubatch {
            tokens: &t,
            seqs: &[0, 1],
            n_seq_tokens: 2,
        };
        let g = Geometry {
            kv_size: 256,
            n_stream: 2,
            n_rs: 0,
        };
        let p = plan(&ub, Kind::Csa, g, &[0, 0]).unwrap();
        // Sequence 0 completes its first block; sequence 1 gets the dummy in its own stream.
        assert_eq!(p.write, vec![0, 256 + 255]);
        assert_eq!(p.n_stream, 2);
        assert_eq!(p.persist_dst, vec![2, 3, 8, 9]);
    }

    #[test]
    fn a_pending_rollback_restores_its_plane_and_snapshots_follow_the_tokens() {
        let t = tokens(0, 4..7);
        let ub = Ubatch {
            tokens: &t,
            seqs: &[0],
            n_seq_tokens: 3,
        };
        let g = Geometry {
            kv_size: 256,
            n_stream: 1,
            n_rs: 2,
        };
        let p = plan(&ub, Kind::Csa, g, &[2]).unwrap();
        assert_eq!(p.restore_src, (16..24).collect::<Vec<_>>());
        assert_eq!(p.restore_dst, (0..8).collect::<Vec<_>>());
        // Plane 1: the ring after the first two tokens (rows 4, 5 from the ubatch, scratch 24..).
        let plane1: Vec<i32> = vec![0, 1, 2, 3, 24, 25, 6, 7];
        assert_eq!(&p.snapshot_src[..8], &plane1[..]);
        assert_eq!(&p.snapshot_src[8..], &[0, 1, 2, 3, 24, 5, 6, 7]);
        assert_eq!(&p.snapshot_dst[..8], &(8..16).collect::<Vec<_>>()[..]);
        // The next ubatch finds no rollback pending.
        let both = plans(
            &[
                ub,
                Ubatch {
                    tokens: &t,
                    seqs: &[0],
                    n_seq_tokens: 3,
                },
            ],
            Kind::Csa,
            g,
            &[2],
        )
        .unwrap();
        assert_eq!(both[1].restore_src, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn gaps_in_a_sequence_are_refused() {
        let t = vec![at(0, 0), at(0, 9), at(0, 10), at(0, 20), at(0, 30)];
        let ub = Ubatch {
            tokens: &t,
            seqs: &[0],
            n_seq_tokens: 5,
        };
        assert!(plan(&ub, Kind::Csa, ONE, &[0]).is_err());
    }

    #[test]
    fn masks_open_the_visible_rows() {
        let p = Plan {
            n_visible: vec![0, 2],
            n_kv: 3,
            ..Plan::default()
        };
        let ninf = f32::NEG_INFINITY;
        assert_eq!(p.mask(), vec![ninf, ninf, ninf, 0.0, 0.0, ninf]);
    }
}
