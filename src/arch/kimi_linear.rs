//! Kimi-Linear: a hybrid of Kimi delta attention layers (KDA, linear attention with a per-head
//! [S, S] state and a decay per key dimension, `graph/ssm.rs`) and multi-head latent attention
//! layers without rotation (DeepSeek's absorbed MLA, the latent kept in a keys-only cache); the
//! layers without KV heads are the KDA ones. Leading dense FFN layers, then experts routed as
//! the file says (weights renormalised) beside shared experts.
//!
//! As in llama.cpp's graph, only the latent attention's output projection is multiplied by its
//! weight's scale; every other projection is used as it is.

use super::created::{layered, EXPERTS, GATED, HEAD, SHARED_GDU};
use super::{deepseek2, head_tensors, minicpm3};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NONE};

pub struct KimiLinear;

impl ArchSpec for KimiLinear {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "kimi-linear",
            about: "Kimi-Linear: Kimi delta attention layers (q, k and v convolved apart, a decay per key dimension, \
                the gated delta rule, an output norm gated by a sigmoid) beside unrotated absorbed latent \
                attention; leading dense layers, then routed and shared experts; a latent cache needs the same K \
                and V cache types, as in llama.cpp.",
            rope_type: ROPE_NONE,
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_RMS_EPS,
                &[
                    "expert_gating_func",
                    "attention.kv_lora_rank",
                    "attention.key_length_mla",
                    "attention.value_length_mla",
                    "ssm.conv_kernel",
                    "kda.head_dim",
                ],
            ],
            layer_members: &[("ssm_norm.weight", "ssm_o_norm")],
            memory: Memory::Hybrid,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.rope = false;
        hp.n_embd_head_k_mla = meta.u32(&hp.key("attention.key_length_mla"))?;
        hp.n_embd_head_v_mla = meta.u32(&hp.key("attention.value_length_mla"))?;
        hp.n_lora_kv = meta.u32(&hp.key("attention.kv_lora_rank"))?;
        load_kda(meta, hp)?;
        split_layers(hp)?;
        load_experts(meta, hp, false, false)?;
        hp.size_label = if hp.n_layer == 27 { "48B.A3B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        kimi_linear(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        hybrid_tensors(hp, KdaTensors::KimiLinear, latent_tensors)
    }
}

/// A Kimi delta attention mixer: the convolutions of queries, keys and values, the projections,
/// the decay's projection(s) `f`, beta, the decay rates and bias, the output gate's `g`, the norm
/// and the output.
pub(super) fn kda(f: &str, g: &str) -> String {
    format!(
        "ssm_conv1d_q.weight ssm_conv1d_k.weight ssm_conv1d_v.weight QKV {f} ssm_beta.weight ssm_a ssm_dt.bias {g} \
         ssm_norm.weight attn_output.weight"
    )
}

/// Latent attention as Kimi's loaders make it: queries compressed where the model has a rank for
/// them, keys and values decompressed per head (without a file the fused decompression is
/// skipped), then `gate` (an output gate, or nothing) and the output projection.
pub(super) fn mla(hp: &HParams, gate: &str) -> String {
    let (q_norm, q) = match hp.n_lora_q > 0 {
        true => ("attn_q_a_norm.weight", "attn_q_a.weight attn_q_b.weight"),
        false => ("", "attn_q.weight"),
    };
    format!(
        "{q_norm} attn_kv_a_norm.weight {q} attn_kv_a_mqa.weight attn_k_b.weight attn_v_b.weight {gate} \
         attn_output.weight"
    )
}

/// Kimi-Linear's: delta attention or latent attention layers; dense leading layers, then experts,
/// shared ones (always made without a file) and the router's selection bias.
fn kimi_linear(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let mixer = match hp.is_recurrent(il) {
            true => kda("ssm_f_a.weight ssm_f_b.weight", "ssm_g_a.weight ssm_g_b.weight"),
            false => mla(hp, ""),
        };
        let experts = format!("{EXPERTS} {SHARED_GDU} exp_probs_b.bias");
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED,
            false => &experts,
        };
        format!("attn_norm.weight {mixer} ffn_norm.weight {ffn}")
    })
}

