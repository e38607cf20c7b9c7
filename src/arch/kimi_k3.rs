//! Kimi-K3: Kimi-Linear's hybrid of KDA and unrotated absorbed latent attention, with a decay
//! bounded below and one full-rank output gate in the KDA layers, a sigmoid output gate on the
//! latent attention, the SiTU activation in every FFN, routed experts that run in a latent space
//! (projected down, normed and up again around them, routed from the full-width input) and
//! cross-layer residual attention: every `attn_res.block_size` layers the residual stream is banked
//! as a checkpoint and restarted from the attention's output, and each norm's input is a softmax
//! mix of the checkpoints and the current stream, scored by a learned vector.
//!
//! As in llama.cpp's graph, no projection is multiplied by its weight's scale.

use super::created::{layered, GATED, HEAD, SHARED_GDU};
use super::{deepseek2, head_tensors, kimi_linear, minicpm3};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, ExpertAct, Gating, Moe};
use crate::model::hparams::{HParams, KdaDecay};
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NONE};

pub struct KimiK3;

impl ArchSpec for KimiK3 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "kimi-k3",
            about: "Kimi-K3: Kimi-Linear's layers with a decay bounded below, a full-rank KDA output gate, a sigmoid \
                output gate on the latent attention, SiTU in every FFN, routed experts in a latent space, and \
                cross-layer residual attention mixing banked checkpoints of the residual stream by learned \
                scores; rollback snapshots kept.",
            rope_type: ROPE_NONE,
            read_keys: &[
                super::READS_SHARED_MOE,
                super::READS_GATING,
                super::READS_MLA,
                super::READS_RMS_EPS,
                &[
                    "expert_latent_length",
                    "ssm.conv_kernel",
                    "kda.head_dim",
                    "kda.gate_lower_bound",
                    "attn_res.block_size",
                    "activation.situ_beta",
                    "activation.situ_linear_beta",
                ],
            ],
            saved_rules: &[super::HELD_LATENT_VALUE_LENGTH],
            layer_members: &[("ssm_norm.weight", "ssm_o_norm")],
            memory: Memory::Hybrid,
            rollback: true,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.rope = false;
        hp.n_embd_head_k_mla = meta.u32(&hp.key("attention.key_length_mla"))?;
        hp.n_embd_head_v_mla = meta.u32(&hp.key("attention.value_length_mla"))?;
        hp.n_lora_q = meta.u32_opt(&hp.key("attention.q_lora_rank"))?.unwrap_or(0);
        hp.n_lora_kv = meta.u32(&hp.key("attention.kv_lora_rank"))?;
        // The cache's values are the latent (older files carry no value length).
        hp.n_embd_head_v = hp.n_lora_kv;
        kimi_linear::load_kda(meta, hp)?;
        if let Some(bound) = meta
            .f32_opt(&hp.key("kda.gate_lower_bound"))?
            .filter(|&b| b > f32::NEG_INFINITY)
        {
            hp.kda_decay = KdaDecay::LowerBound(bound);
        }
        kimi_linear::split_layers(hp)?;
        kimi_linear::load_experts(meta, hp, false, false)?;
        hp.n_expert_latent = meta.u32_opt(&hp.key("expert_latent_length"))?.unwrap_or(0);
        hp.attn_res_block_size = meta.u32(&hp.key("attn_res.block_size"))?;
        hp.situ_beta = meta.f32(&hp.key("activation.situ_beta"))?;
        hp.situ_linear_beta = meta.f32(&hp.key("activation.situ_linear_beta"))?;
        if !(hp.situ_beta.is_finite() && hp.situ_beta != 0.0 && hp.situ_linear_beta.is_finite()) {
            return Err(Error::model(format!(
                "kimi-k3: SiTU betas {} and {} (the first must be finite and non-zero)",
                hp.situ_beta, hp.situ_linear_beta
            )));
        }
        hp.size_label = if hp.n_layer == 93 { "2.8T.A50B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        kimi_k3(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        let e = hp.n_embd;
        let scores = hp.attn_res_block_size > 0;
        if scores {
            specs.push(TensorSpec::new("output_res_score.weight", &[e], true));
        }
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            if scores {
                specs.push(TensorSpec::new(b("attn_res_score.weight"), &[e], true));
                specs.push(TensorSpec::new(b("ffn_res_score.weight"), &[e], true));
            }
            if hp.is_recurrent(il) {
                kimi_linear::kda_tensors(hp, il, kimi_linear::KdaTensors::KimiK3, &mut specs);
            } else {
                latent_tensors(hp, il, &mut specs);
            }
            if il < hp.n_layer_dense_lead as usize {
                let ff = hp.n_ff[il];
                specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
                specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
                specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
            } else {
                expert_tensors(hp, il, &mut specs);
            }
        }
        specs
    }
}

