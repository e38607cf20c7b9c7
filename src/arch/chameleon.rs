//! Chameleon: the Llama decoder with per-head layer norms of queries and keys (epsilon fixed at
//! 1e-5) before rotation, the block norms before or (`swin_norm`) after attention and FFN, and the
//! image tokens' logits masked: llama.cpp's graph writes -FLT_MAX over token ids 4 to 8195 of its
//! logits' memory, so of the first output row only. llama.cpp aborts on a ubatch without outputs
//! (its mask does not fit in no logits); the engine leaves the mask out there.

use super::created::{layered, FFN, HEAD};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

/// The epsilon of the query and key norms llama.cpp fixes (PyTorch's default).
const QK_NORM_EPS: f32 = 1e-5;
/// The image tokens llama.cpp masks: ids from 4 up to 8196.
const IMAGE_TOKENS: (usize, i64) = (4, 8196 - 4);

pub struct Chameleon;

impl ArchSpec for Chameleon {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "chameleon",
            about: "The Llama decoder with per-head query and key layer norms, the block norms optionally after \
                attention and FFN (`swin_norm`), the image tokens' logits masked in the first output row.",
            read_keys: &[super::READS_RMS_EPS, &["swin_norm"]],
            saved_rules: &[super::HELD_NORM_EPS],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.norm_eps = QK_NORM_EPS;
        hp.swin_norm = meta.bool_opt(&hp.key("swin_norm"))?.unwrap_or(false);
        super::check_equal_head_sizes(hp)?;
        // The query projection is as wide as the embeddings, split into the heads.
        if hp.n_head.iter().any(|&n| n * hp.n_embd_head_k != hp.n_embd) {
            return Err(Error::model(
                "chameleon needs query heads as wide as the embeddings together",
            ));
        }
        hp.size_label = match hp.n_layer {
            32 => "7B",
            48 => "34B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let e = hp.n_embd;
        let hk = hp.n_embd_head_k;
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let (n_head, n_head_kv) = (hp.n_head[il], hp.n_head_kv[il]);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("attn_q_norm.weight"), &[hk, n_head], true),
                TensorSpec::new(b("attn_k_norm.weight"), &[hk, n_head_kv], true),
                TensorSpec::new(b("attn_q_norm.bias"), &[hk, n_head], false),
                TensorSpec::new(b("attn_k_norm.bias"), &[hk, n_head_kv], false),
            ]);
            super::attention_tensors(hp, il, &mut specs);
            super::ffn_tensors(hp, il, false, &mut specs);
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        layered(hp, HEAD, |_| {
            format!("attn_norm.weight attn_q_norm.weight attn_k_norm.weight attn_q_norm.bias attn_k_norm.bias QKV attn_output.weight {FFN}")
        })
    }
}

/// Layer `il`'s per-head layer norm of `x` by `attn_{which}_norm` (its bias where the layer has
/// one), named `label`.
fn head_norm(b: &mut Builder, il: usize, x: TensorRef, which: &str, label: &str) -> Result<TensorRef> {
    let w = b.layer_weight(il, &format!("attn_{which}_norm.weight"))?;
    let bias = b.layer_weight_opt(il, &format!("attn_{which}_norm.bias"));
    let n = b.g.norm(x, b.hp.norm_eps)?;
    let mut y = b.g.mul(n, w)?;
    if let Some(bias) = bias {
        y = b.add(y, bias)?;
    }
    Ok(b.name(y, label, Some(il)))
}

impl Decoder for Chameleon {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let swin = hp.swin_norm;
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = match swin {
                true => x,
                false => b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?,
            };
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q = head_norm(b, il, q, "q", "Qcur")?;
            let k = head_norm(b, il, k, "k", "Kcur")?;
            let q = b.rope(q, il, None)?;
            let k = b.rope(k, il, None)?;
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let att = b.attention(il, q, k, v, kq_scale, false)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (mut att, residual) = b.last_layer_rows(il, att, x)?;
            if swin {
                att = b.layer_rms_norm(il, att, "attn_norm.weight", "attn_norm")?;
            }
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            // With the norms after, the FFN reads the normed attention output, not the stream
            // (llama.cpp's graph).
            let cur = match swin {
                true => att,
                false => b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?,
            };
            let mut ffn = b.gated_ffn(il, cur, Ffn::default())?;
            if swin {
                ffn = b.layer_rms_norm(il, ffn, "ffn_norm.weight", "ffn_norm")?;
            }
            let out = b.add(ffn, h)?;
            let out = b.name(out, "ffn_out", l);
            x = b.layer_out(out, il)?;
        }
        let logits = b.output_head(x)?;
        let logits = b.name(logits, "result_output_with_img_logits", None);
        // A ubatch without outputs has no logits to mask (llama.cpp's graph asserts there).
        if logits.ne()[1] == 0 {
            return Ok(Some(b.name(logits, "result_output", None)));
        }
        // A tensor of -FLT_MAX over the image tokens, written where llama.cpp writes it.
        let (start, count) = IMAGE_TOKENS;
        let img = b.g.new_tensor(logits.ggml_type(), &[count])?;
        let img = b.g.clamp(img, -f32::MAX, -f32::MAX)?;
        let img = b.name(img, "img_logits", None);
        let logits = b.g.set_1d(logits, img, start)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
