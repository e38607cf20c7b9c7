//! The cache's contents as bytes, in the layout llama.cpp 0.3.36 writes for its KV cache, so that
//! session files and `llama_state_*` data move between the two engines. That layout follows
//! llama.cpp's structure: a cache has `n_stream` streams (one, or one per sequence when the cache
//! is not unified) and a model with sliding-window layers has two caches, the full-attention
//! layers' and the sliding ones', written one after the other; a model with a lightning indexer
//! (sparse attention) has its indexer keys in a cache of their own, written after the
//! attention's. Our one cache serves all of them with the same cells, so it is written as the
//! several and read back from them.
//!
//! Per cache: `u32 n_stream`, then per stream `u32 cell_count` and, when non-zero, per cell
//! `i32 pos, u32 n_seq, i32 seq[n_seq]`, then `u32 v_trans, u32 n_layer`, per layer
//! `i32 k_type, u64 k_row_bytes` and the cells' K rows, then per layer either
//! `i32 v_type, u64 v_row_bytes` and the V rows, or (V transposed) `i32 v_type, u32 v_elem_bytes,
//! u32 n_embd_v` and the V values column by column.

use super::{CellExt, KvCache, SeqSet, TokenPlace};
use crate::error::{Error, Result};
use crate::ggml::{row_size, tensor_read, tensor_write, TensorRef};
use crate::model::hparams::Swa;
use std::collections::{HashMap, VecDeque};

/// How llama.cpp would lay out this cache.
pub struct Layout {
    pub n_seq_max: usize,
    /// V stored transposed, as llama.cpp does without flash attention.
    pub v_trans: bool,
    /// Per layer, whether it is a sliding-window layer, and the window; None without such layers.
    pub swa: Option<(Vec<bool>, Swa)>,
    /// Per layer, whether it keeps no keys and values (a hybrid model's recurrent or FFN-only
    /// layers): such layers have no part in the cache or its state.
    pub uncached: Vec<bool>,
    /// Each cell's 2D position and token follow its position (models with M-RoPE).
    pub cell_ext: bool,
    /// Per layer, whether it keeps lightning-indexer keys; empty in a model without an indexer.
    pub indexer: Vec<bool>,
    /// The indexer's cache comes after the recurrent states, not after the attention's cache
    /// (llama.cpp's hybrid memory with an indexer, Qwen4-exp's): `state_write` and `state_read`
    /// hand the stream to their `between` hook there.
    pub indexer_after_recurrent: bool,
}

/// What `KvCache::state_write` calls between the attention's caches and the indexer's when
/// `Layout::indexer_after_recurrent`.
pub type WriteHook<'a> = Option<&'a mut dyn FnMut(&mut dyn Sink) -> Result<()>>;
/// What `KvCache::state_read` calls there.
pub type ReadHook<'a> = Option<&'a mut dyn FnMut(&mut dyn Source) -> Result<()>>;

/// Which of a model's caches a cache layer's keys and values are in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LayerKind {
    Full,
    Sliding,
    Indexer,
    Uncached,
}

impl LayerKind {
    /// The caches in the order llama.cpp writes them (an indexer's keys with the full layers', the
    /// sliding layers' after both).
    const CACHES: [LayerKind; 3] = [LayerKind::Full, LayerKind::Indexer, LayerKind::Sliding];

    fn cache(self) -> Option<usize> {
        LayerKind::CACHES.iter().position(|&k| k == self)
    }
}

impl Layout {
    /// The kind of each of `n` cache layers: the model's layers, then (with an indexer) as many
    /// of the indexer's keys.
    fn kinds(&self, n: usize) -> Vec<LayerKind> {
        let n_model = n.saturating_sub(self.indexer.len());
        (0..n)
            .map(|il| {
                if il >= n_model {
                    let keeps =
                        self.indexer[il - n_model] && !self.uncached.get(il - n_model).copied().unwrap_or(false);
                    if keeps {
                        LayerKind::Indexer
                    } else {
                        LayerKind::Uncached
                    }
                } else if self.uncached.get(il).copied().unwrap_or(false) {
                    LayerKind::Uncached
                } else if self
                    .swa
                    .as_ref()
                    .is_some_and(|(f, _)| f.get(il).copied().unwrap_or(false))
                {
                    LayerKind::Sliding
                } else {
                    LayerKind::Full
                }
            })
            .collect()
    }

