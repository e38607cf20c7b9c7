//! Qwen4-exp ("qwen4exp"): Qwen3.5-MoE's hybrid of gated delta net layers (their output norm
//! gated by a sigmoid) and gated full attention, with three additions. The residual stream is
//! `hc_count` copies mixed by low-rank hyper-connections: before each block a per-element
//! sigmoid gate (from the copies, RMS-normed per copy, through a low-rank projection) weighs
//! their mean, after it each copy adds the block's output times its own `2·sigmoid` weight; a
//! last mix, without weights, is the output norm. Full attention is sparse (QSA, `qwen4exp/qsa.rs`)
//! where the file has an indexer ratio for the layer. One linear layer adds n-gram hash
//! embeddings (PLE, `qwen4exp/ple.rs`) to the copies first. The [n_embd, hc] norm weights may
//! be stored flat.

mod ple;
mod qsa;

use super::created::{layered, SHARED_GUD};
use super::qwen35::{delta_net_tensors, expert_tensors, experts_ffn, gated_attention_of, load_experts};
use super::{head_tensors, mamba};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, DeltaNet};
use crate::model::hparams::{HParams, Indexer, Ple};
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_IMROPE};

/// Qwen3.5's delta net with its output norm gated by a sigmoid.
const NET: DeltaNet = DeltaNet {
    fused_beta_alpha: false,
    sigmoid_gate: true,
};

pub struct Qwen4Exp;

const MAX_PLE_NGRAM: u32 = 8;
const MAX_PLE_HEADS: u32 = 64;

