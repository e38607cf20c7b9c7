//! Apertus: the Llama decoder with per-head RMS norms of queries and keys before rotation and an
//! ungated FFN whose activation is xIELU, with its own four parameters in each layer (`xielu.*`,
//! keys without the architecture's prefix).

use super::created::{layered, HEAD};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{rope_factors, Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

/// The xIELU keys, in the order of `HParams::xielu`'s four values.
const XIELU_KEYS: [&str; 4] = ["xielu.alpha_n", "xielu.alpha_p", "xielu.beta", "xielu.eps"];

pub struct Apertus;

impl ArchSpec for Apertus {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "apertus",
            about: "Apertus: the Llama decoder with per-head query and key norms and an ungated xIELU FFN.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                &["xielu.alpha_n", "xielu.alpha_p", "xielu.beta", "xielu.eps"],
            ],
            saved: false,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        let n = hp.n_layer as usize;
        let mut xielu = vec![[0.0; 4]; n];
        for (k, key) in XIELU_KEYS.iter().enumerate() {
            let values = meta
                .f32_per_layer(key, n)?
                .ok_or_else(|| Error::model(format!("key not found in model: {key}")))?;
            for (p, v) in xielu.iter_mut().zip(values) {
                p[k] = v;
            }
        }
        hp.xielu = xielu;
        super::check_equal_head_sizes(hp)?;
        hp.size_label = if hp.n_layer == 32 { "8B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let e = hp.n_embd;
        let head = hp.n_embd_head_k;
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        super::rope_factor_tensors(hp, &mut specs);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            super::attention_tensors(hp, il, &mut specs);
            specs.extend([
                TensorSpec::new(b("attn_output.bias"), &[e], false),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
                TensorSpec::new(b("attn_q_norm.weight"), &[head], true),
                TensorSpec::new(b("attn_q_norm.bias"), &[head], false),
                TensorSpec::new(b("attn_k_norm.weight"), &[head], true),
                TensorSpec::new(b("attn_k_norm.bias"), &[head], false),
            ]);
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        layered(hp, HEAD, |_| {
            "attn_norm.weight ROPE QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_down.weight ffn_up.weight attn_q_norm.weight attn_q_norm.bias attn_k_norm.weight attn_k_norm.bias".into()
        })
    }
}

impl Decoder for Apertus {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = hp.kq_scale();
        let factors = rope_factors(b.model, &b.params);
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            // The norms' biases are loaded but left out, as llama.cpp's graph does.
            let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
            let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
            let q = b.rope(q, il, factors)?;
            let k = b.rope(k, il, factors)?;
            let (q, k, v) = (
                b.name(q, "Qcur_pos", l),
                b.name(k, "Kcur_pos", l),
                b.name(v, "Vcur_pos", l),
            );
            let att = b.attention(il, q, k, v, kq_scale, false)?;
            let att = b.layer_linear(il, "attn_output", att)?;
            let att = b.name(att, "attn_out", l);
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            // Products without the weights' scales, as llama.cpp's graph makes them.
            let up = b.layer_matmul(il, "ffn_up.weight", cur)?;
            let up = b.name(up, "ffn_up", l);
            let [alpha_n, alpha_p, beta, eps] = hp.xielu[il];
            let act = b.g.xielu(up, alpha_n, alpha_p, beta, eps)?;
            let act = b.name(act, "ffn_xielu", l);
            let down = b.layer_matmul(il, "ffn_down.weight", act)?;
            let down = b.name(down, "ffn_down", l);
            let out = b.add(down, h)?;
            let out = b.name(out, "ffn_out", l);
            x = b.layer_out(out, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
