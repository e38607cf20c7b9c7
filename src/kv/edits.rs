//! The cache's side of `llama_memory_*`: each edit goes to the cells and to the compressed
//! caches kept beside them, which take edits on their own terms (whole sequences, rollbacks of
//! the last `n_rs_seq` tokens), as llama.cpp's cache with compressed keys does.

use super::KvCache;
use crate::error::{Error, Result};

/// How a batch's tokens are cut into ubatches for this cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Consecutive chunks (one stream for every sequence).
    Simple,
    /// The same count of tokens from consecutive sequences per ubatch (a stream per sequence);
    /// `keep_tail`: a rollback's tokens stay in one ubatch.
    Equal { keep_tail: bool },
    /// A set of sequences at a time, for tokens shared by several sequences that are written
    /// once per sequence (`KvCache::writes`).
    BySequences,
}

impl KvCache {
    /// Forget everything; with `data`, also zero the tensors. Compressed rows are read (masked)
    /// before they are written, so they are zeroed whatever `data` says.
    pub fn clear(&mut self, data: bool) -> Result<()> {
        self.clear_cells(data);
        self.comp.as_mut().map_or(Ok(()), |c| c.clear(None))
    }

    /// Remove `seq` (every sequence when None) from positions [p0, p1). False, nothing changed,
    /// where compressed caches cannot take it: they are never cut up to a position; from a
    /// position past the sequence's end nothing goes; from one within its last `n_rs_seq` tokens
    /// it is a rollback the next ubatch restores (one at a time); from its start, the whole
    /// sequence goes (every sequence with None), compressed rows and rings zeroed.
    pub fn seq_rm(&mut self, seq: Option<usize>, p0: i32, p1: i32) -> Result<bool> {
        let Some(comp) = self.comp.as_ref() else {
            self.remove_cells(seq, p0, p1);
            return Ok(true);
        };
        if p1 >= 0 {
            return Ok(false);
        }
        if p0 <= 0 {
            self.remove_cells(seq, p0, p1);
            return self.comp.as_mut().map_or(Ok(true), |c| c.clear(seq).map(|()| true));
        }
        let Some(s) = seq else { return Ok(false) };
        let pos_max = self.seq_pos_max(s).unwrap_or(-1);
        if p0 <= pos_max {
            let back = pos_max - (p0 - 1);
            let n_rs = comp.n_rs() as i32;
            if n_rs == 0 || !(1..=n_rs).contains(&back) || comp.rollback(s) != 0 {
                return Ok(false);
            }
            if let Some(c) = self.comp.as_mut() {
                c.set_rollback(s, back as u32);
            }
        }
        self.remove_cells(Some(s), p0, p1);
        Ok(true)
    }

    /// Give `dst` the cells of `src` in [p0, p1); compressed caches copy whole sequences only.
    pub fn seq_cp(&mut self, src: usize, dst: usize, p0: i32, p1: i32) -> Result<()> {
        if let Some(c) = self.comp.as_mut() {
            if p0 > 0 || p1 >= 0 {
                return Err(Error::invalid(format!(
                    "copying positions [{p0}, {p1}) of sequence {src}: compressed caches copy whole sequences \
                     only (p0 = p1 = -1); nothing changed"
                )));
            }
            c.seq_cp(src, dst)?;
        }
        self.copy_cells(src, dst, p0, p1)
    }

    /// Keep only `seq` in its stream. Compressed caches keep a stream per sequence: the others
    /// are emptied one by one.
    pub fn seq_keep(&mut self, seq: usize) -> Result<()> {
        self.keep_cells(seq);
        if self.comp.is_none() {
            return Ok(());
        }
        for other in (0..self.n_stream()).filter(|&s| s != seq) {
            self.remove_cells(Some(other), -1, -1);
            if let Some(c) = self.comp.as_mut() {
                c.clear(Some(other))?;
            }
        }
        Ok(())
    }

    /// The lowest position `seq` can be taken back to (`llama_memory_seq_pos_min`): with
    /// compressed caches its highest, as llama.cpp reports it, since they cannot go back within
    /// the window.
    pub fn seq_pos_floor(&self, seq: usize) -> Option<i32> {
        match self.comp {
            Some(_) => self.seq_pos_max(seq),
            None => self.seq_pos_min(seq),
        }
    }

    /// Whether cached keys can be turned to new positions: not compressed ones, whose blocks
    /// follow the positions.
    pub fn keys_can_turn(&self) -> bool {
        self.comp.is_none()
    }

    /// How a batch is cut into ubatches for this cache; `shared`: some token belongs to several
    /// sequences.
    pub fn split(&self, shared: bool) -> Split {
        match (self.n_stream() > 1, self.comp.is_some()) {
            (false, _) => Split::Simple,
            (true, true) if shared => Split::BySequences,
            (true, keep_tail) => Split::Equal { keep_tail },
        }
    }
}