impl ArchSpec for Qwen4Exp {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "qwen4exp",
            about: "Qwen4-exp: Qwen3.5-MoE's layers, the delta net's norm gated by a sigmoid, in residual streams \
                mixed by low-rank hyper-connections; sparse attention over indexer keys pooled by blocks of \
                positions, the best blocks and the token's own incomplete block attended; n-gram hash embeddings \
                hashed from the cells' tokens into one linear layer, through a dilated convolution whose history \
                is part of the recurrent state; rollback snapshots kept; its embeddings have `n_embd` values, \
                where llama.cpp 0.3.36 reads `hc_count` times as many and aborts.",
            rope_type: ROPE_IMROPE,
            read_keys: &[
                super::READS_INDEXER,
                super::READS_SSM,
                super::READS_RMS_EPS,
                &[
                    "expert_feed_forward_length",
                    "expert_shared_feed_forward_length",
                    "attention.recurrent_layers",
                    "attention.compress_ratios",
                    "hyper_connection.count",
                    "hyper_connection.low_rank",
                    "rope.dimension_sections",
                    "ssm.group_count",
                ],
            ],
            saved_rules: &[super::HELD_EMBD_OUT],
            layer_members: &[("ssm_dt.bias", "ssm_dt"), ("indexer.k_norm.weight", "index_k_norm")],
            memory: Memory::Hybrid,
            rollback: true,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("qwen4exp.{k}");
        let n = hp.n_layer as usize;
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        super::load_rope_sections(meta, hp)?;
        mamba::load_ssm(meta, hp, true)?;
        for k in [
            "conv_kernel",
            "inner_size",
            "state_size",
            "time_step_rank",
            "group_count",
        ] {
            if meta.u32(&key(&format!("ssm.{k}")))? == 0 {
                return Err(Error::model(format!("qwen4exp: ssm.{k} must be greater than zero")));
            }
        }
        load_experts(meta, hp)?;
        hp.hc_count = meta.u32(&key("hyper_connection.count"))?;
        if hp.hc_count <= 1 {
            return Err(Error::model(format!(
                "qwen4exp: hyper_connection.count must be greater than one, got {}",
                hp.hc_count
            )));
        }
        // llama.cpp sizes the embeddings by the hyper-connections' whole width.
        hp.n_embd_out = hp.hc_count.saturating_mul(hp.n_embd);
        hp.hc_low_rank = nonzero(meta, &key("hyper_connection.low_rank"))?;
        let ix = |k: &str| key(&format!("attention.indexer.{k}"));
        let (n_head, head_size, top_k) = (
            nonzero(meta, &ix("head_count"))?,
            nonzero(meta, &ix("key_length"))?,
            nonzero(meta, &ix("top_k"))?,
        );
        hp.compress_ratios = meta
            .u32_per_layer(&key("attention.compress_ratios"), n)?
            .unwrap_or_else(|| vec![0; n]);
        if let Some(r) = hp.compress_ratios.iter().find(|&&r| r > 64) {
            return Err(Error::model(format!(
                "qwen4exp: sparse attention blocks of {r} positions (at most 64)"
            )));
        }
        hp.recurrent_layers = match meta.bool_per_layer(&key("attention.recurrent_layers"), n)? {
            Some(r) => r,
            None => {
                let interval = meta.u32_opt(&key("full_attention_interval"))?.unwrap_or(4);
                if interval == 0 {
                    return Err(Error::model(
                        "qwen4exp: full_attention_interval must be greater than zero",
                    ));
                }
                (0..n).map(|il| (il + 1) % interval as usize != 0).collect()
            }
        };
        hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
        hp.indexer = Indexer {
            n_head,
            head_size,
            top_k,
            layers: hp.kv_layers.clone(),
            ..Indexer::default()
        };
        hp.ple = load_ple(meta, hp)?;
        hp.attn_scale = meta.f32_opt(&key("attention.scale"))?.unwrap_or(0.0);
        if hp.n_embd_head_k != hp.n_embd_head_v {
            return Err(Error::model("qwen4exp needs equal key and value head sizes"));
        }
        hp.size_label = if hp.n_layer == 48 { "A3B" } else { "?B" };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        qwen4exp(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        head_tensors(hp, &mut specs);
        // No output norm: the last hyper-connection mix is it.
        specs.retain(|s| !s.name.starts_with("output_norm"));
        let (e, hc, lr) = (hp.n_embd, hp.hc_count, hp.hc_low_rank);
        let mix = |specs: &mut Vec<TensorSpec>, p: &str, inject: bool| {
            specs.extend([
                TensorSpec::new(format!("{p}_norm.weight"), &[e, hc], true).or_shape(&[e * hc]),
                TensorSpec::matmul(format!("{p}_down.weight"), &[hc * e, lr], true),
                TensorSpec::matmul(format!("{p}_up.weight"), &[lr, hc * e], true),
            ]);
            if inject {
                specs.push(TensorSpec::matmul(format!("{p}_inject.weight"), &[hc * e, hc], true));
            }
        };
        mix(&mut specs, "output_hc", false);
        if let Some(p) = &hp.ple {
            let rows = (0..p.n_heads() as usize)
                .map(|h| p.offsets[h] + p.vocab_sizes[h])
                .max()
                .unwrap_or(0);
            specs.push(TensorSpec::new("per_layer_token_embd.weight", &[p.head_dim, rows], true).at_least());
        }
        let ix = &hp.indexer;
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            mix(&mut specs, &b("hc_attn"), true);
            mix(&mut specs, &b("hc_ffn"), true);
            if hp.is_recurrent(il) {
                delta_net_tensors(hp, il, NET, &mut specs);
            } else {
                let (hk, q, kv) = (
                    hp.n_embd_head_k,
                    hp.n_embd_head_k * hp.n_head[il],
                    hp.n_embd_head_k * hp.n_head_kv[il],
                );
                specs.extend([
                    TensorSpec::matmul(b("attn_q.weight"), &[e, 2 * q], true),
                    TensorSpec::matmul(b("attn_k.weight"), &[e, kv], true),
                    TensorSpec::matmul(b("attn_v.weight"), &[e, kv], true),
                    TensorSpec::matmul(b("attn_output.weight"), &[q, e], true),
                    TensorSpec::new(b("attn_q_norm.weight"), &[hk], true),
                    TensorSpec::new(b("attn_k_norm.weight"), &[hk], true),
                    TensorSpec::matmul(b("indexer.q_proj.weight"), &[e, ix.n_head * ix.head_size], true),
                    TensorSpec::matmul(b("indexer.k_proj.weight"), &[e, ix.head_size], true),
                    TensorSpec::new(b("indexer.q_norm.weight"), &[ix.head_size], true),
                    TensorSpec::new(b("indexer.k_norm.weight"), &[ix.head_size], true),
                ]);
                // Loaded by llama.cpp, left out of its graph.
                for t in ["attn_q", "attn_k", "attn_v"] {
                    let width = if t == "attn_q" { 2 * q } else { kv };
                    specs.push(TensorSpec::new(b(&format!("{t}.bias")), &[width], false));
                }
            }
            if hp.ple.as_ref().is_some_and(|p| p.layer == il) {
                let p = hp.ple.as_ref().map_or(0, |p| p.conv_kernel);
                specs.extend([
                    TensorSpec::matmul(b("ple_key.weight"), &[e, hc * e], true),
                    TensorSpec::matmul(b("ple_value.weight"), &[e, e], true),
                    TensorSpec::new(b("ple_norm_key.weight"), &[e, hc], true).or_shape(&[e * hc]),
                    TensorSpec::new(b("ple_norm_query.weight"), &[e, hc], true).or_shape(&[e * hc]),
                    TensorSpec::new(b("ple_norm_conv.weight"), &[e, hc], true).or_shape(&[e * hc]),
                    TensorSpec::new(b("ple_conv1d.weight"), &[p, hc * e], true),
                ]);
            }
            expert_tensors(hp, il, &mut specs);
        }
        specs
    }
}