/// Kimi-K3's: the residual checkpoints' scores where the model banks them (one after the head,
/// two per layer); delta attention (a full-width output gate) or latent attention with an output
/// gate; dense leading layers, then experts with the router's selection bias, the latent
/// projections and norm around them where they run in a latent space, and shared experts.
fn kimi_k3(hp: &HParams) -> Vec<String> {
    let banks = hp.attn_res_block_size > 0;
    let head = match banks {
        true => "token_embd.weight output_norm.weight output.weight output_res_score.weight",
        false => HEAD,
    };
    layered(hp, head, |il| {
        let scores = if banks {
            "attn_res_score.weight ffn_res_score.weight"
        } else {
            ""
        };
        let mixer = match hp.is_recurrent(il) {
            true => kimi_linear::kda("ssm_f_a.weight ssm_f_b.weight", "ssm_g.weight"),
            false => kimi_linear::mla(hp, "attn_gate.weight"),
        };
        let latent = match hp.n_expert_latent > 0 {
            true => "ffn_routed_down.weight ffn_routed_up.weight ffn_routed_norm.weight",
            false => "",
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED.to_string(),
            false => format!(
                "ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight \
                 {latent} {shared}"
            ),
        };
        format!("attn_norm.weight ffn_norm.weight {scores} {mixer} {ffn}")
    })
}

/// The latent attention's tensors: queries through a normed low rank (where the layer has its
/// norm) or one projection, the absorbed widenings, an optional output gate.
fn latent_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let b = |s: &str| format!("blk.{il}.{s}");
    let (e, rot, kv_rank, q_rank) = (hp.n_embd, hp.n_rot, hp.n_lora_kv, hp.n_lora_q);
    let (hk, hv, n_head) = (hp.n_embd_head_k_mla, hp.n_embd_head_v_mla, hp.n_head[il]);
    let q_norm = b("attn_q_a_norm.weight");
    specs.extend([
        TensorSpec::new(&q_norm, &[q_rank], false),
        TensorSpec::matmul(b("attn_q_a.weight"), &[e, q_rank], false),
        TensorSpec::matmul(b("attn_q_b.weight"), &[q_rank, n_head * hk], false),
        TensorSpec::matmul(b("attn_q.weight"), &[e, n_head * hk], true).unless(&q_norm),
        TensorSpec::new(b("attn_kv_a_norm.weight"), &[kv_rank], true),
        TensorSpec::matmul(b("attn_kv_a_mqa.weight"), &[e, kv_rank + rot], true),
        TensorSpec::matmul(b("attn_k_b.weight"), &[hk - rot, kv_rank, n_head], true),
        TensorSpec::matmul(b("attn_v_b.weight"), &[kv_rank, hv, n_head], true),
        TensorSpec::matmul(b("attn_gate.weight"), &[e, n_head * hv], false),
        TensorSpec::matmul(b("attn_output.weight"), &[n_head * hv, e], true),
    ]);
}

