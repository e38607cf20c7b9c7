//! Recurrent states as bytes, in the layout llama.cpp 0.3.36 writes for its recurrent memory:
//! `u32 cell_count`, per cell `i32 pos, u32 n_seq` and its sequence ids (none when one
//! sequence's state is written), then `u32 s_trans (0), u32 n_layer`, per recurrent layer
//! `i32 r_type, u64 r_row_bytes` and the cells' convolution rows (followed, in a layer with a PLE
//! convolution, by `u64 row_bytes` and its history rows), then per recurrent layer
//! `i32 s_type, u64 s_row_bytes` and their scan rows.

use super::Recurrent;
use crate::error::{Error, Result};
use crate::ggml::{row_size, tensor_write, TensorRef};
use crate::kv::{i32_of, u32_of, u64_of, SeqSet, Sink, Source};

fn bad(msg: impl Into<String>) -> Error {
    Error::invalid(format!("state data: {}", msg.into()))
}

/// A state as read, checked but not yet applied.
pub struct Staged {
    cells: Vec<(i32, SeqSet)>,
    /// Per recurrent layer, the cells' (r, s) rows, concatenated.
    rows: Vec<(Vec<u8>, Vec<u8>)>,
    /// Per recurrent layer, its PLE history rows (empty without).
    ple: Vec<Vec<u8>>,
}

impl Recurrent {
    fn row_bytes(t: TensorRef) -> usize {
        row_size(t.ggml_type(), t.ne()[0])
    }