/// The tensors of a KDA hybrid in DeepSeek's layout (Kimi-Linear's, BailingMoE 3's): per layer a
/// KDA block of `kda`'s kind or the `latent` attention's tensors, then the leading layers' dense
/// FFN or routed experts with their selection bias beside shared experts.
pub(super) fn hybrid_tensors(
    hp: &HParams,
    kda: KdaTensors,
    latent: fn(&HParams, usize, &mut Vec<TensorSpec>),
) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    head_tensors(hp, &mut specs);
    for il in 0..hp.n_layer as usize {
        let b = |s: &str| format!("blk.{il}.{s}");
        specs.push(TensorSpec::new(b("attn_norm.weight"), &[hp.n_embd], true));
        if hp.is_recurrent(il) {
            kda_tensors(hp, il, kda, &mut specs);
        } else {
            latent(hp, il, &mut specs);
        }
        if il < hp.n_layer_dense_lead as usize {
            super::ffn_tensors(hp, il, false, &mut specs);
        } else {
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[hp.n_embd], true));
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[hp.n_expert], true));
            super::routed_expert_tensors(hp, il, &mut specs);
        }
    }
    specs
}

/// The layers without KV heads are the KDA ones, the others latent attention (checked).
pub(super) fn split_layers(hp: &mut HParams) -> Result<()> {
    hp.recurrent_layers = hp.n_head_kv.iter().map(|&h| h == 0).collect();
    hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
    check_latent(hp)
}

/// Leading dense layers (`leading_dense_block_count`, required where `dense_lead_required`), then
/// experts routed as `expert_gating_func` says, their weights normalised and scaled as the file
/// says, beside shared experts as wide as the experts times their count (or, where
/// `shared_width_key`, as `expert_shared_feed_forward_length` says when it is given).
pub(super) fn load_experts(
    meta: &Meta,
    hp: &mut HParams,
    dense_lead_required: bool,
    shared_width_key: bool,
) -> Result<()> {
    let lead = hp.key("leading_dense_block_count");
    hp.n_layer_dense_lead = if dense_lead_required {
        meta.u32(&lead)?
    } else {
        meta.u32_opt(&lead)?.unwrap_or(0)
    };
    if hp.n_layer_dense_lead < hp.n_layer {
        super::check_experts(hp)?;
    }
    meta.u32(&hp.key("expert_feed_forward_length"))?;
    let shared = meta.u32(&hp.key("expert_shared_count"))?;
    let width = match shared_width_key {
        true => meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?,
        false => None,
    };
    hp.n_ff_shexp = width.filter(|&n| n > 0).unwrap_or(hp.n_ff_exp * shared.max(1));
    hp.expert_weights_scale = meta.f32_opt(&hp.key("expert_weights_scale"))?.unwrap_or(0.0);
    hp.expert_weights_norm = meta.bool_opt(&hp.key("expert_weights_norm"))?.unwrap_or(false);
    hp.expert_gating_func = meta.u32(&hp.key("expert_gating_func"))?;
    if Gating::from_llama(hp.expert_gating_func).is_none() {
        return Err(Error::model(format!(
            "{}: unknown expert gating function {}",
            hp.arch_name, hp.expert_gating_func
        )));
    }
    Ok(())
}

