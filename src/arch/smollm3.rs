//! SmolLM3: the Llama decoder in which every fourth layer does not rotate its queries and keys.
//! (llama.cpp's K-shift still rotates those layers' keys; ours does the same, so that a shifted
//! cache holds llama.cpp's numbers.)

use super::llama;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

/// llama.cpp's fixed step: layers 3, 7, 11, ... (counting from 0) have no rotary positions.
const NO_ROPE_EVERY: usize = 4;

pub struct SmolLm3;

impl ArchSpec for SmolLm3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "smollm3",
            about: "SmolLM3: the Llama decoder with every fourth layer without rotary positions.",
            read_keys: &[super::READS_RMS_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        hp.size_label = if hp.n_layer == 36 { "3B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        llama::tensors(hp)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        super::created::plain_head(hp)
    }
}

impl Decoder for SmolLm3 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            no_rope_every: NO_ROPE_EVERY,
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
