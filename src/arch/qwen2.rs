//! Qwen2: the Llama decoder with attention biases, an output bias and NeoX rotation.

use super::llama;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, TensorSpec};

pub struct Qwen2;

impl ArchSpec for Qwen2 {
    fn name(&self) -> &'static str {
        "qwen2"
    }

    fn rope_type(&self) -> i32 {
        2
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        // Size labels as llama.cpp derives them from the layer count, for llama_model_desc.
        hp.size_label = match hp.n_layer {
            24 if hp.n_embd == 1024 => "0.5B",
            24 => "1B",
            28 if hp.n_embd == 1536 => "1.5B",
            28 => "7B",
            32 => "7B",
            36 => "3B",
            40 if hp.n_head[0] == 20 => "4B",
            40 => "13B",
            48 => "14B",
            64 => "32B",
            80 => "70B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = llama::tensors(hp);
        specs.push(TensorSpec::new("output.bias", &[hp.n_vocab], false));
        specs
    }
}

impl Decoder for Qwen2 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        llama::decoder(b, llama::Variant::default())
    }
}
