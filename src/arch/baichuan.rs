//! Baichuan: the Llama decoder without the biases of its attention output and FFN, whose graph
//! depends on the size: the 7B rotates its queries and keys, the 13B biases its scores by distance
//! (ALiBi), and other sizes do neither (as llama.cpp builds them; its K-shift still rotates).

use super::llama;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Baichuan;

const LAYERS_7B: u32 = 32;
const LAYERS_13B: u32 = 40;

impl ArchSpec for Baichuan {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "baichuan",
            about: "Its 7B rotates, its 13B uses ALiBi.",
            read_keys: &[super::READS_RMS_EPS],
            saved_rules: &[super::HELD_ALIBI],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        (hp.size_label, hp.max_alibi_bias) = match hp.n_layer {
            LAYERS_7B => ("7B", 0.0),
            LAYERS_13B => ("13B", 8.0),
            _ => ("?B", 0.0),
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        super::created::plain_head(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        super::common_tensors(hp, false, &mut specs);
        // llama.cpp requires the separate output head.
        super::require_output(&mut specs);
        specs
    }
}

impl Decoder for Baichuan {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            no_wo_bias: true,
            no_ffn_bias: true,
            no_rope: b.hp.n_layer != LAYERS_7B,
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
