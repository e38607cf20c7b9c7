//! LFM2: layers without key/value heads are short convolutions (gated by the input, their
//! window kept as recurrent state); the others attend with per-head query and key norms and NeoX
//! rotation (through a sliding window when the file gives one); each layer ends in a gated FFN.
//! LFM2-MoE: the same with experts in the FFNs after the first `leading_dense_block_count`
//! layers (sigmoid routing with a per-expert selection bias, weights normalised).

use super::attention_tensors;
use super::created::{layered, GATED};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NEOX};

pub struct Lfm2;

pub struct Lfm2Moe;

impl ArchSpec for Lfm2 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "lfm2",
            about: "Short convolutions beside attention; LFM2-ColBERT's projection of the embeddings to \
                `embedding_length_out`, which `llama_model_n_embd_out` reports.",
            rope_type: ROPE_NEOX,
            read_keys: &[super::READS_RMS_EPS, &["attention.sliding_window", "shortconv.l_cache"]],
            saved_rules: // Every layer is dense.
            &[(
                "leading_dense_block_count",
                Rule::Held(|f| Value::U32(f.hp.n_layer_dense_lead)),
            )],
            memory: Memory::Hybrid,
            rollback: true,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        if hp.n_expert > 0 {
            return Err(Error::model("lfm2 has no experts (lfm2moe has)"));
        }
        load_hparams(meta, hp)?;
        hp.n_layer_dense_lead = hp.n_layer;
        hp.size_label = match hp.n_ff.first() {
            Some(2560) => "230M",
            Some(4608) => "350M",
            Some(6912) => "700M",
            Some(8192) => "1.2B",
            Some(10752) => "2.6B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        lfm2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        tensors(hp)
    }
}

/// LFM2's (and LFM2-MoE's): the output norm (`token_embd_norm`); each layer's FFN (dense leading
/// layers, then experts with the router's selection bias) before its mixer, a short convolution
/// or attention with query and key norms; LFM2-ColBERT's projection of the embeddings last.
fn lfm2(hp: &HParams) -> Vec<String> {
    let mut names = layered(hp, "token_embd.weight token_embd_norm.weight output.weight", |il| {
        let ffn = match il < hp.n_layer_dense_lead as usize {
            true => GATED,
            false => {
                "ffn_gate_inp.weight ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight exp_probs_b.bias"
            }
        };
        let mixer = match hp.is_recurrent(il) {
            true => "shortconv.conv.weight shortconv.in_proj.weight shortconv.out_proj.weight",
            false => "attn_q_norm.weight attn_k_norm.weight QKV attn_output.weight",
        };
        format!("ffn_norm.weight {ffn} attn_norm.weight {mixer}")
    });
    names.extend(["dense_2.weight", "dense_2.bias"].map(String::from));
    names
}

impl ArchSpec for Lfm2Moe {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "lfm2moe",
            about: "LFM2's layers with experts routed by sigmoid scores and a selection bias.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                &[
                    "leading_dense_block_count",
                    "expert_feed_forward_length",
                    "expert_gating_func",
                    "shortconv.l_cache",
                ],
            ],
            memory: Memory::Hybrid,
            rollback: true,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        load_hparams(meta, hp)?;
        hp.n_layer_dense_lead = meta.u32_opt(&hp.key("leading_dense_block_count"))?.unwrap_or(0);
        let gating = meta.u32(&hp.key("expert_gating_func"))?;
        if Gating::from_llama(gating).is_none() {
            return Err(Error::NotImplemented("lfm2moe with that expert gating function"));
        }
        hp.expert_gating_func = gating;
        if hp.n_layer_dense_lead < hp.n_layer && (hp.n_expert == 0 || hp.n_expert_used == 0 || hp.n_ff_exp == 0) {
            return Err(Error::model(
                "lfm2moe needs expert_count, expert_used_count and expert_feed_forward_length",
            ));
        }
        hp.size_label = match hp.n_layer {
            24 => "8B.A1B",
            40 => "24B.A2B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        lfm2(hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        tensors(hp)
    }
}

