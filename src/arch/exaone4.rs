//! EXAONE 4: no pre-norms; per-head query and key RMS norms before rotation; RMS norms after
//! attention and after the SwiGLU FFN (OLMo 2's placement); optional rotary factors. The 32B
//! (64 layers) slides three layers of four over a 4096-token window (or the file's) and rotates
//! only those, with the context's frequencies, as llama.cpp's graph does. Multi-token-prediction
//! layers are refused.

use super::created::{layered, GATED, HEAD};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{rope_factors, Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Exaone4;

/// The 32B's layer count, the only size llama.cpp gives sliding layers.
const LAYERS_32B: u32 = 64;
const DEFAULT_WINDOW: u32 = 4096;
const SWA_PERIOD: u32 = 4;

impl ArchSpec for Exaone4 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "exaone4",
            about: "Post-norms, head norms; the 32B's sliding layers alone rotate.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, super::READS_SLIDING],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        super::refuse_mtp(meta, hp)?;
        let window = meta.u32_opt(&hp.key("attention.sliding_window"))?;
        if hp.n_layer == LAYERS_32B {
            let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
            super::load_sliding_window(meta, hp, window.unwrap_or(DEFAULT_WINDOW), SWA_PERIOD, base, scale)?;
        } else {
            // Reported (llama_model_n_swa) though no layer slides, as llama.cpp does.
            hp.n_swa = window.unwrap_or(0);
        }
        hp.size_label = match hp.n_layer {
            30 => "1.2B",
            LAYERS_32B => "32B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        exaone4(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, hk) = (hp.n_embd, hp.n_embd_head_k);
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        super::rope_factor_tensors(hp, &mut specs);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            super::attention_tensors(hp, il, &mut specs);
            specs.extend([
                TensorSpec::new(b("attn_q_norm.weight"), &[hk], true),
                TensorSpec::new(b("attn_k_norm.weight"), &[hk], true),
                TensorSpec::new(b("post_attention_norm.weight"), &[e], true),
                TensorSpec::new(b("post_ffw_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
            ]);
        }
        specs
    }
}

/// EXAONE 4's: `rope_freqs` after the attention output, norms after the attention and the FFN.
fn exaone4(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("QKV attn_output.weight ROPE_FREQS post_attention_norm.weight attn_q_norm.weight attn_k_norm.weight {GATED} post_ffw_norm.weight")
    })
}

impl Decoder for Exaone4 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let factors = rope_factors(b.model, &b.params);
        let sliding_model = hp.swa_layers.iter().any(|&s| s);
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let sliding = sliding_model && hp.swa_layers[il];
            let (q, k, v) = b.qkv(il, x, true)?;
            let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
            let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
            let (q, k) = if !sliding_model || sliding {
                let p = b.params.rope;
                (
                    b.rope_ext(q, p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor, factors)?,
                    b.rope_ext(k, p.freq_base, p.freq_scale, p.ext_factor, p.attn_factor, factors)?,
                )
            } else {
                (q, k)
            };
            let att = b.attention(il, q, k, v, kq_scale, sliding)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let att = b.layer_rms_norm(il, att, "post_attention_norm.weight", "attn_post_norm")?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let ffn = b.gated_ffn(il, h, Ffn::default())?;
            let ffn = b.layer_rms_norm(il, ffn, "post_ffw_norm.weight", "ffn_post_norm")?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