    /// The layers of each cache the model has, and its kind.
    fn caches(&self, n: usize) -> Vec<(Vec<usize>, LayerKind)> {
        let kinds = self.kinds(n);
        LayerKind::CACHES
            .into_iter()
            .filter(|&kind| match kind {
                LayerKind::Sliding => self.swa.is_some(),
                LayerKind::Indexer => !self.indexer.is_empty(),
                _ => true,
            })
            .map(|kind| ((0..n).filter(|&il| kinds[il] == kind).collect(), kind))
            .collect()
    }
}

/// Where state bytes go: a buffer, or a client's writer that takes tensor data by reference
/// (llama.cpp's `llama_io_write_i`, which its own tests hand to the memory).
pub trait Sink {
    fn put(&mut self, bytes: &[u8]);
    /// `n` bytes of `t`'s data from byte `offset`.
    fn tensor(&mut self, t: TensorRef, offset: usize, n: usize) -> Result<()>;
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn tensor(&mut self, t: TensorRef, offset: usize, n: usize) -> Result<()> {
        let start = self.len();
        self.resize(start + n, 0);
        tensor_read(t, offset, &mut self[start..]).map_err(Error::from)
    }
}

/// Bytes to read from: a slice, or (for llama.h's deprecated unbounded calls) caller memory.
pub trait Source {
    fn take(&mut self, n: usize) -> Result<&[u8]>;
    /// Bytes taken so far.
    fn consumed(&self) -> usize;
}

pub struct SliceSource<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> SliceSource<'a> {
    pub fn new(data: &'a [u8]) -> SliceSource<'a> {
        SliceSource { data, at: 0 }
    }
}

impl Source for SliceSource<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| {
                Error::invalid(format!(
                    "state data ends at byte {} but {n} more bytes are needed at byte {}",
                    self.data.len(),
                    self.at
                ))
            })?;
        let s = &self.data[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn consumed(&self) -> usize {
        self.at
    }
}