/// The KDA layers' sizes, held where the recurrent memory and the delta rule read them: heads of
/// `kda.head_dim` (the state's S), as many as the first layer's query heads, one key head per
/// value head, and three convolved channels (q, k, v) per inner dimension.
pub(super) fn load_kda(meta: &Meta, hp: &mut HParams) -> Result<()> {
    let head = meta.u32(&hp.key("kda.head_dim"))?;
    let n_head = hp.n_head[0];
    hp.ssm_d_conv = meta.u32(&hp.key("ssm.conv_kernel"))?;
    let limit = 1 << 16;
    if head == 0 || head > limit || n_head == 0 || hp.ssm_d_conv == 0 || hp.ssm_d_conv > limit {
        return Err(Error::model(format!(
            "{}: KDA heads of {head} ({n_head} of them) with a convolution of {} are out of range",
            hp.arch_name, hp.ssm_d_conv
        )));
    }
    hp.ssm_d_state = head;
    hp.ssm_n_group = n_head;
    hp.ssm_dt_rank = n_head;
    hp.ssm_d_inner = head * n_head;
    Ok(())
}

/// The latent attention layers' cache heads: one KV head of the latent plus the shared part.
fn check_latent(hp: &HParams) -> Result<()> {
    let (hk, rot) = (hp.n_embd_head_k_mla, hp.n_rot);
    let fits = (0..hp.n_layer as usize)
        .filter(|&il| !hp.is_recurrent(il))
        .all(|il| hp.n_head_kv[il] == 1);
    if hp.n_lora_kv == 0 || rot >= hk || hp.n_embd_head_k != hp.n_lora_kv + rot || !fits {
        return Err(Error::model(format!(
            "{}: latent attention needs one KV head per attention layer, of the latent ({}) \
             plus a shared part ({rot} of key heads of {hk}); the file's cached key heads are {}",
            hp.arch_name, hp.n_lora_kv, hp.n_embd_head_k
        )));
    }
    Ok(())
}

/// Where the KDA layers of the three architectures differ in their tensors.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum KdaTensors {
    /// Low-rank decay and output-gate projections, A of [1, n_head].
    KimiLinear,
    /// Low-rank decay projection, one full-rank output gate `ssm_g`, A of [n_head].
    KimiK3,
    /// Full-rank decay (`ssm_f_a`) and output gate (`ssm_g_a`) projections, A of [1, n_head].
    Bailing,
    /// Low-rank decay and output-gate projections, A of [n_head].
    Glm5Next,
}

/// A KDA layer's tensors (the q, k and v projections may be fused where llama.cpp's graph
/// takes that; it loads their biases and leaves them unused).
pub(super) fn kda_tensors(hp: &HParams, il: usize, style: KdaTensors, specs: &mut Vec<TensorSpec>) {
    let b = |s: &str| format!("blk.{il}.{s}");
    let (e, head, n_head, inner) = (hp.n_embd, hp.ssm_d_state, hp.ssm_n_group, hp.ssm_d_inner);
    for part in ["q", "k", "v"] {
        specs.push(TensorSpec::new(
            b(&format!("ssm_conv1d_{part}.weight")),
            &[hp.ssm_d_conv, 1, inner],
            true,
        ));
    }
    let qkv = b("attn_qkv.weight");
    specs.push(TensorSpec::matmul(&qkv, &[e, 3 * inner], false));
    specs.push(TensorSpec::new(b("attn_qkv.bias"), &[3 * inner], false));
    for part in ["q", "k", "v"] {
        specs.push(TensorSpec::matmul(b(&format!("attn_{part}.weight")), &[e, inner], true).unless(&qkv));
        specs.push(TensorSpec::new(b(&format!("attn_{part}.bias")), &[inner], false));
    }
    specs.extend([
        TensorSpec::matmul(b("ssm_beta.weight"), &[e, n_head], true),
        TensorSpec::new(b("ssm_dt.bias"), &[inner], true),
        TensorSpec::new(b("ssm_norm.weight"), &[head], true),
        TensorSpec::matmul(b("attn_output.weight"), &[inner, e], true),
    ]);
    let low_rank = |name: &str, specs: &mut Vec<TensorSpec>| {
        specs.push(TensorSpec::matmul(b(&format!("{name}_a.weight")), &[e, head], true));
        specs.push(TensorSpec::matmul(b(&format!("{name}_b.weight")), &[head, inner], true));
    };
    match style {
        KdaTensors::KimiLinear | KdaTensors::Glm5Next => {
            let a: &[u32] = match style {
                KdaTensors::Glm5Next => &[n_head],
                _ => &[1, n_head],
            };
            specs.push(TensorSpec::new(b("ssm_a"), a, true));
            low_rank("ssm_f", specs);
            low_rank("ssm_g", specs);
        }
        KdaTensors::KimiK3 => {
            specs.push(TensorSpec::new(b("ssm_a"), &[n_head], true));
            low_rank("ssm_f", specs);
            specs.push(TensorSpec::matmul(b("ssm_g.weight"), &[e, inner], true));
        }
        KdaTensors::Bailing => {
            specs.push(TensorSpec::new(b("ssm_a"), &[1, n_head], true));
            specs.push(TensorSpec::matmul(b("ssm_f_a.weight"), &[e, inner], true));
            specs.push(TensorSpec::matmul(b("ssm_g_a.weight"), &[e, inner], true));
        }
    }
}

