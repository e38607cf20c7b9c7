//! Saving and restoring what a context has computed, in llama.cpp's layout: the architecture's
//! name, then the KV cache (`kv::Layout` says how llama.cpp would have laid this one out). A
//! sequence's state is its cells alone. A context without memory (an encoder, a vocab-only model)
//! saves the name alone.

use super::Context;
use crate::error::{Error, Result};
use crate::kv::{read_string, write_string, Layout, Sink, Source};

impl Context<'_> {
    fn state_layout(&self) -> Layout {
        let hp = self.model.hparams.as_ref();
        let swa = hp
            .filter(|hp| hp.has_sliding_layers())
            .map(|hp| (hp.swa_layers.clone(), hp.swa()));
        Layout {
            n_seq_max: self.params.n_seq_max as usize,
            v_trans: !self.params.graph.flash_attn,
            swa,
            uncached: hp
                .map(|hp| hp.kv_layers.iter().map(|&k| !k).collect())
                .unwrap_or_default(),
            cell_ext: hp.is_some_and(|hp| hp.n_pos_per_embd() > 1 || hp.ple.is_some()),
            indexer: hp
                .filter(|hp| hp.indexer.head_size > 0 && self.kv.has_indexer_cache())
                .map(|hp| hp.indexer.layers.clone())
                .unwrap_or_default(),
            indexer_after_recurrent: self.rs.is_some(),
        }
    }

    fn arch_name(&self) -> &'static str {
        self.model.arch.map_or("", |a| a.facts().name)
    }

    fn check_seq(&self, seq: i32) -> Result<usize> {
        usize::try_from(seq)
            .ok()
            .filter(|&s| s < self.params.n_seq_max as usize)
            .ok_or_else(|| Error::invalid(format!("seq_id {seq} outside [0, {})", self.params.n_seq_max)))
    }

    /// The whole state as bytes. Pending position shifts are applied first, so the keys saved
    /// match the positions saved.
    pub fn state_save(&mut self) -> Result<Vec<u8>> {
        self.apply_pending_shift()?;
        let mut out = Vec::new();
        write_string(&mut out, self.arch_name());
        self.memory_state_write(None, false, &mut out)?;
        Ok(out)
    }

    /// Restore a whole state written by `state_save` (or by llama.cpp with the same model and
    /// cache parameters). Nothing changes when the data is refused.
    pub fn state_load(&mut self, src: &mut dyn Source) -> Result<()> {
        let arch = read_string(src)?;
        if arch != self.arch_name().as_bytes() {
            return Err(Error::invalid(format!(
                "state data is for architecture '{}', this model is '{}'",
                String::from_utf8_lossy(&arch),
                self.arch_name()
            )));
        }
        self.memory_state_read(None, false, src)
    }

    /// One sequence's cells as bytes; `swa_only` keeps just the sliding-window layers' part.
    pub fn seq_state_save(&mut self, seq: i32, swa_only: bool) -> Result<Vec<u8>> {
        let seq = self.check_seq(seq)?;
        let mut out = Vec::new();
        self.apply_pending_shift()?;
        self.memory_state_write(Some(seq), swa_only, &mut out)?;
        Ok(out)
    }

    /// Replace sequence `dest` with the cells in `src` (any sequence's saved state).
    pub fn seq_state_load(&mut self, dest: i32, swa_only: bool, src: &mut dyn Source) -> Result<()> {
        let dest = self.check_seq(dest)?;
        self.memory_state_read(Some(dest), swa_only, src)
    }

    /// The memory's part of a state: the attention cache's, then the recurrent states' (as
    /// llama.cpp's hybrid memory writes them), then an indexer's cache in a hybrid model;
    /// nothing without memory.
    pub fn memory_state_write(&self, seq: Option<usize>, swa_only: bool, out: &mut dyn Sink) -> Result<()> {
        let mut rs_written = false;
        // A hybrid model's partial state is its recurrent part alone.
        if self.uses_kv() && !(swa_only && self.rs.is_some()) {
            let rs = self.rs.as_ref();
            let mut recurrent = |out: &mut dyn Sink| -> Result<()> {
                if let Some(rs) = rs {
                    rs.state_write(seq, out)?;
                    rs_written = true;
                }
                Ok(())
            };
            self.kv
                .state_write(&self.state_layout(), seq, swa_only, out, Some(&mut recurrent))?;
        }
        if let Some(rs) = self.rs.as_ref().filter(|_| !rs_written) {
            rs.state_write(seq, out)?;
        }
        Ok(())
    }

    pub fn memory_state_read(&mut self, seq: Option<usize>, swa_only: bool, src: &mut dyn Source) -> Result<()> {
        let attn = self.uses_kv() && !(swa_only && self.rs.is_some());
        let mut staged = None;
        if attn {
            let layout = self.state_layout();
            let rs = self.rs.as_ref();
            let mut recurrent = |src: &mut dyn Source| -> Result<()> {
                if let Some(rs) = rs {
                    staged = Some(rs.read_staged(seq, src)?);
                }
                Ok(())
            };
            self.kv.state_read(&layout, seq, swa_only, src, Some(&mut recurrent))?;
            self.kv.kpool_restored(seq);
        }
        if let Some(rs) = &mut self.rs {
            let read = match staged {
                Some(staged) => rs.apply_staged(seq, staged),
                None => rs.state_read(seq, src),
            };
            if let Err(e) = read {
                // The attention part was restored already: take it back out, as llama.cpp does.
                if attn {
                    self.kv.state_clear(seq)?;
                }
                return Err(e);
            }
        }
        Ok(())
    }
}
