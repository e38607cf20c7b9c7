//! Jina BERT v3 (jina-embeddings-v3's XLM-RoBERTa): BERT's encoder with NeoX rotation instead
//! of a position table, and no classifier head.

use super::bert;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Memory, TensorSpec};

pub struct JinaBertV3;

const JINA_V3: bert::Variant = bert::Variant {
    rope: true,
    gated: false,
};

impl ArchSpec for JinaBertV3 {
    fn name(&self) -> &'static str {
        "jina-bert-v3"
    }

    fn about(&self) -> &'static str {
        "An encoder: BERT's layers with rotary positions: no cache, `llama_encode`, which `llama_decode` \
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
        hp.size_label = if hp.n_layer == 24 { "558M" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        bert::tensors(hp, JINA_V3)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        bert::bert(hp, JINA_V3)
    }
}

impl Decoder for JinaBertV3 {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        bert::encoder(b, JINA_V3)
    }
}