/// Queries straight from one projection (llama.cpp reads no query rank for this model), the
/// latent and shared key part from another, and the absorbed per-head widenings.
fn latent_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let b = |s: &str| format!("blk.{il}.{s}");
    let (e, rot, kv_rank) = (hp.n_embd, hp.n_rot, hp.n_lora_kv);
    let (hk, hv, n_head) = (hp.n_embd_head_k_mla, hp.n_embd_head_v_mla, hp.n_head[il]);
    specs.extend([
        TensorSpec::matmul(b("attn_q.weight"), &[e, n_head * hk], true),
        TensorSpec::new(b("attn_kv_a_norm.weight"), &[kv_rank], true),
        TensorSpec::matmul(b("attn_kv_a_mqa.weight"), &[e, kv_rank + rot], true),
        TensorSpec::matmul(b("attn_k_b.weight"), &[hk - rot, kv_rank, n_head], true),
        TensorSpec::matmul(b("attn_v_b.weight"), &[kv_rank, hv, n_head], true),
        TensorSpec::matmul(b("attn_output.weight"), &[n_head * hv, e], true),
    ]);
}

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`), and
/// the output projection of the linear-attention layers.
const WITHOUT_ADAPTERS: &[&str] = &[
    "output",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_qkv",
    "attn_kv_a_mqa",
    "attn_kv_b",
    "attn_k_b",
    "ssm_beta",
    "ssm_f_a",
    "ssm_f_b",
    "ssm_g_a",
    "ssm_g_b",
];

impl Decoder for KimiLinear {
    fn without_adapters(&self, hp: &HParams, stem: &str, layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem) || (stem == "attn_output" && layer.is_some_and(|il| hp.is_recurrent(il)))
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let hk = i64::from(hp.n_embd_head_k_mla);
        let kq_scale = 1.0 / (hk as f32).sqrt();
        let moe = Moe {
            gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Softmax),
            normalize: true,
            // llama.cpp's graph passes the model's count, not the warmup-aware one.
            warmup_all: false,
            ..Moe::BASE
        };
        let mut x = b.embed_tokens_as("model.embed_tokens")?;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let att = if hp.is_recurrent(il) {
                b.kda_layer(il, cur, true)?
            } else {
                let q = deepseek2::latent_queries(b, il, cur, hk)?;
                let (latent, k_pe) = minicpm3::latent_kv(b, il, cur, None)?;
                let att = deepseek2::absorbed_attention(b, il, q, latent, k_pe, kq_scale, None)?;
                let wo = b.layer_weight(il, "attn_output.weight")?;
                b.linear(wo, None, att)?
            };
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            x = deepseek2::ffn_block(b, il, att, residual, moe)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}