/// Qwen4-exp's: the hyper-connections' head before the output, the per-layer embeddings' table
/// where the model has them; per layer the hyper-connections' weights around the attention and
/// the FFN, attention (a doubled query, query and key norms, the block-sparse indexer) or a gated
/// delta net, the per-layer embeddings' weights in their layer, then Qwen3.5 MoE's experts.
fn qwen4exp(hp: &HParams) -> Vec<String> {
    let head = match hp.ple {
        Some(_) => {
            "token_embd.weight output_hc_norm.weight output_hc_down.weight output_hc_up.weight output.weight \
                    per_layer_token_embd.weight"
        }
        None => "token_embd.weight output_hc_norm.weight output_hc_down.weight output_hc_up.weight output.weight",
    };
    layered(hp, head, |il| {
        let mixer = match hp.is_recurrent(il) {
            true => {
                "attn_qkv.weight attn_gate.weight ssm_conv1d.weight ssm_dt.bias ssm_a ssm_beta.weight \
                 ssm_alpha.weight ssm_norm.weight ssm_out.weight"
            }
            false => {
                "QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight indexer.q_proj.weight \
                 indexer.k_proj.weight indexer.q_norm.weight indexer.k_norm.weight"
            }
        };
        let ple = match hp.ple.as_ref().is_some_and(|p| p.layer == il) {
            true => {
                "ple_key.weight ple_value.weight ple_norm_key.weight ple_norm_query.weight ple_norm_conv.weight \
                 ple_conv1d.weight"
            }
            false => "",
        };
        format!(
            "hc_attn_norm.weight hc_attn_down.weight hc_attn_up.weight hc_attn_inject.weight hc_ffn_norm.weight \
             hc_ffn_down.weight hc_ffn_up.weight hc_ffn_inject.weight {mixer} {ple} ffn_gate_inp.weight \
             ffn_down_exps.weight ffn_gate_up_exps.weight ffn_gate_inp_shexp.weight {SHARED_GUD}"
        )
    })
}

fn nonzero(meta: &Meta, key: &str) -> Result<u32> {
    match meta.u32(key)? {
        0 => Err(Error::model(format!("{key} must be greater than zero"))),
        v => Ok(v),
    }
}

