//! ERNIE 4.5 with experts: ERNIE 4.5's decoder (its attention output bias loaded but left out),
//! leading dense layers, then softmax-routed experts of their own width with an optional
//! selection bias (`exp_probs_b`) and an optional shared expert, without the weights' scales.
//! llama.cpp's graph takes a layer's experts only every `interleave_moe_layer_step` layers and
//! fails on the others, so files whose expert layers are not all on that step are refused.

use super::created::{dense_lead, layered, ATTN, HEAD, SHARED_GDU};
use super::{layer_of, llama};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Ernie45Moe;

impl ArchSpec for Ernie45Moe {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "ernie4_5-moe",
            about: "ERNIE 4.5 with experts: leading dense layers, experts with a selection bias and a shared expert.",
            read_keys: &[
                super::READS_RMS_EPS,
                &[
                    "leading_dense_block_count",
                    "expert_feed_forward_length",
                    "expert_shared_feed_forward_length",
                    "interleave_moe_layer_step",
                    "rope.dimension_sections",
                ],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        hp.n_ff_exp = meta.u32(&hp.key("expert_feed_forward_length"))?;
        hp.n_ff_shexp = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0);
        hp.n_layer_dense_lead = meta.u32_opt(&hp.key("leading_dense_block_count"))?.unwrap_or(0);
        let step = meta.u32(&hp.key("interleave_moe_layer_step"))?;
        if step == 0 || (hp.n_layer_dense_lead..hp.n_layer).any(|il| (il + 1) % step != 0) {
            return Err(Error::model(format!(
                "ernie4_5-moe: expert layers {}..{} are not all on the MoE layer step {step}",
                hp.n_layer_dense_lead, hp.n_layer
            )));
        }
        if hp.n_expert == 0 {
            return Err(Error::model("ernie4_5-moe needs experts (expert_count)"));
        }
        hp.size_label = match hp.n_layer {
            18 => "0.3B",
            28 => "21B.A3B",
            54 => "300B.A47B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        ernie4_5_moe(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, x, sh, n) = (hp.n_embd, hp.n_ff_exp, hp.n_ff_shexp, hp.n_expert);
        let mut specs = llama::tensors_with(hp, true);
        let lead = hp.n_layer_dense_lead as usize;
        super::dense_lead(hp, &mut specs, |d| llama::tensors_with(d, false));
        for s in specs.iter_mut() {
            if layer_of(&s.name).is_some_and(|il| il >= lead) && s.name.contains("_exps.") {
                // Experts as wide as the file's expert width.
                let w = if s.name.contains("ffn_down_exps") {
                    [x, e, n]
                } else {
                    [e, x, n]
                };
                s.shape = w.iter().map(|&d| d.into()).collect();
            }
        }
        for il in lead..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[n], false));
            if sh > 0 {
                super::shared_expert_tensors(hp, il, &mut specs);
            }
        }
        specs
    }
}

/// ERNIE 4.5 MoE's: ERNIE 4.5's attention, dense leading layers, then experts with the router's
/// selection bias (and shared ones where the model has them).
fn ernie4_5_moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts = format!("ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {shared}");
        format!(
            "{ATTN} attn_output.bias ffn_norm.weight {}",
            dense_lead(hp, il, &experts)
        )
    })
}

impl Decoder for Ernie45Moe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            no_wo_bias: true,
            moe: Some(Moe {
                normalize: true,
                ..Moe::BASE
            }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
