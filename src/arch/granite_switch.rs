//! Granite Switch: Granite's scaled decoder (one fused query-key-value projection) carrying LoRA
//! adapters in its own tensors, which activation tokens switch on for the tokens after them
//! (`switch.rs`). Its router's keys and values are a layer of the cache after the blocks, which
//! no K-shift turns; llama.cpp reports that layer as a next-token-prediction one and saves the
//! model with it (one more block, `nextn_predict_layers` 1), without the adapters' keys.

mod switch;

use super::created::{layered, HEAD};
use super::granite::ROTATES_BY_DEFAULT;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::{Array, Value};
use crate::graph::{Builder, Decoder};
use crate::model::hparams::{HParams, TokenAdapters};
use crate::model::metadata::{missing, Meta};
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct GraniteSwitch;

/// The projections each adapter adapts, in the loader's order.
const ADAPTED: [&str; 7] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
];

/// llama.cpp's bound on the adapters' count and rank.
const MAX_ADAPTERS: u32 = 4096;

/// The router's key magnitude where the file gives none.
const DEFAULT_ROUTER_GAIN: f32 = 15.0;

/// A per-layer float llama.cpp's saver writes for every layer, the router's too.
fn zero_per_layer(f: &crate::model::saver::Facts) -> Value {
    Value::Array(Array::F32(vec![0.0; f.n_layer_all + 1]))
}

impl ArchSpec for GraniteSwitch {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "graniteswitch",
            about: "Granite Switch: Granite's scales over a fused projection, with LoRA adapters in its own tensors \
                that activation tokens switch on per token (embedded as their substitutes), through a one-head router \
                layer kept in the cache after the blocks; token ids only.",
            read_keys: &[
                super::READS_RMS_EPS,
                &[
                    "expert_shared_feed_forward_length",
                    "logit_scale",
                    "residual_scale",
                    "embedding_scale",
                    "attention.scale",
                ],
            ],
            saved_rules: &[
                ROTATES_BY_DEFAULT,
                // The router layer, counted as a next-token-prediction one.
                ("block_count", Rule::Held(|f| Value::U32(f.n_layer_all as u32 + 1))),
                ("nextn_predict_layers", Rule::Held(|_| Value::U32(1))),
                ("swiglu_clamp_exp", Rule::Held(zero_per_layer)),
                ("swiglu_clamp_shexp", Rule::Held(zero_per_layer)),
                (
                    "attention.rope_pattern",
                    Rule::Held(|f| Value::U32(u32::from(f.hp.rope))),
                ),
            ],
            ..Facts::BASE
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("graniteswitch.{k}");
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        hp.logit_scale = meta.f32(&key("logit_scale"))?;
        hp.residual_scale = meta.f32_opt(&key("residual_scale"))?.unwrap_or(0.0);
        hp.embedding_scale = meta.f32_opt(&key("embedding_scale"))?.unwrap_or(0.0);
        hp.attn_scale = meta.f32_opt(&key("attention.scale"))?.unwrap_or(0.0);
        hp.rope = meta.bool_opt(&key("rope.scaling.finetuned"))?.unwrap_or(true);
        hp.n_ff_shexp = meta.u32_opt(&key("expert_shared_feed_forward_length"))?.unwrap_or(0);
        super::check_equal_head_sizes(hp)?;
        let n_adapters = meta.u32(&key("adapters.count"))?;
        let rank = meta.u32(&key("adapters.lora_rank"))?;
        if n_adapters > MAX_ADAPTERS || rank > MAX_ADAPTERS {
            return Err(Error::model(format!(
                "graniteswitch: {n_adapters} adapters of rank {rank} (at most {MAX_ADAPTERS} of each)"
            )));
        }
        let ids = |k: &str| -> Result<Vec<i32>> {
            let v = meta.u64_array_opt(&key(k))?.ok_or_else(|| missing(&key(k)))?;
            v.into_iter()
                .map(|id| i32::try_from(id).map_err(|_| Error::model(format!("{}: token id {id}", key(k)))))
                .collect()
        };
        let (activate, substitute) = (
            ids("adapters.token_ids_activate")?,
            ids("adapters.token_ids_substitute")?,
        );
        if activate.len() != n_adapters as usize || substitute.len() != n_adapters as usize {
            return Err(Error::model(format!(
                "graniteswitch: {} activation and {} substitute tokens for {n_adapters} adapters",
                activate.len(),
                substitute.len()
            )));
        }
        if let Some(s) = substitute.iter().find(|&&s| s < 0 || s as u32 >= hp.n_vocab) {
            return Err(Error::model(format!(
                "graniteswitch: substitute token id {s} out of range [0, {})",
                hp.n_vocab
            )));
        }
        hp.token_adapters = Some(TokenAdapters {
            rank,
            router_gain: meta
                .f32_opt(&key("adapters.router_gain"))?
                .unwrap_or(DEFAULT_ROUTER_GAIN),
            activate,
            substitute,
        });
        // The router: one head of one key, never rotated, after the blocks.
        let n = hp.n_layer as usize;
        hp.n_layer_cache_only = 1;
        hp.n_head.push(1);
        hp.n_head_kv.push(1);
        hp.n_ff.push(0);
        hp.kv_layers.push(true);
        hp.swa_layers.push(false);
        hp.recurrent_layers.push(false);
        hp.rope_layers = (0..=n).map(|il| il < n).collect();
        hp.size_label = match (hp.n_layer, hp.n_embd) {
            (40, 4096) => "8B",
            (40, _) => "3B",
            (64, _) => "30B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = Vec::new();
        super::head_tensors(hp, &mut specs);
        let (e, ff) = (hp.n_embd, hp.n_ff[0]);
        let (q, kv) = (hp.n_embd_head_k * hp.n_head[0], hp.n_embd_head_k * hp.n_head_kv[0]);
        let (rank, slots) = match &hp.token_adapters {
            Some(a) => (a.rank, a.activate.len() as u32 + 1),
            None => (0, 1),
        };
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("attn_qkv.weight"), &[e, q + 2 * kv], true),
                TensorSpec::matmul(b("attn_output.weight"), &[q, e], true),
                TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
            ]);
            for (stem, n_in, n_out) in [
                ("attn_q", e, q),
                ("attn_k", e, kv),
                ("attn_v", e, kv),
                ("attn_output", q, e),
                ("ffn_gate", e, ff),
                ("ffn_up", e, ff),
                ("ffn_down", ff, e),
            ] {
                specs.push(TensorSpec::matmul(
                    b(&format!("{stem}.lora_a")),
                    &[n_in, rank, slots],
                    true,
                ));
                specs.push(TensorSpec::matmul(
                    b(&format!("{stem}.lora_b")),
                    &[rank, n_out, slots],
                    true,
                ));
            }
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let lora: Vec<String> = ADAPTED.iter().map(|s| format!("{s}.lora_a {s}.lora_b")).collect();
        let lora = lora.join(" ");
        layered(hp, HEAD, |_| {
            format!(
                "attn_norm.weight attn_qkv.weight attn_output.weight ffn_norm.weight ffn_gate.weight \
                 ffn_down.weight ffn_up.weight {lora}"
            )
        })
    }
}

