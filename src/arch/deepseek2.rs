//! DeepSeek V2/V3 (and Mistral 4, the same graph under its own name): multi-head latent
//! attention, leading dense layers, then experts routed as the file says (softmax unless it names
//! another gating) beside shared experts. DeepSeek V3.2 ("deepseek32") is the same model with
//! sparse attention: a lightning indexer (`graph/indexer.rs`) picks the cells each token's
//! absorbed attention sees.
//!
//! Attention: queries come through a normed low-rank projection (or one projection in the "lite"
//! models); keys and values from one normed latent per token plus a rotated part shared by the
//! heads. Files converted for MLA (`attention.key_length_mla`) keep the latent itself in the
//! cache, absorbed as llama.cpp absorbs it: the queries' unrotated part is multiplied into latent
//! space by `attn_k_b`, each cached key is the latent then the rotated part (one KV head), the
//! values are the cached latent, and `attn_v_b` widens each head's output. Older files
//! (`attn_kv_b`) decompress keys and values per head, as MiniCPM3 does.
//! The attention scale carries YaRN's magnitude correction twice over, as llama.cpp's graph
//! pre-scales it.

use super::created::{dense_lead, layered, sparse_ffn, HEAD, SHARED_GDU};
use super::minicpm3;
use super::{READS_GATING, READS_INDEXER, READS_MLA, READS_RMS_EPS, READS_SHARED_MOE};
use crate::error::{Error, Result};
use crate::ggml::{TensorRef, ROPE_NEOX, ROPE_NORMAL};
use crate::gguf::Value;
use crate::graph::{Builder, Decoder, Ffn, Gating, Moe};
use crate::model::hparams::{AttnTemp, HParams};
use crate::model::metadata::Meta;
use crate::model::saver::{self, Rule};
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

pub struct DeepSeek2 {
    facts: Facts,
    variant: Variant,
}

/// What the files of each name differ in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    DeepSeek2,
    Mistral4,
    /// DeepSeek V3.2: sparse attention.
    DeepSeek32,
    /// GLM 5 (`glm-dsa`): sparse attention whose indexer rotates as the model does and whose
    /// "shared" layers reuse the cells the last full indexer layer picked.
    GlmDsa,
}

impl Variant {
    fn sparse(self) -> bool {
        matches!(self, Variant::DeepSeek32 | Variant::GlmDsa)
    }
}

pub const DEEPSEEK2: DeepSeek2 = DeepSeek2 {
    facts: Facts {
        name: "deepseek2",
        about: "DeepSeek V2/V3 and R1: latent attention absorbed as llama.cpp absorbs it in the MLA files (a \
            keys-only cache holding one latent per token plus the rotated part, queries taken into latent space, \
            values read from the cached latent and widened per head) or decompressed per head in older files; \
            the lite models' direct query projection; YaRN's magnitude pre-applied to the attention scale; \
            leading dense layers, then experts routed as the file says beside shared experts; attention \
            temperature tuning where the file asks; multi-token-prediction layers refused.",
        read_keys: &[
            READS_SHARED_MOE,
            READS_GATING,
            READS_RMS_EPS,
            READS_MLA,
            READS_TEMPERATURE,
        ],
        saved_rules: &[HELD_TEMPERATURE_LENGTH, HELD_YARN_LOG_MUL, super::HELD_GATING],
        ..Facts::BASE
    },
    variant: Variant::DeepSeek2,
};

pub const MISTRAL4: DeepSeek2 = DeepSeek2 {
    facts: Facts {
        name: "mistral4",
        about: "Mistral 4: DeepSeek V2/V3's layers and latent attention (`deepseek2`); attention temperature tuning \
            as Mistral Large's files ask.",
        ..DEEPSEEK2.facts
    },
    variant: Variant::Mistral4,
};

pub const DEEPSEEK32: DeepSeek2 = DeepSeek2 {
    facts: Facts {
        name: "deepseek32",
        about: "DeepSeek V3.2: DeepSeek 3's layers with sparse attention (a lightning indexer scores every cached \
            cell from small query heads against one Hadamard-rotated key per token, kept in its own cache \
            section, and attention sees only the best `top_k` cells); every FFN product scaled by its weight's \
            scale.",
        read_keys: &[
            READS_SHARED_MOE,
            READS_GATING,
            READS_RMS_EPS,
            READS_MLA,
            READS_INDEXER,
            &["rope.dimension_sections", "rope.scaling.yarn_log_multiplier"],
        ],
        saved_rules: &[HELD_TEMPERATURE_LENGTH, HELD_YARN_LOG_MUL, super::HELD_NORM_EPS],
        ..Facts::BASE
    },
    variant: Variant::DeepSeek32,
};

