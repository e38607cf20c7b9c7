//! DeepSeek-V4: every layer attends through a sliding window of raw keys (one 512-or-so wide key
//! per token that is also its value, the last `n_rot` dimensions rotated, per-head sinks); most
//! layers also compress their keys by 4 (CSA, a lightning indexer picking the rows each token
//! sees) or by 128 (HCA, all rows seen), in the caches of `kv::compressed` (`deepseek4/compressed.rs`).
//! Heads are rotated back after attention and projected out through grouped low-rank
//! matrices. The residual stream is four hyper-connection copies mixed by a Sinkhorn-normalised
//! matrix around each block (as GLM5-Next's), and summed once more by gates of their own for the
//! head (as HY-V4's). Every layer is a mixture of experts scored by sqrt(softplus) beside a shared
//! expert; the first `hash_layer_count` route each token by a fixed table instead.
//! Multi-token-prediction layers are refused, as for the other architectures.

mod compressed;

use super::created::{layered, SHARED_GDU};
use super::{deepseek2, glm5_next, hy_v4};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::{Array, Value};
use crate::graph::{Builder, Decoder, Ffn, Gating, Moe};
use crate::kv::compressed::Kind;
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::{self, Rule};
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec};

pub struct Deepseek4;

impl ArchSpec for Deepseek4 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "deepseek4",
            about: "DeepSeek-V4: one key per token, also its value, its last dimensions rotated, attended through a \
                sliding window with sinks; most layers also compress their keys by 4 (a lightning indexer over \
                keys it compresses alike picking the rows each token sees) or by 128, in compressed caches \
                beside the window; heads rotated back after attention and projected out through grouped low-rank \
                matrices; GLM5-Next's hyper-connections and HY-V4's head gates; experts scored by sqrt(softplus) \
                beside a shared one, the first layers routing each token by a fixed table; rollback snapshots \
                kept; keys cannot be shifted, as in llama.cpp.",
            read_keys: &[
                super::READS_GATING,
                super::READS_INDEXER,
                super::READS_RMS_EPS,
                &[
                    "expert_feed_forward_length",
                    "swiglu_clamp_exp",
                    "swiglu_clamp_shexp",
                    "expert_shared_count",
                    "expert_weights_scale",
                    "attention.q_lora_rank",
                    "attention.sliding_window",
                    "attention.output_group_count",
                    "attention.output_lora_rank",
                    "attention.compress_rope_freq_base",
                    "attention.compress_ratios",
                    "hyper_connection.count",
                    "hyper_connection.sinkhorn_iterations",
                    "hyper_connection.epsilon",
                    "hash_layer_count",
                ],
            ],
            saved_rules: &[
                // The shared experts' clamp defaults to the routed experts'.
                (
                    "swiglu_clamp_shexp",
                    Rule::Held(|f| {
                        let mut clamp = f.hp.swiglu_clamp_shexp.clone();
                        clamp.resize(f.n_layer_all, 0.0);
                        Value::Array(Array::F32(clamp))
                    }),
                ),
                super::HELD_EMBD_OUT,
                // llama.cpp reads the ratios as one whole array.
                ("attention.compress_ratios", Rule::Held(saver::whole_compress_ratios)),
            ],
            layer_members: &[("attn_kv_a_norm.weight", "attn_kv_norm")],
            memory: Memory::Compressed,
            rollback: true,
            reports_window: false,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("deepseek4.{k}");
        super::refuse_mtp(meta, hp)?;
        let n = hp.n_layer as usize;
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        hp.n_lora_q = meta.u32(&key("attention.q_lora_rank"))?;
        let window = meta.u32(&key("attention.sliding_window"))?;
        if window == 0 {
            return Err(Error::model(
                "deepseek4 needs a sliding window (attention.sliding_window)",
            ));
        }
        // Every layer attends through the window, whatever the file's pattern says.
        hp.n_swa = window;
        hp.swa_layers = vec![true; n];
        // One key per token, its values read from it.
        let head = hp.n_embd_head_k;
        if head != hp.n_embd_head_v || hp.n_head_kv.iter().any(|&h| h != 1) || hp.n_rot > head {
            return Err(Error::model(format!(
                "deepseek4: one key head per token, as wide as the values (key_length {head}, value_length {}, \
                 head_count_kv {:?}, {} rotated)",
                hp.n_embd_head_v, hp.n_head_kv, hp.n_rot
            )));
        }
        hp.n_embd_head_k_mla = head;
        hp.n_embd_head_v_mla = head;

        deepseek2::load_shared_experts(meta, hp)?;
        hp.expert_weights_scale = meta.f32(&key("expert_weights_scale"))?;
        hp.expert_weights_norm = meta.bool(&key("expert_weights_norm"))?;
        hp.expert_gating_func = meta.u32(&key("expert_gating_func"))?;
        if Gating::from_llama(hp.expert_gating_func) != Some(Gating::SqrtSoftplus) {
            return Err(Error::model(format!(
                "deepseek4: expert gating function {} (llama.cpp runs sqrt-softplus scoring only)",
                hp.expert_gating_func
            )));
        }
        super::check_experts(hp)?;
        let clamp = key("swiglu_clamp_exp");
        hp.swiglu_clamp_exp = meta
            .f32_per_layer(&clamp, n)?
            .ok_or_else(|| crate::model::metadata::missing(&clamp))?;
        hp.swiglu_clamp_shexp = match meta.f32_per_layer(&key("swiglu_clamp_shexp"), n)? {
            Some(limits) => limits,
            None => hp.swiglu_clamp_exp.clone(),
        };
        hp.swiglu_clamp_fused = true;

        hp.o_groups = meta.u32(&key("attention.output_group_count"))?;
        hp.o_lora_rank = meta.u32(&key("attention.output_lora_rank"))?;
        let n_head = hp.n_head.first().copied().unwrap_or(0);
        if hp.o_groups == 0 || hp.o_lora_rank == 0 || hp.n_head.iter().any(|&h| h != n_head || h % hp.o_groups != 0) {
            return Err(Error::model(format!(
                "deepseek4: {} output groups of rank {} for heads {:?}",
                hp.o_groups, hp.o_lora_rank, hp.n_head
            )));
        }
        hp.compress_rope_base = meta.f32(&key("attention.compress_rope_freq_base"))?;
        let ratios_key = key("attention.compress_ratios");
        hp.compress_ratios = meta
            .u32_per_layer(&ratios_key, n)?
            .ok_or_else(|| Error::model(format!("deepseek4 needs '{ratios_key}'")))?;
        if let Some(r) = hp.compress_ratios.iter().find(|&&r| ![0, 4, 128].contains(&r)) {
            return Err(Error::model(format!(
                "deepseek4: a compression ratio of {r} (llama.cpp supports 0, 4 and 128)"
            )));
        }
        let csa: Vec<bool> = hp.compress_ratios.iter().map(|&r| r == 4).collect();
        deepseek2::load_indexer(meta, hp, csa, 0)?;
        hp.indexer.rope_trailing = true;
        hp.indexer.hadamard = true;
        let ih = hp.indexer.head_size;
        if ih < 64 || !ih.is_power_of_two() || ih == head {
            return Err(Error::model(format!(
                "deepseek4: indexer keys of {ih} dimensions (a power of two of at least 64, unlike the \
                 attention's {head}: llama.cpp then rotates every cache, which is not supported here)"
            )));
        }

        glm5_next::load_mixing(meta, hp)?;
        // llama.cpp sizes the embeddings by the hyper-connections' whole width.
        hp.n_embd_out = hp.hc_count.saturating_mul(hp.n_embd);
        hp.n_hash_layers = meta.u32(&key("hash_layer_count"))?;
        hp.size_label = "?B";
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        deepseek4(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let (head, q_rank, ix) = (hp.n_embd_head_k, hp.n_lora_q, &hp.indexer);
        let mut specs = vec![
            TensorSpec::new("token_embd.weight", &[e, v], true),
            TensorSpec::new("output_norm.weight", &[e], true),
            TensorSpec::matmul("output.weight", &[e, v], true),
        ];
        specs.extend(hy_v4::head_tensors(hp));
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let n_head = hp.n_head[il];
            let (groups, rank) = (hp.o_groups, hp.o_lora_rank);
            let (n_exp, n_ff) = (hp.n_expert, hp.n_ff_exp);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("attn_sinks.weight"), &[n_head], true),
                TensorSpec::matmul(b("attn_q_a.weight"), &[e, q_rank], true),
                TensorSpec::new(b("attn_q_a_norm.weight"), &[q_rank], true),
                TensorSpec::matmul(b("attn_q_b.weight"), &[q_rank, n_head * head], true),
                TensorSpec::matmul(b("attn_kv.weight"), &[e, head], true),
                TensorSpec::new(b("attn_kv_a_norm.weight"), &[head], true),
                TensorSpec::matmul(b("attn_output_a.weight"), &[n_head * head / groups, rank, groups], true)
                    .or_shape(&[n_head * head / groups, rank * groups]),
                TensorSpec::matmul(b("attn_output_b.weight"), &[groups * rank, e], true),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_gate_inp.weight"), &[e, n_exp], true),
                TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, n_ff, n_exp], true),
                TensorSpec::matmul(b("ffn_down_exps.weight"), &[n_ff, e, n_exp], true),
                TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, n_ff, n_exp], true),
                TensorSpec::matmul(b("ffn_gate_shexp.weight"), &[e, hp.n_ff_shexp], true),
                TensorSpec::matmul(b("ffn_down_shexp.weight"), &[hp.n_ff_shexp, e], true),
                TensorSpec::matmul(b("ffn_up_shexp.weight"), &[e, hp.n_ff_shexp], true),
                // The vision variant's routing bias for embedding inputs (image rows).
                TensorSpec::new(b("exp_probs_b_vl.bias"), &[n_exp], false),
            ]);
            if (il as u32) < hp.n_hash_layers {
                specs.push(TensorSpec::new(b("ffn_gate_tid2eid.weight"), &[hp.n_expert_used, v], true).ids());
            } else {
                specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[n_exp], true));
            }
            specs.extend(glm5_next::mixing_tensors(hp, il));
            let ratio = hp.compress_ratios[il];
            if ratio == 0 {
                continue;
            }
            let coff = if ratio == 4 { 2 } else { 1 };
            specs.extend([
                TensorSpec::matmul(b("attn_compressor_kv.weight"), &[e, coff * head], true),
                TensorSpec::matmul(b("attn_compressor_gate.weight"), &[e, coff * head], true),
                TensorSpec::new(b("attn_compressor_ape.weight"), &[coff * head, ratio], true),
                TensorSpec::new(b("attn_compressor_norm.weight"), &[head], true),
            ]);
            if ratio == 4 {
                let ih = ix.head_size;
                specs.extend([
                    TensorSpec::matmul(b("indexer.proj.weight"), &[e, ix.n_head], true),
                    TensorSpec::matmul(b("indexer.attn_q_b.weight"), &[q_rank, ix.n_head * ih], true),
                    TensorSpec::matmul(b("indexer_compressor_kv.weight"), &[e, 2 * ih], true),
                    TensorSpec::matmul(b("indexer_compressor_gate.weight"), &[e, 2 * ih], true),
                    TensorSpec::new(b("indexer_compressor_ape.weight"), &[2 * ih, ratio], true),
                    TensorSpec::new(b("indexer_compressor_norm.weight"), &[ih], true),
                ]);
            }
        }
        specs
    }
}