fn load_hparams(meta: &Meta, hp: &mut HParams) -> Result<()> {
    hp.shortconv_l_cache = meta.u32(&hp.key("shortconv.l_cache"))?;
    if !(2..=64).contains(&hp.shortconv_l_cache) {
        return Err(Error::model(format!(
            "lfm2: short convolution window {} out of range (2..=64)",
            hp.shortconv_l_cache
        )));
    }
    hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
    if !hp.causal {
        return Err(Error::NotImplemented(
            "non-causal lfm2 (its centred convolution window)",
        ));
    }
    hp.recurrent_layers = hp.n_head_kv.iter().map(|&h| h == 0).collect();
    hp.kv_layers = hp.recurrent_layers.iter().map(|&r| !r).collect();
    // A sliding window, when given, is every attention layer's.
    let window = meta.u32_opt(&hp.key("attention.sliding_window"))?.unwrap_or(0);
    if window > 0 {
        hp.n_swa = window;
        hp.swa_layers = hp.kv_layers.clone();
        hp.rope_freq_base_swa = hp.rope_freq_base;
    }
    if hp.n_embd_head_k != hp.n_embd_head_v {
        return Err(Error::model("lfm2 needs equal key and value head sizes"));
    }
    Ok(())
}

fn tensors(hp: &HParams) -> Vec<TensorSpec> {
    let (e, v) = (hp.n_embd, hp.n_vocab);
    let mut specs = vec![
        TensorSpec::new("token_embd.weight", &[e, v], true),
        TensorSpec::new("token_embd_norm.weight", &[e], true),
        TensorSpec::matmul("output.weight", &[e, v], false),
    ];
    for il in 0..hp.n_layer as usize {
        let b = |s: &str| format!("blk.{il}.{s}");
        let ff = hp.n_ff[il];
        specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
        if hp.is_recurrent(il) {
            let l = hp.shortconv_l_cache;
            specs.push(TensorSpec::new(b("shortconv.conv.weight"), &[l, e], true));
            specs.push(TensorSpec::matmul(b("shortconv.in_proj.weight"), &[e, 3 * e], true));
            specs.push(TensorSpec::matmul(b("shortconv.out_proj.weight"), &[e, e], true));
        } else {
            attention_tensors(hp, il, &mut specs);
            specs.push(TensorSpec::new(b("attn_q_norm.weight"), &[hp.n_embd_head_k], true));
            specs.push(TensorSpec::new(b("attn_k_norm.weight"), &[hp.n_embd_head_k], true));
        }
        specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
        if il < hp.n_layer_dense_lead as usize {
            specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
            specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
        } else {
            let (x, n) = (hp.n_ff_exp, hp.n_expert);
            specs.push(TensorSpec::matmul(b("ffn_gate_inp.weight"), &[e, n], true));
            specs.push(TensorSpec::matmul(b("ffn_gate_exps.weight"), &[e, x, n], true));
            specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, x, n], true));
            specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[x, e, n], true));
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[n], true));
        }
    }
    // LFM2-ColBERT's projection of the embeddings (applied after pooling).
    let out = hp.embd_out();
    specs.push(TensorSpec::matmul("dense_2.weight", &[e, out], false));
    specs.push(TensorSpec::new("dense_2.bias", &[out], false));
    specs
}

impl Decoder for Lfm2 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        decoder(b)
    }
}

impl Decoder for Lfm2Moe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        decoder(b)
    }
}

fn decoder(b: &mut Builder) -> Result<Option<TensorRef>> {
    let hp = b.hp;
    let kq_scale = 1.0 / (hp.n_embd_head_v as f32).sqrt();
    let mut x = b.embed_tokens_as("model.embed_tokens")?;
    for il in 0..hp.n_layer as usize {
        let l = Some(il);
        let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
        let cur = if hp.is_recurrent(il) {
            b.shortconv_layer(il, cur)?
        } else {
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q_norm = b.layer_weight(il, "attn_q_norm.weight")?;
            let k_norm = b.layer_weight(il, "attn_k_norm.weight")?;
            let (q, k) = (b.rms_norm(q, q_norm)?, b.rms_norm(k, k_norm)?);
            let (q, k) = (b.rope(q, il, None)?, b.rope(k, il, None)?);
            let sliding = crate::graph::is_sliding(hp, il);
            let att = b.attention(il, q, k, v, kq_scale, sliding)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            b.name(att, "attn_out", l)
        };
        let (cur, residual) = b.last_layer_rows(il, cur, x)?;
        let h = b.add(residual, cur)?;
        let normed = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
        let ffn = if il < hp.n_layer_dense_lead as usize {
            b.gated_ffn(il, normed, Ffn::default())?
        } else {
            let moe = Moe {
                gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Sigmoid),
                normalize: true,
                ..Moe::BASE
            };
            b.moe_ffn(il, normed, moe)?
        };
        x = b.add(h, ffn)?;
        x = b.layer_out(x, il)?;
    }
    b.output_head_after("token_embd_norm.weight", x).map(Some)
}
