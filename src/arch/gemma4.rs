//! Gemma 4: Gemma 3's layers with head sizes of their own on the sliding-window layers, values
//! normed without a weight (taken from the key projection where the file has no value
//! projection), unscaled queries, proportional rotation on the global layers (`rope_freqs`),
//! Gemma 3n's per-layer embeddings and shared caches of the last layers, optional mixtures of
//! experts beside a dense FFN, and a per-layer output scale.

use super::created::layered;
use super::gemma3n::{cache_layer, per_layer_inputs, project_per_layer_inputs, slice};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{is_sliding, Builder, Decoder, ExpertAct, Ffn, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct Gemma4;

/// The experts: picked and weighted by softmax, weights normalised, GELU-gated, each times its
/// scale where the stacks have them.
const EXPERTS: Moe = Moe {
    gating: Gating::Softmax,
    normalize: true,
    act: ExpertAct::Gelu,
    scaled: true,
    ..Moe::BASE
};

/// The dense FFN (the shared expert of a layer with experts): GELU-gated, with its weights' scales.
const FFN: Ffn = Ffn {
    gelu: true,
    oai: false,
    scaled: true,
    biased: false,
};

impl ArchSpec for Gemma4 {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "gemma4",
            about: "Gemma 4: Gemma 3's layers with their own head sizes on the sliding-window layers, values \
                normed (or taken from the keys), proportional rotation on the global layers, Gemma \
                3n's per-layer embeddings and shared caches, optional experts beside the FFN and a \
                per-layer output scale.",
            rope_type: ROPE_NEOX,
            // `attention.shared_kv_layers` is read too, but llama.cpp's saver does not write it.
            read_keys: &[
                super::READS_SLIDING,
                super::READS_RMS_EPS,
                &[
                    "attention.sliding_window_pattern",
                    "expert_feed_forward_length",
                    "embedding_length_per_layer_input",
                    "final_logit_softcapping",
                ],
            ],
            // llama.cpp's loader sets the attention scale to 1 whatever the file says.
            saved_rules: &[("attention.scale", Rule::Held(|_| Value::F32(1.0)))],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let pattern = hp.key("attention.sliding_window_pattern");
        hp.swa_layers = super::layer_flags(meta, hp, &pattern, false)?
            .ok_or_else(|| Error::model(format!("gemma4 needs the per-layer array '{pattern}'")))?;
        hp.n_swa = meta.u32(&hp.key("attention.sliding_window"))?;
        hp.rope_freq_base_swa = meta.f32_opt(&hp.key("rope.freq_base_swa"))?.unwrap_or(10000.0);
        let shared = meta.u32_opt(&hp.key("attention.shared_kv_layers"))?.unwrap_or(0);
        let kv_layers = hp.n_layer.saturating_sub(shared) as usize;
        // The shared layers read the last two that keep a cache.
        if kv_layers < 2 {
            return Err(Error::model(format!(
                "gemma4 needs two layers with caches of their own ({shared} of {} share)",
                hp.n_layer
            )));
        }
        hp.kv_layers = (0..hp.n_layer as usize).map(|il| il < kv_layers).collect();
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        hp.n_embd_per_layer = meta.u32(&hp.key("embedding_length_per_layer_input"))?;
        // Required here, as llama.cpp's loader requires them.
        meta.u32(&hp.key("attention.key_length_swa"))?;
        meta.u32(&hp.key("attention.value_length_swa"))?;
        if hp.n_embd_head_k != hp.n_embd_head_v || hp.n_embd_head_k_swa != hp.n_embd_head_v_swa {
            return Err(Error::model("gemma4 needs equal key and value head sizes"));
        }
        hp.final_logit_softcap = meta.f32_opt(&hp.key("final_logit_softcapping"))?.unwrap_or(30.0);
        hp.attn_scale = 1.0;
        hp.rope_factors_swa = false;
        hp.non_causal_sliding_only = true;
        hp.size_label = match hp.n_layer {
            30 => "26B.A4B",
            35 => "E2B",
            42 => "E4B",
            60 => "31B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, a, n) = (hp.n_embd, hp.n_embd_per_layer, hp.n_layer);
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        if a > 0 {
            super::gemma3n::per_layer_tensors(hp, a, &mut specs);
        }
        // One table of factors for every global layer, as wide as their heads' half.
        if let Some(il) = (0..n as usize).find(|&il| !hp.is_swa(il)) {
            specs.push(TensorSpec::new("rope_freqs.weight", &[hp.head_k(il) / 2], true));
        }
        for il in 0..n as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let head = hp.head_k(il);
            let (q, kv) = (head * hp.n_head[il], head * hp.n_head_kv[il]);
            let own = hp.has_kv(il);
            let qkv = b("attn_qkv.weight");
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::matmul(&qkv, &[e, q + 2 * kv], false),
                TensorSpec::matmul(b("attn_q.weight"), &[e, q], true).unless(&qkv),
                TensorSpec::matmul(b("attn_k.weight"), &[e, kv], own).unless(&qkv),
                TensorSpec::matmul(b("attn_v.weight"), &[e, kv], false),
                TensorSpec::matmul(b("attn_output.weight"), &[q, e], true),
                TensorSpec::new(b("attn_q_norm.weight"), &[head], true),
                TensorSpec::new(b("attn_k_norm.weight"), &[head], own),
                TensorSpec::new(b("post_attention_norm.weight"), &[e], true),
                TensorSpec::new(b("layer_output_scale.weight"), &[1], false),
            ]);
            let ff = hp.n_ff[il];
            specs.extend([
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
                TensorSpec::new(b("post_ffw_norm.weight"), &[e], true),
            ]);
            if hp.n_expert > 0 {
                let (x, ne) = (hp.n_ff_exp, hp.n_expert);
                specs.extend([
                    TensorSpec::new(b("ffn_gate_inp.weight"), &[e, ne], true),
                    TensorSpec::new(b("ffn_gate_inp.scale"), &[e], true),
                    TensorSpec::new(b("pre_ffw_norm_2.weight"), &[e], true),
                    TensorSpec::new(b("post_ffw_norm_1.weight"), &[e], true),
                    TensorSpec::new(b("post_ffw_norm_2.weight"), &[e], true),
                    TensorSpec::matmul(b("ffn_down_exps.weight"), &[x, e, ne], true),
                ]);
                specs.extend(super::gate_up_exps(hp, il));
            }
            if a > 0 {
                specs.extend([
                    TensorSpec::matmul(b("inp_gate.weight"), &[e, a], true),
                    TensorSpec::matmul(b("proj.weight"), &[a, e], true),
                    TensorSpec::new(b("post_norm.weight"), &[e], true),
                ]);
            }
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let mut head = String::from("output.weight token_embd.weight");
        if hp.n_embd_per_layer > 0 {
            head += " per_layer_token_embd.weight per_layer_model_proj.weight per_layer_proj_norm.weight";
        }
        head += " output_norm.weight";
        layered(hp, &head, |il| {
            let mut words = String::from(
                "attn_norm.weight attn_q.weight attn_k.weight attn_v.weight attn_output.weight \
                 attn_q_norm.weight attn_k_norm.weight post_attention_norm.weight layer_output_scale.weight",
            );
            if !hp.is_swa(il) {
                words += " ROPE_FREQS";
            }
            words += " ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight";
            if hp.n_expert > 0 {
                words += " ffn_gate_inp.weight ffn_gate_inp.scale pre_ffw_norm_2.weight post_ffw_norm_1.weight \
                    post_ffw_norm_2.weight ffn_gate_up_exps.weight ffn_down_exps.weight";
            }
            if hp.n_embd_per_layer > 0 {
                words += " inp_gate.weight proj.weight post_norm.weight";
            }
            words
        })
    }
}

