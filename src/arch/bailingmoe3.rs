//! BailingMoE 3 (Ling 3): a hybrid of Kimi delta attention layers (full-rank decay and output-gate
//! projections, the decay a "safe gate" bounded below; rollback snapshots kept) and absorbed
//! latent attention layers (rotated, M-RoPE where the file gives sections, each head's output
//! gated by a sigmoid); the layers without KV heads are the KDA ones. Leading dense FFN layers,
//! then experts routed as the file says beside shared experts, each SwiGLU clamped where the file
//! gives limits. Rows are selected for the outputs after the final norm, as llama.cpp does here.
//!
//! As in llama.cpp's graph, no projection is multiplied by its weight's scale.

use super::created::{layered, HEAD, SHARED_GUD};
use super::{deepseek2, kimi_linear, minicpm3};
use crate::error::{Error, Result};
use crate::ggml::{TensorRef, ROPE_MROPE};
use crate::graph::{Builder, Decoder, Gating, Moe};
use crate::model::hparams::{HParams, KdaDecay};
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec};

pub struct BailingMoe3;

impl ArchSpec for BailingMoe3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "bailingmoe3",
            about: "Ling 3: Kimi delta attention layers with full-rank decay and output-gate projections and a safe \
                gate, beside rotated absorbed latent attention gated per head, M-RoPE where the file gives \
                sections; SwiGLU limits on experts and the other FFNs in llama.cpp's split form; rollback \
                snapshots kept; multi-token-prediction layers refused.",
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_MLA,
                super::READS_RMS_EPS,
                &[
                    "expert_shared_feed_forward_length",
                    "swiglu_clamp_exp",
                    "swiglu_clamp_shexp",
                    "rope.dimension_sections",
                    "ssm.conv_kernel",
                    "kda.head_dim",
                    "kda.safe_gate",
                    "kda.gate_lower_bound",
                ],
            ],
            saved_rules: &[("kda.safe_gate", Rule::Bool(true))],
            layer_members: &[
                ("ssm_norm.weight", "ssm_o_norm"),
                ("layer_output_norm.weight", "nextn.shared_head_norm"),
            ],
            memory: Memory::Hybrid,
            rollback: true,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::refuse_mtp(meta, hp)?;
        hp.n_embd_head_k_mla = meta.u32(&hp.key("attention.key_length_mla"))?;
        hp.n_embd_head_v_mla = meta.u32(&hp.key("attention.value_length_mla"))?;
        hp.n_lora_kv = meta.u32(&hp.key("attention.kv_lora_rank"))?;
        hp.n_lora_q = meta.u32_opt(&hp.key("attention.q_lora_rank"))?.unwrap_or(0);
        kimi_linear::load_kda(meta, hp)?;
        let safe = meta.bool_opt(&hp.key("kda.safe_gate"))?.unwrap_or(true);
        let bound = meta.f32(&hp.key("kda.gate_lower_bound"))?;
        if !safe || bound.is_nan() || bound >= 0.0 {
            return Err(Error::model(format!(
                "bailingmoe3: only the safe KDA gate with a negative lower bound is defined (safe_gate {safe}, bound {bound})"
            )));
        }
        hp.kda_decay = KdaDecay::SafeGate(bound);
        if meta.i32_array(&hp.key("rope.dimension_sections"), 4)?.is_some() {
            super::load_rope_sections(meta, hp)?;
        }
        // The VL files carry M-RoPE sections; text-only files rotate plainly.
        if hp.rope_sections[0] > 0 && hp.rope_sections[1] > 0 {
            hp.rope_type = ROPE_MROPE;
        }
        kimi_linear::split_layers(hp)?;
        kimi_linear::load_experts(meta, hp, true, true)?;
        let n = hp.n_layer as usize;
        hp.swiglu_clamp_exp = meta.f32_per_layer(&hp.key("swiglu_clamp_exp"), n)?.unwrap_or_default();
        hp.swiglu_clamp_shexp = meta
            .f32_per_layer(&hp.key("swiglu_clamp_shexp"), n)?
            .unwrap_or_default();
        hp.size_label = match (hp.n_layer, hp.n_embd, hp.n_expert) {
            (24, 1536, 128) => "7.9B.A1.3B",
            (42, 2560, 512) => "124B.A5.1B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        bailingmoe3(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        kimi_linear::hybrid_tensors(hp, kimi_linear::KdaTensors::Bailing, latent_tensors)
    }
}