/// DeepSeek-V4's: HY-V4's head; attention with sinks, compressed queries, one key-value
/// projection and a grouped low-rank output, the hyper-connections' mixing weights, then the
/// compressor where the layer compresses its keys (with the indexer's where it compresses by 4);
/// the router with its token-to-expert table (hash layers) or selection bias, the vision
/// variant's bias, experts and shared ones.
fn deepseek4(hp: &HParams) -> Vec<String> {
    let head = "token_embd.weight output_norm.weight output.weight output_hc_fn.weight output_hc_base.weight \
                output_hc_scale.weight";
    layered(hp, head, |il| {
        let ratio = hp.compress_ratios.get(il).copied().unwrap_or(0);
        let compressor = match ratio {
            0 => "",
            _ => {
                "attn_compressor_kv.weight attn_compressor_gate.weight attn_compressor_ape.weight \
                  attn_compressor_norm.weight"
            }
        };
        let indexer = match ratio {
            4 => {
                "indexer.proj.weight indexer.attn_q_b.weight indexer_compressor_kv.weight \
                  indexer_compressor_gate.weight indexer_compressor_ape.weight indexer_compressor_norm.weight"
            }
            _ => "",
        };
        let routing = match (il as u32) < hp.n_hash_layers {
            true => "ffn_gate_tid2eid.weight",
            false => "exp_probs_b.bias",
        };
        format!(
            "attn_norm.weight attn_sinks.weight attn_q_a.weight attn_q_a_norm.weight attn_q_b.weight attn_kv.weight \
             attn_kv_a_norm.weight attn_output_a.weight attn_output_b.weight hc_attn_fn.weight hc_attn_base.weight \
             hc_attn_scale.weight hc_ffn_fn.weight hc_ffn_base.weight hc_ffn_scale.weight {compressor} {indexer} \
             ffn_gate_inp.weight {routing} exp_probs_b_vl.bias ffn_norm.weight ffn_gate_exps.weight \
             ffn_down_exps.weight ffn_up_exps.weight {SHARED_GDU}"
        )
    })
}

