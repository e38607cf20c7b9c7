//! PLaMo 2: a hybrid of PLaMo-2 Mamba layers (the layers without KV heads) and attention layers
//! (one fused projection, per-head query and key norms with a weight per head, NeoX rotation,
//! scores scaled by the value head size). Every layer has norms before and after its mixer and
//! its FFN, an ungated-looking SwiGLU FFN whose one projection holds gate and up.

use super::created::{layered, HEAD};
use super::{head_tensors, mamba, plamo3};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Memory, TensorSpec};

pub struct Plamo2;

impl ArchSpec for Plamo2 {
    fn name(&self) -> &'static str {
        "plamo2"
    }

    fn about(&self) -> &'static str {
        "PLaMo 2: PLaMo-2 Mamba layers (z and x interleaved per head, normed B, C and Δt) beside \
            attention with per-head norm weights, norms around every mixer and FFN; llama.cpp 0.3.36 stores \
            a multi-sequence ubatch's states at the wrong cells and the engine does not, so results agree \
            where one sequence is decoded at a time."
    }

    fn rope_type(&self) -> i32 {
        2
    }

    fn read_keys(&self) -> &'static [&'static str] {
        &[
            "attention.layer_norm_rms_epsilon",
            "ssm.inner_size",
            "ssm.conv_kernel",
            "ssm.state_size",
            "ssm.time_step_rank",
            "ssm.group_count",
        ]
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        mamba::load_ssm(meta, hp, true)?;
        hp.recurrent_layers = hp.n_head_kv.iter().map(|&h| h == 0).collect();
        hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
        hp.size_label = match (hp.n_layer, hp.n_embd) {
            (16, _) => "1B",
            (32, 2048) => "2B",
            (32, 4096) => "8B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        plamo2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let (e, inner, state, heads, conv) = (hp.n_embd, hp.ssm_d_inner, hp.ssm_d_state, hp.ssm_dt_rank, hp.ssm_d_conv);
        let dt_dim = (hp.n_embd / 16).max(64);
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("post_attention_norm"), &[e], true),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::new(b("post_ffw_norm"), &[e], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, 2 * ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
            ]);
            if hp.is_recurrent(il) {
                specs.extend([
                    TensorSpec::matmul(b("ssm_in.weight"), &[e, 2 * inner], true),
                    TensorSpec::new(b("ssm_conv1d.weight"), &[conv, inner], true),
                    TensorSpec::matmul(b("ssm_x.weight"), &[inner, dt_dim + 2 * state], true),
                    TensorSpec::matmul(b("ssm_dt.weight"), &[dt_dim, heads], true),
                    TensorSpec::new(b("ssm_dt.bias"), &[heads], true),
                    TensorSpec::new(b("ssm_a"), &[heads], true),
                    TensorSpec::new(b("ssm_d"), &[heads], true),
                    TensorSpec::matmul(b("ssm_out.weight"), &[inner, e], true),
                    TensorSpec::new(b("ssm_dt_norm"), &[dt_dim], true),
                    TensorSpec::new(b("ssm_b_norm"), &[state], true),
                    TensorSpec::new(b("ssm_c_norm"), &[state], true),
                ]);
            } else {
                let (hk, hv) = (hp.n_embd_head_k, hp.n_embd_head_v);
                let (nh, nkv) = (hp.n_head[il], hp.n_head_kv[il]);
                specs.extend([
                    TensorSpec::matmul(b("attn_qkv.weight"), &[e, nh * hk + nkv * hk + nkv * hv], true),
                    TensorSpec::new(b("attn_q_norm.weight"), &[hk, nh], true),
                    TensorSpec::new(b("attn_k_norm.weight"), &[hk, nkv], true),
                    TensorSpec::matmul(b("attn_output.weight"), &[nh * hv, e], true),
                ]);
            }
        }
        specs
    }

    fn memory(&self) -> Memory {
        Memory::Hybrid
    }
}

/// PLaMo 2's: Mamba layers (with norms of dt, B and C, named without `.weight`) or attention
/// layers with per-head norms; norms after the mixer and the fused FFN.
fn plamo2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = if hp.is_recurrent(il) {
            "ssm_in.weight ssm_conv1d.weight ssm_x.weight ssm_dt.weight ssm_dt.bias ssm_a ssm_d ssm_out.weight ssm_dt_norm ssm_b_norm ssm_c_norm"
        } else {
            "attn_qkv.weight attn_q_norm.weight attn_k_norm.weight attn_output.weight"
        };
        format!(
            "attn_norm.weight {mixer} post_attention_norm ffn_norm.weight ffn_down.weight ffn_up.weight post_ffw_norm"
        )
    })
}

impl Decoder for Plamo2 {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_v as f32).sqrt();
        let mut x = b.embed_tokens_as("embedding_output")?;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let mixed = if hp.is_recurrent(il) {
                b.plamo2_mamba_layer(il, cur)?
            } else {
                let qkv = b.layer_matmul(il, "attn_qkv.weight", cur)?;
                let (q, k, v) = b.split_qkv(il, qkv, true)?;
                let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
                let q = b.rope(q, il, None)?;
                let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
                let k = b.rope(k, il, None)?;
                let att = b.attention(il, q, k, v, kq_scale, false)?;
                let wo = b.layer_weight(il, "attn_output.weight")?;
                b.linear(wo, None, att)?
            };
            x = plamo3::sandwich_ffn(b, il, mixed, x)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
