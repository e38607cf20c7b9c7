//! Spark 2.5: a Llama-like decoder with per-layer head counts, a sliding window on the layers its
//! pattern array marks, a sigmoid gate per attention head (`attn_gate`, read from the attention's
//! input) before the output projection, and a GELU-gated FFN without biases or scales.

use super::created::{layered, HEAD};
use super::head_tensors;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Spark2_5;

impl ArchSpec for Spark2_5 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "spark2_5",
            about: "Per-layer heads, sigmoid gates per attention head, GELU FFN.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["attention.sliding_window_pattern"],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        super::load_sliding_window_array(meta, hp)?;
        hp.size_label = if hp.n_layer == 28 { "1.7B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        spark2_5(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let e = hp.n_embd;
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            super::attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::matmul(b("attn_gate.weight"), &[e, hp.n_head[il]], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
        }
        specs
    }
}

/// Spark 2.5's: an attention gate per head, the FFN gate, up, down.
fn spark2_5(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        "attn_norm.weight QKV attn_gate.weight attn_output.weight ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight".into()
    })
}

impl Decoder for Spark2_5 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q = b.rope(q, il, None)?;
            let k = b.rope(k, il, None)?;
            let (q, k) = (b.name(q, "Qcur_rope", l), b.name(k, "Kcur_rope", l));
            let att = b.attention(il, q, k, v, kq_scale, is_sliding(hp, il))?;
            let att = b.name(att, "attn_out", l);
            // One sigmoid gate per head, over each head's whole output.
            let gate = b.layer_matmul(il, "attn_gate.weight", cur)?;
            let gate = b.g.sigmoid(gate)?;
            let gate = b.name(gate, "attn_gate", l);
            let gated = b.gate_heads(il, att, gate)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, gated)?;
            let att = b.name(att, "attn_out_proj", l);
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = Ffn {
                gelu: true,
                scaled: false,
                biased: false,
                oai: false,
            };
            let ffn = b.gated_ffn(il, cur, ffn)?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