/// The weights llama.cpp's graph multiplies without adapters (`Decoder::without_adapters`).
const WITHOUT_ADAPTERS: &[&str] = &["output", "attn_output_a"];

impl Decoder for Deepseek4 {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        WITHOUT_ADAPTERS.contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let (e, hc) = (i64::from(hp.n_embd), i64::from(hp.hc_count));
        let moe = Moe {
            warmup_all: false,
            ..Moe::silu(
                hp.expert_gating_func,
                Gating::SqrtSoftplus,
                hp.expert_weights_norm,
                false,
            )
        };
        let x = b.embed_tokens()?;
        let nt = x.ne()[1];
        let x = b.g.reshape(x, &[e, 1, nt])?;
        let x = b.g.repeat(x, [e, hc, nt, 1])?;
        let mut x = b.name(x, "hc_init", None);
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let (cur, mix) = glm5_next::hc_pre(b, il, x, "attn")?;
            let cur = b.name(cur, "hc_attn_pre", l);
            let cur = b.layer_rms_norm(il, cur, "attn_norm.weight", "attn_norm")?;
            let att = attention(b, il, cur)?;
            x = glm5_next::hc_post(b, att, x, mix)?;
            x = b.name(x, "hc_attn_post", l);

            let residual = x;
            let (cur, mix) = glm5_next::hc_pre(b, il, x, "ffn")?;
            let cur = b.name(cur, "hc_ffn_pre", l);
            b.g.expand(residual);
            let cur = b.layer_rms_norm(il, cur, "ffn_norm.weight", "ffn_norm")?;
            let routed = if b.takes_embeddings() {
                media_experts(b, il, cur, moe)?
            } else if (il as u32) < hp.n_hash_layers {
                hashed_experts(b, il, cur, moe)?
            } else {
                b.moe_ffn(il, cur, moe)?
            };
            let routed = b.name(routed, "ffn_moe_out", l);
            let shared = b.gated_ffn_named(il, cur, Ffn::default(), "_shexp")?;
            let shared = b.name(shared, "ffn_shexp", l);
            let ffn = b.add(routed, shared)?;
            let ffn = b.name(ffn, "ffn_out", l);
            x = glm5_next::hc_post(b, ffn, residual, mix)?;
            x = b.add_cvec(x, il)?;
            x = b.name(x, "l_last", l);
        }
        let flat = b.g.reshape(x, &[e * hc, nt])?;
        let flat = b.select_outputs(flat)?;
        let n_out = flat.ne()[1];
        let x = b.g.reshape(flat, &[e, hc, n_out])?;
        let cur = hy_v4::hc_head(b, x)?;
        let cur = b.name(cur, "hc_head", None);
        let logits = b.output_head(cur)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// The experts of embedding inputs (an image's rows, which have no token ids to hash): routed
