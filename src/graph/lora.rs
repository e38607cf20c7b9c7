//! LoRA adapters in the graph: a weight's product `W x` gains `s * B (A x)` per active adapter
//! that adapts `W`, in the order the adapters were set (llama.cpp's `build_lora_mm`). Each factor
//! `s` is read from an input tensor rather than baked into the graph, so changing an adapter's
//! scale reuses the built graph; `x * s` through a broadcast multiply rounds as ggml's scale op
//! does (one f32 product per element), so the results are llama.cpp's.

use super::Builder;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::model::lora::{LoraAdapter, LoraWeight};
use std::sync::Arc;

/// The scale factors' input of a graph: one f32 per (adapter, adapted weight) the graph uses.
pub struct LoraScales {
    pub input: TensorRef,
    /// Per slot of `input`: the adapter (its index in the set the graph was built for) and the
    /// pair, whose rank the factor depends on.
    pub slots: Vec<(usize, LoraWeight)>,
}

impl LoraScales {
    /// The input's values for the adapters' current `scales` (in the order of the graph's set).
    pub fn values(&self, adapters: &[Arc<LoraAdapter>], scales: &[f32]) -> Vec<f32> {
        let mut v = vec![0f32; self.input.ne()[0] as usize];
        for (slot, (ai, w)) in v.iter_mut().zip(&self.slots) {
            *slot = w.scale(adapters[*ai].alpha, scales[*ai]);
        }
        v
    }
}

/// The stem of a weight's name and its layer (`attn_q_a` and 12 for `blk.12.attn_q_a.weight`,
/// `output` and none for `output.weight`), as `Decoder::without_adapters` takes them.
fn stem_and_layer(name: &str) -> (&str, Option<usize>) {
    let stem = name.strip_suffix(".weight").unwrap_or(name);
    match stem.strip_prefix("blk.").and_then(|rest| rest.split_once('.')) {
        Some((il, s)) => (s, il.parse::<usize>().ok()),
        None => (stem, None),
    }
}

/// Graph nodes the adapters can add (a product of two matrices, a view, a multiply and an add
/// per adapted weight, and room for the weight being used twice).
pub fn extra_nodes(adapters: &[Arc<LoraAdapter>]) -> usize {
    adapters.iter().map(|a| 10 * a.n_weights()).sum()
}

impl Builder<'_> {
    /// `w x` with the active adapters' parts for `w`.
    pub fn weight_mm(&mut self, w: TensorRef, x: TensorRef) -> Result<TensorRef> {
        let y = self.g.mul_mat(w, x)?;
        self.add_lora(w, x, y, None)
    }

    /// Add to `y`, the product of `w` and `x` (of the experts `ids` picks, for a stack of
    /// experts), each active adapter's `s * B (A x)` for `w`.
    pub fn add_lora(
        &mut self,
        w: TensorRef,
        x: TensorRef,
        mut y: TensorRef,
        ids: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let name = w.name();
        // The token embeddings' pairs are laid out for row lookups (`add_lora_rows`); where the
        // embeddings also serve as the output head they are not applied to its product (whose
        // shapes they do not fit: llama.cpp's graph fails there).
        if self.adapters.loras.is_empty() || name.ends_with("token_embd.weight") || self.multiplied_plainly(&name) {
            return Ok(y);
        }
        for ai in 0..self.adapters.loras.len() {
            let Some(lw) = self.adapters.loras[ai].weight(&name).copied() else {
                continue;
            };
            let d = match ids {
                None => {
                    let ax = self.g.mul_mat(lw.a, x)?;
                    self.g.mul_mat(lw.b, ax)?
                }
                Some(ids) => {
                    let ax = self.g.mul_mat_id(lw.a, x, ids)?;
                    self.g.mul_mat_id(lw.b, ax, ids)?
                }
            };
            let s = self.lora_scale(ai, &name, lw)?;
            let d = self.g.mul(d, s)?;
            y = self.g.add(y, d)?;
        }
        Ok(y)
    }

    /// Whether the architecture's graph multiplies weight `name` without its adapters.
    fn multiplied_plainly(&self, name: &str) -> bool {
        let (stem, layer) = stem_and_layer(name);
        self.decoder.without_adapters(self.hp, stem, layer)
    }

    /// Add to `x`, the rows of the table `table` for the input tokens, each active adapter's
    /// `s * B A[tokens]` for it (the token embeddings' pairs are laid out for a row lookup).
    pub(super) fn add_lora_rows(&mut self, table: TensorRef, mut x: TensorRef) -> Result<TensorRef> {
        if self.adapters.loras.is_empty() {
            return Ok(x);
        }
        let name = table.name();
        for ai in 0..self.adapters.loras.len() {
            let Some(lw) = self.adapters.loras[ai].weight(&name).copied() else {
                continue;
            };
            let rows = self.g.get_rows(lw.a, self.token_ids()?)?;
            let d = self.g.mul_mat(lw.b, rows)?;
            let s = self.lora_scale(ai, &name, lw)?;
            let d = self.g.mul(d, s)?;
            x = self.g.add(x, d)?;
        }
        Ok(x)
    }

    /// The one-element view of the scales input holding adapter `ai`'s factor for `name` (the
    /// input is made on first use, with a slot for every weight of every adapter).
    fn lora_scale(&mut self, ai: usize, name: &str, lw: LoraWeight) -> Result<TensorRef> {
        let slot = match self.lora_slots.get(&(ai, name.to_string())) {
            Some(&s) => s,
            None => {
                let s = self.lora_slots.len();
                self.lora_slots.insert((ai, name.to_string()), s);
                s
            }
        };
        let scales = match &mut self.inputs.lora {
            Some(l) => l,
            None => {
                let n: usize = self.adapters.loras.iter().map(|a| a.n_weights()).sum();
                let input = self
                    .g
                    .input(ggml_sys::ggml_type_GGML_TYPE_F32, &[n as i64], "inp_lora_scales")?;
                self.inputs.lora.insert(LoraScales {
                    input,
                    slots: Vec::new(),
                })
            }
        };
        if slot == scales.slots.len() {
            scales.slots.push((ai, lw));
        }
        let input = scales.input;
        self.g
            .view(input, &[1], &[], slot * std::mem::size_of::<f32>())
            .map_err(Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::stem_and_layer;

    #[test]
    fn weights_are_named_by_stem_and_layer() {
        assert_eq!(stem_and_layer("blk.12.attn_kv_b.weight"), ("attn_kv_b", Some(12)));
        assert_eq!(
            stem_and_layer("blk.3.indexer.attn_k.weight"),
            ("indexer.attn_k", Some(3))
        );
        assert_eq!(stem_and_layer("output.weight"), ("output", None));
    }
}
