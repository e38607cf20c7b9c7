//! Nomic BERT (nomic-embed-text): BERT's encoder with rotary positions instead of a position
//! table and a SwiGLU FFN (whose biases llama.cpp loads but does not apply).

use super::bert;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Memory, TensorSpec};

pub struct NomicBert;

const NOMIC: bert::Variant = bert::Variant {
    rope: true,
    gated: true,
};

impl ArchSpec for NomicBert {
    fn name(&self) -> &'static str {
        "nomic-bert"
    }

    fn about(&self) -> &'static str {
        "An encoder with rotary positions and SwiGLU: no cache, `llama_encode`, which `llama_decode` \
            calls for it as llama.cpp does; one ubatch per batch."
    }

    fn rope_type(&self) -> i32 {
        2
    }

    fn read_keys(&self) -> &'static [&'static str] {
        &["attention.layer_norm_epsilon"]
    }

    fn memory(&self) -> Memory {
        Memory::None
    }

    fn has_output_head(&self) -> bool {
        false
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        bert::load_hparams(meta, hp)?;
        hp.size_label = if hp.n_layer == 12 { "137M" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        bert::tensors(hp, NOMIC)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        bert::bert(hp, NOMIC)
    }
}

impl Decoder for NomicBert {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        bert::encoder(b, NOMIC)
    }
}
