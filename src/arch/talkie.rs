//! Talkie: every norm an RMS norm without a weight (the embeddings' too), queries normalised per
//! head after rotation with one gain per head (keys without a gain), every layer adding the normed
//! embeddings back times its `layer_output_scale`, and logits multiplied by `logit_scale`.

use super::attention_tensors;
use super::created::layered;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Talkie;

impl ArchSpec for Talkie {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "talkie",
            about: "Weightless norms, per-head query gains, embeddings added back per layer.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, &["logit_scale"]],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.logit_scale = meta.f32(&hp.key("logit_scale"))?;
        super::check_equal_head_sizes(hp)?;
        hp.size_label = if hp.n_layer == 40 { "13B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        talkie(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::matmul("output.weight", &[e, v], true),
        ];
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[1, hp.n_head[il]], true));
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
            specs.push(TensorSpec::new(b("layer_output_scale.weight"), &[1], true));
        }
        specs
    }
}

/// Talkie's: no norm weights but a per-head query scale and a scale on each layer's output.
fn talkie(hp: &HParams) -> Vec<String> {
    layered(hp, "token_embd.weight output.weight", |_| {
        "QKV attn_output.weight attn_q_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight layer_output_scale.weight".into()
    })
}

impl Decoder for Talkie {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let eps = hp.rms_eps;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let x = b.embed_tokens()?;
        let x = b.g.rms_norm(x, eps)?;
        let mut x = b.name(x, "inp_norm", None);
        let embd_skip = x;
        let n_layer = hp.n_layer as usize;
        for il in 0..n_layer {
            let l = Some(il);
            let cur = b.g.rms_norm(x, eps)?;
            let cur = b.name(cur, "attn_norm", l);
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q = b.rope(q, il, None)?;
            let k = b.rope(k, il, None)?;
            let q_gain = b.layer_weight(il, "attn_q_norm.weight")?;
            let q = b.rms_norm(q, q_gain)?;
            let q = b.name(q, "Qcur_norm", l);
            let k = b.g.rms_norm(k, eps)?;
            let k = b.name(k, "Kcur_norm", l);
            let v = b.name(v, "Vcur", l);
            let att = b.attention(il, q, k, v, kq_scale, false)?;
            let att = b.name(att, "kqv_out", l);
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let att = b.name(att, "attn_out", l);
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let skip = if il + 1 == n_layer {
                b.select_outputs(embd_skip)?
            } else {
                embd_skip
            };
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.g.rms_norm(h, eps)?;
            let cur = b.name(cur, "ffn_norm", l);
            // llama.cpp's graph multiplies only the down projection by its weight's scale.
            let up = b.layer_matmul(il, "ffn_up.weight", cur)?;
            let gate = b.layer_matmul(il, "ffn_gate.weight", cur)?;
            let act = b.g.swiglu(gate, up)?;
            let down_w = b.layer_weight(il, "ffn_down.weight")?;
            let ffn = b.linear(down_w, None, act)?;
            let ffn = b.name(ffn, "ffn_out", l);
            let out = b.add(ffn, h)?;
            let out_scale = b.layer_weight(il, "layer_output_scale.weight")?;
            let skip = b.g.mul(skip, out_scale)?;
            let skip = b.name(skip, "embd_skip", l);
            x = b.add(out, skip)?;
            x = b.layer_out(x, il)?;
        }
        let x = b.g.rms_norm(x, eps)?;
        let logits = b.output_projection(x, None)?;
        let logits = b.scale(logits, hp.logit_scale)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