/// Routed experts of the latent width (with the projections around them when there is one)
/// beside full-width shared experts.
fn expert_tensors(hp: &HParams, il: usize, specs: &mut Vec<TensorSpec>) {
    let b = |s: &str| format!("blk.{il}.{s}");
    let (e, n, x, sh) = (hp.n_embd, hp.n_expert, hp.n_ff_exp, hp.n_ff_shexp);
    let latent = if hp.n_expert_latent > 0 { hp.n_expert_latent } else { e };
    specs.extend([
        TensorSpec::new(b("ffn_gate_inp.weight"), &[e, n], true),
        TensorSpec::new(b("exp_probs_b.bias"), &[n], true),
        TensorSpec::matmul(b("ffn_gate_exps.weight"), &[latent, x, n], true),
        TensorSpec::matmul(b("ffn_up_exps.weight"), &[latent, x, n], true),
        TensorSpec::matmul(b("ffn_down_exps.weight"), &[x, latent, n], true),
        TensorSpec::matmul(b("ffn_gate_shexp.weight"), &[e, sh], true),
        TensorSpec::matmul(b("ffn_up_shexp.weight"), &[e, sh], true),
        TensorSpec::matmul(b("ffn_down_shexp.weight"), &[sh, e], true),
    ]);
    if hp.n_expert_latent > 0 {
        specs.extend([
            TensorSpec::matmul(b("ffn_routed_down.weight"), &[e, latent], true),
            TensorSpec::matmul(b("ffn_routed_up.weight"), &[latent, e], true),
            TensorSpec::new(b("ffn_routed_norm.weight"), &[latent], false),
        ]);
    }
}

/// The checkpoints of the cross-layer residual attention: [n_embd, n_checkpoints, n_tokens].
struct Checkpoints(Option<TensorRef>);

impl Checkpoints {
    /// Bank `x` ([n_embd, n_tokens]) as the next checkpoint.
    fn push(&mut self, b: &mut Builder, x: TensorRef) -> Result<()> {
        let [n_embd, n_tokens, ..] = x.ne();
        let ckpt = b.g.reshape(x, &[n_embd, 1, n_tokens])?;
        self.0 = Some(match self.0 {
            Some(stack) => b.g.concat(stack, ckpt, 1)?,
            None => ckpt,
        });
        Ok(())
    }

