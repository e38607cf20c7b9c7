//! Qwen3-MoE: Qwen3 whose FFNs are experts (softmax routing, the picked weights normalised), as
//! wide as `expert_feed_forward_length`.

use super::qwen3;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, TensorSpec};

pub struct Qwen3Moe;

impl ArchSpec for Qwen3Moe {
    fn name(&self) -> &'static str {
        "qwen3moe"
    }

    fn rope_type(&self) -> i32 {
        2
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_expert == 0 {
            return Err(Error::model("qwen3moe needs experts (key 'qwen3moe.expert_count')"));
        }
        if hp.n_ff_exp == 0 {
            hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used;
        }
        // Size labels as llama.cpp derives them, for llama_model_desc.
        hp.size_label = match hp.n_layer {
            48 => "30B.A3B",
            94 => "235B.A22B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        qwen3::tensors(hp, true)
    }
}

impl Decoder for Qwen3Moe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        qwen3::build(b)
    }
}