/// Ling 3's (`bailingmoe3`): delta attention layers (one projection for the decay and one for the
/// gate) or latent attention (each compression's norm after it, an output gate per head); dense
/// leading layers, then experts with the router's selection bias and shared ones (gate, up, down).
fn bailingmoe3(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let q = match hp.n_lora_q > 0 {
            true => "attn_q_a.weight attn_q_a_norm.weight attn_q_b.weight",
            false => "attn_q.weight",
        };
        let mixer = match hp.is_recurrent(il) {
            true => kimi_linear::kda("ssm_f_a.weight", "ssm_g_a.weight"),
            false => format!(
                "{q} attn_kv_a_mqa.weight attn_kv_a_norm.weight attn_k_b.weight attn_v_b.weight attn_gate.weight \
                 attn_output.weight"
            ),
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GUD } else { "" };
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => "ffn_gate.weight ffn_up.weight ffn_down.weight".to_string(),
            false => format!(
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_up_exps.weight ffn_down_exps.weight {shared}"
            ),
        };
        format!("attn_norm.weight {mixer} ffn_norm.weight {ffn}")
    })
}

/// Queries through a normed low rank (with a query rank) or one projection, the latent and the
/// rotated shared key part, the absorbed widenings, one output gate per head.
fn latent_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let b = |s: &str| format!("blk.{il}.{s}");
    let (e, rot, kv_rank, q_rank) = (hp.n_embd, hp.n_rot, hp.n_lora_kv, hp.n_lora_q);
    let (hk, hv, n_head) = (hp.n_embd_head_k_mla, hp.n_embd_head_v_mla, hp.n_head[il]);
    if q_rank > 0 {
        specs.extend([
            TensorSpec::matmul(b("attn_q_a.weight"), &[e, q_rank], true),
            TensorSpec::new(b("attn_q_a_norm.weight"), &[q_rank], true),
            TensorSpec::matmul(b("attn_q_b.weight"), &[q_rank, n_head * hk], true),
        ]);
    } else {
        specs.push(TensorSpec::matmul(b("attn_q.weight"), &[e, n_head * hk], true));
    }
    specs.extend([
        TensorSpec::matmul(b("attn_kv_a_mqa.weight"), &[e, kv_rank + rot], true),
        TensorSpec::new(b("attn_kv_a_norm.weight"), &[kv_rank], true),
        TensorSpec::matmul(b("attn_k_b.weight"), &[hk - rot, kv_rank, n_head], true),
        TensorSpec::matmul(b("attn_v_b.weight"), &[kv_rank, hv, n_head], true),
        TensorSpec::matmul(b("attn_gate.weight"), &[e, n_head], true),
        TensorSpec::matmul(b("attn_output.weight"), &[n_head * hv, e], true),
    ]);
}

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`).
const WITHOUT_ADAPTERS: &[&str] = &[
    "output",
    "attn_q",
    "attn_q_a",
    "attn_q_b",
    "attn_kv_a_mqa",
    "attn_k_b",
    "attn_output",
    "attn_gate",
    "ssm_beta",
    "ssm_f_a",
    "ssm_g_a",
    "nextn.eh_proj",
    "attn_k",
    "attn_v",
];

impl Decoder for BailingMoe3 {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let kq_scale = 1.0 / (hp.n_embd_head_k_mla as f32).sqrt();
        let moe = Moe::silu(hp.expert_gating_func, Gating::Softmax, hp.expert_weights_norm, false);
        let mut x = b.embed_tokens_as("model.input_embed")?;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = if hp.is_recurrent(il) {
                b.kda_layer(il, cur, false)?
            } else {
                gated_latent_attention(b, il, cur, kq_scale)?
            };
            x = deepseek2::ffn_block(b, il, att, x, moe)?;
        }
        let logits = b.output_head_selecting(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// Absorbed latent attention (rotated), each head's output times the sigmoid of its gate, then
/// projected out.
fn gated_latent_attention(b: &mut Builder, il: usize, cur: TensorRef, kq_scale: f32) -> Result<TensorRef> {
    let hp = b.hp;
    let (hv, n_head) = (i64::from(hp.n_embd_head_v_mla), i64::from(hp.n_head[il]));
    let q = deepseek2::latent_queries(b, il, cur, i64::from(hp.n_embd_head_k_mla))?;
    let nt = q.ne()[2];
    let (latent, k_pe) = minicpm3::latent_kv(b, il, cur, None)?;
    let att = deepseek2::absorbed_attention(b, il, q, latent, k_pe, kq_scale, None)?;
    let gate = b.layer_matmul(il, "attn_gate.weight", cur)?;
    let gate = b.g.reshape(gate, &[1, n_head, nt])?;
    let gate = b.g.sigmoid(gate)?;
    let att = b.g.reshape(att, &[hv, n_head, nt])?;
    let att = b.g.mul(att, gate)?;
    let att = b.g.reshape(att, &[hv * n_head, nt])?;
    let out = b.layer_matmul(il, "attn_output.weight", att)?;
    Ok(b.name(out, "mla_out", Some(il)))
}
