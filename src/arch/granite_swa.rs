//! Granite with sliding-window layers (`granite_swa`): Granite's decoder and scales, per-head
//! attention sinks in every layer, a sliding window on the
//! layers `attention.sliding_window_pattern` marks, rotation on those `attention.rope_pattern`
//! marks (all when absent), and experts with a shared expert whose gate is fused into `ffn_up_shexp`.

use super::created::{layered, ATTN, GATED_BIASED, HEAD};
use super::{granite, layer_flags, llama};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::{Array, Value};
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct GraniteSwa;

impl ArchSpec for GraniteSwa {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "granite_swa",
            about: "Sliding layers from an array, attention sinks, a per-layer rope pattern, a fused shared expert.",
            read_keys: &[
                super::READS_RMS_EPS,
                &[
                    "expert_shared_feed_forward_length",
                    "deepstack_mapping",
                    "logit_scale",
                    "residual_scale",
                    "embedding_scale",
                    "attention.rope_pattern",
                    "attention.sliding_window",
                    "attention.sliding_window_pattern",
                    "attention.scale",
                ],
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.logit_scale = meta.f32(&hp.key("logit_scale"))?;
        hp.residual_scale = meta.f32_opt(&hp.key("residual_scale"))?.unwrap_or(0.0);
        hp.embedding_scale = meta.f32_opt(&hp.key("embedding_scale"))?.unwrap_or(0.0);
        hp.attn_scale = meta.f32_opt(&hp.key("attention.scale"))?.unwrap_or(0.0);
        super::check_equal_head_sizes(hp)?;
        super::load_sliding_window_array(meta, hp)?;
        if let Some(rope) = layer_flags(meta, hp, &hp.key("attention.rope_pattern"), true)? {
            hp.rope_layers = rope;
        }
        // Granite Vision's deepstack inputs (image features added to later layers): embedding rows
        // wider than n_embd whose extra parts are injected into later layers, which the graph
        // does not do.
        let deepstack = hp.key("deepstack_mapping");
        // llama.cpp reads the array as int32 (-1: none) and injects inputs from the second layer on.
        let map: Vec<i32> = match meta.0.get(&deepstack) {
            Some(Value::Array(Array::I32(map))) => map.clone(),
            Some(Value::Array(Array::U32(map))) => map.iter().map(|&m| m as i32).collect(),
            _ => Vec::new(),
        };
        if map.iter().take(hp.n_layer as usize).skip(1).any(|&m| m >= 0) {
            return Err(Error::model(format!(
                "'{deepstack}': deepstack layers are not supported"
            )));
        }
        if hp.n_expert > 0 {
            hp.n_ff_exp = hp.n_ff[0];
            hp.n_ff_shexp = meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0);
        }
        hp.size_label = match hp.n_layer {
            32 | 40 => "3B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        granite_swa(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = llama::tensors(hp);
        let (e, sh) = (hp.n_embd, hp.n_ff_shexp);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_sinks.weight"), &[hp.n_head[il]], true));
            if hp.n_expert > 0 {
                // Llama's separate gate and up stacks, or fused ones.
                let apart = [b("ffn_gate_exps.weight"), b("ffn_up_exps.weight")];
                specs.retain(|s| !apart.contains(&s.name));
                specs.extend(super::gate_up_exps(hp, il));
            }
            if sh > 0 {
                specs.push(TensorSpec::matmul(b("ffn_up_shexp.weight"), &[e, 2 * sh], true));
                specs.push(TensorSpec::matmul(b("ffn_down_shexp.weight"), &[sh, e], true));
            }
        }
        specs
    }
}

/// Granite with sliding-window layers: Llama's attention with per-head sinks, the rotary factors,
/// then the FFN with its biases, or experts (gate and up fused: made fused without a file) with a
/// shared expert whose gate and up are one projection.
fn granite_swa(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        let ffn = match hp.n_expert {
            0 => GATED_BIASED.to_string(),
            _ => {
                let shared = if hp.n_ff_shexp > 0 {
                    "ffn_up_shexp.weight ffn_down_shexp.weight"
                } else {
                    ""
                };
                format!("ffn_gate_inp.weight ffn_down_exps.weight ffn_gate_up_exps.weight {shared}")
            }
        };
        format!("{ATTN} attn_output.bias attn_sinks.weight ffn_norm.weight ROPE {ffn}")
    })
}

impl Decoder for GraniteSwa {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        llama::decoder(b, granite::variant())
    }
}
