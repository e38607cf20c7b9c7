//! EuroBERT: an encoder built like a Llama decoder: RMS pre-norms, NeoX rotation, attention
//! both ways within the batch, a SwiGLU FFN without biases or weight scales, a final RMS norm.

use super::attention_tensors;
use super::created::layered;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct EuroBert;

impl ArchSpec for EuroBert {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "eurobert",
            about: "An encoder in the Llama decoder's shape (RMS pre-norms, rotation, SwiGLU): no cache, \
                `llama_encode`, which `llama_decode` calls for it as llama.cpp does; one ubatch per batch.",
            read_keys: &[super::READS_RMS_EPS],
            ..super::ENCODER
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        // llama.cpp's LLM_TYPE_SMALL, the 210M model.
        hp.size_label = if hp.n_layer == 12 { "0.2B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::new("output_norm.weight", &[e], true),
        ];
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        layered(hp, "token_embd.weight output_norm.weight", |_| {
            "attn_norm.weight QKV attn_output.weight ffn_norm.weight ffn_gate.weight ffn_up.weight \
             ffn_down.weight"
                .into()
        })
    }
}

impl Decoder for EuroBert {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        prenorm_encoder(
            b,
            |b, il, cur| {
                let ffn = b.gated_ffn(il, cur, Ffn::default())?;
                Ok(b.name(ffn, "ffn_out", Some(il)))
            },
            "output_norm.weight",
        )
    }
}

/// The encoder of RMS pre-norm layers with rotation (EuroBERT's, NeoBERT's): `ffn` is a layer's
/// FFN on its normed input, `out_norm` the final norm's weight.
pub(super) fn prenorm_encoder(
    b: &mut Builder,
    ffn: impl Fn(&mut Builder, usize, TensorRef) -> Result<TensorRef>,
    out_norm: &str,
) -> Result<Option<TensorRef>> {
    let hp = b.hp;
    let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
    let mut x = b.embed_tokens_as("inp_embd")?;
    for il in 0..hp.n_layer as usize {
        let l = Some(il);
        let w = b.layer_weight(il, "attn_norm.weight")?;
        let cur = b.rms_norm(x, w)?;
        let (q, k, v) = b.qkv(il, cur, true)?;
        let (q, k) = (b.rope(q, il, None)?, b.rope(k, il, None)?);
        let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
        let att = b.attention_no_cache(il, q, k, v, kq_scale)?;
        let att = b.layer_linear(il, "attn_output", att)?;
        let att = b.name(att, "kqv_out", l);
        let (att, residual) = b.last_layer_rows(il, att, x)?;
        let h = b.add(att, residual)?;
        let h = b.name(h, "ffn_inp", l);
        let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
        let out = ffn(b, il, cur)?;
        x = b.add(out, h)?;
    }
    let w = b.weight(out_norm)?;
    let x = b.rms_norm(x, w)?;
    let x = b.name(x, "result_embd", None);
    b.set_hidden(x);
    Ok(None)
}
