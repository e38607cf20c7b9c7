//! dots.llm1: Qwen3's layers (per-head query and key norms before NeoX rotation) with leading
//! dense layers, then experts routed by the file's gating function (an optional selection bias,
//! the picked weights normalised and scaled as the file says) beside shared experts, and its own
//! output head.

use super::{dense_lead, llama, qwen3};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, ExpertAct, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, TensorSpec};

pub struct Dots1;

impl ArchSpec for Dots1 {
    fn name(&self) -> &'static str {
        "dots1"
    }

    fn rope_type(&self) -> i32 {
        2
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        // llama.cpp's key and value projections are as wide as its queries.
        if hp.n_rot != hp.n_embd_head_k || hp.n_head_kv.iter().zip(&hp.n_head).any(|(kv, q)| kv != q) {
            return Err(Error::model(
                "dots1 needs as many KV heads as query heads and the rope dimension count equal to the head size",
            ));
        }
        hp.n_layer_dense_lead = meta.u32_opt(&hp.key("leading_dense_block_count"))?.unwrap_or(0);
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        let shared = meta.u32(&hp.key("expert_shared_count"))?;
        hp.expert_weights_scale = meta.f32_opt(&hp.key("expert_weights_scale"))?.unwrap_or(0.0);
        hp.expert_weights_norm = meta.bool_opt(&hp.key("expert_weights_norm"))?.unwrap_or(false);
        if hp.n_layer_dense_lead < hp.n_layer {
            if hp.n_expert == 0 || hp.n_expert_used == 0 {
                return Err(Error::model("dots1 needs experts (expert_count, expert_used_count)"));
            }
            // llama.cpp has no gating of its own for dots1: the file must say.
            let gating = meta.u32(&hp.key("expert_gating_func"))?;
            if Gating::from_llama(gating).is_none() {
                return Err(Error::NotImplemented("dots1 with that expert gating function"));
            }
            hp.expert_gating_func = gating;
        }
        hp.n_ff_shexp = hp.n_ff_exp * shared;
        hp.size_label = if hp.n_layer == 62 { "142B" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = qwen3::tensors(hp, true);
        dense_lead(hp, &mut specs, |d| qwen3::tensors(d, false));
        for s in specs.iter_mut().filter(|s| s.name == "output.weight") {
            s.required = true;
        }
        let (e, sh) = (hp.n_embd, hp.n_ff_shexp);
        for il in hp.n_layer_dense_lead as usize..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[hp.n_expert], false));
            specs.push(TensorSpec::matmul(b("ffn_gate_shexp.weight"), &[e, sh], true));
            specs.push(TensorSpec::matmul(b("ffn_up_shexp.weight"), &[e, sh], true));
            specs.push(TensorSpec::matmul(b("ffn_down_shexp.weight"), &[sh, e], true));
        }
        specs
    }
}

impl Decoder for Dots1 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let variant = llama::Variant {
            qk_norm: true,
            moe: Some(Moe {
                gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Softmax),
                normalize: hp.expert_weights_norm,
                act: ExpertAct::Silu,
                scaled: false,
                warmup_all: true,
            }),
            ..llama::Variant::default()
        };
        llama::decoder(b, variant)
    }
}
