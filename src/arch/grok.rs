//! Grok: scaled embeddings; attention scores capped by cap * tanh(kq * output_scale / cap) before
//! an unscaled softmax (so never flash attention, as in llama.cpp); norms after attention and
//! after the FFN; GELU experts, averaged with an optional dense GELU FFN; multiplied and
//! optionally soft-capped logits. llama.cpp's defaults stand in for keys older files lack.

use super::created::{layered, ATTN, EXPERTS, FFN, HEAD};
use super::{attention_tensors, head_tensors};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{Builder, Decoder, ExpertAct, Ffn, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Grok;

const MOE: Moe = Moe {
    normalize: true,
    act: ExpertAct::Gelu,
    ..Moe::BASE
};

// llama.cpp's defaults for files without the keys.
const LOGIT_SCALE: f32 = 0.577_350_269_189_625_7_f64 as f32;
const EMBEDDING_SCALE: f32 = 78.383_671_769_061_69_f64 as f32;
const OUTPUT_SCALE: f32 = 0.088_388_347_648_318_45_f64 as f32;
const YARN_BETA_FAST: f32 = 8.0;

impl ArchSpec for Grok {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "grok",
            about: "Capped attention scores, so no flash attention, as in llama.cpp; GELU experts with a dense FFN, \
                soft-capped logits.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, &["expert_feed_forward_length", "logit_scale", "attn_logit_softcapping", "router_logit_softcapping", "final_logit_softcapping", "embedding_scale", "attention.output_scale", "attention.temperature_length", "rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"]],
            saved_rules: // llama.cpp's saver writes its default YaRN beta whatever the file says.
            &[
                ("logit_scale", Rule::F32(LOGIT_SCALE)),
                ("embedding_scale", Rule::F32(EMBEDDING_SCALE)),
                ("attention.output_scale", Rule::F32(OUTPUT_SCALE)),
                ("attn_logit_softcapping", Rule::F32(30.0)),
                ("router_logit_softcapping", Rule::F32(30.0)),
                ("final_logit_softcapping", Rule::F32(0.0)),
                (
                    "rope.scaling.yarn_beta_fast",
                    Rule::Held(|_| Value::F32(YARN_BETA_FAST)),
                ),
            ],
            layer_members: &[("layer_output_norm.weight", "ffn_post_norm")],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let f = |hp: &HParams, key: &str, default: f32| -> Result<f32> {
            Ok(meta.f32_opt(&hp.key(key))?.unwrap_or(default))
        };
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.logit_scale = f(hp, "logit_scale", LOGIT_SCALE)?;
        hp.embedding_scale = f(hp, "embedding_scale", EMBEDDING_SCALE)?;
        hp.kq_tanh_scale = f(hp, "attention.output_scale", OUTPUT_SCALE)?;
        hp.kq_tanh_cap = f(hp, "attn_logit_softcapping", 30.0)?;
        hp.final_logit_softcap = f(hp, "final_logit_softcapping", 0.0)?;
        hp.yarn_ext_factor = f(hp, "rope.scaling.yarn_ext_factor", hp.yarn_ext_factor)?;
        hp.yarn_attn_factor = f(hp, "rope.scaling.yarn_attn_factor", hp.yarn_attn_factor)?;
        hp.yarn_beta_fast = YARN_BETA_FAST;
        super::load_yarn_betas(meta, hp)?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_embd_head_k * hp.n_head[0] != hp.n_embd {
            return Err(Error::model("grok needs its query heads to span the embedding"));
        }
        if hp.kq_tanh_cap == 0.0 {
            return Err(Error::model(format!("'{}' is 0", hp.key("attn_logit_softcapping"))));
        }
        super::check_experts(hp)?;
        if hp.n_ff_exp == 0 {
            hp.n_ff_exp = hp.n_ff[0];
        }
        hp.size_label = if hp.n_layer == 64 { "314B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        grok(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, ffe, ne) = (hp.n_embd, hp.n_ff_exp, hp.n_expert);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("attn_output_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], false));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], false));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], false));
            specs.push(TensorSpec::new(b("ffn_gate_inp.weight"), &[e, ne], true));
            specs.push(TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, ffe, ne], false));
            specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ffe, ne], true));
            specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[ffe, e, ne], true));
            let out_norm = b("layer_output_norm.weight");
            specs.push(TensorSpec::new(&out_norm, &[e], false));
            specs.push(TensorSpec::new(b("post_ffw_norm.weight"), &[e], true).unless(out_norm));
        }
        specs
    }
}

/// Grok's: a dense FFN and experts, norms after the attention output and the layer.
fn grok(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_output_norm.weight {FFN} {EXPERTS} layer_output_norm.weight")
    })
}

impl Decoder for Grok {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            // The scale is in the capping; the softmax scales by 1.
            let att = b.rotary_attention(il, cur, 1.0, false)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let att = b.layer_rms_norm(il, att, "attn_output_norm.weight", "attn_out_norm")?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let experts = b.moe_ffn(il, cur, MOE)?;
            let mut ffn = experts;
            if b.layer_weight_opt(il, "ffn_up.weight").is_some() {
                let plain = Ffn {
                    gelu: true,
                    scaled: false,
                    biased: false,
                    oai: false,
                };
                let dense = b.gated_ffn(il, cur, plain)?;
                let dense = b.name(dense, "ffn_out", l);
                let sum = b.add(dense, experts)?;
                ffn = b.scale(sum, std::f32::consts::FRAC_1_SQRT_2)?;
            }
            let post = match b.layer_weight_opt(il, "layer_output_norm.weight") {
                Some(_) => "layer_output_norm.weight",
                None => "post_ffw_norm.weight",
            };
            let ffn = b.layer_rms_norm(il, ffn, post, "ffn_post_norm")?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let mut logits = b.output_head(x)?;
        logits = b.scale(logits, hp.logit_scale)?;
        let cap = hp.final_logit_softcap;
        if cap != 0.0 {
            logits = b.soft_cap(logits, 1.0, cap)?;
        }
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