pub const GLM_DSA: DeepSeek2 = DeepSeek2 {
    facts: Facts {
        name: "glm-dsa",
        about: "GLM 5: DeepSeek V3.2's layers, its indexer rotating plainly, \"shared\" indexer layers reusing the \
            last full layer's picks.",
        read_keys: &[
            READS_SHARED_MOE,
            READS_GATING,
            READS_RMS_EPS,
            READS_MLA,
            READS_INDEXER,
            &["attention.indexer.types", "rope.dimension_sections"],
        ],
        saved_rules: &[
            (
                "attention.indexer.types",
                Rule::Held(|f| saver::flags(&f.hp.indexer.layers[..f.n_layer])),
            ),
            super::HELD_GATING,
        ],
        ..Facts::BASE
    },
    variant: Variant::GlmDsa,
};

/// The context length from which llama.cpp takes a GLM-DSA file for GLM 5.2, whose indexer layers
/// default to a pattern of shared ones.
const GLM52_MIN_CONTEXT: u32 = 1 << 20;

/// llama.cpp's vocabulary size of GLM 4.7 Lite, whose files route by sigmoid without saying so.
const GLM47_LITE_VOCAB: u32 = 154880;

/// DeepSeek-V2's loader reads the temperature length into another field, leaving this one 0.
const HELD_TEMPERATURE_LENGTH: (&str, Rule) = ("attention.temperature_length", Rule::Held(|_| Value::U32(0)));
/// Its YaRN log multiplier as loading resolved it.
const HELD_YARN_LOG_MUL: (&str, Rule) = (
    "rope.scaling.yarn_log_multiplier",
    Rule::Held(|f| Value::F32(f.hp.rope_yarn_log_mul)),
);

/// What DeepSeek V2/V3 and Mistral 4 read beside the others: attention temperature tuning and
/// YaRN's log multiplier.
const READS_TEMPERATURE: &[&str] = &[
    "attention.temperature_length",
    "attention.temperature_scale",
    "rope.scaling.yarn_log_multiplier",
];

