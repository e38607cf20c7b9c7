//! PLaMo (the first): RMS norms; attention and a SwiGLU FFN both reading the layer's one norm
//! output and both added to the stream; NeoX rotation over whole heads; no biases on the attention
//! output or the FFN.

use super::created::{layered, ATTN, GATED, HEAD};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Plamo;

impl ArchSpec for Plamo {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "plamo",
            about: "Attention and FFN from one norm.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        hp.size_label = if hp.n_layer == 40 { "13B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        plamo(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let e = hp.n_embd;
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            super::attention_tensors(hp, il, &mut specs);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
            ]);
        }
        specs
    }
}

/// PLaMo's: one norm per layer (attention and FFN in parallel).
fn plamo(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} {GATED}"))
}

impl Decoder for Plamo {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = b.rotary_attention(il, cur, kq_scale, false)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let (cur, _) = b.last_layer_rows(il, cur, cur)?;
            let ffn = b.gated_ffn(il, cur, Ffn::default())?;
            let ffn = b.name(ffn, "ffn_out", l);
            let sum = b.add(ffn, att)?;
            x = b.add(sum, residual)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
