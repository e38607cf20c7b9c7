//! DBRX: layer norms without biases, a fused query-key-value projection clamped to
//! `attention.clamp_kqv`, NeoX rotation, and softmax-routed experts (the picked weights
//! normalised, the weights' scales left out) after a norm named `attn_output_norm`.

use super::created::{self, layered, HEAD};
use super::gpt2;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Dbrx;

const EXPERTS: Moe = Moe {
    normalize: true,
    ..Moe::BASE
};

impl ArchSpec for Dbrx {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "dbrx",
            about: "Clamped fused projection, layer norms, experts.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_NORM_EPS, &["attention.clamp_kqv"]],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.norm_eps = meta.f32(&hp.key("attention.layer_norm_epsilon"))?;
        hp.clamp_kqv = meta.f32(&hp.key("attention.clamp_kqv"))?;
        hp.n_ff_exp = hp.n_ff[0];
        hp.size_label = if hp.n_layer == 40 { "16x12B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        dbrx(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, ne) = (hp.n_embd, hp.n_expert);
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            super::attention_tensors(hp, il, &mut specs);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("attn_output_norm.weight"), &[e], true),
                TensorSpec::new(b("ffn_gate_inp.weight"), &[e, ne], true),
                TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, ff, ne], true),
                TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ff, ne], true),
                TensorSpec::matmul(b("ffn_down_exps.weight"), &[ff, e, ne], true),
            ]);
        }
        specs
    }
}

/// DBRX's: the fused projection, a norm after the attention output, experts only.
fn dbrx(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!(
            "attn_norm.weight attn_qkv.weight attn_output.weight attn_output_norm.weight {}",
            created::EXPERTS
        )
    })
}

impl Decoder for Dbrx {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = gpt2::norm(b, &format!("blk.{il}.attn_norm"), x, "attn_norm", l)?;
            let att = b.rotary_attention(il, cur, kq_scale, false)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = gpt2::norm(b, &format!("blk.{il}.attn_output_norm"), h, "attn_out_norm", l)?;
            let ffn = b.moe_ffn(il, cur, EXPERTS)?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let x = gpt2::norm(b, "output_norm", x, "result_norm", None)?;
        b.output_head_unnormed(x).map(Some)
    }
}
