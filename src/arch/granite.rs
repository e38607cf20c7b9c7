//! Granite: the Llama decoder with a scaled embedding, scaled block outputs, its own attention
//! scale and divided logits; `rope.scaling.finetuned = false` turns rotary positions off. Granite
//! MoE (`granitemoe`, or `granite` with experts): experts as wide as the FFN, without the weights'
//! scales, and optionally a shared expert beside them. MiniCPM: Granite's graph, always rotating,
//! with llama.cpp's default scales where the file has none.

use super::llama;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Granite(Facts);

/// What all three read: their scales and norms' epsilon.
const READS_SCALES: &[&str] = &[
    "logit_scale",
    "residual_scale",
    "embedding_scale",
    "attention.layer_norm_rms_epsilon",
];
/// What Granite's files read beside: a shared expert's width and the attention scale.
const READS_GRANITE: &[&str] = &["expert_shared_feed_forward_length", "attention.scale"];

pub const GRANITE: Granite = Granite(Facts {
    name: "granite",
    about: "Granite: embedding, residual, attention and logit scales; with experts too.",
    read_keys: &[READS_SCALES, READS_GRANITE, &["deepstack_mapping"]],
    saved_rules: &[ROTATES_BY_DEFAULT],
    ..Facts::BASE
});
pub const GRANITE_MOE: Granite = Granite(Facts {
    name: "granitemoe",
    about: "Granite MoE, with or without a shared expert.",
    read_keys: &[READS_SCALES, READS_GRANITE],
    ..Facts::BASE
});
/// MiniCPM: Granite's graph, with defaults for the scales older files leave out.
pub const MINICPM: Granite = Granite(Facts {
    name: "minicpm",
    about: "MiniCPM: Granite's graph, with default scales.",
    read_keys: &[READS_SCALES],
    // Its loader holds its defaults where the file has none.
    saved_rules: &[
        ("rope.scaling.finetuned", Rule::Held(|_| Value::Bool(true))),
        ("logit_scale", Rule::Held(|f| Value::F32(f.hp.logit_scale))),
        ("embedding_scale", Rule::Held(|f| Value::F32(f.hp.embedding_scale))),
        ("residual_scale", Rule::Held(|f| Value::F32(f.hp.residual_scale))),
    ],
    ..Facts::BASE
});

/// Rotary positions unless the file says otherwise (Granite's and Granite Hybrid's default).
pub(super) const ROTATES_BY_DEFAULT: (&str, Rule) = ("rope.scaling.finetuned", Rule::Bool(true));

impl ArchSpec for Granite {
    fn facts(&self) -> &Facts {
        &self.0
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        if self.0.name == "minicpm" {
            // llama.cpp's defaults for MiniCPM files without the keys.
            let logit = if hp.n_embd > 0 { 256.0 / hp.n_embd as f32 } else { 1.0 };
            hp.logit_scale = meta.f32_opt(&hp.key("logit_scale"))?.unwrap_or(logit);
            let residual = 1.4 / (hp.n_layer as f32).sqrt();
            hp.residual_scale = meta.f32_opt(&hp.key("residual_scale"))?.unwrap_or(residual);
            hp.embedding_scale = meta.f32_opt(&hp.key("embedding_scale"))?.unwrap_or(12.0);
        } else {
            hp.logit_scale = meta.f32(&hp.key("logit_scale"))?;
            hp.residual_scale = meta.f32_opt(&hp.key("residual_scale"))?.unwrap_or(0.0);
            hp.embedding_scale = meta.f32_opt(&hp.key("embedding_scale"))?.unwrap_or(0.0);
            hp.attn_scale = meta.f32_opt(&hp.key("attention.scale"))?.unwrap_or(0.0);
        }
        // Granite Mamba-free dense models may turn rotation off; Granite MoE always rotates.
        if self.0.name == "granite" {
            hp.rope = meta.bool_opt(&hp.key("rope.scaling.finetuned"))?.unwrap_or(true);
        }
        super::check_equal_head_sizes(hp)?;
        if hp.n_expert > 0 {
            hp.n_ff_exp = hp.n_ff[0];
            hp.n_ff_shexp = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0);
        }
        // Size labels as llama.cpp derives them, for llama_model_desc.
        hp.size_label = match (hp.n_layer, hp.n_embd) {
            (52, _) if self.0.name == "minicpm" => "1B",
            (40, _) if self.0.name == "minicpm" => "2B",
            _ if self.0.name == "minicpm" => "?B",
            (24, _) if self.0.name == "granitemoe" => "1B.A400M",
            (32, _) if self.0.name == "granitemoe" => "3B.A800M",
            _ if self.0.name == "granitemoe" => "?B",
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
        let mut specs = llama::tensors(hp);
        for il in (0..hp.n_layer as usize).filter(|_| hp.n_ff_shexp > 0) {
            super::shared_expert_tensors(hp, il, &mut specs);
        }
        specs
    }

    /// Granite's, Granite MoE's and MiniCPM's loaders are Llama's.
    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        llama::llama(hp)
    }
}

impl Decoder for Granite {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        llama::decoder(b, variant())
    }
}

/// Granite's experts: a softmax over all, the picked weights summing to one, no weight scales.
pub(super) fn variant() -> llama::Variant {
    llama::Variant {
        moe: Some(Moe {
            normalize: true,
            ..Moe::BASE
        }),
        ..llama::Variant::BASE
    }
}
