//! HY-V3 (Tencent Hunyuan 3): per-head query and key norms before NeoX rotation (with optional
//! frequency factors); per layer, as the file has them, a dense FFN or experts (gate and up fused
//! or not) routed by sigmoid unless the file says otherwise, with a selection bias named without
//! its suffix, beside an always-on shared expert, every projection times its weight's scale; the
//! output rows picked after the final norm, as llama.cpp's graph does. Multi-token-prediction
//! layers are refused.

use super::created::{layered, GATED, HEAD, SHARED_GUD};
use super::head_tensors;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{rope_factors, Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct HyV3;

impl ArchSpec for HyV3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "hy_v3",
            about: "Hunyuan 3: head norms, dense or sigmoid-routed expert layers as the file has them beside a \
                shared expert, weight scales, output rows picked after the final norm.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_GATING,
                super::READS_RMS_EPS,
                &[
                    "expert_feed_forward_length",
                    "expert_shared_feed_forward_length",
                    "expert_weights_scale",
                ],
            ],
            saved_rules: &[super::HELD_GATING],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        super::refuse_mtp(meta, hp)?;
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        if hp.n_ff_exp == 0 {
            hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used.max(1);
        }
        let shared = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0);
        hp.n_ff_shexp = if shared > 0 { shared } else { hp.n_ff_exp };
        super::load_sigmoid_routing(meta, hp)?;
        hp.size_label = if hp.n_layer == 48 { "30B.A3B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        hy_v3(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        super::rope_factor_tensors(hp, &mut specs);
        let (e, hk) = (hp.n_embd, hp.n_embd_head_k);
        let (n, x, sh) = (hp.n_expert, hp.n_ff_exp, hp.n_ff_shexp);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            super::attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hk], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hk], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            // Every FFN tensor is optional: a layer is dense or experts as the file has it.
            specs.extend([
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], false),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], false),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], false),
                TensorSpec::new(b("ffn_gate_inp.weight"), &[e, n], false),
                TensorSpec::new(b("exp_probs_b"), &[n], false),
                TensorSpec::matmul(b("ffn_gate_up_exps.weight"), &[e, 2 * x, n], false),
                TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, x, n], false),
                TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, x, n], false),
                TensorSpec::matmul(b("ffn_down_exps.weight"), &[x, e, n], false),
                TensorSpec::matmul(b("ffn_gate_shexp.weight"), &[e, sh], false),
                TensorSpec::matmul(b("ffn_up_shexp.weight"), &[e, sh], false),
                TensorSpec::matmul(b("ffn_down_shexp.weight"), &[sh, e], false),
            ]);
        }
        specs
    }
}

/// HY-V3's: Qwen 3's attention; every FFN tensor is optional, so without a file each layer gets
/// both a dense FFN and experts (the router's selection bias named without `.bias`, gate and up
/// fused) with shared ones, and runs the experts.
fn hy_v3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!(
            "attn_norm.weight QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {GATED} \
             ffn_gate_inp.weight exp_probs_b ffn_down_exps.weight ffn_gate_up_exps.weight {SHARED_GUD}"
        )
    })
}

impl Decoder for HyV3 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        let factors = rope_factors(b.model, &b.params);
        let scaled = Ffn {
            scaled: true,
            ..Ffn::default()
        };
        let mut x = b.embed_tokens()?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = b.head_normed_attention(il, cur, kq_scale, factors)?;
            // Every row reaches the final norm; the outputs are picked after it.
            let h = b.add(att, x)?;
            let h = b.name(h, "ffn_inp", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if b.layer_weight_opt(il, "ffn_gate_inp.weight").is_some() {
                let moe = Moe {
                    gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Sigmoid),
                    normalize: hp.expert_weights_norm,
                    scaled: true,
                    ..Moe::BASE
                };
                let routed = b.moe_ffn(il, cur, moe)?;
                let shared = b.gated_ffn_named(il, cur, scaled, "_shexp")?;
                b.add(routed, shared)?
            } else {
                b.gated_ffn(il, cur, scaled)?
            };
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let logits = b.output_head_selecting(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