/// The PLE keys, checked as llama.cpp checks them; None without `ple.layers`.
fn load_ple(meta: &Meta, hp: &HParams) -> Result<Option<Ple>> {
    let key = |k: &str| format!("qwen4exp.{k}");
    let layers = meta.u64_array_opt(&key("ple.layers"))?.unwrap_or_default();
    let layer = match layers.as_slice() {
        [] => return Ok(None),
        [l] => *l as usize,
        _ => {
            return Err(Error::model(format!(
                "qwen4exp: ple.layers lists {} layers, but only one PLE layer is supported",
                layers.len()
            )))
        }
    };
    if layer >= hp.n_layer as usize {
        return Err(Error::model(format!("qwen4exp: PLE layer {layer} is out of range")));
    }
    if !hp.is_recurrent(layer) {
        return Err(Error::model(format!(
            "qwen4exp: PLE layer {layer} is not a linear attention layer"
        )));
    }
    let mut p = Ple {
        layer,
        ngram: meta.u32(&key("ple.ngram_size"))?,
        heads_per_ngram: meta.u32(&key("ple.heads_per_ngram"))?,
        conv_kernel: nonzero(meta, &key("ple.conv_kernel"))?,
        eos: meta.u32(&key("ple.eos_token_id"))?,
        image_token: meta.u32_opt(&key("ple.image_token_id"))?.unwrap_or(0),
        head_dim: nonzero(meta, &key("embedding_length_per_layer_input"))?,
        multipliers: Vec::new(),
        offsets: Vec::new(),
        vocab_sizes: Vec::new(),
    };
    if !(2..=MAX_PLE_NGRAM).contains(&p.ngram) {
        return Err(Error::model(format!(
            "qwen4exp: PLE n-gram size {} is out of range",
            p.ngram
        )));
    }
    let n_heads = p.n_heads();
    if n_heads == 0 || n_heads > MAX_PLE_HEADS {
        return Err(Error::model(format!(
            "qwen4exp: PLE head count {n_heads} is out of range"
        )));
    }
    let array = |name: &str, min: u32, max: u32| -> Result<Vec<u64>> {
        let v = meta.u64_array_opt(&key(name))?.unwrap_or_default();
        if v.len() < min as usize || v.len() > max as usize {
            return Err(Error::model(format!(
                "qwen4exp: {name} has {} entries, {min} to {max} are needed",
                v.len()
            )));
        }
        Ok(v)
    };
    p.multipliers = array("ple.layer_multipliers", p.ngram, MAX_PLE_NGRAM)?;
    let offsets = array("ple.head_offsets", n_heads, MAX_PLE_HEADS)?;
    let sizes = array("ple.head_vocab_sizes", n_heads, MAX_PLE_HEADS)?;
    for h in 0..n_heads as usize {
        let (o, s) = (offsets[h], sizes[h]);
        if s == 0 || o + s > i32::MAX as u64 {
            return Err(Error::model(format!(
                "qwen4exp: PLE head {h} range does not fit the int32 row index"
            )));
        }
        p.offsets.push(o as u32);
        p.vocab_sizes.push(s as u32);
    }
    // The embeddings' heads feed projections as wide as the model.
    if p.head_dim * n_heads != hp.n_embd {
        return Err(Error::model(format!(
            "qwen4exp: PLE heads of {} times {n_heads} must be as wide as the model ({})",
            p.head_dim, hp.n_embd
        )));
    }
    Ok(Some(p))
}

impl Decoder for Qwen4Exp {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let (e, hc) = (i64::from(hp.n_embd), i64::from(hp.hc_count));
        let x = b.embed_tokens_as("model.input_embed")?;
        let nt = x.ne()[1];
        let ple = ple::ple_embeddings(b)?;
        // The streams start as copies of the embedding.
        let x = b.g.reshape(x, &[e, 1, nt])?;
        let mut res = b.g.repeat(x, [e, hc, nt, 1])?;
        let last = hp.n_layer as usize - 1;
        for il in 0..=last {
            if let (Some(emb), true) = (ple, hp.ple.as_ref().is_some_and(|p| p.layer == il)) {
                res = ple::ple_layer(b, il, emb, res)?;
            }
            let (cur, inject) = hc_mix(b, res, &format!("blk.{il}.hc_attn"), Some(il))?;
            let mut cur = if hp.is_recurrent(il) {
                b.gated_delta_layer(il, cur, NET)?
            } else {
                let sparse = hp.compress_ratios.get(il).is_some_and(|&r| r > 0);
                let picks = if sparse {
                    Some(qsa::qsa_top_k(b, il, cur)?)
                } else {
                    None
                };
                let q = b.layer_weight(il, "attn_q.weight")?;
                let k = b.layer_weight(il, "attn_k.weight")?;
                let v = b.layer_weight(il, "attn_v.weight")?;
                let qkv = (
                    b.linear(q, None, cur)?,
                    b.linear(k, None, cur)?,
                    b.linear(v, None, cur)?,
                );
                gated_attention_of(b, il, qkv, picks)?
            };
            let mut inject = inject.ok_or_else(|| Error::Internal("a block mix without weights".into()))?;
            if il == last {
                // Everything after is per token: keep the outputs' rows alone.
                cur = b.select_outputs(cur)?;
                inject = b.select_outputs(inject)?;
                let flat = b.g.reshape(res, &[e * hc, nt])?;
                let flat = b.select_outputs(flat)?;
                res = b.g.reshape(flat, &[e, hc, flat.ne()[1]])?;
            }
            res = hc_combine(b, res, cur, inject)?;
            let (cur, inject) = hc_mix(b, res, &format!("blk.{il}.hc_ffn"), Some(il))?;
            let ffn = experts_ffn(b, il, cur)?;
            let ffn = b.name(ffn, "ffn_out", Some(il));
            let inject = inject.ok_or_else(|| Error::Internal("a block mix without weights".into()))?;
            res = hc_combine(b, res, ffn, inject)?;
            res = b.name(res, "l_last", Some(il));
        }
        let (x, _) = hc_mix(b, res, "output_hc", None)?;
        b.output_projection(x, None).map(Some)
    }
}

