//! Llama (and the families that share its graph: Mistral, SmolLM, ...). Its decoder and tensors
//! also serve Qwen2 (`qwen2.rs`), Qwen3 (`qwen3.rs`, with per-head query and key norms),
//! SmolLM3 (`smollm3.rs`, with layers that do not rotate) and Granite (`granite.rs`, with scales).

use super::common_tensors;
use super::created::{layered, ATTN, EXPERTS, GATED_BIASED, HEAD};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{is_sliding, rope_factors, Builder, Decoder, Ffn, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct Llama;

/// LLaMA as an embedding model (`llama-embed`): Llama's loader and layers, attention within the
/// ubatch though its contexts keep a (unused) KV cache, as llama.cpp's do, and no output head.
pub struct LlamaEmbed;

const LLAMA: Facts = Facts {
    name: "llama",
    about: "Llama 2/3, Mistral, SmolLM, ..., and Mixtral-style mixtures of experts.",
    read_keys: &[super::READS_RMS_EPS],
    ..Facts::BASE
};

impl ArchSpec for Llama {
    fn facts(&self) -> &Facts {
        &LLAMA
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        if hp.n_rot != hp.n_embd_head_k {
            return Err(crate::Error::model(format!(
                "invalid rope dimension count {}: llama needs it equal to the head size {}",
                hp.n_rot, hp.n_embd_head_k
            )));
        }
        // Mixtral-style experts are as wide as the dense FFN would be.
        hp.n_ff_exp = hp.n_ff[0];
        // Size labels as llama.cpp derives them from the layer count, for llama_model_desc.
        hp.size_label = match hp.n_layer {
            32 if hp.n_expert == 8 => "8x7B",
            56 if hp.n_expert == 8 => "8x22B",
            _ if hp.n_expert == 8 => "?B",
            16 | 22 => "1B",
            26 | 28 => "3B",
            30 => "256M",
            32 if hp.n_vocab == 49152 => "3B",
            32 if hp.n_vocab < 40000 => "7B",
            32 => "8B",
            36 => "8B",
            40 => "13B",
            48 => "34B",
            60 => "30B",
            80 if hp.n_head[0] == hp.n_head_kv[0] => "65B",
            80 => "70B",
            _ => "?B",
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        tensors(hp)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        llama(hp)
    }
}

/// Llama's loader (and Granite's, Granite MoE's, MiniCPM's, Mistral 3's, Refact's): the attention output's bias, the rotary
/// factors, the dense FFN with its biases, or experts (with shared ones where the model has them).
pub(super) fn llama(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        let ffn = if hp.n_expert == 0 {
            GATED_BIASED.to_string()
        } else if hp.n_ff_shexp > 0 {
            format!("{EXPERTS} ffn_gate_shexp.weight ffn_up_shexp.weight ffn_down_shexp.weight")
        } else {
            EXPERTS.to_string()
        };
        format!("{ATTN} attn_output.bias ffn_norm.weight ROPE {ffn}")
    })
}

impl Decoder for Llama {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = Variant {
            ffn_scales: true,
            ..Variant::BASE
        };
        decoder(b, variant)
    }
}

impl ArchSpec for LlamaEmbed {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "llama-embed",
            about: "LLaMA as an embedding model: Llama's layers attending within each ubatch (causally in \
                `llama_decode` unless the model says otherwise, both ways in `llama_encode`) beside an \
                unused KV cache, as llama.cpp's, and no output head.",
            ..LLAMA
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        Llama.load_hparams(meta, hp)
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        tensors(hp)
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        llama(hp)
    }
}

impl Decoder for LlamaEmbed {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let variant = Variant {
            ffn_scales: true,
            no_cache: true,
            embed: true,
            ..Variant::BASE
        };
        decoder(b, variant)
    }
}

/// Llama's tensors: the common decoder's, optional rotary factors and optional biases.
pub(super) fn tensors(hp: &HParams) -> Vec<TensorSpec> {
    tensors_with(hp, true)
}