impl ArchSpec for DeepSeek2 {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let key = |k: &str| format!("{}.{k}", self.facts.name);
        hp.rms_eps = meta.f32(&key("attention.layer_norm_rms_epsilon"))?;
        super::refuse_mtp(meta, hp)?;
        hp.n_layer_dense_lead = meta.u32_opt(&key("leading_dense_block_count"))?.unwrap_or(0);
        // The "lite" models (DeepSeek-V2-Lite, GigaChat3, Kanana-2) project queries directly;
        // llama.cpp tells them by their depth and ignores a query rank they might carry.
        let sparse = self.variant.sparse();
        let lite = !sparse && (matches!(hp.n_layer, 26 | 27) || (hp.n_layer == 48 && hp.n_vocab == 128256));
        if !lite {
            hp.n_lora_q = meta.u32(&key("attention.q_lora_rank"))?;
        }
        hp.n_lora_kv = meta.u32(&key("attention.kv_lora_rank"))?;
        hp.n_embd_head_k_mla = meta.u32_opt(&key("attention.key_length_mla"))?.unwrap_or(0);
        hp.n_embd_head_v_mla = meta.u32_opt(&key("attention.value_length_mla"))?.unwrap_or(0);
        if (hp.n_embd_head_k_mla == 0) != (hp.n_embd_head_v_mla == 0) {
            return Err(Error::model(
                "deepseek2: attention.key_length_mla and attention.value_length_mla go together",
            ));
        }
        if sparse {
            self.load_indexer(meta, hp)?;
        }
        check_heads(hp)?;
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }
        load_shared_experts(meta, hp)?;
        hp.expert_weights_scale = meta.f32_opt(&key("expert_weights_scale"))?.unwrap_or(0.0);
        hp.expert_weights_norm = meta.bool_opt(&key("expert_weights_norm"))?.unwrap_or(false);
        // V3.2's files must say.
        let gating = match self.variant {
            Variant::DeepSeek32 => meta.u32(&key("expert_gating_func"))?,
            _ => meta.u32_opt(&key("expert_gating_func"))?.unwrap_or(0),
        };
        hp.expert_gating_func = match gating {
            // The older DeepSeek files say nothing: softmax, except GLM 4.7 Lite's; GLM 5's
            // sigmoid.
            0 if self.variant == Variant::GlmDsa => 2,
            0 if matches!(hp.n_layer, 47 | 48) && hp.n_vocab == GLM47_LITE_VOCAB => 2,
            0 if !sparse => 1,
            g if Gating::from_llama(g).is_some() => g,
            g => return Err(Error::model(format!("deepseek2: unknown expert gating function {g}"))),
        };
        // The converter stores the log multiplier times 0.1; llama.cpp cancels that (and reads
        // none for GLM 5).
        let log_mul = meta.f32_opt(&key("rope.scaling.yarn_log_multiplier"))?;
        if let Some(m) = log_mul.filter(|_| self.variant != Variant::GlmDsa) {
            hp.rope_yarn_log_mul = m / 0.1;
            // DeepSeek 2's rotations keep their magnitude (llama.cpp special-cases it, and not
            // Mistral 4, which shares its graph).
            if self.variant == Variant::DeepSeek2 && hp.rope_yarn_log_mul != 1.0 {
                hp.rope_yarn_mscale = hp.rope_yarn_log_mul;
            }
        }
        // Mistral Large's temperature tuning, where the file asks for it.
        if !sparse {
            hp.attn_temp = AttnTemp {
                scale: meta.f32_opt(&key("attention.temperature_scale"))?.unwrap_or(0.0),
                length: meta.u32_opt(&key("attention.temperature_length"))?.unwrap_or(0),
                offset: 0.0,
            };
        }
        hp.size_label = match (self.variant, hp.n_layer) {
            (Variant::DeepSeek32, 61) => "685B.A37B",
            (Variant::GlmDsa, 78) => "744B.A40B",
            _ if sparse => "?B",
            (_, 27) => "16B",
            (_, 47) => "30B.A3B",
            (_, 60) => "236B",
            (_, 61) => "671B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        match self.variant.sparse() {
            true => dsa(hp),
            false => deepseek2(hp),
        }
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        latent_tensors(hp, self.variant.sparse())
    }
}

/// DeepSeek-V2's (and V3's, Mistral 4's): latent attention (queries compressed where the model
/// has a rank for them; keys and values decompressed per head when absorbed), dense leading
/// layers, then experts with the router's selection bias, fused gate and up projections (made
/// fused without a file) and shared ones where the model has them.
fn deepseek2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let (q_norm, q) = if hp.n_lora_q > 0 {
            ("attn_q_a_norm.weight", "attn_q_a.weight attn_q_b.weight")
        } else {
            ("", "attn_q.weight")
        };
        let kv = if hp.kv_latent() {
            "attn_k_b.weight attn_v_b.weight"
        } else {
            "attn_kv_b.weight"
        };
        let shared = if hp.n_ff_shexp > 0 { SHARED_GDU } else { "" };
        let experts =
            format!("ffn_gate_inp.weight exp_probs_b.bias ffn_down_exps.weight ffn_gate_up_exps.weight {shared}");
        format!(
            "attn_norm.weight {q_norm} attn_kv_a_norm.weight {q} attn_kv_a_mqa.weight {kv} attn_output.weight ffn_norm.weight {}",
            dense_lead(hp, il, &experts)
        )
    })
}

/// The lightning indexer of DeepSeek's sparse attention: its key norm (with a bias), the heads'
/// weights, keys and queries.
pub(super) const INDEXER: &str =
    "indexer.k_norm.weight indexer.k_norm.bias indexer.proj.weight indexer.attn_k.weight indexer.attn_q_b.weight";

/// DeepSeek-V3.2's and GLM 5's (`glm-dsa`): latent attention with compressed queries and keys and
/// values decompressed per head, the indexer in every layer (made without a file where it is
/// optional); dense leading layers, then experts with the router's selection bias and shared ones.
fn dsa(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        format!(
            "attn_norm.weight attn_q_a_norm.weight attn_kv_a_norm.weight attn_q_a.weight attn_q_b.weight \
             attn_kv_a_mqa.weight attn_k_b.weight attn_v_b.weight attn_output.weight ffn_norm.weight {INDEXER} {}",
            sparse_ffn(hp, il)
        )
    })
}

