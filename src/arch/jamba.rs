//! Jamba: a decoder whose layers without key/value heads are Mamba layers (with norms of Δt, B
//! and C) and the rest attention without rotary positions; each layer's FFN dense or a mixture of
//! experts (softmax gating, weights not renormalised).

use super::created::{layered, EXPERTS, GATED, HEAD};
use super::{attention_tensors, head_tensors, llama, mamba};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NONE};

pub struct Jamba;

impl ArchSpec for Jamba {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "jamba",
            about: "A hybrid: Mamba layers, attention without rotation, experts.",
            rope_type: ROPE_NONE,
            read_keys: &[super::READS_SSM, super::READS_RMS_EPS],
            memory: Memory::Hybrid,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        mamba::load_ssm(meta, hp, false)?;
        if hp.ssm_d_inner != 2 * hp.n_embd {
            return Err(Error::model("jamba: only an expansion factor of 2 is supported"));
        }
        hp.recurrent_layers = hp.n_head_kv.iter().map(|&h| h == 0).collect();
        hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
        hp.rope = false;
        hp.size_label = "?B";
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        jamba(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, ne) = (hp.n_embd, hp.n_expert);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            if hp.is_recurrent(il) {
                mamba::mamba_tensors(hp, il, true, &mut specs);
            } else {
                attention_tensors(hp, il, &mut specs);
            }
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            // Each layer is a mixture of experts (as wide as the dense FFN) or dense.
            let router = b("ffn_gate_inp.weight");
            if ne > 0 {
                specs.push(TensorSpec::new(&router, &[e, ne], false));
                specs.push(TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, ff, ne], false));
                specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ff, ne], false));
                specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[ff, e, ne], false));
            }
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true).unless(&router));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true).unless(&router));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true).unless(&router));
        }
        specs
    }
}

/// Jamba's: Mamba layers with norms of dt, B and C, or attention layers; experts in every layer
/// when the model has experts (without a file, every router is made).
fn jamba(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = if hp.is_recurrent(il) {
            "ssm_in.weight ssm_conv1d.weight ssm_conv1d.bias ssm_x.weight ssm_dt_norm.weight ssm_dt.weight ssm_dt.bias ssm_b_norm.weight ssm_c_norm.weight ssm_a ssm_d ssm_out.weight"
        } else {
            "QKV attn_output.weight"
        };
        let ffn = if hp.n_expert > 0 { EXPERTS } else { GATED };
        format!("attn_norm.weight {mixer} ffn_norm.weight {ffn}")
    })
}

impl Decoder for Jamba {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = llama::Variant {
            mamba1: true,
            moe: Some(Moe { ..Moe::BASE }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