/// The same, with experts where the file has them only if the architecture loads `experts`.
pub(super) fn tensors_with(hp: &HParams, experts: bool) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    common_tensors(hp, experts, &mut specs);
    // Llama 3 (or LongRoPE) stores rotary frequency factors once for all layers.
    super::rope_factor_tensors(hp, &mut specs);
    // Experts may leave out their gate (then SiLU acts on the up projection alone).
    for s in specs.iter_mut().filter(|s| s.name.ends_with("ffn_gate_exps.weight")) {
        s.required = false;
    }
    for il in 0..hp.n_layer as usize {
        specs.push(TensorSpec::new(
            format!("blk.{il}.attn_output.bias"),
            &[hp.n_embd],
            false,
        ));
        super::ffn_bias_tensors(hp, il, &mut specs);
    }
    specs
}

/// What the architectures built on the Llama decoder change in it.
#[derive(Clone, Copy)]
pub(super) struct Variant {
    /// Normalise each query and key head (`attn_q_norm`, `attn_k_norm`, each where the layer has
    /// it) before rotation, or (`qk_norm_after_rope`, Maincoder's) after it.
    pub qk_norm: bool,
    pub qk_norm_after_rope: bool,
    /// Every this-many layers (the last of each group) rotates nothing; 0: every layer rotates.
    pub no_rope_every: usize,
    /// Multiply the dense FFN's projections by their weights' scales (llama.cpp's Llama and Qwen3
    /// graphs do; the others load the scales and leave them out).
    pub ffn_scales: bool,
    /// A hybrid model's recurrent layers are Mamba (Jamba's) rather than Mamba-2 layers.
    pub mamba1: bool,
    /// The experts' gating and weighting, when not the Llama family's.
    pub moe: Option<Moe>,
    /// The dense FFN is relu(up x)² projected down, without a gate (Arcee's).
    pub relu_sqr: bool,
    /// The attention output's bias is loaded but left out (ERNIE 4.5's graph).
    pub no_wo_bias: bool,
    /// Normalise the whole query and key projections (`attn_q_norm`, `attn_k_norm` as wide as
    /// them) before splitting them into heads (OLMoE's).
    pub qk_norm_whole: bool,
    /// The FFN's norm weight under another name (Seed-OSS's `post_attention_norm`).
    pub ffn_norm: Option<&'static str>,
    /// The dense FFN's biases are loaded but left out (Refact's graph).
    pub no_ffn_bias: bool,
    /// Attention within the ubatch, without a cache (the diffusion models, which have no memory;
    /// LLaMA as an embedding model, whose cache goes unused).
    pub no_cache: bool,
    /// No output head: the normed hidden states are the graph's output (an embedding model).
    pub embed: bool,
    /// The output head's bias is loaded but left out (Dream's graph).
    pub no_output_bias: bool,
    /// Rotary frequency factors are loaded but left out (LLaDA's graph).
    pub no_rope_factors: bool,
    /// A fused projection's scale is loaded but left out (OpenELM's graph).
    pub no_qkv_scale: bool,
    /// The graph rotates nothing though the model has rotary positions (which a K-shift still
    /// turns): Baichuan's sizes other than 7B, as llama.cpp builds them.
    pub no_rope: bool,
    /// How sliding-window layers rotate in the graph (a K-shift always uses their own base).
    pub swa_rope: SwaRope,
    /// Only sliding-window layers rotate, in the graph (Maple's); a K-shift rotates every layer.
    pub rope_sliding_only: bool,
    /// A layer's experts are loaded but left out: its FFN is SiLU of the normed input alone
    /// (Refact's graph, whose dense FFN finds no weights in a layer with experts).
    pub experts_unused: bool,
}

impl Variant {
    /// Llama's decoder as it is, which an architecture changes only where it differs (the
    /// dense FFN leaves its weights' scales out: Llama's own graph passes them).
    pub(super) const BASE: Variant = Variant {
        qk_norm: false,
        qk_norm_after_rope: false,
        no_rope_every: 0,
        ffn_scales: false,
        mamba1: false,
        moe: None,
        relu_sqr: false,
        no_wo_bias: false,
        qk_norm_whole: false,
        ffn_norm: None,
        no_ffn_bias: false,
        no_cache: false,
        embed: false,
        no_output_bias: false,
        no_rope_factors: false,
        no_qkv_scale: false,
        no_rope: false,
        swa_rope: SwaRope::Own,
        rope_sliding_only: false,
        experts_unused: false,
    };
}