pub(crate) fn u32_of(src: &mut dyn Source) -> Result<u32> {
    let b = src.take(4)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

pub(crate) fn i32_of(src: &mut dyn Source) -> Result<i32> {
    Ok(u32_of(src)? as i32)
}

pub(crate) fn u64_of(src: &mut dyn Source) -> Result<u64> {
    let b = src.take(8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Ok(u64::from_le_bytes(a))
}

/// llama.cpp's length-prefixed string.
pub fn write_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// The longest string state data holds (an architecture name). Every count read from state data is
/// bounded by what this context could have written before anything that far is read: llama.h's
/// deprecated setters take caller memory without a size.
const MAX_STRING: usize = 256;

/// Memory with compressed caches opens its state with "DSV4" (llama.cpp's tag for it), a
/// version, and whether it is partial.
const COMPRESSED_MAGIC: u32 = 0x3456_5344;
const COMPRESSED_VERSION: u32 = 1;

pub fn read_string(src: &mut dyn Source) -> Result<Vec<u8>> {
    let n = u32_of(src)? as usize;
    if n > MAX_STRING {
        return Err(bad(format!("a string of {n} bytes (at most {MAX_STRING} are written)")));
    }
    Ok(src.take(n)?.to_vec())
}

/// A cell's rows, one per layer of its cache.
type Rows = Vec<Vec<u8>>;

/// One cell as the data describes it, with its K and V rows.
struct StagedCell {
    /// The stream the data puts it in.
    stream: usize,
    pos: i32,
    seqs: SeqSet,
    ext: CellExt,
    k: Rows,
    v: Rows,
}

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(format!("state data: {}", msg.into()))
}

impl KvCache {
    fn k_row(&self, il: usize) -> usize {
        let t = self.k(il);
        row_size(t.ggml_type(), t.ne()[0])
    }

    /// Bytes of one cell's values in layer `il` (0 where the values are read from the keys).
    fn v_row(&self, il: usize) -> usize {
        self.v(il)
            .map_or(0, |t| row_size(t.ggml_type(), self.v_width[il] as i64))
    }

    /// Layer `il`'s value tensor, the bytes of one of its elements and its layer's width; the
    /// elements must be whole bytes (not a quantized type's blocks).
    fn v_elements(&self, il: usize) -> Result<Option<(TensorRef, usize, usize)>> {
        let Some(t) = self.v(il) else { return Ok(None) };
        let (el, width) = (row_size(t.ggml_type(), 1), self.v_width[il]);
        if el == 0 || el * width != self.v_row(il) {
            return Err(Error::invalid(
                "a quantized V cache cannot be laid out transposed (that needs flash attention)",
            ));
        }
        Ok(Some((t, el, width)))
    }

    /// One stream's part of a transposed value tensor: its offset and length in bytes.
    fn v_stream_block(&self, il: usize, t: TensorRef, stream: usize) -> (usize, usize) {
        let len = row_size(t.ggml_type(), t.ne()[0]) * self.layer_stream_size(il);
        (stream * len, len)
    }

    /// Layer `il`'s values of the cells at `rows`, a `v_row` for each, whatever the layout.
    fn read_v_rows(&self, il: usize, rows: &[usize]) -> Result<Rows> {
        let row = self.v_row(il);
        let Some(t) = self.v(il) else {
            return Ok(vec![Vec::new(); rows.len()]);
        };
        if !self.v_transposed_at(il) {
            let read = |&r: &usize| -> Result<Vec<u8>> {
                let mut out = vec![0; row];
                tensor_read(t, r * row, &mut out)?;
                Ok(out)
            };
            return rows.iter().map(read).collect();
        }
        let Some((_, el, width)) = self.v_elements(il)? else {
            return Ok(Vec::new());
        };
        let size = self.layer_stream_size(il);
        let mut blocks: HashMap<usize, Vec<u8>> = HashMap::new();
        let mut out = Vec::with_capacity(rows.len());
        for &r in rows {
            let (stream, cell) = (r / size, r % size);
            let block = match blocks.entry(stream) {
                std::collections::hash_map::Entry::Occupied(b) => b.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    let (at, len) = self.v_stream_block(il, t, stream);
                    let mut b = vec![0; len];
                    tensor_read(t, at, &mut b)?;
                    v.insert(b)
                }
            };
            let mut values = vec![0; row];
            for j in 0..width {
                let at = (j * size + cell) * el;
                values[j * el..(j + 1) * el].copy_from_slice(&block[at..at + el]);
            }
            out.push(values);
        }
        Ok(out)
    }

    /// Write layer `il`'s values of cells, each a row and its `v_row` bytes (nothing where the
    /// layer keeps no values), whatever the layout.
    fn write_v_rows(&self, il: usize, rows: &[(usize, &[u8])]) -> Result<()> {
        let Some(t) = self.v(il) else { return Ok(()) };
        if !self.v_transposed_at(il) {
            let row = self.v_row(il);
            for &(r, data) in rows {
                tensor_write(t, r * row, data)?;
            }
            return Ok(());
        }
        let Some((_, el, width)) = self.v_elements(il)? else {
            return Ok(());
        };
        let size = self.layer_stream_size(il);
        let mut streams: Vec<usize> = rows.iter().map(|&(r, _)| r / size).collect();
        streams.sort_unstable();
        streams.dedup();
        for stream in streams {
            let (at, len) = self.v_stream_block(il, t, stream);
            let mut block = vec![0; len];
            tensor_read(t, at, &mut block)?;
            for &(r, data) in rows.iter().filter(|(r, _)| r / size == stream) {
                let cell = r % size;
                for j in 0..width {
                    let to = (j * size + cell) * el;
                    block[to..to + el].copy_from_slice(&data[j * el..(j + 1) * el]);
                }
            }
            tensor_write(t, at, &block)?;
        }
        Ok(())
    }

    /// Undo a restore of `seq` (every sequence when None) whose other part failed after this one
    /// succeeded: its cells are removed and the rows of those it held alone zeroed, since the
    /// attention still reads free cells' rows (masked, but a NaN times a zero weight is NaN).
    pub fn state_clear(&mut self, seq: Option<usize>) -> Result<()> {
        let Some(s) = seq else {
            self.clear_cells(true);
            return Ok(());
        };
        let stream = self.stream_of(s);
        for il in 0..self.layers.len() {
            let sliding = self.sliding_layer(il);
            let cells = &self.set(sliding).streams[stream];
            let first_row = stream * cells.size();
            let (k_zero, v_zero) = (vec![0u8; self.k_row(il)], vec![0u8; self.v_row(il)]);
            let alone: Vec<usize> = (0..cells.size())
                .filter(|&i| cells.pos(i).is_some() && cells.seqs(i) == SeqSet::single(s))
                .map(|i| first_row + i)
                .collect();
            for &row in &alone {
                tensor_write(self.k(il), row * self.k_row(il), &k_zero)?;
            }
            let zeros: Vec<(usize, &[u8])> = alone.iter().map(|&r| (r, &v_zero[..])).collect();
            self.write_v_rows(il, &zeros)?;
        }
        self.remove_cells(Some(s), -1, -1);
        Ok(())
    }

    /// The cells stream `stream` holds for `seq` (all sequences when None), in cell order, each as
    /// its row in the tensors and the sequence ids written for it: of the full layers' cells, or
    /// with `sliding` of the sliding layers'.
    fn stream_cells(&self, sliding: bool, stream: usize, seq: Option<usize>) -> Vec<(usize, Vec<usize>)> {
        let set = self.set(sliding);
        let (cells, window) = (&set.streams[stream], set.window);
        let first_row = stream * cells.size();
        let mut out = Vec::new();
        for i in 0..cells.size() {
            let Some(pos) = cells.pos(i) else { continue };
            let seqs = cells.seqs(i);
            let ids: Vec<usize> = match seq {
                Some(q) if seqs.contains(q) => vec![q],
                Some(_) => continue,
                None => seqs.iter().collect(),
            };
            // A sequence's cells that its sliding window no longer sees are not part of it.
            if let (Some(q), Some(w)) = (seq, window) {
                if cells.seq_pos_max(q).is_some_and(|p1| w.hides(p1, pos)) {
                    continue;
                }
            }
            out.push((first_row + i, ids));
        }
        out
    }

    /// Append the state of `seq` (every sequence when None) to `out`. `swa_only` leaves out the
    /// full-attention layers' cache of a sliding-window model (llama.h's PARTIAL_ONLY flag).
    /// With compressed caches, as llama.cpp writes that memory: its header, the cells, then the
    /// compressed caches (`compressed::Store::state_write`).
    pub fn state_write(
        &self,
        layout: &Layout,
        seq: Option<usize>,
        swa_only: bool,
        out: &mut dyn Sink,
        between: WriteHook,
    ) -> Result<()> {
        let Some(c) = &self.comp else {
            return self.write_cells(layout, seq, swa_only, out, between);
        };
        for v in [COMPRESSED_MAGIC, COMPRESSED_VERSION, u32::from(swa_only)] {
            out.put(&v.to_le_bytes());
        }
        self.write_cells(layout, seq, swa_only, out, None)?;
        c.state_write(seq, seq.and_then(|s| self.seq_pos_max(s)), swa_only, out)
    }

    fn write_cells(
        &self,
        layout: &Layout,
        seq: Option<usize>,
        swa_only: bool,
        out: &mut dyn Sink,
        mut between: WriteHook,
    ) -> Result<()> {
        let n_layer = self.layers.len();
        for (layers, kind) in layout.caches(n_layer) {
            if kind == LayerKind::Indexer && layout.indexer_after_recurrent {
                if let Some(hook) = between.as_mut() {
                    hook(out)?;
                }
            }
            let sliding = kind == LayerKind::Sliding;
            if swa_only && layout.swa.is_some() && !sliding {
                continue;
            }
            out.put(&(self.n_stream() as u32).to_le_bytes());
            for stream in 0..self.n_stream() {
                let cells = self.stream_cells(sliding, stream, seq);
                out.put(&(cells.len() as u32).to_le_bytes());
                if cells.is_empty() {
                    continue;
                }
                let held = &self.set(sliding).streams[stream];
                let first_row = stream * held.size();
                for (row, ids) in &cells {
                    let pos = held.pos(row - first_row).unwrap_or_default();
                    out.put(&pos.to_le_bytes());
                    out.put(&(ids.len() as u32).to_le_bytes());
                    if layout.cell_ext {
                        let e = held.ext(row - first_row);
                        for v in [e.x, e.y, e.tok] {
                            out.put(&v.to_le_bytes());
                        }
                    }
                    for &s in ids {
                        out.put(&(s as i32).to_le_bytes());
                    }
                }
                self.write_rows(layout, &layers, &cells, out)?;
            }
        }
        Ok(())
    }

    fn write_rows(
        &self,
        layout: &Layout,
        layers: &[usize],
        cells: &[(usize, Vec<usize>)],
        out: &mut dyn Sink,
    ) -> Result<()> {
        out.put(&u32::from(layout.v_trans).to_le_bytes());
        out.put(&(layers.len() as u32).to_le_bytes());
        for &il in layers {
            let (t, row) = (self.k(il), self.k_row(il));
            out.put(&(t.ggml_type() as i32).to_le_bytes());
            out.put(&(row as u64).to_le_bytes());
            for (i, _) in cells {
                out.tensor(t, i * row, row)?;
            }
        }
        // Values read from the keys have no section, as in llama.cpp.
        let rows: Vec<usize> = cells.iter().map(|(i, _)| *i).collect();
        for &il in layers {
            let Some(t) = self.v(il) else { continue };
            let row = self.v_row(il);
            out.put(&(t.ggml_type() as i32).to_le_bytes());
            let values = self.read_v_rows(il, &rows)?;
            if !layout.v_trans {
                out.put(&(row as u64).to_le_bytes());
                values.iter().for_each(|v| out.put(v));
                continue;
            }
            let Some((_, el, width)) = self.v_elements(il)? else {
                continue;
            };
            out.put(&(el as u32).to_le_bytes());
            out.put(&(width as u32).to_le_bytes());
            for j in 0..width {
                for v in &values {
                    out.put(&v[j * el..(j + 1) * el]);
                }
            }
        }
        Ok(())
    }

    /// Read the state of one sequence into `dest`, or (None) of the whole cache, from `src`; with
    /// `swa_only` (llama.h's PARTIAL_ONLY flag), a sequence's sliding-window layers only. The data
    /// is checked completely before the cache changes; on error the cache is as it was.
    /// With compressed caches, their header is checked first and the compressed caches read
    /// after the cells; if they are refused, the restored cells are taken back out.
    pub fn state_read(
        &mut self,
        layout: &Layout,
        dest: Option<usize>,
        swa_only: bool,
        src: &mut dyn Source,
        between: ReadHook,
    ) -> Result<()> {
        if self.comp.is_none() {
            return self.read_cells(layout, dest, swa_only, src, between);
        }
        let (magic, version) = (u32_of(src)?, u32_of(src)?);
        if magic != COMPRESSED_MAGIC || version != COMPRESSED_VERSION {
            return Err(bad(format!(
                "not compressed-cache memory of version {COMPRESSED_VERSION} (magic {magic:#x}, \
                 version {version})"
            )));
        }
        let partial = match u32_of(src)? {
            m @ (0 | 1) => m == 1,
            m => return Err(bad(format!("compressed-cache state mode {m} (0 or 1 expected)"))),
        };
        if partial != swa_only {
            return Err(bad(
                "compressed-cache state saved with other flags (LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) than it is read with",
            ));
        }
        self.read_cells(layout, dest, swa_only, src, None)?;
        let read = match self.comp.as_mut() {
            Some(c) => c.state_read(dest, swa_only, src),
            None => Ok(()),
        };
        if let Err(e) = read {
            self.state_clear(dest)?;
            return Err(e);
        }
        Ok(())
    }

    fn read_cells(
        &mut self,
        layout: &Layout,
        dest: Option<usize>,
        swa_only: bool,
        src: &mut dyn Source,
        mut between: ReadHook,
    ) -> Result<()> {
        let partial = swa_only && layout.swa.is_some();
        if partial && dest.is_none() {
            return Err(bad("only a sequence's state can hold just the sliding-window layers"));
        }
        let n_layer = self.layers.len();
        let mut full: Vec<StagedCell> = Vec::new();
        let mut sliding: Option<(Vec<usize>, Vec<StagedCell>)> = None;
        // The indexer's rows by cache, stream, position and sequences.
        type Key = (usize, usize, i32, SeqSet);
        let mut other_rows: HashMap<Key, VecDeque<(Rows, Rows)>> = HashMap::new();
        for (layers, kind) in layout.caches(n_layer) {
            if partial && kind != LayerKind::Sliding {
                continue;
            }
            if kind == LayerKind::Indexer && layout.indexer_after_recurrent {
                if let Some(hook) = between.as_mut() {
                    hook(src)?;
                }
            }
            let n_stream = u32_of(src)? as usize;
            if n_stream != self.n_stream() {
                return Err(bad(format!(
                    "{n_stream} streams, this context has {} (kv_unified and n_seq_max must match)",
                    self.n_stream()
                )));
            }
            let own_cells = kind == LayerKind::Sliding;
            let mut cells = Vec::new();
            for stream in 0..n_stream {
                cells.extend(self.read_stream(layout, &layers, own_cells, stream, dest, src)?);
            }
            match kind.cache() {
                _ if own_cells => sliding = Some((layers, cells)),
                Some(cache) if kind != LayerKind::Full => {
                    for c in cells {
                        other_rows
                            .entry((cache, c.stream, c.pos, c.seqs))
                            .or_default()
                            .push_back((c.k, c.v));
                    }
                }
                _ => full.extend(cells),
            }
        }
        // The full layers' cells (which may have no layers, but has the cells) take the indexer's
        // rows matched by stream, position and sequences, in order where several cells share
        // them; empty rows for uncached layers.
        let kinds = layout.kinds(n_layer);
        let full_layers: Vec<(usize, LayerKind)> = (0..n_layer)
            .filter(|&il| kinds[il] != LayerKind::Sliding)
            .map(|il| (il, kinds[il]))
            .collect();
        for c in &mut full {
            let mut k_parts: [Option<Rows>; 2] = [Some(std::mem::take(&mut c.k)), None];
            let mut v_parts: [Option<Rows>; 2] = [Some(std::mem::take(&mut c.v)), None];
            if let Some((k, v)) = other_rows
                .get_mut(&(1, c.stream, c.pos, c.seqs))
                .and_then(VecDeque::pop_front)
            {
                (k_parts[1], v_parts[1]) = (Some(k), Some(v));
            }
            c.k = merge_layers(&full_layers, k_parts, |il| self.k_row(il));
            c.v = merge_layers(&full_layers, v_parts, |il| self.v_row(il));
        }
        let unmatched: usize = other_rows.values().map(VecDeque::len).sum();
        if unmatched > 0 {
            return Err(bad(format!(
                "{unmatched} cells of the indexer layers are not among the full layers' cells"
            )));
        }
        let mut staged = Vec::new();
        if !partial {
            staged.push((full_layers.into_iter().map(|(il, _)| il).collect(), false, full));
        }
        if let Some((layers, cells)) = sliding {
            staged.push((layers, true, cells));
        }
        self.apply_staged(dest, staged)
    }

    /// One stream's cells and their rows of `layers`, for the full layers' cells or (`sliding`)
    /// the sliding layers'.
    fn read_stream(
        &self,
        layout: &Layout,
        layers: &[usize],
        sliding: bool,
        stream: usize,
        dest: Option<usize>,
        src: &mut dyn Source,
    ) -> Result<Vec<StagedCell>> {
        let n = u32_of(src)? as usize;
        if n == 0 {
            return Ok(Vec::new());
        }
        let size = self.stream_size_of(sliding);
        if n > size {
            return Err(bad(format!("{n} cells, a stream of this cache has {size}")));
        }
        let mut cells = Vec::with_capacity(n);
        for _ in 0..n {
            let pos = i32_of(src)?;
            let n_seq = u32_of(src)? as usize;
            if dest.is_some() && n_seq != 1 {
                return Err(bad(format!("a sequence's cell lists {n_seq} sequences, not 1")));
            }
            if n_seq > layout.n_seq_max {
                return Err(bad(format!(
                    "a cell lists {n_seq} sequences, this context has {}",
                    layout.n_seq_max
                )));
            }
            if pos < 0 {
                return Err(bad(format!("negative position {pos}")));
            }
            let ext = if layout.cell_ext {
                CellExt {
                    x: i32_of(src)?,
                    y: i32_of(src)?,
                    tok: i32_of(src)?,
                }
            } else {
                CellExt::default()
            };
            let mut seqs = SeqSet::default();
            for _ in 0..n_seq {
                let s = i32_of(src)?;
                if s < 0 || s as usize >= layout.n_seq_max {
                    return Err(bad(format!("sequence id {s} outside [0, {})", layout.n_seq_max)));
                }
                let s = s as usize;
                if dest.is_none() && self.stream_of(s) != stream {
                    return Err(bad(format!(
                        "stream {stream} lists sequence {s}, which this context keeps in stream {}",
                        self.stream_of(s)
                    )));
                }
                seqs.insert(s);
            }
            if let Some(d) = dest {
                seqs = SeqSet::single(d);
            }
            cells.push(StagedCell {
                stream: dest.map_or(stream, |d| self.stream_of(d)),
                pos,
                seqs,
                ext,
                k: Vec::with_capacity(layers.len()),
                v: Vec::with_capacity(layers.len()),
            });
        }
        let v_trans = u32_of(src)? != 0;
        let n_layer = u32_of(src)? as usize;
        if n_layer != layers.len() {
            return Err(bad(format!("{n_layer} layers, this cache has {}", layers.len())));
        }
        if v_trans != layout.v_trans {
            return Err(bad(format!(
                "V is {}transposed but this context keeps it {}transposed (flash attention must match)",
                if v_trans { "" } else { "not " },
                if layout.v_trans { "" } else { "not " }
            )));
        }
        for &il in layers {
            let t = self.k(il);
            let row = self.k_row(il);
            check_type(src, t, il, "key")?;
            check_size(u64_of(src)?, row, il, "key row")?;
            for c in cells.iter_mut() {
                c.k.push(src.take(row)?.to_vec());
            }
        }
        for &il in layers {
            let Some(t) = self.v(il) else {
                cells.iter_mut().for_each(|c| c.v.push(Vec::new()));
                continue;
            };
            let row = self.v_row(il);
            check_type(src, t, il, "value")?;
            if !v_trans {
                check_size(u64_of(src)?, row, il, "value row")?;
                for c in cells.iter_mut() {
                    c.v.push(src.take(row)?.to_vec());
                }
                continue;
            }
            let (el, width) = match self.v_elements(il)? {
                Some((_, el, width)) => (el, width),
                None => (0, 0),
            };
            check_size(u64::from(u32_of(src)?), el, il, "value element")?;
            check_size(u64::from(u32_of(src)?), width, il, "value width")?;
            for c in cells.iter_mut() {
                c.v.push(vec![0; row]);
            }
            for j in 0..width {
                for c in cells.iter_mut() {
                    let last = c.v.len() - 1;
                    c.v[last][j * el..(j + 1) * el].copy_from_slice(src.take(el)?);
                }
            }
        }
        Ok(cells)
    }

    /// Put staged cells in place, each list in its set (the full layers' or the sliding ones')
    /// with its rows of that set's `layers`: the whole cache from the first cells, or `dest`'s
    /// cells replaced. All cells are placed before any row is written; if one list does not fit,
    /// nothing changes.
    fn apply_staged(&mut self, dest: Option<usize>, staged: Vec<(Vec<usize>, bool, Vec<StagedCell>)>) -> Result<()> {
        let before = self.sets.clone();
        let mut rows = Vec::with_capacity(staged.len());
        for (_, sliding, cells) in &staged {
            match self.place_staged(dest, *sliding, cells) {
                Some(r) => rows.push(r),
                None => {
                    self.sets = before;
                    return Err(bad(format!("{} cells do not fit in the cache", cells.len())));
                }
            }
        }
        if let (None, Some(buffer)) = (dest, &self.storage) {
            buffer.clear(0);
        }
        for ((layers, _, cells), rows) in staged.iter().zip(&rows) {
            for (c, &row) in cells.iter().zip(rows) {
                for (j, &il) in layers.iter().enumerate() {
                    tensor_write(self.k(il), row * self.k_row(il), &c.k[j])?;
                }
            }
            for (j, &il) in layers.iter().enumerate() {
                let values: Vec<(usize, &[u8])> = cells.iter().zip(rows).map(|(c, &row)| (row, &c.v[j][..])).collect();
                self.write_v_rows(il, &values)?;
            }
        }
        Ok(())
    }

    /// Occupy cells of one set for staged `cells`; their rows, or None when they do not fit.
    fn place_staged(&mut self, dest: Option<usize>, sliding: bool, cells: &[StagedCell]) -> Option<Vec<usize>> {
        let set = if sliding { self.sets.len() - 1 } else { 0 };
        let Some(d) = dest else {
            let stream_size = self.sets[set].stream_size();
            let mut rows = vec![0; cells.len()];
            for (s, cells_of_stream) in self.sets[set].streams.iter_mut().enumerate() {
                let mine: Vec<usize> = (0..cells.len()).filter(|&i| cells[i].stream == s).collect();
                let pos: Vec<i32> = mine.iter().map(|&i| cells[i].pos).collect();
                let seqs: Vec<SeqSet> = mine.iter().map(|&i| cells[i].seqs).collect();
                let ext: Vec<CellExt> = mine.iter().map(|&i| cells[i].ext).collect();
                let slots = cells_of_stream.restore(&pos, &seqs, &ext);
                for (&i, c) in mine.iter().zip(slots) {
                    rows[i] = s * stream_size + c;
                }
            }
            return Some(rows);
        };
        let stream = self.stream_of(d);
        self.sets[set].streams[stream].seq_rm(Some(d), -1, -1);
        let tokens: Vec<TokenPlace> = cells
            .iter()
            .map(|c| TokenPlace {
                pos: c.pos,
                seqs: c.seqs,
                primary_seq: d,
                ext: c.ext,
            })
            .collect();
        let placed = self.place_in(&tokens, set..set + 1, None)?;
        Some(if sliding { placed.sliding_rows } else { placed.rows })
    }
}

