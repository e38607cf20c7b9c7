//! EmbeddingGemma: Gemma 3's layers as an encoder. Its sliding-window layers see a window
//! reaching both ways (half of it before the token, half after), every token attends both ways,
//! and the embeddings end in the optional Sentence Transformers projections (`dense_2`, `dense_3`)
//! after pooling.

use super::created::{layered, ATTN, HEAD, KQ_NORMS};
use super::gemma3;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_NEOX};

pub struct GemmaEmbedding;

/// Without an explicit pattern, every sixth layer attends globally.
const DEFAULT_SWA_PERIOD: u32 = 6;

impl ArchSpec for GemmaEmbedding {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "gemma-embedding",
            about: "EmbeddingGemma: Gemma 3's layers as an encoder, sliding windows reaching both ways, dense \
                projections after pooling: no cache, `llama_encode`, which `llama_decode` calls for it as \
                llama.cpp does; one ubatch per batch.",
            rope_type: ROPE_NEOX,
            read_keys: &[
                super::READS_RMS_EPS,
                super::READS_SLIDING,
                &[
                    "dense_2_feat_in",
                    "dense_2_feat_out",
                    "dense_3_feat_in",
                    "dense_3_feat_out",
                ],
            ],
            saved_rules: &[
                // llama.cpp's loader makes the model non-causal and sets the query scale itself.
                super::HELD_CAUSAL,
                (
                    "attention.scale",
                    Rule::Held(|f| Value::F32(1.0 / (f.hp.n_embd_head_k as f32).sqrt())),
                ),
            ],
            memory: Memory::None,
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let window = meta.u32(&hp.key("attention.sliding_window"))?;
        if window == 0 {
            return Err(Error::NotImplemented("an EmbeddingGemma sliding window of 0 tokens"));
        }
        hp.swa_symmetric = true;
        super::load_sliding_window(meta, hp, window, DEFAULT_SWA_PERIOD, 10000.0, 1.0)?;
        hp.causal = false;
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        let [d2_in, d2_out, d3_in, d3_out] = [
            "dense_2_feat_in",
            "dense_2_feat_out",
            "dense_3_feat_in",
            "dense_3_feat_out",
        ]
        .map(|key| meta.u32_opt(&hp.key(key)).map(|v| v.unwrap_or(0)));
        let (d2_in, d3_out) = (d2_in?, d3_out?);
        if ![0, hp.n_embd].contains(&d2_in) || ![0, hp.n_embd].contains(&d3_out) {
            return Err(Error::model(
                "dense_2_feat_in and dense_3_feat_out must be the embedding length",
            ));
        }
        hp.dense_2_feat_out = d2_out?;
        hp.dense_3_feat_in = d3_in?;
        hp.size_label = if hp.n_layer == 24 { "0.3B" } else { "?B" };
        hp.attn_scale = 1.0 / (hp.n_embd_head_k as f32).sqrt();
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let e = hp.n_embd;
        let mut specs = gemma3::tensors(hp, true);
        specs.push(TensorSpec::matmul("dense_2.weight", &[e, hp.dense_2_feat_out], false));
        specs.push(TensorSpec::matmul("dense_3.weight", &[hp.dense_3_feat_in, e], false));
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        // The dense projections only where the file gives their widths (a zero one is no shape).
        let dense = match (hp.dense_2_feat_out, hp.dense_3_feat_in) {
            (0, 0) => "",
            (_, 0) => "dense_2.weight",
            (0, _) => "dense_3.weight",
            _ => "dense_2.weight dense_3.weight",
        };
        layered(hp, &format!("{HEAD} {dense}"), |_| {
            format!("{ATTN} post_attention_norm.weight {KQ_NORMS} ffn_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight post_ffw_norm.weight")
        })
    }
}

impl Decoder for GemmaEmbedding {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let mut x = super::gemma3::scaled_embeddings(b, true)?;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let (q, k, v) = b.qkv(il, cur, true)?;
            let q = b.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
            let q = b.rope(q, il, None)?;
            let k = b.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
            let k = b.rope(k, il, None)?;
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            // Gemma scales the queries before attention instead of the scores.
            let q = b.scale(q, hp.attn_scale)?;
            let att = b.attention_no_cache(il, q, k, v, 1.0)?;
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let att = b.layer_rms_norm(il, att, "post_attention_norm.weight", "attn_post_norm")?;
            let h = b.add(att, residual)?;
            let h = b.name(h, "sa_out", l);
            let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
            let ffn = b.gated_ffn(
                il,
                cur,
                Ffn {
                    gelu: true,
                    ..Ffn::default()
                },
            )?;
            let ffn = b.name(ffn, "ffn_out", l);
            // llama.cpp names this norm's steps without the layer.
            let w = b.layer_weight(il, "post_ffw_norm.weight")?;
            let n = b.g.rms_norm(ffn, hp.rms_eps)?;
            let n = b.name(n, "norm", None);
            let n = b.g.mul(n, w)?;
            let ffn = b.name(n, "ffn_post_norm", None);
            x = b.add(ffn, h)?;
            x = b.layer_out(x, il)?;
        }
        let w = b.weight("output_norm.weight")?;
        let x = b.g.rms_norm(x, hp.rms_eps)?;
        let x = b.name(x, "norm", None);
        let x = b.g.mul(x, w)?;
        let x = b.name(x, "result_norm", None);
        b.set_hidden(x);
        Ok(None)
    }
}
