//! The graph's inputs the layers read (token rows, positions, cache rows, masks, Hadamard
//! matrices, temperature scales), each made by the first layer that needs it: an input no node
//! reads would be left without memory. A mechanism's own inputs are a `GraphInput` it makes and
//! fills itself, as llama.cpp's `llm_graph_input_i`.

use super::{mask_type, Builder, GraphParams, Shape};
use crate::error::{Error, Result};
use crate::ggml::{tensor_set, TensorRef};
use crate::kv::{KvCache, TokenPlace, UbatchMemory};
use crate::model::hparams::HParams;
use std::any::Any;

/// The inputs of one mechanism of a built graph (the tensors it made while the graph was built),
/// which fill themselves before every compute from the ubatch they run.
pub trait GraphInput: Any + Send {
    fn set(&self, ub: &UbatchView) -> Result<()>;
}

/// What a ubatch gives its graph's inputs.
pub struct UbatchView<'a> {
    /// Where its tokens are, in order.
    pub places: &'a [TokenPlace],
    /// Its sequences in id order (a sequence's index here is its `seq_index`).
    pub seqs: &'a [usize],
    pub shape: &'a Shape,
    pub hp: &'a HParams,
    pub params: &'a GraphParams,
    /// The cache, its tokens placed.
    pub kv: &'a KvCache,
    /// The cache's state for this ubatch beyond its cells.
    pub memory: UbatchMemory<'a>,
    /// The encoder's outputs, for an encoder-decoder's decoder (after a `llama_encode`).
    pub cross: Option<&'a super::Cross>,
}

/// The place of sequence `s` among a ubatch's sorted sequences `seqs` (llama.cpp's `seq_idx`).
pub fn seq_index(seqs: &[usize], s: usize) -> usize {
    seqs.iter().position(|&x| x == s).unwrap_or(0)
}

/// Write `bytes` into the input `t`.
pub fn set_bytes(t: TensorRef, bytes: &[u8]) -> Result<()> {
    tensor_set(t, bytes).map_err(Error::from)
}

