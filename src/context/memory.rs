//! What `llama_memory_*` does on a context: each operation goes to the memories the model's
//! architecture keeps — the attention cache, the recurrent states, or both (combined as
//! llama.cpp's hybrid memory combines them) — and does nothing on a context without memory.

use super::Context;
use crate::error::{Error, Result};
use crate::ggml::BufferTypeId;
use crate::model::spec::Memory;

impl Context<'_> {
    /// The memory the model's architecture keeps (none on a vocab-only model).
    pub fn memory_kind(&self) -> Memory {
        self.arch.map_or(Memory::None, |a| a.facts().memory)
    }

    /// Whether the model's attention layers keep a cache.
    pub(super) fn uses_kv(&self) -> bool {
        matches!(
            self.memory_kind(),
            Memory::KvCache | Memory::Hybrid | Memory::Compressed
        )
    }

    /// Bytes the memories hold, per buffer type.
    pub fn memory_buffers(&self) -> Vec<(BufferTypeId, usize)> {
        let mut out = self.kv.memory_breakdown();
        out.extend(self.rs.iter().flat_map(|rs| rs.memory_breakdown()));
        out
    }

    pub fn memory_clear(&mut self, data: bool) {
        if self.uses_kv() {
            log_failure(self.kv.clear(data));
        }
        if let Some(rs) = &mut self.rs {
            rs.clear(data);
        }
    }

    /// Remove `seq` (every sequence when None) from positions [p0, p1). False when recurrent
    /// state would have to lose part of its history, or the cache cannot cut there (nothing
    /// changes then).
    pub fn memory_seq_rm(&mut self, seq: Option<usize>, p0: i32, p1: i32) -> bool {
        if let Some(rs) = &mut self.rs {
            if !rs.cells.seq_rm(seq, p0, p1) {
                return false;
            }
        }
        if !self.uses_kv() {
            return true;
        }
        self.kv.seq_rm(seq, p0, p1).unwrap_or_else(|e| {
            crate::log_error!("memory: {e}");
            true
        })
    }

    pub fn memory_seq_cp(&mut self, src: usize, dst: usize, p0: i32, p1: i32) -> Result<()> {
        if self.uses_kv() {
            self.kv.seq_cp(src, dst, p0, p1)?;
        }
        if let Some(rs) = &mut self.rs {
            rs.cells.seq_cp(src, dst);
        }
        Ok(())
    }

    pub fn memory_seq_keep(&mut self, seq: usize) {
        if self.uses_kv() {
            log_failure(self.kv.seq_keep(seq));
        }
        if let Some(rs) = &mut self.rs {
            rs.cells.seq_keep(seq);
        }
    }

    pub fn memory_seq_add(&mut self, seq: usize, p0: i32, p1: i32, delta: i32) -> Result<()> {
        self.require_shift("llama_memory_seq_add")?;
        if self.uses_kv() {
            self.kv.seq_add(seq, p0, p1, delta);
        }
        if let Some(rs) = &mut self.rs {
            rs.cells.seq_add(seq, p0, p1, delta);
        }
        Ok(())
    }

    pub fn memory_seq_div(&mut self, seq: usize, p0: i32, p1: i32, d: i32) -> Result<()> {
        self.require_shift("llama_memory_seq_div")?;
        if self.uses_kv() {
            self.kv.seq_div(seq, p0, p1, d);
        }
        if let Some(rs) = &mut self.rs {
            rs.cells.seq_div(seq, p0, p1, d);
        }
        Ok(())
    }

    /// Whether cached keys can be turned to new positions (`llama_memory_can_shift`): not when
    /// attention rotates by several positions per token (M-RoPE), nor when the sliding-window
    /// layers keep fewer cells than the others, as llama.cpp answers.
    pub fn can_shift(&self) -> bool {
        !self.uses_kv() || (self.keys_can_turn() && self.kv.sizes_match())
    }

    /// Whether the keys can be rotated to new positions at all (not with M-RoPE, nor keys the
    /// model marks fixed, nor where the cache says not). Caches of different sizes still shift,
    /// each on its own, as llama.cpp's do.
    fn keys_can_turn(&self) -> bool {
        self.kv.keys_can_turn()
            && self
                .model
                .hparams
                .as_ref()
                .is_none_or(|hp| hp.n_pos_per_embd() == 1 && !hp.fixed_keys)
    }

    /// Refuse a position change the keys cannot follow (llama.cpp aborts at the next decode).
    fn require_shift(&self, what: &str) -> Result<()> {
        if !self.uses_kv() || self.keys_can_turn() {
            return Ok(());
        }
        Err(Error::invalid(format!(
            "{what}: this model's cached keys cannot be shifted (multi-dimensional rope, compressed keys or \
             layers rotating different widths; \
             llama_memory_can_shift is false): nothing changed"
        )))
    }

    /// The lowest position `seq` holds (both memories must hold it), as far as the cache can go
    /// back (`KvCache::seq_pos_floor`).
    pub fn memory_seq_pos_min(&self, seq: usize) -> Option<i32> {
        let kv = self.uses_kv().then(|| self.kv.seq_pos_floor(seq));
        let rs = self.rs.as_ref().map(|rs| rs.cells.seq_pos_min(seq));
        match (kv, rs) {
            (Some(a), Some(b)) => a.max(b),
            (a, b) => a.or(b).flatten(),
        }
    }

    /// The highest position `seq` holds (both memories must hold it).
    pub fn memory_seq_pos_max(&self, seq: usize) -> Option<i32> {
        let kv = self.uses_kv().then(|| self.kv.seq_pos_max(seq));
        let rs = self.rs.as_ref().map(|rs| rs.cells.seq_pos_max(seq));
        match (kv, rs) {
            (Some(Some(a)), Some(Some(b))) => Some(a.min(b)),
            (Some(_), Some(_)) => None,
            (a, b) => a.or(b).flatten(),
        }
    }
}

/// A memory edit that cannot fail except by a ggml error, logged (llama.h gives it no status).
fn log_failure(r: Result<()>) {
    if let Err(e) = r {
        crate::log_error!("memory: {e}");
    }
}
