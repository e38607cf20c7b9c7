//! Recurrent memory (llama.cpp's `llama_memory_recurrent`): instead of every past token's keys
//! and values, each sequence has one state per recurrent layer, a fixed-size summary of
//! everything it has read: a convolution window (`r`, the last few inputs) and a scan state (`s`).
//! One cell per sequence (`n_seq_max` of them); the tensors hold a row per cell. A state cannot be
//! cut back to an earlier position, so only whole sequences can be removed.

mod cells;
mod state;

pub use cells::{RsCells, SeqGroup, Window};
pub use state::Staged;

use crate::error::{Error, Result};
use crate::ggml::{BufferType, BufferTypeId, Placed, PlacedBuffers, TensorRef};
use crate::model::hparams::HParams;

pub struct Recurrent {
    pub cells: RsCells,
    /// Per layer (r, s): [n_embd_r, cells] and [n_embd_s, cells], F32; None for a layer that is
    /// not recurrent.
    layers: Vec<Option<(TensorRef, TensorRef)>>,
    /// Per layer, the history of the per-layer-embedding convolution ([conv_state, cells]) in the layer
    /// that has one: llama.cpp keeps it as a second row beside the layer's `r`.
    ple: Vec<Option<TensorRef>>,
    n_seq_max: usize,
    storage: PlacedBuffers,
}

impl Recurrent {
    /// States for `n_seq_max` sequences in the recurrent layers of a model, with `n_rs_seq`
    /// earlier states of each kept for rolling back: the tensors hold `1 + n_rs_seq` planes of a
    /// row per cell (plane k: the state k tokens before the last).
    /// Layer `il`'s states go in `buft_of(il)`.
    pub fn new(
        hp: &HParams,
        n_seq_max: usize,
        n_rs_seq: usize,
        buft_of: &dyn Fn(usize) -> BufferType,
    ) -> Result<Recurrent> {
        let size = n_seq_max.max(1);
        let rows = (size * (1 + n_rs_seq)) as i64;
        let n_layer = hp.n_layer as usize;
        let (n_embd_r, n_embd_s) = (hp.n_embd_r() as i64, hp.n_embd_s() as i64);
        let mut arena = Placed::new(3 * n_layer);
        let f32t = ggml_sys::ggml_type_GGML_TYPE_F32;
        let mut layers = Vec::with_capacity(n_layer);
        let mut ple = Vec::with_capacity(n_layer);
        for il in 0..n_layer {
            let keeps_ple = hp.ple.as_ref().is_some_and(|p| p.layer == il);
            if !hp.is_recurrent(il) {
                layers.push(None);
                ple.push(None);
                continue;
            }
            let r = arena.new_tensor(buft_of(il), f32t, &[n_embd_r, rows], &format!("cache_r_l{il}"));
            let s = arena.new_tensor(buft_of(il), f32t, &[n_embd_s, rows], &format!("cache_s_l{il}"));
            layers.push(Some((
                r.map_err(|e| Error::invalid(e.to_string()))?,
                s.map_err(|e| Error::invalid(e.to_string()))?,
            )));
            ple.push(match hp.ple.as_ref().filter(|_| keeps_ple) {
                Some(p) => {
                    let width = i64::from(p.conv_state(hp.n_embd, hp.hc_count));
                    let t = arena.new_tensor(buft_of(il), f32t, &[width, rows], &format!("cache_ple_r_l{il}"));
                    Some(t.map_err(|e| Error::invalid(e.to_string()))?)
                }
                None => None,
            });
        }
        // Fresh states are zero (allocate clears).
        let buffer = arena
            .allocate()
            .map_err(|e| Error::Ggml(format!("recurrent state: {e}")))?;
        crate::log_info!(
            "recurrent memory: {size} cells, {n_rs_seq} rollback snapshots, {n_layer} layers, {:.2} MiB",
            buffer.size() as f64 / (1024.0 * 1024.0)
        );
        Ok(Recurrent {
            cells: RsCells::new(size, n_rs_seq),
            layers,
            ple,
            n_seq_max,
            storage: buffer,
        })
    }

    /// Layer `il`'s (convolution, scan) state tensors.
    pub fn layer(&self, il: usize) -> Result<(TensorRef, TensorRef)> {
        self.layers
            .get(il)
            .copied()
            .flatten()
            .ok_or_else(|| Error::Internal(format!("layer {il} has no recurrent state")))
    }

    /// Layer `il`'s PLE convolution history, where it has one.
    pub fn ple(&self, il: usize) -> Option<TensorRef> {
        self.ple.get(il).copied().flatten()
    }

    pub fn size(&self) -> usize {
        self.cells.size()
    }

    /// Rollback snapshots kept per cell.
    pub fn n_rs_seq(&self) -> usize {
        self.cells.n_rs_seq()
    }

    pub fn clear(&mut self, data: bool) {
        self.cells.clear();
        if data {
            self.storage.clear(0);
        }
    }

    pub fn bytes(&self) -> usize {
        self.storage.size()
    }

    pub fn memory_breakdown(&self) -> Vec<(BufferTypeId, usize)> {
        self.storage.memory_breakdown()
    }
}
