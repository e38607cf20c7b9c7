//! Muse Glimmer: AFMoE's attention without its experts. The token embeddings are RMS-normed
//! (no weight); per-head query and key norms; a sliding window on three layers of four (as the
//! file's pattern says), which alone rotate (the global layers take no positions); a full-width
//! sigmoid gate read from the attention's input before the output projection; RMS norms after
//! attention and after the dense FFN with llama.cpp's fixed epsilon of 1e-8; the logits scaled by
//! `logit_scale`, then soft-capped when the file says.

use super::created::{layered, GATED, HEAD};
use super::head_tensors;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct MuseGlimmer;

/// Without a pattern in the file, the last layer of each four attends globally.
const PERIOD: u32 = 4;
/// The epsilon of the norms after attention and after the FFN (llama.cpp's constant).
const POST_NORM_EPS: f32 = 1e-8;

impl ArchSpec for MuseGlimmer {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "muse-glimmer",
            about: "AFMoE's gated attention over dense layers: normed embeddings, only the sliding layers rotate, \
                post norms, scaled and capped logits.",
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["logit_scale", "final_logit_softcapping"],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        hp.final_logit_softcap = meta.f32_opt(&hp.key("final_logit_softcapping"))?.unwrap_or(0.0);
        hp.logit_scale = meta.f32(&hp.key("logit_scale"))?;
        let window = meta.u32(&hp.key("attention.sliding_window"))?;
        super::load_sliding_window(meta, hp, window, PERIOD, hp.rope_freq_base, 1.0)?;
        hp.size_label = if hp.n_layer == 52 { "30B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        muse_glimmer(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        super::require_output(&mut specs);
        let (e, hk) = (hp.n_embd, hp.n_embd_head_k);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            super::attention_tensors(hp, il, &mut specs);
            super::ffn_tensors(hp, il, false, &mut specs);
            for norm in ["attn_norm", "post_attention_norm", "post_ffw_norm"] {
                specs.push(TensorSpec::new(b(&format!("{norm}.weight")), &[e], true));
            }
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hk], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hk], true));
            specs.push(TensorSpec::matmul(
                b("attn_gate.weight"),
                &[e, hk * hp.n_head[il]],
                true,
            ));
        }
        specs
    }
}

/// The attention of Muse Glimmer and AFMoE: norms before and after, query and key norms, a gate.
pub(super) const GATED_ATTN: &str = "attn_norm.weight post_attention_norm.weight QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight attn_gate.weight ffn_norm.weight post_ffw_norm.weight";

/// Muse Glimmer's.
fn muse_glimmer(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{GATED_ATTN} {GATED}"))
}

impl Decoder for MuseGlimmer {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let x = b.embed_tokens()?;
        let x = b.g.rms_norm(x, hp.rms_eps)?;
        let mut x = b.name(x, "embd_norm", None);
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let sliding = is_sliding(hp, il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let gate = b.layer_matmul(il, "attn_gate.weight", cur)?;
            let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
            let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
            let (q, k) = if sliding {
                (b.rope(q, il, None)?, b.rope(k, il, None)?)
            } else {
                (q, k)
            };
            let att = b.attention(il, q, k, v, kq_scale, sliding)?;
            let gate = b.g.sigmoid(gate)?;
            let gated = b.gate_heads(il, att, gate)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, gated)?;
            let att = post_norm(b, il, att, "post_attention_norm.weight", "attn_post_norm")?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.gated_ffn(il, cur, Ffn::default())?;
            let ffn = post_norm(b, il, ffn, "post_ffw_norm.weight", "ffn_post_norm")?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        let mut logits = b.scale(logits, hp.logit_scale)?;
        if hp.final_logit_softcap != 0.0 {
            logits = b.soft_cap(logits, 1.0, hp.final_logit_softcap)?;
        }
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// RMS norm with llama.cpp's fixed epsilon, times layer `il`'s weight `name`.
fn post_norm(b: &mut Builder, il: usize, x: TensorRef, name: &str, label: &str) -> Result<TensorRef> {
    let w = b.layer_weight(il, name)?;
    let n = b.g.rms_norm(x, POST_NORM_EPS)?;
    let y = b.g.mul(n, w)?;
    Ok(b.name(y, label, Some(il)))
}