/// How a Llama-like graph rotates its sliding-window layers.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum SwaRope {
    /// With their own base and scale (`rope_freq_base_swa`), as llama.cpp's `get_rope_freq_base`.
    Own,
    /// With the context's base, unscaled and without YaRN (Mellum's graph).
    Plain,
    /// With the context's base and scale, as the global layers (EXAONE-MoE's graph).
    Global,
}

/// The experts of the Llama-like models: softmax over all, the picked weights summing to one.
const MOE: Moe = Moe {
    normalize: true,
    scaled: true,
    ..Moe::BASE
};

/// The Llama decoder: pre-norm attention with rotary positions and a SwiGLU FFN, per layer.
pub(super) fn decoder(b: &mut Builder, variant: Variant) -> Result<Option<TensorRef>> {
    let hp = b.hp;
    let kq_scale = hp.kq_scale();
    let rope_factors = rope_factors(b.model, &b.params).filter(|_| !variant.no_rope_factors);
    let mut x = b.embed_tokens()?;
    let n_layer = hp.n_layer as usize;
    for il in 0..n_layer {
        let l = Some(il);
        let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
        let att = if hp.is_recurrent(il) {
            // A hybrid model's state-space layer in place of attention.
            if variant.mamba1 {
                b.mamba_layer(il, cur)?
            } else {
                b.mamba2_layer(il, cur)?
            }
        } else {
            attention_block(b, il, cur, variant, kq_scale, rope_factors)?
        };
        let (mut att, residual) = b.last_layer_rows(il, att, x)?;
        if hp.residual_scale != 0.0 {
            att = b.scale(att, hp.residual_scale)?;
        }
        let h = b.add(att, residual)?;
        let h = b.name(h, "ffn_inp", l);
        let cur = b.layer_rms_norm(il, h, variant.ffn_norm.unwrap_or("ffn_norm.weight"), "ffn_norm")?;
        // Layers with a router are mixtures of experts (whichever tensors the architecture loads).
        let routed = b.layer_weight_opt(il, "ffn_gate_inp.weight").is_some();
        let mut ffn = if routed && variant.experts_unused {
            let ffn = b.g.silu(cur)?;
            b.name(ffn, "ffn_out", l)
        } else if routed {
            let experts = b.moe_ffn(il, cur, variant.moe.unwrap_or(MOE))?;
            // A shared expert beside them (Granite MoE's), without its weights' scales; with a
            // gate (Qwen2-MoE's), scaled by silu(g)/g of the gate's output g.
            if b.layer_weight_opt(il, "ffn_up_shexp.weight").is_some() {
                // Without its own gate, the shared expert's gate is the first half of `ffn_up_shexp`
                // (Granite SWA's).
                let mut shared = if b.layer_weight_opt(il, "ffn_gate_shexp.weight").is_some() {
                    b.gated_ffn_named(il, cur, Ffn::default(), "_shexp")?
                } else {
                    b.fused_gated_ffn_named(il, cur, "_shexp")?
                };
                if let Some(w) = b.layer_weight_opt(il, "ffn_gate_inp_shexp.weight") {
                    let g = b.linear(w, None, cur)?;
                    let silu = b.g.silu(g)?;
                    let gate = b.g.div(silu, g)?;
                    shared = b.g.mul(shared, gate)?;
                }
                let shared = b.name(shared, "ffn_shexp", l);
                b.add(experts, shared)?
            } else {
                experts
            }
        } else if variant.relu_sqr {
            let ffn = b.relu_sqr_ffn_named(il, cur, "", Ffn::default())?;
            b.name(ffn, "ffn_out", l)
        } else {
            let ffn = b.gated_ffn(
                il,
                cur,
                Ffn {
                    scaled: variant.ffn_scales,
                    biased: !variant.no_ffn_bias,
                    ..Ffn::default()
                },
            )?;
            b.name(ffn, "ffn_out", l)
        };
        if hp.residual_scale != 0.0 {
            ffn = b.scale(ffn, hp.residual_scale)?;
        }
        x = b.add(ffn, h)?;
        x = b.layer_out(x, il)?;
    }
    if variant.embed {
        let norm = b.weight("output_norm.weight")?;
        let x = b.rms_norm(x, norm)?;
        let x = b.name(x, "result_norm", None);
        b.set_hidden(x);
        return Ok(None);
    }
    let mut logits = if variant.no_output_bias {
        b.output_head_without_bias(x)?
    } else {
        b.output_head(x)?
    };
    if hp.logit_scale != 0.0 {
        logits = b.scale(logits, 1.0 / hp.logit_scale)?;
    }
    Ok(Some(b.name(logits, "result_output", None)))
}

