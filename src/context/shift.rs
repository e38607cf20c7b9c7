//! Applying position changes to the cache: keys were rotated for their old positions, so after
//! `seq_add`/`seq_div` they are rotated by the difference before the next decode reads them. The
//! pass goes through the context's one scheduler like any other graph.

use super::Context;
use crate::error::{Error, Result};
use crate::ggml::{tensor_set, ComputeStatus};
use crate::graph::build_shift;

impl Context<'_> {
    pub(super) fn apply_pending_shift(&mut self) -> Result<()> {
        // The full layers' cells, then the sliding layers', each shifted on its own.
        for sliding in [false, true] {
            self.apply_shift(sliding)?;
        }
        Ok(())
    }

    fn apply_shift(&mut self, sliding: bool) -> Result<()> {
        let Some(deltas) = self.kv.pending_shift(sliding) else {
            return Ok(());
        };
        // Keys that were never rotated need no turning back: the new positions are all there is.
        if !self.model.hparams.as_ref().is_some_and(|hp| hp.rope) {
            self.kv.shift_applied(sliding);
            return Ok(());
        }
        let bytes: Vec<u8> = deltas.iter().flat_map(|d| d.to_le_bytes()).collect();
        let shift = build_shift(self.model, &self.kv, self.params.graph, sliding)?;
        // The scheduler now plans the shift graph; the cached decode graph must be re-allocated.
        self.graph = None;
        self.sched.alloc(&shift.graph)?;
        tensor_set(shift.deltas, &bytes)?;
        let keys = if sliding { 3 } else { 0 };
        for (rot, bytes) in [(shift.k_rot, keys), (shift.idx_rot, 2)] {
            if let Some(rot) = rot {
                tensor_set(rot, &self.rotation_bytes[bytes])?;
            }
        }
        self.backend.set_n_threads(self.params.n_threads_batch);
        match self.sched.compute(&shift.graph) {
            ComputeStatus::Success => {}
            ComputeStatus::Aborted => return Err(Error::Cancelled("K-shift aborted by the abort callback".into())),
            ComputeStatus::Failed(code) => return Err(Error::Ggml(format!("K-shift failed with status {code}"))),
        }
        self.kv.shift_applied(sliding);
        self.counters.k_shifts += 1;
        Ok(())
    }
}