    /// The checkpoints and `cur` mixed per token by the softmax of their scores (each the RMS
    /// normed row times the weight `score`, summed); `cur` itself while nothing is banked (always,
    /// without cross-layer residual attention).
    fn mix(&self, b: &mut Builder, cur: TensorRef, score: &str) -> Result<TensorRef> {
        let Some(stack) = self.0 else { return Ok(cur) };
        let score_w = b.weight(score)?;
        let eps = b.hp.rms_eps;
        let [_, n_ckpt, n_tokens, _] = stack.ne();
        let score = |bd: &mut Builder, x: TensorRef| -> Result<TensorRef> {
            let n = bd.g.rms_norm(x, eps)?;
            let n = bd.g.mul(n, score_w)?;
            bd.g.sum_rows(n).map_err(Error::from)
        };
        let sc_stack = score(b, stack)?;
        let sc_stack = b.g.reshape(sc_stack, &[n_ckpt, n_tokens])?;
        let sc_cur = score(b, cur)?;
        let scores = b.g.concat(sc_stack, sc_cur, 0)?;
        let probs = b.g.soft_max_rows(scores)?;
        let nb = probs.nb();
        let p_stack = b.g.view(probs, &[n_ckpt, n_tokens], &[nb[1]], 0)?;
        let p_stack = b.g.cont(p_stack)?;
        let p_cur = b.g.view(probs, &[1, n_tokens], &[nb[1]], n_ckpt as usize * nb[0])?;
        let p_cur = b.g.cont(p_cur)?;
        let out = b.g.weighted_rows(stack, p_stack)?;
        let cur = b.g.mul(cur, p_cur)?;
        b.add(out, cur)
    }
}

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`).
const WITHOUT_ADAPTERS: &[&str] = &[
    "output",
    "attn_q",
    "attn_q_a",
    "attn_q_b",
    "attn_kv_a_mqa",
    "attn_kv_b",
    "attn_k_b",
    "attn_output",
    "attn_gate",
    "attn_k",
    "attn_v",
    "ssm_beta",
    "ssm_f_a",
    "ssm_f_b",
    "ssm_g",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
    "ffn_gate_inp",
    "ffn_gate_shexp",
    "ffn_up_shexp",
    "ffn_down_shexp",
    "ffn_routed_up",
    "ffn_routed_down",
];

impl Decoder for KimiK3 {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let hk = i64::from(hp.n_embd_head_k_mla);
        let kq_scale = 1.0 / (hk as f32).sqrt();
        let block = hp.attn_res_block_size as usize;
        let moe = Moe {
            gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Softmax),
            normalize: hp.expert_weights_norm,
            act: ExpertAct::Situ,
            // llama.cpp's graph passes the model's count, not the warmup-aware one.
            warmup_all: false,
            ..Moe::BASE
        };
        let mut banked = Checkpoints(None);
        let mut x = b.embed_tokens_as("inp_embd")?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let mixed = banked.mix(b, x, &format!("blk.{il}.attn_res_score.weight"))?;
            let restart = block > 0 && il % block == 0;
            if restart {
                banked.push(b, x)?;
            }
            let cur = b.layer_rms_norm(il, mixed, "attn_norm.weight", "attn_norm")?;
            let att = if hp.is_recurrent(il) {
                b.kda_layer(il, cur, true)?
            } else {
                latent_attention(b, il, cur, kq_scale)?
            };
            let h = if restart { att } else { b.add(x, att)? };
            let h = b.name(h, "prefix_sum_attn", l);
            let mixed = banked.mix(b, h, &format!("blk.{il}.ffn_res_score.weight"))?;
            let cur = b.layer_rms_norm(il, mixed, "ffn_norm.weight", "ffn_norm")?;
            let ffn = if il < hp.n_layer_dense_lead as usize {
                b.situ_ffn(il, cur, "")?
            } else {
                latent_experts(b, il, cur, moe)?
            };
            let ffn = b.name(ffn, "ffn_out", l);
            x = b.add(h, ffn)?;
            x = b.layer_out(x, il)?;
        }
        let x = banked.mix(b, x, "output_res_score.weight")?;
        let x = b.select_outputs(x)?;
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// Unrotated absorbed latent attention, its output gated by the sigmoid of `attn_gate` times
/// the normed input where the layer has that gate, then projected out.
fn latent_attention(b: &mut Builder, il: usize, cur: TensorRef, kq_scale: f32) -> Result<TensorRef> {
    let hp = b.hp;
    let q = deepseek2::latent_queries(b, il, cur, i64::from(hp.n_embd_head_k_mla))?;
    let (latent, k_pe) = minicpm3::latent_kv(b, il, cur, None)?;
    let mut att = deepseek2::absorbed_attention(b, il, q, latent, k_pe, kq_scale, None)?;
    if b.layer_weight_opt(il, "attn_gate.weight").is_some() {
        let g = b.layer_matmul(il, "attn_gate.weight", cur)?;
        let g = b.g.sigmoid(g)?;
        att = b.g.mul(att, g)?;
    }
    b.layer_matmul(il, "attn_output.weight", att)
}

/// Routed experts over the input projected into their latent space (routed by the full-width
/// input), normed and projected back, plus the shared experts over the full-width input.
fn latent_experts(b: &mut Builder, il: usize, cur: TensorRef, moe: Moe) -> Result<TensorRef> {
    let routed_in = match b.layer_weight_opt(il, "ffn_routed_down.weight") {
        Some(w) => b.g.mul_mat(w, cur)?,
        None => cur,
    };
    let logits = b.router_logits(il, cur)?;
    let mut routed = b.moe_ffn_from_logits(il, routed_in, logits, moe)?;
    if b.layer_weight_opt(il, "ffn_routed_norm.weight").is_some() {
        routed = b.layer_rms_norm(il, routed, "ffn_routed_norm.weight", "ffn_routed_norm")?;
    }
    if let Some(w) = b.layer_weight_opt(il, "ffn_routed_up.weight") {
        routed = b.g.mul_mat(w, routed)?;
    }
    let shared = b.situ_ffn(il, cur, "_shexp")?;
    let shared = b.name(shared, "ffn_shexp", Some(il));
    b.add(routed, shared)
}
