//! Phi-3 (and Phi-4): a fused query-key-value projection (or separate ones), queries scaled before
//! attention, the FFN's gate and up projections fused in one matrix, LongRoPE frequency factors.
//! PhiMoE: the same graph with biased RMS norms, a biased attention output and head, and
//! softmax-routed experts.

use super::common_tensors;
use super::created::{layered, ATTN, BIASED_HEAD, EXPERTS, HEAD};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{rope_factors, Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Phi3 {
    facts: Facts,
    experts: bool,
}

pub const PHI3: Phi3 = Phi3 {
    facts: Facts {
        name: "phi3",
        about: "Phi-3 and Phi-4: fused projections, LongRoPE.",
        read_keys: &[super::READS_RMS_EPS, &["attention.sliding_window"]],
        rope_type: ROPE_NEOX,
        ..Facts::BASE
    },
    experts: false,
};

pub const PHIMOE: Phi3 = Phi3 {
    facts: Facts {
        name: "phimoe",
        about: "Phi-3's layers with biased norms and experts.",
        read_keys: &[super::READS_RMS_EPS],
        rope_type: ROPE_NEOX,
        ..Facts::BASE
    },
    experts: true,
};

/// PhiMoE's experts: softmax over all, the picked weights summing to one.
const PHIMOE_EXPERTS: Moe = Moe {
    normalize: true,
    ..Moe::BASE
};

impl ArchSpec for Phi3 {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0) > 0 {
            // As llama.cpp 0.3.36 does: Phi's sliding window is switched off.
            crate::log_warn!("phi3: the model's sliding window is ignored, as llama.cpp ignores it");
        }
        if self.experts {
            hp.n_ff_exp = hp.n_ff[0];
        }
        hp.size_label = match hp.n_layer {
            32 if self.experts => "16x3.8B",
            _ if self.experts => "?B",
            24 => "1B",
            32 => "3B",
            40 => "14B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        match self.experts {
            false => phi3(hp),
            true => phimoe(hp),
        }
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        common_tensors(hp, self.experts, &mut specs);
        specs.retain(|s| !s.name.ends_with(".ffn_gate.weight"));
        for s in specs.iter_mut().filter(|s| s.name.ends_with(".ffn_up.weight")) {
            // Gate and up, one after the other in each row.
            s.shape[1] *= 2;
        }
        for name in ["rope_factors_long.weight", "rope_factors_short.weight"] {
            specs.push(TensorSpec::new(name, &[hp.n_rot / 2], false));
        }
        if self.experts {
            let (e, v) = (hp.n_embd, hp.n_vocab);
            super::require_output(&mut specs);
            specs.push(TensorSpec::new("output_norm.bias", &[e], true));
            specs.push(TensorSpec::new("output.bias", &[v], true));
            for il in 0..hp.n_layer as usize {
                for name in ["attn_norm.bias", "ffn_norm.bias", "attn_output.bias"] {
                    specs.push(TensorSpec::new(format!("blk.{il}.{name}"), &[e], true));
                }
            }
        }
        specs
    }
}

/// Phi-3's: a fused gate and up projection, LongRoPE's factors always.
fn phi3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ffn_down.weight ffn_up.weight ROPE_LONG_SHORT")
    })
}

/// PhiMoE's: biased norms and output, experts, LongRoPE's factors always.
fn phimoe(hp: &HParams) -> Vec<String> {
    layered(hp, &format!("{BIASED_HEAD} output.bias"), |_| {
        format!("attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias {EXPERTS} ROPE_LONG_SHORT")
    })
}

/// RMS norm of `x` by `{name}.weight`, plus `{name}.bias` where the model has it (PhiMoE).
fn biased_rms_norm(b: &mut Builder, name: &str, x: TensorRef) -> Result<TensorRef> {
    let w = b.weight(&format!("{name}.weight"))?;
    let y = b.rms_norm(x, w)?;
    match b.weight_opt(&format!("{name}.bias")) {
        Some(bias) => b.g.add(y, bias).map_err(Error::from),
        None => Ok(y),
    }
}

impl Decoder for Phi3 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let q_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let factors = rope_factors(b.model, &b.params);
        let mut x = b.embed_tokens()?;
        let n_layer = hp.n_layer as usize;
        for il in 0..n_layer {
            let l = Some(il);
            let cur = biased_rms_norm(b, &format!("blk.{il}.attn_norm"), x)?;
            let cur = b.name(cur, "attn_norm", l);
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q = b.rope(q, il, factors)?;
            let k = b.rope(k, il, factors)?;
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let q = b.scale(q, q_scale)?;
            let att = b.attention(il, q, k, v, 1.0, false)?;
            let att = b.name(att, "kqv_out", l);
            let att = b.layer_linear(il, "attn_output", att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let cur = biased_rms_norm(b, &format!("blk.{il}.ffn_norm"), h)?;
            let cur = b.name(cur, "ffn_norm", l);
            let ffn = if b.layer_weight_opt(il, "ffn_gate_inp.weight").is_some() {
                b.moe_ffn(il, cur, PHIMOE_EXPERTS)?
            } else {
                b.fused_gated_ffn(il, cur)?
            };
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(h, ffn)?;
            x = b.layer_out(x, il)?;
        }
        let x = biased_rms_norm(b, "output_norm", x)?;
        let logits = b.output_head_unnormed(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
