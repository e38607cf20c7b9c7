//! Granite: the Llama decoder with a scaled embedding, scaled block outputs, its own attention
//! scale and divided logits; `rope.scaling.finetuned = false` turns rotary positions off.

use super::llama;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, TensorSpec};

pub struct Granite;

impl ArchSpec for Granite {
    fn name(&self) -> &'static str {
        "granite"
    }

    fn rope_type(&self) -> i32 {
        0
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.logit_scale = meta.f32(&hp.key("logit_scale"))?;
        hp.residual_scale = meta.f32_opt(&hp.key("residual_scale"))?.unwrap_or(0.0);
        hp.embedding_scale = meta.f32_opt(&hp.key("embedding_scale"))?.unwrap_or(0.0);
        hp.attn_scale = meta.f32_opt(&hp.key("attention.scale"))?.unwrap_or(0.0);
        hp.rope = meta.bool_opt(&hp.key("rope.scaling.finetuned"))?.unwrap_or(true);
        super::check_equal_head_sizes(hp)?;
        // Size labels as llama.cpp derives them, for llama_model_desc.
        hp.size_label = match (hp.n_layer, hp.n_embd) {
            (32, _) => "3B",
            (40, 2048) => "2B",
            (40, 2560) => "3B",
            (40, 4096) => "8B",
            (64, _) => "30B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        llama::tensors(hp)
    }
}

impl Decoder for Granite {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        llama::decoder(b, llama::Variant::default())
    }
}