/// by the router in every layer, with the vision bias where the layer has one (else the layer's
/// own, none in a hash-routed layer), as llama.cpp routes media.
fn media_experts(b: &mut Builder, il: usize, cur: TensorRef, moe: Moe) -> Result<TensorRef> {
    let bias = b
        .layer_weight_opt(il, "exp_probs_b_vl.bias")
        .or_else(|| b.layer_weight_opt(il, "exp_probs_b.bias"));
    let logits = b.router_logits(il, cur)?;
    let (picked, weights) = b.moe_route_biased(il, logits, moe, bias)?;
    b.moe_experts(il, cur, picked, weights, moe, "_exps")
}

/// The experts of a hash-routed layer: each token's are a fixed row of `ffn_gate_tid2eid` (by
/// its id), weighted by their sqrt-softplus scores.
fn hashed_experts(b: &mut Builder, il: usize, cur: TensorRef, moe: Moe) -> Result<TensorRef> {
    let logits = b.router_logits(il, cur)?;
    let probs = b.moe_probs(il, logits, moe)?;
    let table = b.layer_weight(il, "ffn_gate_tid2eid.weight")?;
    let picked = b.g.get_rows(table, b.token_ids()?)?;
    let picked = b.name(picked, "ffn_moe_topk", Some(il));
    let weights = b.moe_weights(il, probs, picked, moe)?;
    b.moe_experts(il, cur, picked, weights, moe, "_exps")
}