    fn recurrent_layers(&self) -> impl Iterator<Item = (TensorRef, TensorRef)> + '_ {
        self.layers.iter().flatten().copied()
    }

    /// Per recurrent layer, its PLE history, if it has one.
    fn ple_rows(&self) -> Vec<Option<TensorRef>> {
        let layers = self.layers.iter().zip(&self.ple);
        layers.filter(|(l, _)| l.is_some()).map(|(_, p)| *p).collect()
    }

    /// Append the state of `seq` (every sequence when None) to `out`.
    pub fn state_write(&self, seq: Option<usize>, out: &mut dyn Sink) -> Result<()> {
        let saved = self
            .cells
            .saved_cells(seq)
            .ok_or_else(|| Error::invalid("sequences sharing a recurrent state have different rollbacks pending"))?;
        out.put(&(saved.len() as u32).to_le_bytes());
        for &(i, _) in &saved {
            out.put(&self.cells.pos(i).to_le_bytes());
            let ids: Vec<usize> = match seq {
                Some(_) => Vec::new(),
                None => self.cells.seqs(i).iter().collect(),
            };
            out.put(&(ids.len() as u32).to_le_bytes());
            for s in ids {
                out.put(&(s as i32).to_le_bytes());
            }
        }
        out.put(&0u32.to_le_bytes());
        out.put(&(self.layers.len() as u32).to_le_bytes());
        let copy = |t: TensorRef, out: &mut dyn Sink| -> Result<()> {
            let row = Self::row_bytes(t);
            out.put(&(t.ggml_type() as i32).to_le_bytes());
            out.put(&(row as u64).to_le_bytes());
            for &(_, src) in &saved {
                out.tensor(t, src * row, row)?;
            }
            Ok(())
        };
        for ((r, _), p) in self.recurrent_layers().zip(self.ple_rows()) {
            copy(r, out)?;
            // The PLE history follows its layer's r, with its row size but no type.
            if let Some(p) = p {
                let row = Self::row_bytes(p);
                out.put(&(row as u64).to_le_bytes());
                for &(_, src) in &saved {
                    out.tensor(p, src * row, row)?;
                }
            }
        }
        for (_, s) in self.recurrent_layers() {
            copy(s, out)?;
        }
        Ok(())
    }

    /// Read one sequence's state into `dest`, or (None) every state, from `src`. The data is
    /// checked completely before anything changes; on error the memory is as it was.
    pub fn state_read(&mut self, dest: Option<usize>, src: &mut dyn Source) -> Result<()> {
        let staged = self.read_staged(dest, src)?;
        self.apply_staged(dest, staged)
    }

    /// Apply a state `read_staged` checked; on error the memory is as it was.
    pub fn apply_staged(&mut self, dest: Option<usize>, staged: Staged) -> Result<()> {
        let before = self.cells.clone();
        let first = match dest {
            None => self
                .cells
                .restore_all(&staged.cells)
                .map(|()| 0)
                .ok_or_else(|| bad("a sequence has two states, or an id is beyond this context's sequences")),
            Some(d) => match staged.cells.as_slice() {
                [] => {
                    self.cells.seq_rm(Some(d), -1, -1);
                    return Ok(());
                }
                [(pos, _)] => self
                    .cells
                    .restore_seq(d, *pos)
                    .ok_or_else(|| bad(format!("no free cell for sequence {d}'s state"))),
                more => Err(bad(format!(
                    "{} cells for one sequence, whose state is one",
                    more.len()
                ))),
            },
        };
        let written = first.and_then(|first| {
            let layers: Vec<(TensorRef, TensorRef)> = self.recurrent_layers().collect();
            for ((r, s), (r_rows, s_rows)) in layers.into_iter().zip(&staged.rows) {
                tensor_write(r, first * Self::row_bytes(r), r_rows)?;
                tensor_write(s, first * Self::row_bytes(s), s_rows)?;
            }
            for (p, rows) in self.ple_rows().into_iter().zip(&staged.ple) {
                if let Some(p) = p {
                    tensor_write(p, first * Self::row_bytes(p), rows)?;
                }
            }
            Ok(())
        });
        match written {
            Ok(()) => self.cells.reset_rollback(dest),
            Err(_) => self.cells = before,
        }
        written
    }

    /// Read and check one sequence's state (`dest`) or every state from `src`, changing nothing.
    pub fn read_staged(&self, dest: Option<usize>, src: &mut dyn Source) -> Result<Staged> {
        let count = u32_of(src)? as usize;
        if count > self.size() {
            return Err(bad(format!("{count} cells, this context has {}", self.size())));
        }
        let mut cells = Vec::with_capacity(count);
        for _ in 0..count {
            let pos = i32_of(src)?;
            let n_seq = u32_of(src)? as usize;
            if dest.is_some() && n_seq != 0 {
                return Err(bad("a sequence's cell lists sequence ids"));
            }
            if n_seq > self.n_seq_max {
                return Err(bad(format!("a cell of {n_seq} sequences (at most {})", self.n_seq_max)));
            }
            let mut seqs = SeqSet::default();
            for _ in 0..n_seq {
                let s = i32_of(src)?;
                match usize::try_from(s).ok().filter(|&s| s < self.n_seq_max) {
                    Some(s) => seqs.insert(s),
                    None => return Err(bad(format!("sequence id {s} outside [0, {})", self.n_seq_max))),
                }
            }
            cells.push((pos, seqs));
        }
        if u32_of(src)? != 0 {
            return Err(bad("transposed recurrent states are not written by llama.cpp 0.3.36"));
        }
        let n_layer = u32_of(src)? as usize;
        if n_layer != self.layers.len() {
            return Err(bad(format!("{n_layer} layers, this model has {}", self.layers.len())));
        }
        let read = |t: TensorRef, il: usize, what: &str, src: &mut dyn Source| -> Result<Vec<u8>> {
            let ty = i32_of(src)?;
            if ty != t.ggml_type() as i32 {
                return Err(bad(format!(
                    "layer {il}: {what} type {ty}, this context's is {}",
                    t.ggml_type()
                )));
            }
            let row = u64_of(src)?;
            if row != Self::row_bytes(t) as u64 {
                return Err(bad(format!(
                    "layer {il}: {what} rows of {row} bytes, this context's are {}",
                    Self::row_bytes(t)
                )));
            }
            Ok(src.take(count * Self::row_bytes(t))?.to_vec())
        };
        let layers: Vec<(TensorRef, TensorRef)> = self.recurrent_layers().collect();
        let mut r_rows = Vec::with_capacity(layers.len());
        let mut ple = Vec::with_capacity(layers.len());
        for (il, (&(r, _), p)) in layers.iter().zip(self.ple_rows()).enumerate() {
            r_rows.push(read(r, il, "r", src)?);
            ple.push(match p {
                Some(p) => {
                    let row = u64_of(src)?;
                    if row != Self::row_bytes(p) as u64 {
                        return Err(bad(format!(
                            "layer {il}: PLE rows of {row} bytes, this context's are {}",
                            Self::row_bytes(p)
                        )));
                    }
                    src.take(count * Self::row_bytes(p))?.to_vec()
                }
                None => Vec::new(),
            });
        }
        let mut rows = Vec::with_capacity(layers.len());
        for ((il, &(_, s)), r) in layers.iter().enumerate().zip(r_rows) {
            rows.push((r, read(s, il, "s", src)?));
        }
        Ok(Staged { cells, rows, ple })
    }
}