impl Decoder for Gemma4 {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let mut x = super::gemma3::scaled_embeddings(b, true)?;
        let per_layer = match hp.n_embd_per_layer {
            0 => None,
            a => {
                let rows = per_layer_inputs(b, a)?;
                b.g.expand(rows);
                Some(project_per_layer_inputs(b, x, rows, a)?)
            }
        };
        for il in 0..hp.n_layer as usize {
            x = layer(b, il, x, per_layer)?;
        }
        let logits = b.output_head_selecting(x)?;
        let logits = match hp.final_logit_softcap {
            0.0 => logits,
            cap => b.soft_cap(logits, 1.0, cap)?,
        };
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// Layer `il` over the stream `x`; `per_layer` is [width, n_tokens, n_layer] where the model has
/// per-layer embeddings.
fn layer(b: &mut Builder, il: usize, x: TensorRef, per_layer: Option<TensorRef>) -> Result<TensorRef> {
    let l = Some(il);
    let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
    let att = attention(b, il, cur)?;
    let wo = b.layer_weight(il, "attn_output.weight")?;
    let att = b.linear(wo, None, att)?;
    let att = b.layer_rms_norm(il, att, "post_attention_norm.weight", "attn_post_norm")?;
    let attn_out = b.add(att, x)?;
    let attn_out = b.name(attn_out, "attn_out", l);

    let cur = if b.layer_weight_opt(il, "ffn_gate_inp.weight").is_some() {
        let mlp = b.layer_rms_norm(il, attn_out, "ffn_norm.weight", "ffn_norm_1")?;
        let mlp = b.gated_ffn(il, mlp, FFN)?;
        let mlp = b.layer_rms_norm(il, mlp, "post_ffw_norm_1.weight", "ffn_mlp")?;
        let moe = b.layer_rms_norm(il, attn_out, "pre_ffw_norm_2.weight", "ffn_norm_2")?;
        // The router reads the layer's stream normed without a weight, scaled per channel.
        let r = b.g.rms_norm(attn_out, b.hp.rms_eps)?;
        let r = b.scale(r, 1.0 / (b.hp.n_embd as f32).sqrt())?;
        let s = b.layer_weight(il, "ffn_gate_inp.scale")?;
        let r = b.g.mul(r, s)?;
        let router = b.layer_weight(il, "ffn_gate_inp.weight")?;
        let logits = b.weight_mm(router, r)?;
        let logits = b.name(logits, "ffn_moe_logits", l);
        let moe = b.moe_ffn_from_logits(il, moe, logits, EXPERTS)?;
        let moe = b.layer_rms_norm(il, moe, "post_ffw_norm_2.weight", "ffn_moe")?;
        let sum = b.add(mlp, moe)?;
        b.name(sum, "ffn_moe_combined", l)
    } else {
        let cur = b.layer_rms_norm(il, attn_out, "ffn_norm.weight", "ffn_norm")?;
        let cur = b.gated_ffn(il, cur, FFN)?;
        b.name(cur, "ffn_out", l)
    };
    let cur = super::gemma3::post_ffw_norm(b, il, cur)?;
    let mut cur = b.add(cur, attn_out)?;

    if let Some(per_layer) = per_layer {
        let pe_in = b.name(cur, "pe_in", l);
        let gated = b.layer_matmul(il, "inp_gate.weight", pe_in)?;
        let gated = b.g.gelu(gated)?;
        let this_layer = slice(b, per_layer, il)?;
        let gated = b.g.mul(gated, this_layer)?;
        let out = b.layer_matmul(il, "proj.weight", gated)?;
        let out = b.layer_rms_norm(il, out, "post_norm.weight", "per_layer_embd_out")?;
        cur = b.add(pe_in, out)?;
    }
    if let Some(s) = b.layer_weight_opt(il, "layer_output_scale.weight") {
        cur = b.g.mul(cur, s)?;
        cur = b.name(cur, "out_scaled", l);
    }
    b.layer_out(cur, il)
}

/// Layer `il`'s attention over the normed `cur`, before the output projection: its own keys and
/// values (the values normed without a weight, and the keys' projection where the layer has no
/// value projection), or past the layers that keep them, the queries alone over an earlier
/// layer's cache. Scores are not scaled.
fn attention(b: &mut Builder, il: usize, cur: TensorRef) -> Result<TensorRef> {
    let hp = b.hp;
    let l = Some(il);
    let (head, n_head, n_head_kv) = (hp.head_k(il), hp.n_head[il], hp.n_head_kv[il]);
    let fused = match b.layer_weight_opt(il, "attn_qkv.weight") {
        Some(w) => {
            let qkv = b.linear(w, None, cur)?;
            let qkv = b.name(qkv, "wqkv", l);
            Some(b.split_qkv(il, qkv, false)?)
        }
        None => None,
    };
    let q = match fused {
        Some((q, _, _)) => q,
        None => {
            let w = b.layer_weight(il, "attn_q.weight")?;
            b.linear(w, None, cur)?
        }
    };
    let q = b.name(q, "Qcur", l);
    let q = b.heads(q, head, n_head)?;
    let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
    // The global layers rotate in proportion (their frequency factors); the sliding ones plainly.
    let factors = match hp.is_swa(il) {
        true => None,
        false => b.weight_opt("rope_freqs.weight"),
    };
    let q = b.rope_dims(q, il, hp.rot(il), factors)?;
    let q = b.name(q, "Qcur_pos", l);
    let src = cache_layer(hp, il);
    if src != il {
        let att = b.attention_shared(il, src, q, 1.0)?;
        return Ok(b.name(att, "kqv_out", l));
    }
    let (k, v) = match fused {
        Some((_, k, v)) => (k, v),
        None => {
            let w = b.layer_weight(il, "attn_k.weight")?;
            let k = b.linear(w, None, cur)?;
            let k = b.name(k, "Kcur", l);
            let v = match b.layer_weight_opt(il, "attn_v.weight") {
                Some(w) => {
                    let v = b.linear(w, None, cur)?;
                    b.name(v, "Vcur", l)
                }
                None => k,
            };
            (k, v)
        }
    };
    let k = b.heads(k, head, n_head_kv)?;
    let v = b.heads(v, head, n_head_kv)?;
    let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
    let v = b.g.rms_norm(v, hp.rms_eps)?;
    let v = b.name(v, "Vcur_normed", l);
    let k = b.rope_dims(k, il, hp.rot(il), factors)?;
    let k = b.name(k, "Kcur_pos", l);
    let att = b.attention(il, q, k, v, 1.0, is_sliding(hp, il))?;
    Ok(b.name(att, "kqv_out", l))
}
