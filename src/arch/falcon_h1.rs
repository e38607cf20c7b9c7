//! Falcon-H1: every layer runs attention and a Mamba-2 mixer side by side on the same normed
//! input and adds both to the residual, then a gated FFN; the context keeps both a KV cache and
//! recurrent state for every layer.

use super::created::{layered, GATED_BIASED};
use super::mamba::MAMBA2;
use super::{attention_tensors, head_tensors, mamba};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NEOX};

pub struct FalconH1;

impl ArchSpec for FalconH1 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "falcon-h1",
            about: "A hybrid: attention and Mamba-2 side by side in every layer.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_SSM, super::READS_RMS_EPS, &["ssm.group_count"]],
            memory: Memory::Hybrid,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        mamba::load_mamba2(meta, hp)?;
        hp.recurrent_layers = vec![true; hp.n_layer as usize];
        if hp.n_head_kv.contains(&0) || hp.n_embd_head_k != hp.n_embd_head_v {
            return Err(Error::model(
                "falcon-h1: every layer attends, with equal key and value head sizes",
            ));
        }
        hp.size_label = match hp.n_layer {
            36 => "0.5B",
            24 => "1.5B",
            66 => "1B",
            32 => "3B",
            44 => "7B",
            72 => "34B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        falcon_h1(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        super::rope_factor_tensors(hp, &mut specs);
        let e = hp.n_embd;
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            mamba::mamba2_tensors(hp, il, false, &mut specs);
            // Falcon-H1's group norm is optional.
            if let Some(norm) = specs.iter_mut().find(|s| s.name == b("ssm_norm.weight")) {
                norm.required = false;
            }
            attention_tensors(hp, il, &mut specs);
            // Loaded, but the graph leaves the output projection's bias out (as llama.cpp's).
            specs.push(TensorSpec::new(b("attn_output.bias"), &[e], false));
            specs.push(TensorSpec::new(b("ffn_norm"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
            super::ffn_bias_tensors(hp, il, &mut specs);
        }
        specs
    }
}

/// Falcon-H1's: a Mamba-2 mixer and attention side by side in every layer, then Granite's FFN.
fn falcon_h1(hp: &HParams) -> Vec<String> {
    layered(hp, "token_embd.weight output.weight output_norm.weight", |_| {
        format!("{MAMBA2} QKV attn_output.weight attn_output.bias attn_norm.weight ffn_norm ROPE_FREQS {GATED_BIASED}")
    })
}

impl Decoder for FalconH1 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = hp.kq_scale();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = b.rotary_attention(il, cur, kq_scale, false)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let att = b.name(att, "attn_out", l);
            // The mixer reads its own norm of the same input.
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "ssm_in")?;
            let ssm = b.mamba2_layer(il, cur)?;
            let mixed = b.add(att, ssm)?;
            let h = b.add(mixed, x)?;
            let (_, h) = b.last_layer_rows(il, mixed, h)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm", "ffn_norm")?;
            let ffn = Ffn {
                biased: true,
                ..Ffn::default()
            };
            let ffn = b.gated_ffn(il, cur, ffn)?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        b.output_head(x).map(Some)
    }
}
