//! Architectures whose llama.cpp graph is the Llama decoder's with different switches: their
//! rotation, whether the dense FFN multiplies by its weights' scales, and llama.cpp's size labels.
//! XVERSE (normal rotation), EXAONE (NeoX rotation, rotary frequency factors) and ERNIE 4.5
//! leave the FFN scales out; Arcee's FFN is an ungated squared ReLU; Mistral 3 is Llama itself,
//! experts included, with its attention temperature tuning where the file asks; OLMoE normalises whole query and key
//! projections and mixes its experts' outputs unnormalised; Seed-OSS names its FFN norm
//! `post_attention_norm`; Refact does not rotate but biases scores by distance (ALiBi), and
//! leaves out the biases of its attention output and FFN (and, in a file with experts, the
//! experts themselves, which it loads); InternLM 2 is Llama without FFN scales;
//! Qwen (the first) rotates as NeoX and its FFN is half as wide as its file says; Nanbeige is Llama
//! itself (its layers in loops refused); Maincoder normalises query and key heads after rotating.
//! Hunyuan's dense models (and Hunyuan-VL's language model, with M-RoPE when its file has the
//! sections) normalise query and key heads after rotating, their base raised by an XDRoPE alpha.
//! OpenELM (head counts and FFN widths per layer) normalises query and key heads and leaves its
//! fused projection's scale out.
//! The diffusion models Dream (Qwen2's layout) and LLaDA (Llama's, its attention output and FFN
//! biases and rotary factors left out) attend both ways within a batch and keep no memory, as encoders do.

use super::created::{layered, ATTN, EXPERTS, FFN, GATED, GATED_BIASED, HEAD, TIED_HEAD};
use super::llama;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::gguf::Value;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_MROPE, ROPE_NEOX, ROPE_NONE};

pub struct LlamaLike {
    facts: Facts,
    variant: llama::Variant,
    /// Mixtral-style experts (as wide as the FFN) where the file has them.
    experts: bool,
    /// llama.cpp's size label per layer count.
    sizes: &'static [(u32, &'static str)],
    /// ALiBi's maximum bias (0: none), which llama.cpp fixes for the architecture.
    alibi: f32,
    /// The FFN is half as wide as `feed_forward_length` says (Qwen's).
    half_ffn: bool,
    /// Hunyuan's rotation: the base raised by `rope.scaling.alpha` (XDRoPE); `Some(true)` also
    /// M-RoPE when the file's sections ask for it (llama.cpp's `use_mrope`, Hunyuan-VL).
    hunyuan_rope: Option<bool>,
    /// What llama.cpp's loader creates without a file (`ArchSpec::created_tensors`).
    created: fn(&HParams) -> Vec<String>,
}

/// What ERNIE 4.5 and PaddleOCR read.
const READS_ERNIE4_5: &[&str] = &[
    "leading_dense_block_count",
    "expert_feed_forward_length",
    "expert_shared_feed_forward_length",
    "interleave_moe_layer_step",
    "attention.layer_norm_rms_epsilon",
    "rope.dimension_sections",
];

/// What a member is unless it says otherwise: the Llama decoder reading its norms' epsilon.
const BASE: LlamaLike = LlamaLike {
    facts: Facts {
        read_keys: &[super::READS_RMS_EPS],
        ..Facts::BASE
    },
    variant: llama::Variant::BASE,
    experts: false,
    sizes: &[],
    alibi: 0.0,
    half_ffn: false,
    hunyuan_rope: None,
    created: |_| Vec::new(),
};

pub const XVERSE: LlamaLike = LlamaLike {
    facts: Facts {
        name: "xverse",
        about: "XVERSE: the Llama decoder (normal rotation) without FFN scales.",
        ..BASE.facts
    },
    created: super::created::plain_head,
    sizes: &[(32, "7B"), (40, "13B"), (80, "65B")],
    ..BASE
};

pub const EXAONE: LlamaLike = LlamaLike {
    facts: Facts {
        name: "exaone",
        about: "EXAONE: the Llama decoder with NeoX rotation and rotary frequency factors, without FFN scales.",
        rope_type: ROPE_NEOX,
        ..BASE.facts
    },
    created: exaone,
    sizes: &[(32, "8B")],
    ..BASE
};