/// The tensors of a DeepSeek-style model: latent attention (absorbed or not), an indexer in the
/// layers that keep one (`sparse`; optional elsewhere), leading dense FFNs, then routed and shared
/// experts.
pub(super) fn latent_tensors(hp: &HParams, sparse: bool) -> Vec<TensorSpec> {
    let mut specs = Vec::new();
    super::head_tensors(hp, &mut specs);
    let (e, rot) = (hp.n_embd, hp.n_rot);
    let (q_rank, kv_rank) = (hp.n_lora_q, hp.n_lora_kv);
    let (hk, hv) = head_sizes(hp);
    let nope = hk - rot;
    for il in 0..hp.n_layer as usize {
        let b = |s: &str| format!("blk.{il}.{s}");
        let n_head = hp.n_head[il];
        specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
        if q_rank > 0 {
            specs.extend([
                TensorSpec::new(b("attn_q_a_norm.weight"), &[q_rank], true),
                TensorSpec::matmul(b("attn_q_a.weight"), &[e, q_rank], true),
                TensorSpec::matmul(b("attn_q_b.weight"), &[q_rank, n_head * hk], true),
            ]);
        } else {
            specs.push(TensorSpec::matmul(b("attn_q.weight"), &[e, n_head * hk], true));
        }
        specs.extend([
            TensorSpec::new(b("attn_kv_a_norm.weight"), &[kv_rank], true),
            TensorSpec::matmul(b("attn_kv_a_mqa.weight"), &[e, kv_rank + rot], true),
            TensorSpec::matmul(b("attn_output.weight"), &[n_head * hv, e], true),
        ]);
        if hp.kv_latent() {
            specs.extend([
                TensorSpec::matmul(b("attn_k_b.weight"), &[nope, kv_rank, n_head], true),
                TensorSpec::matmul(b("attn_v_b.weight"), &[kv_rank, hv, n_head], true),
            ]);
        } else {
            let width = n_head * (nope + hv);
            specs.push(TensorSpec::matmul(b("attn_kv_b.weight"), &[kv_rank, width], true));
        }
        if sparse {
            // Layers sharing another's picks may still carry indexer weights.
            let (ix, own) = (&hp.indexer, hp.indexer.keeps(il));
            specs.extend([
                TensorSpec::new(b("indexer.k_norm.weight"), &[ix.head_size], own),
                TensorSpec::new(b("indexer.k_norm.bias"), &[ix.head_size], own),
                TensorSpec::matmul(b("indexer.proj.weight"), &[e, ix.n_head], own),
                TensorSpec::matmul(b("indexer.attn_k.weight"), &[e, ix.head_size], own),
                TensorSpec::matmul(b("indexer.attn_q_b.weight"), &[q_rank, ix.n_head * ix.head_size], own),
            ]);
        }
        if il < hp.n_layer_dense_lead as usize {
            super::ffn_tensors(hp, il, false, &mut specs);
        } else {
            specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
            specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[hp.n_expert], false));
            super::routed_expert_tensors(hp, il, &mut specs);
        }
    }
    specs
}

impl DeepSeek2 {
    /// Sparse attention's lightning indexer. Its keys are rotated by a Hadamard matrix as wide as
    /// they are, and their first `n_rot` dimensions by RoPE (llama.cpp's shapes). DeepSeek V3.2
    /// has one in every layer, rotated as NeoX does; GLM 5 where `attention.indexer.types` says
    /// (every layer before GLM 5.2, a pattern in 5.2's), rotated as the model is (plainly).
    fn load_indexer(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        let name = self.facts.name;
        if !hp.kv_latent() {
            return Err(Error::model(format!(
                "{name} needs absorbed latent attention (attention.key_length_mla and value_length_mla)"
            )));
        }
        let key = |k: &str| hp.key(&format!("attention.indexer.{k}"));
        let n = hp.n_layer as usize;
        let glm = self.variant == Variant::GlmDsa;
        let layers = match meta.bool_per_layer(&key("types"), n)? {
            Some(types) if glm => types,
            _ if glm && hp.n_ctx_train >= GLM52_MIN_CONTEXT => {
                (0..n).map(|il| il < 2 || (il < 78 && (il - 2) % 4 == 0)).collect()
            }
            _ => vec![true; n],
        };
        if layers.first() == Some(&false) {
            return Err(Error::model(format!(
                "{name}: the first layer's indexer is shared, but no earlier layer has one to share"
            )));
        }
        load_indexer(meta, hp, layers, if glm { ROPE_NORMAL } else { ROPE_NEOX })?;
        hp.indexer.hadamard = true;
        if hp.indexer.head_size < 64 || !hp.indexer.head_size.is_power_of_two() {
            return Err(Error::model(format!(
                "{name}: indexer keys of {} dimensions (a power of two of at least 64, for the Hadamard matrix)",
                hp.indexer.head_size
            )));
        }
        // V3.2's indexer key norm (llama.cpp fixes it; GLM 5's is left at 0).
        if !glm {
            hp.norm_eps = 1e-6;
        }
        Ok(())
    }
}

