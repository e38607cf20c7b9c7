//! gpt-oss: attention with per-head sinks and output biases, every other layer sliding, YaRN
//! positions; biased experts routed by a softmax over the picked ones, gpt-oss's clamped SwiGLU;
//! the requested rows selected after the last layer.

use super::common_tensors;
use super::created::{layered, EXPERTS, HEAD};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, Builder, Decoder, ExpertAct, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct GptOss;

/// Without an explicit pattern, every other layer slides.
const DEFAULT_SWA_PERIOD: u32 = 2;

const MOE: Moe = Moe {
    gating: Gating::SoftmaxWeight,
    act: ExpertAct::SwigluOai,
    ..Moe::BASE
};

impl ArchSpec for GptOss {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "gpt-oss",
            about: "Attention sinks, biased experts, sliding layers, YaRN.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &["expert_feed_forward_length"],
            ],
            saved_rules: &[super::HELD_SWA_BASE],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_expert == 0 || hp.n_ff_exp == 0 {
            return Err(Error::model(format!(
                "gpt-oss needs experts (keys '{}' and '{}')",
                hp.key("expert_count"),
                hp.key("expert_feed_forward_length")
            )));
        }
        let window = meta.u32(&hp.key("attention.sliding_window"))?;
        let (base, scale) = (hp.rope_freq_base, hp.rope_freq_scale);
        super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, base, scale)?;
        hp.size_label = match hp.n_layer {
            24 => "20B",
            36 => "120B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        gpt_oss(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        common_tensors(hp, true, &mut specs);
        specs.retain(|s| !s.name.ends_with(".ffn_norm.weight"));
        super::require_output(&mut specs);
        let (e, ne, ff) = (hp.n_embd, hp.n_expert, hp.n_ff_exp);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("post_attention_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("attn_output.bias"), &[e], true));
            specs.push(TensorSpec::new(b("attn_sinks.weight"), &[hp.n_head[il]], true));
            specs.push(TensorSpec::new(b("ffn_gate_inp.bias"), &[ne], true));
            specs.push(TensorSpec::new(b("ffn_gate_exps.bias"), &[ff, ne], true));
            specs.push(TensorSpec::new(b("ffn_up_exps.bias"), &[ff, ne], true));
            specs.push(TensorSpec::new(b("ffn_down_exps.bias"), &[e, ne], true));
        }
        specs
    }
}

/// gpt-oss's: a norm after the attention, attention sinks, experts with biases (the biases last).
fn gpt_oss(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight post_attention_norm.weight QKV attn_output.weight attn_sinks.weight {EXPERTS} attn_output.bias ffn_gate_inp.bias ffn_gate_exps.bias ffn_down_exps.bias ffn_up_exps.bias")
    })
}

impl Decoder for GptOss {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_rot as f32).sqrt();
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = b.rotary_attention(il, cur, kq_scale, is_sliding(hp, il))?;
            let att = b.layer_linear(il, "attn_output", att)?;
            let att = b.name(att, "attn_out", l);
            let h = b.add(att, x)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "post_attention_norm.weight", "attn_post_norm")?;
            let ffn = b.moe_ffn(il, cur, MOE)?;
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        // llama.cpp selects the requested rows only after the last layer here.
        let x = b.select_outputs(x)?;
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