pub const ERNIE4_5: LlamaLike = LlamaLike {
    facts: Facts {
        name: "ernie4_5",
        about: "ERNIE 4.5, dense: the Llama decoder without FFN scales.",
        read_keys: &[READS_ERNIE4_5],
        ..BASE.facts
    },
    created: ernie4_5,
    variant: llama::Variant {
        no_wo_bias: true,
        ..llama::Variant::BASE
    },
    sizes: &[(18, "0.3B")],
    ..BASE
};

/// DeciLM / Llama-Nemotron: Llama with per-layer head and FFN counts. Its attention-free,
/// "linear attention" and FFN-free layers (no query heads, no KV heads, no FFN) are refused.
pub const DECI: LlamaLike = LlamaLike {
    facts: Facts {
        name: "deci",
        about: "The Llama decoder with per-layer heads and FFN widths; its attention-free, linear-attention and \
        FFN-free layers are refused.",
        ..BASE.facts
    },
    created: deci,
    sizes: &[(32, "7B"), (80, "70B"), (162, "405B")],
    ..BASE
};

pub const ARCEE: LlamaLike = LlamaLike {
    facts: Facts {
        name: "arcee",
        about: "The Llama decoder with an ungated squared-ReLU FFN.",
        ..BASE.facts
    },
    created: arcee,
    variant: llama::Variant {
        relu_sqr: true,
        ..llama::Variant::BASE
    },
    sizes: &[(36, "4B")],
    ..BASE
};

pub const OLMOE: LlamaLike = LlamaLike {
    facts: Facts {
        name: "olmoe",
        about: "The Llama decoder with whole-projection query and key norms and experts.",
        rope_type: ROPE_NEOX,
        ..BASE.facts
    },
    created: olmoe,
    variant: llama::Variant {
        qk_norm_whole: true,
        no_wo_bias: true,
        moe: Some(Moe { ..Moe::BASE }),
        ..llama::Variant::BASE
    },
    experts: true,
    sizes: &[(16, "A1.7B")],
    ..BASE
};

pub const SEED_OSS: LlamaLike = LlamaLike {
    facts: Facts {
        name: "seed_oss",
        about: "Seed-OSS: the Llama decoder, its FFN norm named `post_attention_norm`.",
        rope_type: ROPE_NEOX,
        ..BASE.facts
    },
    created: seed_oss,
    variant: llama::Variant {
        ffn_norm: Some("post_attention_norm.weight"),
        ..llama::Variant::BASE
    },
    sizes: &[(64, "36B")],
    ..BASE
};

pub const MISTRAL3: LlamaLike = LlamaLike {
    facts: Facts {
        name: "mistral3",
        about: "The Llama decoder, dense or with experts; attention temperature tuning where the file asks.",
        read_keys: &[
            super::READS_RMS_EPS,
            &[
                "attention.temperature_scale",
                "rope.scaling.yarn_log_multiplier",
                "rope.scaling.yarn_beta_fast",
                "rope.scaling.yarn_beta_slow",
            ],
        ],
        ..BASE.facts
    },
    created: llama::llama,
    variant: llama::Variant {
        ffn_scales: true,
        ..llama::Variant::BASE
    },
    experts: true,
    sizes: &[(26, "3B"), (34, "8B"), (40, "14B")],
    ..BASE
};

pub const REFACT: LlamaLike = LlamaLike {
    facts: Facts {
        name: "refact",
        about: "The Llama decoder with ALiBi instead of rotation; experts in a file are loaded and left out, as \
        llama.cpp does.",
        rope_type: ROPE_NONE,
        saved_rules: &[super::HELD_ALIBI],
        ..BASE.facts
    },
    created: llama::llama,
    variant: llama::Variant {
        no_wo_bias: true,
        no_ffn_bias: true,
        experts_unused: true,
        ..llama::Variant::BASE
    },
    experts: true,
    alibi: 8.0,
    sizes: &[(32, "1B")],
    ..BASE
};

pub const NANBEIGE: LlamaLike = LlamaLike {
    facts: Facts {
        name: "nanbeige",
        about: "Nanbeige: the Llama decoder (its layers in loops refused).",
        ..BASE.facts
    },
    created: nanbeige,
    variant: llama::Variant {
        ffn_scales: true,
        ..llama::Variant::BASE
    },
    sizes: &[],
    ..BASE
};

pub const MAINCODER: LlamaLike = LlamaLike {
    facts: Facts {
        name: "maincoder",
        about: "The Llama decoder with head norms after rotation.",
        ..BASE.facts
    },
    created: qk_normed,
    variant: llama::Variant {
        qk_norm_after_rope: true,
        ..llama::Variant::BASE
    },
    sizes: &[(32, "1B")],
    ..BASE
};

