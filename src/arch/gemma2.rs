//! Gemma 2: Gemma 3's decoder without query and key norms, with soft-capped attention scores and
//! logits, every other layer sliding, the output tied to the embeddings.

use super::created::{layered, ATTN, TIED_HEAD};
use super::gemma3;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Gemma2;

/// llama.cpp's defaults where a file leaves them out.
const DEFAULT_WINDOW: u32 = 4096;
const DEFAULT_SWA_PERIOD: u32 = 2;
const DEFAULT_ATTN_SOFTCAP: f32 = 50.0;
const DEFAULT_FINAL_SOFTCAP: f32 = 30.0;

impl ArchSpec for Gemma2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "gemma2",
            about: "Gemma 2: soft-capped attention and logits, every other layer sliding.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["attn_logit_softcapping", "final_logit_softcapping"],
            ],
            saved_rules: &[
                ("attention.scale", Rule::Held(|f| Value::F32(f.hp.attn_scale))),
                ("attention.sliding_window", Rule::U32(DEFAULT_WINDOW)),
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let window = meta
            .u32_opt(&hp.key("attention.sliding_window"))?
            .unwrap_or(DEFAULT_WINDOW);
        // Sliding layers rotate as the model was trained unless the file says otherwise.
        let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
        super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, base, scale)?;
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.attn_softcap = meta
            .f32_opt(&hp.key("attn_logit_softcapping"))?
            .unwrap_or(DEFAULT_ATTN_SOFTCAP);
        hp.final_logit_softcap = meta
            .f32_opt(&hp.key("final_logit_softcapping"))?
            .unwrap_or(DEFAULT_FINAL_SOFTCAP);
        hp.size_label = match hp.n_layer {
            26 => "2B",
            42 => "9B",
            46 => "27B",
            _ => "?B",
        };
        hp.attn_scale = gemma3::query_scale(hp, hp.n_layer == 46);
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        gemma2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = gemma3::tensors(hp, false);
        // llama.cpp always reads the output head from the embeddings.
        specs.retain(|s| s.name != "output.weight");
        specs
    }
}

/// Gemma 2's: Gemma's with norms after the attention and the FFN.
fn gemma2(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| {
        format!("{ATTN} post_attention_norm.weight ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight")
    })
}

impl Decoder for Gemma2 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        gemma3::decoder(b, false)
    }
}