/// Layer `il`'s attention over `cur`: projections, optional q/k norms, rotation (unless the
/// variant leaves the layer unrotated), attention over the cache and the output projection.
fn attention_block(
    b: &mut Builder,
    il: usize,
    cur: TensorRef,
    variant: Variant,
    kq_scale: f32,
    rope_factors: Option<TensorRef>,
) -> Result<TensorRef> {
    let hp = b.hp;
    let l = Some(il);
    let (q, k, v) = if variant.qk_norm_whole {
        let (q, k, v) = b.qkv(il, cur, false)?;
        let q_norm = b.layer_weight(il, "attn_q_norm.weight")?;
        let q = b.rms_norm(q, q_norm)?;
        let k_norm = b.layer_weight(il, "attn_k_norm.weight")?;
        let k = b.rms_norm(k, k_norm)?;
        (
            b.heads(q, hp.n_embd_head_k, hp.n_head[il])?,
            b.heads(k, hp.n_embd_head_k, hp.n_head_kv[il])?,
            b.heads(v, hp.n_embd_head_v, hp.n_head_kv[il])?,
        )
    } else {
        b.qkv_scaled(il, cur, true, !variant.no_qkv_scale)?
    };
    // Each norm where the layer has it (the architectures that load them optionally).
    let head_norms = |b: &mut Builder, q: TensorRef, k: TensorRef| -> Result<(TensorRef, TensorRef)> {
        let mut out = [q, k];
        for (t, which) in out.iter_mut().zip(["q", "k"]) {
            let weight = format!("attn_{which}_norm.weight");
            if b.layer_weight_opt(il, &weight).is_some() {
                let label = format!("{}cur_normed", which.to_uppercase());
                *t = b.layer_rms_norm(il, *t, &weight, &label)?;
            }
        }
        Ok((out[0], out[1]))
    };
    let (q, k) = if variant.qk_norm { head_norms(b, q, k)? } else { (q, k) };
    let rotate = hp.has_rope(il)
        && !variant.no_rope
        && (variant.no_rope_every == 0 || !(il + 1).is_multiple_of(variant.no_rope_every))
        && (!variant.rope_sliding_only || is_sliding(hp, il));
    let swa_rope = if is_sliding(hp, il) {
        variant.swa_rope
    } else {
        SwaRope::Own
    };
    let (q, k) = if rotate && swa_rope != SwaRope::Own {
        let r = b.params.rope;
        let (scale, ext, attn) = match swa_rope {
            SwaRope::Plain => (1.0, 0.0, 1.0),
            _ => (r.freq_scale, r.ext_factor, r.attn_factor),
        };
        (
            b.rope_ext(q, r.freq_base, scale, ext, attn, rope_factors)?,
            b.rope_ext(k, r.freq_base, scale, ext, attn, rope_factors)?,
        )
    } else if rotate {
        (b.rope(q, il, rope_factors)?, b.rope(k, il, rope_factors)?)
    } else {
        (q, k)
    };
    let (q, k) = if variant.qk_norm_after_rope {
        head_norms(b, q, k)?
    } else {
        (q, k)
    };
    // Mistral 3's temperature tuning, where its file asks for it.
    let q = b.temperature_tuned(q)?;
    let (q, k, v) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l), b.name(v, "Vcur", l));
    let att = if variant.no_cache {
        b.attention_no_cache(il, q, k, v, kq_scale)?
    } else {
        b.attention(il, q, k, v, kq_scale, is_sliding(hp, il))?
    };
    let att = b.name(att, "kqv_out", l);
    let att = if variant.no_wo_bias {
        let wo = b.layer_weight(il, "attn_output.weight")?;
        b.linear(wo, None, att)?
    } else {
        b.layer_linear(il, "attn_output", att)?
    };
    let att = b.name(att, "attn_out", l);
    Ok(att)
}