pub const DREAM: LlamaLike = LlamaLike {
    facts: Facts {
        name: "dream",
        about: "Dream, a diffusion model on Qwen2's layout: attention both ways within a batch, no memory, as \
        encoders.",
        rope_type: ROPE_NEOX,
        saved_rules: &[super::HELD_CAUSAL],
        is_diffusion: true,
        memory: Memory::None,
        ..BASE.facts
    },
    created: super::qwen2::qwen2,
    variant: llama::Variant {
        no_cache: true,
        no_output_bias: true,
        ..llama::Variant::BASE
    },
    sizes: &[(28, "7B")],
    ..BASE
};

pub const LLADA: LlamaLike = LlamaLike {
    facts: Facts {
        name: "llada",
        about: "LLaDA, a diffusion model on Llama's layout: attention both ways within a batch, no memory, as \
        encoders.",
        saved_rules: &[super::HELD_CAUSAL],
        is_diffusion: true,
        memory: Memory::None,
        ..BASE.facts
    },
    created: llada,
    variant: llama::Variant {
        no_cache: true,
        no_wo_bias: true,
        no_ffn_bias: true,
        no_rope_factors: true,
        ..llama::Variant::BASE
    },
    sizes: &[(32, "8B")],
    ..BASE
};

pub const OPENELM: LlamaLike = LlamaLike {
    facts: Facts {
        name: "openelm",
        about: "Per-layer head counts and widths.",
        rope_type: ROPE_NEOX,
        ..BASE.facts
    },
    created: openelm,
    variant: llama::Variant {
        qk_norm: true,
        no_qkv_scale: true,
        ..llama::Variant::BASE
    },
    sizes: &[(16, "270M"), (20, "450M"), (28, "1B"), (36, "3B")],
    ..BASE
};

/// Hunyuan's dense models and Hunyuan-VL's language model: per-head query and key norms after
/// rotation.
const HUNYUAN: LlamaLike = LlamaLike {
    facts: Facts {
        name: "hunyuan-dense",
        about: "The Llama decoder with head norms after rotation and an XDRoPE base.",
        rope_type: ROPE_NEOX,
        read_keys: &[super::READS_RMS_EPS, &["rope.dimension_sections"]],
        // Raised by its XDRoPE alpha.
        saved_rules: &[("rope.freq_base", Rule::Held(|f| Value::F32(f.hp.rope_freq_base)))],
        ..BASE.facts
    },
    created: qk_normed,
    variant: llama::Variant {
        qk_norm_after_rope: true,
        ..llama::Variant::BASE
    },
    hunyuan_rope: Some(false),
    ..BASE
};

pub const HUNYUAN_DENSE: LlamaLike = HUNYUAN;

pub const HUNYUAN_VL: LlamaLike = LlamaLike {
    facts: Facts {
        name: "hunyuan_vl",
        about: "Hunyuan-VL's language model: hunyuan-dense's layers, with M-RoPE.",
        ..HUNYUAN.facts
    },
    hunyuan_rope: Some(true),
    ..HUNYUAN
};

/// PaddleOCR's language model: ERNIE 4.5's layout (dense, whatever its expert count says) with
/// M-RoPE and its attention output bias.
pub const PADDLEOCR: LlamaLike = LlamaLike {
    facts: Facts {
        name: "paddleocr",
        about: "PaddleOCR's language model: ERNIE 4.5's layout with M-RoPE.",
        rope_type: ROPE_MROPE,
        read_keys: &[READS_ERNIE4_5],
        ..BASE.facts
    },
    created: ernie4_5,
    sizes: &[(18, "0.3B"), (28, "21B.A3B"), (54, "300B.A47B")],
    ..BASE
};

/// openPangu-Embedded: Llama with NeoX rotation and its attention output bias; its rotary
/// factors are loaded but left out.
pub const PANGU_EMBED: LlamaLike = LlamaLike {
    facts: Facts {
        name: "pangu-embedded",
        about: "The Llama decoder (openPangu-Embedded).",
        rope_type: ROPE_NEOX,
        ..BASE.facts
    },
    created: pangu_embed,
    variant: llama::Variant {
        no_rope_factors: true,
        ..llama::Variant::BASE
    },
    sizes: &[(26, "1B"), (34, "7B")],
    ..BASE
};