/// Layer `il`'s attention block over the normed input `cur`: queries from their latent, one
/// normed rotated key, the layer's compressions, attention (`deepseek4/compressed.rs`), the heads rotated
/// back and projected out through the grouped low-rank output.
fn attention(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = b.hp;
    let l = Some(il);
    let head = i64::from(hp.n_embd_head_k);
    let n_head = i64::from(hp.n_head[il]);
    let nt = cur.ne()[1];
    let qr = deepseek2::query_latent(b, il, cur)?.ok_or_else(|| Error::model("deepseek4 needs attn_q_a_norm"))?;
    let qr = b.name(qr, "qr_norm", l);
    let q = deepseek2::queries_from_latent(b, il, qr, head)?;
    let q = b.g.rms_norm(q, hp.rms_eps)?;
    let q = compressed::dsv4_layer_rope(b, il, q, false)?;
    let q = b.name(q, "q", l);
    let kv = b.layer_matmul(il, "attn_kv.weight", cur)?;
    let kv = b.layer_rms_norm(il, kv, "attn_kv_a_norm.weight", "kv_norm")?;
    let kv = b.g.reshape(kv, &[head, 1, nt])?;
    let kv = compressed::dsv4_layer_rope(b, il, kv, false)?;
    let kv = b.name(kv, "kv", l);
    match hp.compress_ratios.get(il).copied().unwrap_or(0) {
        4 => {
            compressed::dsv4_compress(b, il, Kind::Csa, cur)?;
            compressed::dsv4_compress(b, il, Kind::Lid, cur)?;
        }
        128 => compressed::dsv4_compress(b, il, Kind::Hca, cur)?,
        _ => {}
    }
    let kq_scale = 1.0 / (head as f32).sqrt();
    let out = compressed::dsv4_attention(b, il, (q, kv), (cur, qr), kq_scale)?;
    let out = b.g.reshape(out, &[head, n_head, nt])?;
    let out = compressed::dsv4_layer_rope(b, il, out, true)?;
    let out = b.name(out, "attn_derope", l);
    let groups = i64::from(hp.o_groups);
    let out = b.g.reshape(out, &[head * n_head / groups, groups, nt])?;
    let out = b.g.permute(out, [0, 2, 1, 3])?;
    let wo_a = b.layer_weight(il, "attn_output_a.weight")?;
    let rank = i64::from(hp.o_lora_rank);
    let wo_a = if wo_a.ne()[2] == groups {
        wo_a
    } else {
        b.g.reshape(wo_a, &[wo_a.ne()[0], rank, groups])?
    };
    let oa = b.g.mul_mat(wo_a, out)?;
    let oa = b.name(oa, "attn_wo_a", l);
    let oa = b.g.permute(oa, [0, 2, 1, 3])?;
    let oa = b.g.cont(oa)?;
    let oa = b.g.reshape(oa, &[rank * groups, nt])?;
    let out = b.layer_matmul(il, "attn_output_b.weight", oa)?;
    Ok(b.name(out, "attn_out", l))
}