/// The routed experts' width (required, as llama.cpp reads it) and the shared experts' total.
pub(super) fn load_shared_experts(meta: &Meta, hp: &mut HParams) -> Result<()> {
    meta.u32(&hp.key("expert_feed_forward_length"))?;
    hp.n_ff_shexp = hp.n_ff_exp * meta.u32(&hp.key("expert_shared_count"))?;
    Ok(())
}

/// A lightning indexer's sizes, in `layers`, rotating its queries and keys by `rope_mode`.
pub(super) fn load_indexer(meta: &Meta, hp: &mut HParams, layers: Vec<bool>, rope_mode: i32) -> Result<()> {
    let name = hp.arch_name;
    let key = |k: &str| hp.key(&format!("attention.indexer.{k}"));
    let ix = crate::model::hparams::Indexer {
        n_head: meta.u32(&key("head_count"))?,
        head_size: meta.u32(&key("key_length"))?,
        top_k: meta.u32(&key("top_k"))?,
        layers,
        rope_mode,
        rope_trailing: false,
        hadamard: false,
        block: 0,
        local: 0,
        values: false,
        kpool: 0,
        kpool_tail: false,
    };
    if ix.n_head == 0 || ix.top_k == 0 {
        return Err(Error::model(format!("{name}: the indexer needs heads and a top_k")));
    }
    if hp.n_rot > ix.head_size {
        return Err(Error::model(format!(
            "{name}: indexer keys of {} dimensions, fewer than the {} rotated",
            ix.head_size, hp.n_rot
        )));
    }
    hp.indexer = ix;
    Ok(())
}

/// The key and value head sizes attention computes with (decompressed, for an absorbed file).
fn head_sizes(hp: &HParams) -> (u32, u32) {
    if hp.kv_latent() {
        (hp.n_embd_head_k_mla, hp.n_embd_head_v_mla)
    } else {
        (hp.n_embd_head_k, hp.n_embd_head_v)
    }
}

/// The head sizes the cache and the graph can hold: an absorbed file's cache heads are one latent
/// plus the rotated part; a decompressed one has a key head per query head.
pub(super) fn check_heads(hp: &HParams) -> Result<()> {
    let (hk, _) = head_sizes(hp);
    if hp.n_rot == 0 || hp.n_rot >= hk || hp.n_lora_kv == 0 {
        return Err(Error::model(format!(
            "deepseek2 rotates {} of key heads of {hk} dimensions (with a KV rank of {}): it needs some of both",
            hp.n_rot, hp.n_lora_kv
        )));
    }
    let absorbed = hp.kv_latent();
    let kv_heads_ok = hp
        .n_head
        .iter()
        .zip(&hp.n_head_kv)
        .all(|(&q, &kv)| if absorbed { kv == 1 } else { kv == q });
    if !kv_heads_ok {
        return Err(Error::model(if absorbed {
            "deepseek2 with absorbed latent attention needs one KV head per layer"
        } else {
            "deepseek2 needs as many KV heads as query heads"
        }));
    }
    if absorbed && hp.n_embd_head_k != hp.n_lora_kv + hp.n_rot {
        return Err(Error::model(format!(
            "deepseek2: cached key heads of {} are not the latent ({}) plus the rotated part ({})",
            hp.n_embd_head_k, hp.n_lora_kv, hp.n_rot
        )));
    }
    Ok(())
}