pub const INTERNLM2: LlamaLike = LlamaLike {
    facts: Facts {
        name: "internlm2",
        about: "InternLM 2: the Llama decoder without FFN scales.",
        ..BASE.facts
    },
    created: super::created::plain_head,
    sizes: &[(32, "7B"), (48, "20B")],
    ..BASE
};

pub const QWEN: LlamaLike = LlamaLike {
    facts: Facts {
        name: "qwen",
        about: "Qwen 1: the Llama decoder rotating as NeoX, its FFN half as wide as its file says.",
        rope_type: ROPE_NEOX,
        ..BASE.facts
    },
    created: qwen,
    variant: llama::Variant {
        no_wo_bias: true,
        ..llama::Variant::BASE
    },
    half_ffn: true,
    sizes: &[(32, "7B"), (40, "13B")],
    ..BASE
};

impl ArchSpec for LlamaLike {
    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        (self.created)(hp)
    }

    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        // Mistral 3's temperature tuning: its scale from the file, steps of the original context
        // (llama.cpp's other Llama-like loaders do not read the key).
        let temp_scale = match self.facts.name {
            "mistral3" => meta.f32_opt(&hp.key("attention.temperature_scale"))?.unwrap_or(0.0),
            _ => 0.0,
        };
        if temp_scale != 0.0 {
            if hp.n_ctx_orig_yarn == 0 {
                return Err(Error::model(
                    "invalid n_ctx_orig_yarn for attention temperature scaling",
                ));
            }
            hp.attn_temp = crate::model::hparams::AttnTemp {
                scale: temp_scale,
                length: hp.n_ctx_orig_yarn,
                offset: 0.0,
            };
        }
        if meta.u32_opt(&hp.key("num_loops"))?.unwrap_or(1) > 1 {
            return Err(Error::NotImplemented("layers run in loops (num_loops above 1)"));
        }
        if self.experts {
            hp.n_ff_exp = hp.n_ff[0];
        }
        let plain = |il: usize| hp.n_head[il] > 0 && hp.n_head_kv[il] > 0 && hp.n_ff[il] > 0;
        if let Some(il) = (0..hp.n_layer as usize).find(|&il| !plain(il)) {
            return Err(Error::NotImplemented(match (hp.n_head[il], hp.n_head_kv[il]) {
                (0, _) => "attention-free layers (a layer with no attention heads)",
                (_, 0) => "linear-attention layers (a layer with no KV heads)",
                _ => "FFN-free layers (a layer with feed_forward_length 0)",
            }));
        }
        if self.facts.name == "mistral3" {
            super::load_yarn_betas(meta, hp)?;
            let log_mul = meta.f32_opt(&hp.key("rope.scaling.yarn_log_multiplier"))?;
            hp.rope_yarn_log_mul = log_mul.unwrap_or(0.0);
        }
        hp.rope = self.facts.rope_type >= 0;
        // The diffusion models attend both ways.
        hp.causal &= !self.variant.no_cache;
        if hp.n_pos_per_embd() > 1 && meta.i32_array(&hp.key("rope.dimension_sections"), 4)?.is_some() {
            super::load_rope_sections(meta, hp)?;
        }
        if let Some(mrope) = self.hunyuan_rope {
            let alpha = meta.f32_opt(&hp.key("rope.scaling.alpha"))?.unwrap_or(0.0);
            if alpha > 0.0 {
                let dim = hp.n_embd_head_k as f32;
                hp.rope_freq_base *= alpha.powf(dim / (dim - 2.0));
            }
            if mrope && meta.i32_array(&hp.key("rope.dimension_sections"), 4)?.is_some() {
                super::load_rope_sections(meta, hp)?;
                if hp.rope_sections[0] > 0 && hp.rope_sections[1] > 0 {
                    hp.rope_type = crate::ggml::ROPE_MROPE;
                }
            }
        }
        if self.half_ffn {
            hp.n_ff.iter_mut().for_each(|n| *n /= 2);
        }
        hp.max_alibi_bias = self.alibi;
        hp.size_label = if self.hunyuan_rope.is_some() {
            match hp.n_embd {
                1024 => "0.5B",
                2048 => "1.8B",
                3072 => "4B",
                4096 => "7B",
                _ => "?B",
            }
        } else {
            self.sizes
                .iter()
                .find(|(n, _)| *n == hp.n_layer)
                .map_or("?B", |(_, label)| label)
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        // Dense architectures: a file's expert counts do not make them mixtures.
        let mut specs = llama::tensors_with(hp, self.experts);
        if self.variant.no_output_bias {
            specs.push(TensorSpec::new("output.bias", &[hp.n_vocab], false));
        }
        if self.variant.relu_sqr {
            specs.retain(|s| !s.name.ends_with("ffn_gate.weight"));
        }
        if let Some(name) = self.variant.ffn_norm {
            for s in specs.iter_mut().filter(|s| s.name.ends_with("ffn_norm.weight")) {
                s.name = s.name.replace("ffn_norm.weight", name);
            }
        }
        let head_norms = self.variant.qk_norm_after_rope || self.variant.qk_norm;
        for il in (0..hp.n_layer as usize).filter(|_| head_norms) {
            let hk = hp.n_embd_head_k;
            specs.push(TensorSpec::new(format!("blk.{il}.attn_q_norm.weight"), &[hk], true));
            specs.push(TensorSpec::new(format!("blk.{il}.attn_k_norm.weight"), &[hk], true));
        }
        for il in (0..hp.n_layer as usize).filter(|_| self.variant.qk_norm_whole) {
            let q = hp.n_embd_head_k * hp.n_head[il];
            let k = hp.n_embd_head_k * hp.n_head_kv[il];
            specs.push(TensorSpec::new(format!("blk.{il}.attn_q_norm.weight"), &[q], true));
            specs.push(TensorSpec::new(format!("blk.{il}.attn_k_norm.weight"), &[k], true));
        }
        specs
    }
}

