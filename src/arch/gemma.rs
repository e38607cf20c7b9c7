//! Gemma (the first generation): Gemma 2's decoder without its post-norms, sliding windows and
//! soft caps (`gemma3::decoder`): scaled embeddings, queries scaled by 1/√head, a GELU-gated FFN,
//! the output tied to the embeddings.

use super::created::{layered, ATTN, TIED_HEAD};
use super::gemma3;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Gemma;

impl ArchSpec for Gemma {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "gemma",
            about: "Gemma 1.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.attn_scale = gemma3::query_scale(hp, false);
        hp.size_label = match hp.n_layer {
            18 => "2B",
            28 => "7B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        gemma(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = gemma3::tensors(hp, false);
        specs.retain(|s| {
            s.name != "output.weight"
                && !s.name.ends_with("post_attention_norm.weight")
                && !s.name.ends_with("post_ffw_norm.weight")
        });
        specs
    }
}

/// Gemma's: the FFN gate, up, down.
fn gemma(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight")
    })
}

impl Decoder for Gemma {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        gemma3::decoder(b, false)
    }
}