/// Rows for each of `layers` (a cache layer and its kind) from each cache's rows (`parts`, by
/// `LayerKind::cache`): zeros where a cache has none for a cell; none for an uncached layer.
fn merge_layers(layers: &[(usize, LayerKind)], parts: [Option<Rows>; 2], row_len: impl Fn(usize) -> usize) -> Rows {
    let mut parts = parts.map(|p| p.map(Vec::into_iter));
    layers
        .iter()
        .map(|&(il, kind)| match kind.cache().and_then(|c| parts.get_mut(c)) {
            Some(part) => part
                .as_mut()
                .and_then(Iterator::next)
                .unwrap_or_else(|| vec![0; row_len(il)]),
            None => Vec::new(),
        })
        .collect()
}

fn check_type(src: &mut dyn Source, t: TensorRef, il: usize, what: &str) -> Result<()> {
    let ty = i32_of(src)?;
    if ty != t.ggml_type() as i32 {
        return Err(bad(format!(
            "layer {il}: {what} type {ty}, this cache has {} (type_k/type_v must match)",
            t.ggml_type()
        )));
    }
    Ok(())
}

fn check_size(got: u64, want: usize, il: usize, what: &str) -> Result<()> {
    if got != want as u64 {
        return Err(bad(format!("layer {il}: {what} of {got} bytes, this cache has {want}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(uncached: Vec<bool>, indexer: Vec<bool>) -> Layout {
        Layout {
            n_seq_max: 1,
            v_trans: false,
            swa: None,
            uncached,
            cell_ext: false,
            indexer,
            indexer_after_recurrent: false,
        }
    }

    #[test]
    fn indexer_keys_are_a_cache_after_the_attention_one() {
        // Two model layers, the second without keys; then their indexer keys.
        let l = layout(vec![false, true], vec![true, true]);
        let caches = l.caches(4);
        assert_eq!(caches.len(), 2);
        assert!(caches[0].0 == [0] && caches[0].1 == LayerKind::Full);
        assert!(caches[1].0 == [2] && caches[1].1 == LayerKind::Indexer);
        // Without an indexer, one cache of the model's layers.
        let plain = layout(vec![false, false], Vec::new()).caches(2);
        assert!(plain.len() == 1 && plain[0].0 == [0, 1]);
    }

    #[test]
    fn sliding_layers_come_after_the_indexer_keys() {
        // llama.cpp's dsa_iswa cache: the full layers and their indexer keys, then the sliding.
        let mut l = layout(vec![false, false], vec![true, false]);
        l.swa = Some((vec![false, true], Swa::Window(4)));
        let order: Vec<(Vec<usize>, LayerKind)> = l.caches(4);
        let kinds: Vec<LayerKind> = order.iter().map(|c| c.1).collect();
        assert!(kinds == [LayerKind::Full, LayerKind::Indexer, LayerKind::Sliding]);
        assert!(order[0].0 == [0] && order[1].0 == [2] && order[2].0 == [1]);
    }

    #[test]
    fn merged_rows_take_each_cache_in_layer_order() {
        use LayerKind::*;
        let layers = [(0, Full), (1, Uncached), (3, Indexer), (4, Full)];
        let parts = [Some(vec![vec![1], vec![4]]), Some(vec![vec![3]])];
        let rows = merge_layers(&layers, parts, |_| 2);
        assert_eq!(rows, [vec![1], vec![], vec![3], vec![4]]);
        // A cache without rows for the cell: zeros of the layer's width.
        let rows = merge_layers(&layers, [Some(vec![vec![1], vec![4]]), None], |_| 2);
        assert_eq!(rows[2], [0, 0]);
    }
}