/// LLaDA's: Llama's dense layers, the rotary factors always `rope_freqs`.
fn llada(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_output.bias ffn_norm.weight ROPE_FREQS {GATED_BIASED}")
    })
}

/// Qwen 3's list ([`super::qwen3::qwen3`]) with the usual head (Maincoder's, Hunyuan's dense ones).
fn qk_normed(hp: &HParams) -> Vec<String> {
    super::qwen3::qwen3(hp, HEAD)
}

/// EXAONE's: `rope_freqs` after the FFN norm.
fn exaone(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} ffn_norm.weight ROPE_FREQS {GATED}"))
}

/// Arcee's: `rope_freqs`, and an FFN without a gate.
fn arcee(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} ffn_norm.weight ROPE_FREQS ffn_down.weight ffn_up.weight")
    })
}

/// ERNIE 4.5's (dense): the attention output's bias.
fn ernie4_5(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} attn_output.bias {FFN}"))
}

/// Nanbeige's: `rope_freqs` before the FFN norm.
fn nanbeige(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} ROPE_FREQS {FFN}"))
}

/// OLMoE's: whole-projection query and key norms, then routed experts.
fn olmoe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {EXPERTS}")
    })
}

/// Seed-OSS's: the projections first, then both norms; the FFN gate, up, down.
fn seed_oss(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        "QKV attn_output.weight attn_norm.weight post_attention_norm.weight ffn_gate.weight ffn_up.weight ffn_down.weight".into()
    })
}

/// Deci's: per layer, attention with projections, a linear replacement (norm and output only)
/// or none, and an FFN or none.
fn deci(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let attn = match (hp.n_head[il], hp.n_head_kv[il]) {
            (h, 0) if h > 0 => "attn_norm.weight attn_output.weight",
            (_, 0) => "",
            _ => ATTN,
        };
        let (norm, ffn) = if hp.n_ff[il] > 0 {
            ("ffn_norm.weight", GATED)
        } else {
            ("", "")
        };
        format!("{attn} attn_output.bias {norm} ROPE {ffn} ffn_gate.bias ffn_down.bias ffn_up.bias")
    })
}

/// Qwen's (the first): the fused projection with its bias.
fn qwen(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("attn_norm.weight attn_qkv.weight attn_qkv.bias attn_output.weight ffn_norm.weight {GATED}")
    })
}

/// OpenELM's: the fused projection, then query and key norms; the head tied.
fn openelm(hp: &HParams) -> Vec<String> {
    layered(hp, TIED_HEAD, |_| {
        format!("attn_norm.weight attn_qkv.weight attn_q_norm.weight attn_k_norm.weight attn_output.weight {FFN}")
    })
}

/// PanGu Embedded's: Llama's dense layers without the FFN's biases.
fn pangu_embed(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_output.bias ffn_norm.weight ROPE {GATED}")
    })
}

impl Decoder for LlamaLike {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        llama::decoder(b, self.variant)
    }
}
