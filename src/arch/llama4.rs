//! Llama 4: Llama's layers with chunked attention on three layers of four (chunks of 8192
//! positions, the fourth layer global), the global layers unrotated and their queries scaled by
//! attention temperature tuning (llama.cpp's fixed 0.1 per 8192 positions), weightless RMS norms
//! of the rotated queries and keys (except in the 128-expert model), and experts every
//! `interleave_moe_layer_step` layers: picked by their raw router logits, their sigmoid weights
//! multiplied into each expert's input, beside a shared expert. A file whose sliding window is 0
//! has no chunks and rotates every layer but the last (llama.cpp's `n_no_rope_layer_step`).

use super::created::{layered, ATTN, EXPERTS, GATED, HEAD, SHARED_GDU};
use super::head_tensors;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{is_sliding, rope_factors, Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::{AttnTemp, HParams};
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Llama4;

/// llama.cpp's chunk size, and the temperature tuning it fixes for chunked models.
const CHUNK: u32 = 8192;
const TEMPERATURE: AttnTemp = AttnTemp {
    scale: 0.1,
    length: CHUNK,
    offset: 1.0,
};
/// Without a pattern in the file, the last layer of each four attends globally, unrotated.
const PERIOD: u32 = 4;
/// The expert count of the model without query and key norms.
const EXPERTS_WITHOUT_KQ_NORM: u32 = 128;

impl ArchSpec for Llama4 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "llama4",
            about: "Chunked attention on three layers of four, the fourth unrotated and temperature-tuned, \
                weightless query and key norms, experts every interleave step picked by raw logits with their \
                weights multiplied into their inputs, beside a shared expert.",
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["expert_feed_forward_length", "interleave_moe_layer_step"],
            ],
            saved_rules: &[
                super::HELD_SWA_BASE,
                super::HELD_WINDOW,
                (
                    "attention.temperature_scale",
                    Rule::Held(|f| Value::F32(f.hp.attn_temp.scale)),
                ),
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_rot != hp.n_embd_head_k {
            return Err(Error::model("llama4 rotates whole heads"));
        }
        if hp.n_expert == 0 {
            return Err(Error::model("llama4 model cannot have zero experts"));
        }
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        hp.n_ff_shexp = hp.n_ff_exp;
        hp.n_moe_layer_step = meta.u32(&hp.key("interleave_moe_layer_step"))?;
        match meta.u32_opt(&hp.key("attention.sliding_window"))? {
            Some(0) => {}
            _ => {
                hp.swa_chunked = true;
                hp.attn_temp = TEMPERATURE;
                let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
                super::load_sliding_window(meta, hp, CHUNK, PERIOD, base, scale)?;
            }
        }
        hp.size_label = match (hp.n_expert, hp.n_embd) {
            (16, _) => "17B.16E",
            (128, _) => "17B.128E",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        llama4(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        specs.push(TensorSpec::new("rope_freqs.weight", &[hp.n_rot / 2], false));
        for il in 0..hp.n_layer as usize {
            specs.push(TensorSpec::new(
                format!("blk.{il}.attn_norm.weight"),
                &[hp.n_embd],
                true,
            ));
            super::attention_tensors(hp, il, &mut specs);
            let experts = is_moe_layer(hp, il);
            super::ffn_tensors(hp, il, experts, &mut specs);
            if experts {
                super::shared_expert_tensors(hp, il, &mut specs);
            }
        }
        specs
    }
}

/// Llama 4's: `rope_freqs`, experts (with a shared one) every `interleave_moe_layer_step` layers.
fn llama4(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let ffn = if is_moe_layer(hp, il) {
            format!("{EXPERTS} {SHARED_GDU}")
        } else {
            GATED.into()
        };
        format!("{ATTN} ffn_norm.weight ROPE_FREQS {ffn}")
    })
}

pub(super) fn is_moe_layer(hp: &HParams, il: usize) -> bool {
    hp.n_moe_layer_step > 0 && (il + 1).is_multiple_of(hp.n_moe_layer_step as usize)
}

impl Decoder for Llama4 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let factors = rope_factors(b.model, &b.params);
        // Global layers go unrotated every PERIOD layers, or (no chunks) only the last.
        let no_rope_step = if hp.swa_chunked {
            PERIOD as usize
        } else {
            hp.n_layer as usize
        };
        let kq_norm = hp.n_expert != EXPERTS_WITHOUT_KQ_NORM;
        let moe = Moe {
            gating: Gating::Sigmoid,
            weights_first: true,
            ..Moe::BASE
        };
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let rotated = !(il + 1).is_multiple_of(no_rope_step);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (mut q, mut k, v) = b.qkv(il, cur, true)?;
            if rotated {
                q = b.rope(q, il, factors)?;
                k = b.rope(k, il, factors)?;
                if kq_norm {
                    q = b.g.rms_norm(q, hp.rms_eps)?;
                    k = b.g.rms_norm(k, hp.rms_eps)?;
                }
            } else {
                let temp = b.attn_temperature()?;
                q = b.g.mul(q, temp)?;
            }
            let att = b.attention(il, q, k, v, kq_scale, is_sliding(hp, il))?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if is_moe_layer(hp, il) {
                let routed = b.moe_ffn(il, cur, moe)?;
                let shared = b.gated_ffn_named(il, cur, Ffn::default(), "_shexp")?;
                let shared = b.name(shared, "ffn_moe_shexp", l);
                b.add(routed, shared)?
            } else {
                b.gated_ffn(il, cur, Ffn::default())?
            };
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
