//! Phi-3 (and Phi-4): a fused query-key-value projection (or separate ones), queries scaled before
//! attention, the FFN's gate and up projections fused in one matrix, LongRoPE frequency factors.

use super::common_tensors;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{rope_factors, Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, TensorSpec};

pub struct Phi3;

impl ArchSpec for Phi3 {
    fn name(&self) -> &'static str {
        "phi3"
    }

    fn rope_type(&self) -> i32 {
        2
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0) > 0 {
            // As llama.cpp 0.3.36 does: Phi's sliding window is switched off.
            crate::log_warn!("phi3: the model's sliding window is ignored, as llama.cpp ignores it");
        }
        hp.size_label = match hp.n_layer {
            24 => "1B",
            32 => "3B",
            40 => "14B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        common_tensors(hp, false, &mut specs);
        specs.retain(|s| !s.name.ends_with(".ffn_gate.weight"));
        for s in specs.iter_mut().filter(|s| s.name.ends_with(".ffn_up.weight")) {
            // Gate and up, one after the other in each row.
            s.shape[1] *= 2;
        }
        for name in ["rope_factors_long.weight", "rope_factors_short.weight"] {
            specs.push(TensorSpec::new(name, &[hp.n_rot / 2], false));
        }
        specs
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
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q = b.rope(q, il, factors)?;
            let k = b.rope(k, il, factors)?;
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let q = b.scale(q, q_scale)?;
            let att = b.attention(il, q, k, v, 1.0, false)?;
            let att = b.name(att, "kqv_out", l);
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let h = b.add(att, residual)?;
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.fused_gated_ffn(il, cur)?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(h, ffn)?;
            x = b.name(x, "l_out", l);
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