impl Decoder for GraniteSwitch {
    /// Only the output head goes through `build_lora_mm` in llama.cpp's graph.
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        stem != "output"
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let (mut x, mut ids) = switch::embed_and_route(b)?;
        let head = hp.n_embd_head_k;
        let kq_scale = match hp.attn_scale {
            0.0 => 1.0 / (head as f32).sqrt(),
            s => s,
        };
        let nt = b.shape.n_tokens as i64;
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            let qkv = b.layer_matmul(il, "attn_qkv.weight", cur)?;
            let qkv = b.name(qkv, "wqkv", l);
            let (n_head, n_head_kv) = (hp.n_head[il], hp.n_head_kv[il]);
            let (nq, nkv) = (i64::from(head * n_head), i64::from(head * n_head_kv));
            let row = |n: i64| crate::ggml::row_size(qkv.ggml_type(), n);
            let mut parts = Vec::with_capacity(3);
            for (stem, start, width, heads) in [
                ("attn_q", 0, nq, n_head),
                ("attn_k", nq, nkv, n_head_kv),
                ("attn_v", nq + nkv, nkv, n_head_kv),
            ] {
                let t = b.g.view(qkv, &[width, nt], &[qkv.nb()[1]], row(start))?;
                let t = b.g.cont(t)?;
                let d = switch::delta(b, il, stem, cur, ids)?;
                let t = b.add(t, d)?;
                parts.push(b.g.reshape(t, &[i64::from(head), i64::from(heads), nt])?);
            }
            let (mut q, mut k, v) = (parts[0], parts[1], parts[2]);
            if hp.has_rope(il) {
                q = b.rope(q, il, None)?;
                k = b.rope(k, il, None)?;
            }
            let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
            let att = b.attention(il, q, k, v, kq_scale, false)?;
            let att = b.name(att, "attn_pre_o", l);
            let att = switch::switched(b, il, "attn_output", att, ids)?;
            let att = b.name(att, "attn_out", l);
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            if il + 1 == hp.n_layer as usize {
                // The picked rows' slots, for the last FFN.
                let picked = b.g.reshape(ids, &[1, nt])?;
                let picked = b.select_outputs(picked)?;
                ids = b.g.reshape(picked, &[picked.ne()[1]])?;
            }
            x = ffn(b, il, att, residual, ids)?;
        }
        let logits = b.output_head(x)?;
        let logits = b.scale(logits, 1.0 / hp.logit_scale)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// The rest of layer `il` after its attention `att`: both scaled by the residual scale where the
/// model has one, the switched SwiGLU FFN (its gate's SiLU and the product apart, as llama.cpp
/// computes them).
fn ffn(b: &mut Builder, il: usize, att: TensorRef, residual: TensorRef, ids: TensorRef) -> Result<TensorRef> {
    let scale = b.hp.residual_scale;
    let scaled = |b: &mut Builder, t: TensorRef| if scale != 0.0 { b.scale(t, scale) } else { Ok(t) };
    let att = scaled(b, att)?;
    let h = b.add(att, residual)?;
    let h = b.name(h, "ffn_inp", Some(il));
    let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
    let gate = switch::switched(b, il, "ffn_gate", cur, ids)?;
    let up = switch::switched(b, il, "ffn_up", cur, ids)?;
    let gate = b.g.silu(gate)?;
    let gu = b.g.mul(gate, up)?;
    let out = switch::switched(b, il, "ffn_down", gu, ids)?;
    let out = b.name(out, "ffn_out", Some(il));
    let out = scaled(b, out)?;
    let out = b.add(out, h)?;
    b.layer_out(out, il)
}
