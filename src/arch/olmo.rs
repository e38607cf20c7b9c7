//! OLMo (the first generation): the Llama layout with layer norms that have no weights, an
//! unbiased attention output, no FFN scales, and queries, keys and values optionally clamped.

use super::created::{layered, GATED};
use super::llama;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Olmo;

impl ArchSpec for Olmo {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "olmo",
            about: "OLMo 1: weightless layer norms, clamped projections.",
            read_keys: &[super::READS_NORM_EPS, &["attention.clamp_kqv"]],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.norm_eps = meta.f32(&hp.key("attention.layer_norm_epsilon"))?;
        hp.clamp_kqv = meta.f32_opt(&hp.key("attention.clamp_kqv"))?.unwrap_or(0.0);
        super::check_equal_head_sizes(hp)?;
        hp.size_label = match hp.n_layer {
            22 => "1B",
            32 => "7B",
            80 => "70B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        olmo(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = llama::tensors_with(hp, false);
        specs.retain(|s| !s.name.ends_with("_norm.weight"));
        specs
    }
}

/// OLMo's (the first): no norm weights at all.
fn olmo(hp: &HParams) -> Vec<String> {
    layered(hp, "token_embd.weight output.weight", |_| {
        format!("QKV attn_output.weight {GATED}")
    })
}

impl Decoder for Olmo {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let eps = hp.norm_eps;
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.g.norm(x, eps)?;
            let att = b.rotary_attention(il, cur, hp.kq_scale(), false)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let cur = b.g.norm(h, eps)?;
            let ffn = b.gated_ffn(il, cur, Ffn::default())?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let x = b.g.norm(x, eps)?;
        b.output_head_unnormed(x).map(Some)
    }
}