/// The mix of the streams `res` ([n_embd, hc, n_tokens]) before a block (`il`; the output
/// head's when None) by the weights `{prefix}_*`: [n_embd, n_tokens], and (in a layer) the
/// streams' weights for adding the block's output, [hc, n_tokens], before their sigmoid.
fn hc_mix(b: &mut Builder, res: TensorRef, prefix: &str, il: Option<usize>) -> Result<(TensorRef, Option<TensorRef>)> {
    let hp = b.hp;
    let (e, hc) = (i64::from(hp.n_embd), i64::from(hp.hc_count));
    let nt = res.ne()[2];
    let w = |b: &mut Builder, s: &str| b.weight(&format!("{prefix}_{s}.weight"));
    // A file may keep the [n_embd, hc] norm weights flat, as llama.cpp accepts them.
    let norm = w(b, "norm")?;
    let norm = b.g.reshape(norm, &[e, hc])?;
    let xn = b.rms_norm(res, norm)?;
    let xn = b.g.reshape(xn, &[e * hc, nt])?;
    let xn = b.name(xn, "hc_norm", il);
    let down = w(b, "down")?;
    let lo = b.weight_mm(down, xn)?;
    let lo = b.scale(lo, 1.0 / hc as f32)?;
    let lo = b.g.silu(lo)?;
    let up = w(b, "up")?;
    let gate = b.weight_mm(up, lo)?;
    let gate = b.name(gate, "hc_gate", il);
    let Some(il) = il else {
        // The head's mix, as llama.cpp builds it there: gate, then the streams' mean.
        let sig = b.g.sigmoid(gate)?;
        let gated = b.g.mul(xn, sig)?;
        let gated = b.g.reshape(gated, &[e, hc, nt])?;
        let row = gated.nb()[1];
        let stream = |b: &mut Builder, c: i64| b.g.view(gated, &[e, nt], &[row * hc as usize], c as usize * row);
        let first = stream(b, 0)?;
        let mut mixed = b.g.cont(first)?;
        for c in 1..hc {
            let s = stream(b, c)?;
            mixed = b.add(mixed, s)?;
        }
        return Ok((b.scale(mixed, 1.0 / hc as f32)?, None));
    };
    let x3 = b.g.reshape(xn, &[e, hc, nt])?;
    let g3 = b.g.reshape(gate, &[e, hc, nt])?;
    let mixed = b.g.gated_row_mean(x3, g3, 1.0 / hc as f32)?;
    let mixed = b.name(mixed, "hc_mixed", Some(il));
    let inject = w(b, "inject")?;
    let inject = b.weight_mm(inject, xn)?;
    Ok((mixed, Some(b.name(inject, "hc_inject", Some(il)))))
}

/// The streams `res` each plus the block's output `out` ([n_embd, n_tokens]) times
/// `2·sigmoid(inject / hc)`.
fn hc_combine(b: &mut Builder, res: TensorRef, out: TensorRef, inject: TensorRef) -> Result<TensorRef> {
    let hc = b.hp.hc_count as f32;
    let w = b.scale(inject, 1.0 / hc)?;
    let w = b.g.sigmoid(w)?;
    let w = b.scale(w, 2.0)?;
    b.g.add_weighted_rows(out, res, w, None).map_err(Error::from)
}
