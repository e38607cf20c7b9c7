//! Rotary position embedding: each layer's frequencies (the context's, or a sliding-window layer's
//! own) and the model's frequency factors.

use super::{is_sliding, Builder, GraphParams};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::model::hparams::HParams;
use crate::model::Model;

/// The rotary frequency factors of the model, if it has any: `rope_freqs`, or
/// LongRoPE's long or short factors as the context's length asks.
pub fn rope_factors(model: &Model, params: &GraphParams) -> Option<TensorRef> {
    let w = model.weights()?;
    w.get("rope_freqs.weight").or_else(|| {
        w.get(if params.rope.long_factors {
            "rope_factors_long.weight"
        } else {
            "rope_factors_short.weight"
        })
    })
}

/// The rotary base frequency and frequency scale of layer `il`: sliding-window layers keep the
/// model's own (llama.cpp's `rope_freq_base_train_swa` and `rope_freq_scale_train_swa`), the
/// others take the context's.
pub(super) fn rope_freqs(hp: &HParams, params: &GraphParams, il: usize) -> (f32, f32) {
    if is_sliding(hp, il) {
        (hp.rope_freq_base_swa, hp.rope_freq_scale_swa)
    } else {
        (params.rope.freq_base, params.rope.freq_scale)
    }
}

impl Builder<'_> {
    /// Rotate `x` ([head_dim, n_head, n_tokens]) of layer `il` by the input positions.
    pub fn rope(&mut self, x: TensorRef, il: usize, freq_factors: Option<TensorRef>) -> Result<TensorRef> {
        let (base, scale) = rope_freqs(self.hp, &self.params, il);
        let (ext_factor, attn_factor) = (self.params.rope.ext_factor, self.params.rope.attn_factor);
        self.rope_ext(x, base, scale, ext_factor, attn_factor, freq_factors)
    }

    /// `rope` over the first `n_rot` dimensions of each head rather than the model's `n_rot` (a
    /// layer that rotates less or more of its heads than the others).
    pub fn rope_dims(
        &mut self,
        x: TensorRef,
        il: usize,
        n_rot: u32,
        freq_factors: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let (base, scale) = rope_freqs(self.hp, &self.params, il);
        let (ext_factor, attn_factor) = (self.params.rope.ext_factor, self.params.rope.attn_factor);
        let pos = self.positions()?;
        self.rope_with(x, pos, n_rot, base, scale, ext_factor, attn_factor, freq_factors)
    }

    /// Rotate `x` of layer `il` by the positions `pos` (as many per row of `x` as the model's
    /// rotation takes) rather than the tokens'.
    pub fn rope_at(&mut self, x: TensorRef, il: usize, pos: TensorRef) -> Result<TensorRef> {
        let (base, scale) = rope_freqs(self.hp, &self.params, il);
        let (ext_factor, attn_factor) = (self.params.rope.ext_factor, self.params.rope.attn_factor);
        self.rope_with(x, pos, self.hp.n_rot, base, scale, ext_factor, attn_factor, None)
    }

    /// Rotate `x` by the input positions with the given frequencies and YaRN factors (for the
    /// architectures whose layers rotate differently from the context's settings).
    pub fn rope_ext(
        &mut self,
        x: TensorRef,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        freq_factors: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let pos = self.positions()?;
        self.rope_with(
            x,
            pos,
            self.hp.n_rot,
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            freq_factors,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn rope_with(
        &mut self,
        x: TensorRef,
        pos: TensorRef,
        n_rot: u32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        freq_factors: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let p = self.params.rope;
        let mode = self.hp.rope_type;
        let sections = (self.hp.n_pos_per_embd() > 1).then_some(self.hp.rope_sections);
        self.g
            .rope(
                x,
                pos,
                freq_factors,
                n_rot as i32,
                mode,
                sections,
                p.n_ctx_orig as i32,
                freq_base,
                freq_scale,
                ext_factor,
                attn_factor,
                p.beta_fast,
                p.beta_slow,
            )
            .map_err(Error::from)
    }
}
