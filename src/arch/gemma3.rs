//! Gemma 3: sliding-window attention on most layers, Q/K norms, post-attention and post-FFN norms.
//! Its decoder also serves Gemma 2 (`gemma2.rs`: no Q/K norms, soft caps).

use super::common_tensors;
use super::created::{layered, ATTN, HEAD, KQ_NORMS};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{is_sliding, Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Gemma3;

impl ArchSpec for Gemma3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "gemma3",
            about: "Gemma 3: sliding-window attention on most layers, query and key norms, post-attention and \
                post-FFN norms.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, super::READS_SLIDING, &["final_logit_softcapping"]],
            saved_rules: &[
                ("final_logit_softcapping", Rule::F32(0.0)),
                // llama.cpp computes the attention scale whatever the file says; it tells the 27B by
                // its layers without next-token-prediction ones.
                (
                    "attention.scale",
                    Rule::Held(|f| Value::F32(query_scale(f.hp, f.n_layer == 62))),
                ),
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        load_hparams(meta, hp)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        gemma3(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        tensors(hp, true)
    }
}

/// Gemma 3's: Gemma 2's with key and query norms, and its own output head.
fn gemma3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} post_attention_norm.weight {KQ_NORMS} ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight")
    })
}

impl Decoder for Gemma3 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        decoder(b, true)
    }
}

/// Without an explicit pattern, every sixth layer attends globally.
const DEFAULT_SWA_PERIOD: u32 = 6;

fn load_hparams(meta: &Meta, hp: &mut HParams) -> Result<()> {
    let window = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
    // Sliding layers rotate with llama.cpp's defaults: base 10000, unscaled.
    super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, 10000.0, 1.0)?;
    hp.final_logit_softcap = meta.f32_opt(&hp.key("final_logit_softcapping"))?.unwrap_or(0.0);
    hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
    hp.size_label = match hp.n_layer {
        18 => "270M",
        26 => "1B",
        32 => "8B",
        34 => "4B",
        48 => "12B",
        62 => "27B",
        _ => "?B",
    };
    hp.attn_scale = query_scale(hp, hp.n_layer == 62);
    Ok(())
}

/// Gemma's tensors: the common decoder's, post-attention and post-FFN norms and, with `qk_norm`
/// (Gemma 3), per-head query and key norms.
pub(super) fn tensors(hp: &HParams, qk_norm: bool) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    common_tensors(hp, false, &mut specs);
    for il in 0..hp.n_layer as usize {
        let b = |s: &str| format!("blk.{il}.{s}");
        specs.push(TensorSpec::new(b("post_attention_norm.weight"), &[hp.n_embd], true));
        if qk_norm {
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hp.n_embd_head_k], true));
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hp.n_embd_head_k], true));
        }
        specs.push(TensorSpec::new(b("post_ffw_norm.weight"), &[hp.n_embd], true));
    }
    specs
}

/// llama.cpp's sizes of the Gemma generations' largest models scale queries by the model width
/// per head rather than the head size.
pub(super) fn query_scale(hp: &HParams, widest: bool) -> f32 {
    let scale_dim = if widest {
        hp.n_embd / hp.n_head[0].max(1)
    } else {
        hp.n_embd_head_k
    };
    1.0 / (scale_dim as f32).sqrt()
}

/// The token embeddings times √n_embd, as Gemma's graphs begin; embeddings given as input go in
/// as they are where `inputs_as_given`.
pub(super) fn scaled_embeddings(b: &mut Builder, inputs_as_given: bool) -> Result<TensorRef> {
    let x = b.embed_tokens()?;
    let scale = if inputs_as_given && b.takes_embeddings() {
        1.0
    } else {
        (b.hp.n_embd as f32).sqrt()
    };
    let x = b.scale(x, scale)?;
    Ok(b.name(x, "inp_scaled", None))
}

/// The Gemma decoder: scaled embeddings, Q/K norms (Gemma 3, `qk_norm`), sliding-window attention
/// on some layers (with its own rotary base), post-attention and post-FFN norms, a GELU-gated FFN,
/// soft-capped attention scores and logits where the model has caps.
pub(super) fn decoder(b: &mut Builder, qk_norm: bool) -> Result<Option<TensorRef>> {
    let hp = b.hp;
    // Gemma 3 (the one with Q/K norms) takes embedding inputs as they are, as llama.cpp does.
    let mut x = scaled_embeddings(b, qk_norm)?;
    let n_layer = hp.n_layer as usize;
    for il in 0..n_layer {
        let sliding = is_sliding(hp, il);
        let l = Some(il);
        let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
        let (q, k, v) = b.qkv(il, cur, true)?;
        let (q, k) = if qk_norm {
            (
                b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?,
                b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?,
            )
        } else {
            (q, k)
        };
        let q = b.rope(q, il, None)?;
        let k = b.rope(k, il, None)?;
        let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
        // Gemma scales the queries before attention instead of the scores.
        let q = b.scale(q, hp.attn_scale)?;
        let att = b.attention(il, q, k, v, 1.0, sliding)?;
        let att = b.name(att, "kqv_out", l);
        let wo = b.layer_weight(il, "attn_output.weight")?;
        let att = b.linear(wo, None, att)?;
        let (att, residual) = b.last_layer_rows(il, att, x)?;
        // Gemma 1 has no post-norms (Gemma 2 and 3 require theirs).
        let att = if b.layer_weight_opt(il, "post_attention_norm.weight").is_some() {
            b.layer_rms_norm(il, att, "post_attention_norm.weight", "attn_post_norm")?
        } else {
            att
        };
        let h = b.add(att, residual)?;
        let h = b.name(h, "sa_out", l);
        let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
        let ffn = b.gated_ffn(
            il,
            cur,
            Ffn {
                gelu: true,
                ..Ffn::default()
            },
        )?;
        let ffn = b.name(ffn, "ffn_out", l);
        let ffn = match b.layer_weight_opt(il, "post_ffw_norm.weight") {
            Some(_) => post_ffw_norm(b, il, ffn)?,
            None => ffn,
        };
        x = b.add(ffn, h)?;
        x = b.layer_out(x, il)?;
    }
    let mut logits = b.output_head(x)?;
    let cap = hp.final_logit_softcap;
    if cap != 0.0 {
        logits = b.soft_cap(logits, 1.0, cap)?;
    }
    Ok(Some(b.name(logits, "result_output", None)))
}

/// Layer `il`'s post-FFN norm of `ffn`, its first step named without the layer ("norm"), as
/// llama.cpp's Gemma graphs name it.
pub(super) fn post_ffw_norm(b: &mut Builder, il: usize, ffn: TensorRef) -> Result<TensorRef> {
    let w = b.layer_weight(il, "post_ffw_norm.weight")?;
    let n = b.g.rms_norm(ffn, b.hp.rms_eps)?;
    let n = b.name(n, "norm", None);
    let n = b.g.mul(n, w)?;
    Ok(b.name(n, "ffn_post_norm", Some(il)))
}
