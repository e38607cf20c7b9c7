//! OLMo 2 (and OLMo 3, the same graph with sliding-window layers): no pre-norms; RMS norms of the
//! whole query and key projections; post-attention and post-FFN norms; a separate output head.

use super::common_tensors;
use super::created::{layered, HEAD};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Olmo2;

/// Without an explicit pattern, every fourth layer attends globally.
const DEFAULT_SWA_PERIOD: u32 = 4;

impl ArchSpec for Olmo2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "olmo2",
            about: "OLMo 2, and OLMo 3's sliding layers: post-norms, whole-projection query and key norms.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, super::READS_SLIDING],
            saved_rules: &[super::HELD_SWA_BASE_IF_WINDOW],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_embd_head_k * hp.n_head[0] != hp.n_embd {
            return Err(Error::model(format!(
                "olmo2 needs head size x heads = embedding width ({} x {} != {})",
                hp.n_embd_head_k, hp.n_head[0], hp.n_embd
            )));
        }
        let window = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
        // What the K-shift rotates sliding layers with (the graph uses the context's base).
        let base = hp.rope_freq_base;
        super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, base, 1.0)?;
        hp.size_label = match hp.n_layer {
            16 => "1B",
            32 => "7B",
            40 => "13B",
            64 => "32B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        olmo2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        common_tensors(hp, false, &mut specs);
        // No pre-norms; the output head is its own tensor.
        specs.retain(|s| !s.name.ends_with(".attn_norm.weight") && !s.name.ends_with(".ffn_norm.weight"));
        super::require_output(&mut specs);
        let e = hp.n_embd;
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let k = hp.n_embd_head_k * hp.n_head_kv[il];
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[k], true));
            specs.push(TensorSpec::new(b("post_attention_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("post_ffw_norm.weight"), &[e], true));
        }
        specs
    }
}

/// OLMo 2's: norms after the attention and the FFN.
fn olmo2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        "QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight post_attention_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight".into()
    })
}

impl Decoder for Olmo2 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let head = hp.n_embd_head_k;
        let kq_scale = 1.0 / (head as f32).sqrt();
        let mut x = b.embed_tokens()?;
        let n_layer = hp.n_layer as usize;
        for il in 0..n_layer {
            let l = Some(il);
            let (q, k, v) = b.qkv(il, x, false)?;
            let q_norm = b.layer_weight(il, "attn_q_norm.weight")?;
            let q = b.rms_norm(q, q_norm)?;
            let q = b.name(q, "Qcur_normed", l);
            let k_norm = b.layer_weight(il, "attn_k_norm.weight")?;
            let k = b.rms_norm(k, k_norm)?;
            let k = b.name(k, "Kcur_normed", l);
            let q = b.heads(q, head, hp.n_head[il])?;
            let k = b.heads(k, head, hp.n_head_kv[il])?;
            let v = b.heads(v, head, hp.n_head_kv[il])?;
            let (q, k) = if is_sliding(hp, il) {
                // llama.cpp rotates sliding layers with the context's base, unscaled, without YaRN.
                let base = b.params.rope.freq_base;
                (
                    b.rope_ext(q, base, 1.0, 0.0, 1.0, None)?,
                    b.rope_ext(k, base, 1.0, 0.0, 1.0, None)?,
                )
            } else {
                (b.rope(q, il, None)?, b.rope(k, il, None)?)
            };
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let att = b.attention(il, q, k, v, kq_scale, is_sliding(hp, il))?;
            let att = b.name(att, "kqv_out", l);
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let att = b.layer_rms_norm(il, att, "post_attention_norm.weight", "attn_post_norm")?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let ffn = b.gated_ffn(il, h, Ffn::default())?;
            let ffn = b.name(ffn, "ffn_out", l);
            let post_ffn = b.layer_weight(il, "post_ffw_norm.weight")?;
            let ffn = b.rms_norm(ffn, post_ffn)?;
            let ffn = b.name(ffn, "ffn_post_norm", None);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