/// The weights llama.cpp's graphs multiply without adapters (`Decoder::without_adapters`): the
/// latent attention's projections and the output head, and with sparse attention the indexer's.
const WITHOUT_ADAPTERS: &[&str] = &[
    "output",
    "attn_q",
    "attn_q_a",
    "attn_q_b",
    "attn_kv_a_mqa",
    "attn_kv_b",
    "attn_k_b",
];
pub(super) const SPARSE_WITHOUT_ADAPTERS: &[&str] = &[
    "output",
    "attn_q_a",
    "attn_q_b",
    "attn_kv_a_mqa",
    "attn_k_b",
    "indexer.attn_k",
    "indexer.attn_q_b",
    "indexer.proj",
];

impl Decoder for DeepSeek2 {
    fn without_adapters(&self, _hp: &HParams, stem: &str, _layer: Option<usize>) -> bool {
        if self.variant.sparse() {
            SPARSE_WITHOUT_ADAPTERS
        } else {
            WITHOUT_ADAPTERS
        }
        .contains(&stem)
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let (hk, _) = head_sizes(hp);
        let kq_scale = pre_scaled_kq(b, hk);
        let hk = i64::from(hk);
        // The sparse models' graphs multiply every FFN product by its weight's scale.
        let (sparse, norm) = (self.variant.sparse(), hp.expert_weights_norm);
        let moe = Moe::silu(hp.expert_gating_func, Gating::Softmax, norm, sparse);
        let mut x = b.embed_tokens()?;
        // The cells the last full indexer layer picked, which shared layers reuse.
        let mut last_picks = None;
        for il in 0..hp.n_layer as usize {
            let cur = b.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
            // Sparse attention's indexer scores the cells from the queries' latent.
            let (q, picks) = if self.variant.sparse() {
                let qr = query_latent(b, il, cur)?
                    .ok_or_else(|| Error::model(format!("{} needs low-rank queries (attn_q_a)", self.facts.name)))?;
                if hp.indexer.keeps(il) {
                    last_picks = Some(b.lightning_top_k(il, cur, qr)?);
                }
                (queries_from_latent(b, il, qr, hk)?, last_picks)
            } else {
                (latent_queries(b, il, cur, hk)?, None)
            };
            let (latent, k_pe) = minicpm3::latent_kv(b, il, cur, None)?;
            let att = if hp.kv_latent() {
                let mask = picks.map(|p| b.sparse_mask(p)).transpose()?;
                absorbed_attention(b, il, q, latent, k_pe, kq_scale, mask)?
            } else {
                minicpm3::decompressed_attention(b, il, q, latent, k_pe, kq_scale, None)?
            };
            let wo = b.layer_weight(il, "attn_output.weight")?;
            let att = b.linear(wo, None, att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            x = ffn_block(b, il, att, residual, moe)?;
        }
        let logits = b.output_head(x)?;
        Ok(Some(b.name(logits, "result_output", None)))
    }
}

/// The attention scale for key heads of `head_k` dimensions with YaRN's magnitude correction
/// undone from the context's factor and applied to the scores instead (llama.cpp's pre-scaling
/// in DeepSeek 2's graph).
pub(super) fn pre_scaled_kq(b: &Builder, head_k: u32) -> f32 {
    let p = b.params.rope;
    let stretch = (1.0 / p.freq_scale).ln();
    let attn_factor_org = p.attn_factor * (1.0 + 0.1 * stretch);
    let mscale = attn_factor_org * (1.0 + 0.1 * b.hp.rope_yarn_log_mul * stretch);
    mscale * mscale / (head_k as f32).sqrt()
}

/// The queries of layer `il` from the normed `cur`, [head_k, n_head, n_tokens]: through a normed
/// low rank where the layer has one (`attn_q_a_norm`), else one projection.
pub(super) fn latent_queries(b: &mut Builder, il: usize, cur: TensorRef, head_k: i64) -> Result<TensorRef> {
    match query_latent(b, il, cur)? {
        Some(qr) => queries_from_latent(b, il, qr, head_k),
        None => {
            let q = b.layer_matmul(il, "attn_q.weight", cur)?;
            let nt = q.ne()[1];
            b.g.reshape(q, &[head_k, i64::from(b.hp.n_head[il]), nt])
                .map_err(Error::from)
        }
    }
}

/// The queries' normed low-rank latent of layer `il`, where the layer has one (`attn_q_a_norm`).
pub(super) fn query_latent(b: &mut Builder, il: usize, cur: TensorRef) -> Result<Option<TensorRef>> {
    if b.layer_weight_opt(il, "attn_q_a_norm.weight").is_none() {
        return Ok(None);
    }
    let q = b.layer_matmul(il, "attn_q_a.weight", cur)?;
    b.layer_rms_norm(il, q, "attn_q_a_norm.weight", "q").map(Some)
}

/// The queries from their latent `qr`, [head_k, n_head, n_tokens].
pub(super) fn queries_from_latent(b: &mut Builder, il: usize, qr: TensorRef, head_k: i64) -> Result<TensorRef> {
    let q = b.layer_matmul(il, "attn_q_b.weight", qr)?;
    let nt = q.ne()[1];
    b.g.reshape(q, &[head_k, i64::from(b.hp.n_head[il]), nt])
        .map_err(Error::from)
}

/// The rest of a DeepSeek-style layer after its attention `att`: the residual `x` added, normed,
/// then the leading layers' dense FFN or the routed experts beside the shared ones, added again.
/// Where the experts are scaled (`Moe::scaled`), so are the dense and shared FFNs.
pub(super) fn ffn_block(b: &mut Builder, il: usize, att: TensorRef, x: TensorRef, moe: Moe) -> Result<TensorRef> {
    let l = Some(il);
    let dense = Ffn {
        scaled: moe.scaled,
        ..Ffn::default()
    };
    let h = b.add(att, x)?;
    let h = b.name(h, "ffn_inp", l);
    let cur = b.layer_rms_norm(il, h, "ffn_norm.weight", "ffn_norm")?;
    let ffn = if il < b.hp.n_layer_dense_lead as usize {
        b.gated_ffn(il, cur, dense)?
    } else {
        let routed = b.moe_ffn(il, cur, moe)?;
        let shared = b.gated_ffn_named(il, cur, dense, "_shexp")?;
        let shared = b.name(shared, "ffn_shexp", l);
        b.add(routed, shared)?
    };
    let ffn = b.name(ffn, "ffn_out", l);
    let out = b.add(ffn, h)?;
    b.layer_out(out, il)
}

/// Absorbed latent attention of layer `il`: the queries `q` ([head_k, n_head, n_tokens]) have
/// their unrotated part taken into latent space by `attn_k_b` and their trailing part rotated
/// (where the model rotates); each cached key is the normed `latent` then the shared `k_pe`; the
/// values are the cached latent, widened per head by `attn_v_b` after the weighted sum. `mask`
/// replaces the attention mask (DeepSeek sparse attention's).
pub(super) fn absorbed_attention(
    b: &mut Builder,
    il: usize,
    q: TensorRef,
    latent: TensorRef,
    k_pe: TensorRef,
    kq_scale: f32,
    mask: Option<TensorRef>,
) -> Result<TensorRef> {
    let hp = b.hp;
    let l = Some(il);
    let [hk, n_head, nt, _] = q.ne();
    let rot = i64::from(hp.n_rot);
    let nope = hk - rot;
    let qnb = q.nb();
    let row = |n: i64| crate::ggml::row_size(q.ggml_type(), n);
    let q_nope = b.g.view(q, &[nope, n_head, nt], &[qnb[1], qnb[2]], 0)?;
    let q_pe = b.g.view(q, &[rot, n_head, nt], &[qnb[1], qnb[2]], row(nope))?;
    let q_pe = if hp.rope { b.rope(q_pe, il, None)? } else { q_pe };
    let q_nope = b.g.permute(q_nope, [0, 2, 1, 3])?;
    let q_absorbed = b.layer_matmul(il, "attn_k_b.weight", q_nope)?;
    let q_absorbed = b.g.permute(q_absorbed, [0, 2, 1, 3])?;
    let q = b.g.concat(q_absorbed, q_pe, 0)?;
    let latent = b.g.reshape(latent, &[i64::from(hp.n_lora_kv), 1, nt])?;
    let k = b.g.concat(latent, k_pe, 0)?;
    let q = b.temperature_tuned(q)?;
    let (q, k) = (b.name(q, "Qcur", l), b.name(k, "Kcur", l));
    let wv_b = b.layer_weight(il, "attn_v_b.weight")?;
    b.attention_latent(il, q, k, wv_b, kq_scale, mask)
}
