//! An encoder-decoder's encoder outputs (llama.cpp's `llama_cross`): `llama_encode` keeps them,
//! each with its sequences, and the decoder's graphs attend to them until the next encode. They
//! are not part of the memory: clearing it or restoring a state leaves them.

use super::Context;
use crate::error::{Error, Result};
use crate::ggml::tensor_get_f32;
use crate::graph::Cross;
use crate::kv::TokenPlace;

impl Context<'_> {
    /// Whether the model encodes for a decoder, rather than only encoding or decoding.
    fn encodes_for_decoder(&self) -> bool {
        self.arch
            .is_some_and(|a| a.facts().has_encoder && a.facts().has_decoder)
    }

    /// After an encode of the tokens at `places`: keep the encoder's outputs (every token's
    /// final hidden state) for the decoder, in place of the last ones.
    pub(super) fn keep_encoder_output(&mut self, places: &[TokenPlace]) -> Result<()> {
        if !self.encodes_for_decoder() {
            return Ok(());
        }
        let hidden = self
            .graph
            .as_ref()
            .and_then(|(_, built)| built.hidden)
            .ok_or_else(|| Error::Internal("the encoder's graph has no hidden states".into()))?;
        let mut rows = vec![0f32; hidden.ne()[0] as usize * places.len()];
        tensor_get_f32(hidden, &mut rows)?;
        self.cross = Some(Cross {
            rows,
            seqs: places.iter().map(|p| p.seqs).collect(),
        });
        Ok(())
    }

    /// The encoder outputs a decoder graph attends to (0 for a model without them); refused
    /// before the first encode, whose outputs the decoder needs (llama.cpp reads an unset
    /// input there).
    pub(super) fn n_enc(&self) -> Result<usize> {
        if !self.encodes_for_decoder() {
            return Ok(0);
        }
        match &self.cross {
            Some(c) => Ok(c.seqs.len()),
            None => Err(Error::invalid(
                "this encoder-decoder model decodes after llama_encode: encode the input first",
            )),
        }
    }

    /// The same for the worst-case graph reserved before any encode: as many as the training
    /// context, as llama.cpp reserves.
    pub(super) fn n_enc_reserved(&self) -> usize {
        match (self.encodes_for_decoder(), &self.cross) {
            (false, _) => 0,
            (true, Some(c)) => c.seqs.len(),
            (true, None) => self.model.hparams.as_ref().map_or(0, |h| h.n_ctx_train as usize),
        }
    }
}