pub fn set_i32(t: TensorRef, v: &[i32]) -> Result<()> {
    set_bytes(t, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

pub fn set_i64(t: TensorRef, v: impl IntoIterator<Item = i64>) -> Result<()> {
    set_bytes(t, &v.into_iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

pub fn set_f32(t: TensorRef, v: &[f32]) -> Result<()> {
    set_bytes(t, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

/// f16 bit patterns of the two mask values.
const F16_ZERO: u16 = 0x0000;
const F16_NEG_INF: u16 = 0xfc00;

/// Write the mask `mask` into `t` in its type: F16 (for flash attention) or F32.
pub fn set_mask(t: TensorRef, mask: &[f32]) -> Result<()> {
    if t.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_F16 {
        return set_f32(t, mask);
    }
    let bytes: Vec<u8> = mask
        .iter()
        .flat_map(|&m| {
            match m {
                0.0 => F16_ZERO,
                f32::NEG_INFINITY => F16_NEG_INF,
                // ALiBi's distances.
                _ => crate::ggml::f16_bits(m),
            }
            .to_le_bytes()
        })
        .collect();
    set_bytes(t, &bytes)
}

/// What a Hadamard matrix input rotates (`GraphParams::k_rot`, `v_rot`, `idx_rot`).
#[derive(Clone, Copy)]
pub enum Rotated {
    Keys,
    SlidingKeys,
    Values,
    IndexerKeys,
}

impl Builder<'_> {
    /// Token embeddings of the input tokens, [n_embd, n_tokens].
    pub fn embed_tokens(&mut self) -> Result<TensorRef> {
        self.embed_rows("token_embd.weight")
    }

    /// The same, renamed `name` as the architecture's llama.cpp graph renames it (what a cb_eval
    /// callback sees).
    pub fn embed_tokens_as(&mut self, name: &str) -> Result<TensorRef> {
        let x = self.embed_tokens()?;
        Ok(self.name(x, name, None))
    }

    /// The input tokens' rows of the table `name` (a model without token embeddings reads its
    /// output head), or the caller's embedding rows, [n_embd, n_tokens]; times the model's
    /// embedding scale if it has one (Granite's, Grok's), as llama.cpp's `build_inp_embd`.
    pub fn embed_rows(&mut self, name: &str) -> Result<TensorRef> {
        let mut x = match self.inputs.embd {
            Some(rows) => rows,
            None => {
                let table = self.weight(name)?;
                let x = self.g.get_rows(table, self.token_ids()?)?;
                self.add_lora_rows(table, x)?
            }
        };
        if self.hp.n_deepstack > 0 {
            // Token rows are padded with zeros to the input's width, as llama.cpp pads them, so
            // that the deepstack layers add the same (zeros) to text as to the caller's rows.
            let (n_embd, n_inp) = (i64::from(self.hp.n_embd), i64::from(self.hp.n_embd_inp()));
            if self.inputs.embd.is_none() {
                x = self.g.pad(x, [n_inp - n_embd, 0, 0, 0])?;
            }
            self.deepstack = Some(x);
            x = self.g.view(x, &[n_embd, x.ne()[1]], &[x.nb()[1]], 0)?;
        }
        if self.hp.embedding_scale != 0.0 {
            x = self.scale(x, self.hp.embedding_scale)?;
        }
        Ok(self.name(x, "embd", None))
    }

    /// Whether the graph takes embedding rows rather than token ids.
    pub fn takes_embeddings(&self) -> bool {
        self.inputs.embd.is_some()
    }

    /// The token ids input; an architecture that reads the ids beyond their embeddings cannot
    /// take embeddings as input.
    pub fn token_ids(&self) -> Result<TensorRef> {
        self.inputs.tokens.ok_or_else(|| {
            Error::invalid(format!(
                "'{}' reads the token ids themselves (not only their embeddings): give it token ids, not embeddings",
                self.hp.arch_name
            ))
        })
    }

    /// The positions input (made on first use: a graph that never reads it would leave it
    /// without memory).
    pub fn positions(&mut self) -> Result<TensorRef> {
        if let Some(pos) = self.inputs.pos {
            return Ok(pos);
        }
        let n = self.shape.n_tokens as i64 * i64::from(self.hp.n_pos_per_embd());
        let pos = self.g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[n], "inp_pos")?;
        Ok(*self.inputs.pos.insert(pos))
    }

    /// The cache rows of the ubatch's tokens, I64 [n_tokens] (made on first use).
    pub fn kv_rows(&mut self) -> Result<TensorRef> {
        self.rows_input(false, false)
    }

    /// The rows the keys (or with `values`, the values) are stored by: the full layers' cells, or
    /// with `sliding` the sliding-window layers' (made on first use; named as llama.cpp names
    /// both).
    pub fn rows_input(&mut self, values: bool, sliding: bool) -> Result<TensorRef> {
        let slot = match (values, sliding) {
            (false, false) => &mut self.inputs.kv_rows,
            (true, false) => &mut self.inputs.v_rows,
            (false, true) => &mut self.inputs.kv_rows_swa,
            (true, true) => &mut self.inputs.v_rows_swa,
        };
        if let Some(r) = *slot {
            return Ok(r);
        }
        let name = if values { "attn_inp_v_idxs" } else { "attn_inp_k_idxs" };
        let per_token = if values { self.kv.value_indices_per_token() } else { 1 };
        let nt = (self.shape.n_tokens * self.shape.kv_copies.max(1) * per_token) as i64;
        let r = self.g.input(ggml_sys::ggml_type_GGML_TYPE_I64, &[nt], name)?;
        Ok(*slot.insert(r))
    }

    /// The attention mask of the ubatch's tokens among themselves ([n_tokens, n_tokens]), for
    /// attention without the cache, whether or not the context keeps one.
    pub fn ubatch_mask(&mut self, sliding: bool) -> Result<TensorRef> {
        if (self.inputs.mask.is_some() || self.inputs.mask_swa.is_some()) && !self.inputs.mask_in_ubatch {
            return Err(Error::Internal(
                "a graph attends both over the cache and within the ubatch".into(),
            ));
        }
        self.inputs.mask_in_ubatch = true;
        self.mask(sliding)
    }

    /// The attention mask input, or (`sliding`) the sliding-window one, [n_kv, n_tokens] (made
    /// on first use).
    pub fn mask(&mut self, sliding: bool) -> Result<TensorRef> {
        let slot = if sliding {
            &mut self.inputs.mask_swa
        } else {
            &mut self.inputs.mask
        };
        if let Some(m) = *slot {
            return Ok(m);
        }
        let name = if sliding {
            "attn_inp_kq_mask_swa"
        } else {
            "attn_inp_kq_mask"
        };
        let n_kv = match (self.inputs.mask_in_ubatch, sliding) {
            (true, _) => self.shape.n_tokens,
            (false, true) => self.shape.n_kv_swa,
            (false, false) => self.shape.n_kv,
        };
        let ne = [n_kv as i64, self.shape.n_tokens as i64];
        let m = self.g.input(mask_type(self.params.flash_attn), &ne, name)?;
        Ok(*slot.insert(m))
    }

    /// The Hadamard matrix of the cache's keys, values or indexer keys, an input made by the first
    /// layer that needs it; None when they are not rotated.
    pub fn rotation(&mut self, of: Rotated) -> Result<Option<TensorRef>> {
        let (n, slot, name) = match of {
            Rotated::Keys => (self.params.k_rot, &mut self.inputs.k_rot, "attn_inp_k_rot"),
            Rotated::SlidingKeys => (self.params.k_rot_swa, &mut self.inputs.k_rot_swa, "attn_inp_k_rot"),
            Rotated::Values => (self.params.v_rot, &mut self.inputs.v_rot, "attn_inp_v_rot"),
            Rotated::IndexerKeys => (self.params.idx_rot, &mut self.inputs.idx_rot, "attn_inp_k_rot_lid"),
        };
        let n = i64::from(n);
        if n == 0 {
            return Ok(None);
        }
        if let Some(t) = *slot {
            return Ok(Some(t));
        }
        let t = self.g.input(ggml_sys::ggml_type_GGML_TYPE_F32, &[n, n], name)?;
        Ok(Some(*slot.insert(t)))
    }

    /// The queries' temperature scales, one per token ([1, 1, n_tokens]; `HParams::attn_temp`).
    pub fn attn_temperature(&mut self) -> Result<TensorRef> {
        if let Some(t) = self.inputs.attn_temp {
            return Ok(t);
        }
        let nt = self.shape.n_tokens as i64;
        let t = self
            .g
            .input(ggml_sys::ggml_type_GGML_TYPE_F32, &[1, 1, nt], "inp_attn_scale")?;
        Ok(*self.inputs.attn_temp.insert(t))
    }
}
