//! A context's control vector (llama.h's `llama_set_adapter_cvec`): per layer a direction added to
//! the layer's output, for the layers of a range. As in llama.cpp, layer 0 never has one (the data
//! starts at layer 1), the tensors are made at the first set, in each layer's device memory, and
//! stay when the vector is cleared.

use crate::error::{Error, Result};
use crate::ggml::{tensor_set, Placed, PlacedBuffers, TensorRef};
use crate::model::Model;

#[derive(Default)]
pub struct ControlVector {
    /// Per layer its direction (none for layer 0); empty until first set.
    tensors: Vec<Option<TensorRef>>,
    _buffers: Option<PlacedBuffers>,
    /// The layers it applies to, inclusive; None while cleared.
    range: Option<(i32, i32)>,
}

impl ControlVector {
    /// Set the directions from `data` (layer `il`'s at `(il - 1) * n_embd`; layers past its end
    /// keep what they had) and the layer range, or clear it (`data` None). Returns whether the
    /// layers it applies to changed (the graph must be built anew).
    pub fn set(&mut self, model: &Model, data: Option<&[f32]>, n_embd: i32, range: (i32, i32)) -> Result<bool> {
        let before = self.active_layers(model);
        let Some(data) = data else {
            self.range = None;
            return Ok(before != self.active_layers(model));
        };
        let hp = model
            .hparams
            .as_ref()
            .ok_or_else(|| Error::invalid("the model was loaded vocab-only"))?;
        if n_embd != hp.n_embd as i32 {
            return Err(Error::invalid(format!(
                "control vector n_embd = {n_embd}, the model's is {}",
                hp.n_embd
            )));
        }
        if self.tensors.is_empty() {
            self.make(model)?;
        }
        let width = hp.n_embd as usize;
        for (il, t) in self.tensors.iter().enumerate() {
            let (Some(t), Some(row)) = (t, data.get((il.max(1) - 1) * width..il * width)) else {
                continue;
            };
            let bytes: Vec<u8> = row.iter().flat_map(|v| v.to_le_bytes()).collect();
            tensor_set(*t, &bytes)?;
        }
        self.range = Some(range);
        Ok(before != self.active_layers(model))
    }

    /// A zeroed F32 [n_embd] tensor per layer but the first, each in its layer's memory.
    fn make(&mut self, model: &Model) -> Result<()> {
        let hp = model
            .hparams
            .as_ref()
            .ok_or_else(|| Error::invalid("the model was loaded vocab-only"))?;
        let n_layer = hp.n_layer as usize;
        let mut placed = Placed::new(n_layer);
        let mut tensors = vec![None];
        for il in 1..n_layer {
            let buft = model.placement.layer_buffer_type(il)?;
            let t = placed.new_tensor(
                buft,
                ggml_sys::ggml_type_GGML_TYPE_F32,
                &[i64::from(hp.n_embd)],
                &format!("cvec_l{il}"),
            )?;
            tensors.push(Some(t));
        }
        self._buffers = Some(placed.allocate()?);
        self.tensors = tensors;
        Ok(())
    }

    /// Per layer the direction added to its output, if any.
    pub fn active_layers(&self, model: &Model) -> Vec<Option<TensorRef>> {
        let n_layer = model.hparams.as_ref().map_or(0, |h| h.n_layer as usize);
        (0..n_layer)
            .map(|il| {
                let (start, end) = self.range?;
                let on = (il as i64) >= i64::from(start) && (il as i64) <= i64::from(end);
                self.tensors.get(il).copied().flatten().filter(|_| on)
            })
            .collect()
    }
}
