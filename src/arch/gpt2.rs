//! The GPT-2 family: pre-norm layers with layer norms (mean and variance, with biases), one
//! attention (fused or separate projections with biases) and an FFN of GELU (or, JAIS, SwiGLU)
//! with biases. What differs is how positions enter: GPT-2 and StarCoder add a learned table,
//! CodeShell, StarCoder 2, Orion and Pocket TTS (ungated GELU, no projection biases) rotate, BLOOM, MPT and JAIS bias the scores by distance
//! (ALiBi); Orion's attention output and SwiGLU FFN have no biases; Nemotron's FFN is an ungated
//! squared ReLU, and so is JAIS 2's (which rotates). Phi-2 and Falcon feed
//! attention and FFN from one norm and add both to the stream, GPT-NeoX may (its file says). BLOOM
//! normalises its token embeddings first; MPT's biases are optional and it may divide GELU's
//! output by per-channel scales.
//!
//! llama.cpp's FFNs here leave the weights' scales out; its K-shift rotates the keys of any
//! architecture whose rope type is not "none", StarCoder's included, so a shift does so here too.

use super::created::{layered, BIASED_HEAD, GATED};
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Ffn};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX, ROPE_NONE, ROPE_NORMAL};

/// How token positions reach attention.
#[derive(Clone, Copy, PartialEq)]
enum Positions {
    /// A learned table `position_embd` added to the token embeddings (`optional`: MPT's).
    Learned { optional: bool },
    /// Rotated queries and keys.
    Rotary,
    /// ALiBi: `attention.max_alibi_bias` from the file, or this fixed value when llama.cpp sets it.
    Alibi { fixed: Option<f32> },
}

/// Which biases an architecture's norms and projections (attention output, FFN) have.
#[derive(Clone, Copy, PartialEq)]
enum Biases {
    Required,
    /// Any may be absent (MPT).
    Optional,
    /// The norms' are required, the projections' optional (Nemotron).
    OptionalProjections,
    /// The projections have none (Orion, StableLM, Falcon).
    NoProjections,
}

/// The FFN's activation.
#[derive(Clone, Copy, PartialEq)]
enum Act {
    Gelu,
    /// With a gate projection (JAIS, Orion, StableLM).
    SwiGlu,
    /// relu(x)², ungated (Nemotron).
    ReluSqr,
}

/// How a layer's attention and FFN join the residual stream.
#[derive(Clone, Copy, PartialEq)]
enum Residual {
    /// The FFN reads the stream after attention was added (with its own norm; without one, as in
    /// StableLM 2, it reads the attention's norm output).
    Sequential,
    /// Both read the stream before the layer, each through its own norm, and both are added to it
    /// where the file says so (GPT-NeoX's `use_parallel_residual`), else sequential.
    ParallelIfFile,
    /// Both read the attention's norm output (Phi-2, Falcon; Falcon 40B's attention may read a
    /// norm of its own).
    SharedNorm,
}

pub struct Gpt2Like {
    facts: Facts,
    positions: Positions,
    /// A layer norm over the token embeddings (BLOOM).
    token_norm: bool,
    /// Which biases the norms and projections have.
    biases: Biases,
    /// MPT's extras: clamped projections, optional norms of whole queries and keys, GELU's output
    /// divided by per-channel scales.
    mpt: bool,
    /// The FFN's activation.
    act: Act,
    /// Attention scores scaled by 1/head_dim (JAIS) rather than 1/sqrt(head_dim).
    scale_by_head_dim: bool,
    /// Queries are scaled before attention rather than the scores in it (Phi-2).
    prescale_q: bool,
    /// How attention and FFN meet the residual stream.
    residual: Residual,
    /// Optional per-head query and key norms, and an optional FFN norm (StableLM).
    head_norms: bool,
    /// The output head has a bias (Phi-2).
    output_bias: bool,
    /// Attention may read its own norm `attn_norm_2` of the layer's input (Falcon 40B).
    attn_norm_2: bool,
    /// The token embeddings may be left out and the output head read instead (CodeShell), whose
    /// head is then required.
    embeddings_from_output: bool,
    /// What llama.cpp's loader creates without a file (`ArchSpec::created_tensors`).
    created: fn(&HParams) -> Vec<String>,
    /// llama.cpp's size label per layer count.
    sizes: &'static [(u32, &'static str)],
}

pub const GPT2: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "gpt2",
        about: "GPT-2: layer norms with biases, learned position tables.",
        rope_type: ROPE_NONE,
        read_keys: &[super::READS_NORM_EPS],
        saved_rules: &[],
        ..Facts::BASE
    },
    positions: Positions::Learned { optional: false },
    token_norm: false,
    biases: Biases::Required,
    mpt: false,
    act: Act::Gelu,
    scale_by_head_dim: false,
    prescale_q: false,
    residual: Residual::Sequential,
    head_norms: false,
    output_bias: false,
    attn_norm_2: false,
    embeddings_from_output: false,
    created: gpt2,
    sizes: &[(12, "0.1B"), (24, "0.4B"), (36, "0.8B"), (48, "1.5B")],
};

pub const STARCODER: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "starcoder",
        about: "StarCoder: the GPT-2 family (layer norms with biases), learned position tables.",
        rope_type: ROPE_NORMAL,
        ..GPT2.facts
    },
    sizes: &[(24, "1B"), (36, "3B"), (42, "7B"), (40, "15B")],
    ..GPT2
};

pub const CODESHELL: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "codeshell",
        about: "CodeShell: the GPT-2 family (layer norms with biases).",
        rope_type: ROPE_NEOX,
        ..GPT2.facts
    },
    created: codeshell,
    positions: Positions::Rotary,
    embeddings_from_output: true,
    sizes: &[(42, "7B")],
    ..GPT2
};

pub const STARCODER2: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "starcoder2",
        about: "StarCoder 2: the GPT-2 family (layer norms with biases).",
        rope_type: ROPE_NEOX,
        ..GPT2.facts
    },
    created: starcoder2,
    positions: Positions::Rotary,
    sizes: &[(30, "3B"), (32, "7B"), (40, "15B"), (52, "20B"), (88, "34B")],
    ..GPT2
};

pub const BLOOM: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "bloom",
        about: "The GPT-2 family (layer norms with biases); ALiBi, normed token embeddings.",
        saved_rules: &[super::HELD_ALIBI],
        ..GPT2.facts
    },
    created: bloom,
    positions: Positions::Alibi { fixed: Some(8.0) },
    token_norm: true,
    sizes: &[(24, "1B")],
    ..GPT2
};

pub const MPT: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "mpt",
        about: "The GPT-2 family (layer norms with biases); ALiBi, optional learned positions, clamped projections, \
        GELU output scales.",
        read_keys: &[
            super::READS_NORM_EPS,
            &["attention.max_alibi_bias", "attention.clamp_kqv"],
        ],
        ..GPT2.facts
    },
    created: mpt,
    positions: Positions::Learned { optional: true },
    biases: Biases::Optional,
    mpt: true,
    sizes: &[(32, "7B"), (48, "30B")],
    ..GPT2
};

pub const JAIS: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "jais",
        about: "The GPT-2 family (layer norms with biases); ALiBi, SwiGLU.",
        read_keys: &[super::READS_NORM_EPS, &["attention.max_alibi_bias"]],
        ..GPT2.facts
    },
    created: jais,
    positions: Positions::Alibi { fixed: None },
    act: Act::SwiGlu,
    scale_by_head_dim: true,
    sizes: &[(24, "1.3B"), (40, "13B")],
    ..GPT2
};

pub const ORION: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "orion",
        about: "The GPT-2 family (layer norms with biases); SwiGLU, no layer biases.",
        rope_type: ROPE_NEOX,
        ..GPT2.facts
    },
    created: orion,
    positions: Positions::Rotary,
    act: Act::SwiGlu,
    biases: Biases::NoProjections,
    sizes: &[(40, "14B")],
    ..GPT2
};

/// Pocket TTS's text backbone: rotated, no projection biases, its head the token embeddings.
pub const POCKETTTS: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "pockettts",
        about: "Pocket TTS's text backbone: layer norms, rotation, an ungated GELU FFN, the head tied to the \
        embeddings.",
        rope_type: ROPE_NORMAL,
        ..GPT2.facts
    },
    created: pockettts,
    positions: Positions::Rotary,
    biases: Biases::NoProjections,
    sizes: &[(6, "109M"), (24, "335M")],
    ..GPT2
};

pub const STABLELM: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "stablelm",
        about: "The GPT-2 family (layer norms with biases); partial rotation, optional per-head query and key norms.",
        rope_type: ROPE_NEOX,
        ..GPT2.facts
    },
    created: stablelm,
    positions: Positions::Rotary,
    act: Act::SwiGlu,
    biases: Biases::NoProjections,
    head_norms: true,
    sizes: &[(24, "1B"), (32, "3B"), (40, "12B")],
    ..GPT2
};

pub const PHI2: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "phi2",
        about: "The GPT-2 family (layer norms with biases); attention and FFN from one norm, partial rotation.",
        rope_type: ROPE_NEOX,
        ..GPT2.facts
    },
    created: phi2,
    positions: Positions::Rotary,
    prescale_q: true,
    residual: Residual::SharedNorm,
    output_bias: true,
    sizes: &[(24, "1B"), (32, "3B")],
    ..GPT2
};

pub const NEMOTRON: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "nemotron",
        about: "Nemotron: the GPT-2 family (layer norms with biases); squared-ReLU FFN.",
        rope_type: ROPE_NEOX,
        ..GPT2.facts
    },
    created: starcoder2,
    positions: Positions::Rotary,
    biases: Biases::OptionalProjections,
    act: Act::ReluSqr,
    sizes: &[(32, "4B")],
    ..GPT2
};

pub const JAIS2: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "jais2",
        about: "JAIS 2: the GPT-2 family (layer norms with biases); squared-ReLU FFN.",
        rope_type: ROPE_NEOX,
        ..GPT2.facts
    },
    created: jais2,
    positions: Positions::Rotary,
    act: Act::ReluSqr,
    sizes: &[(32, "8B"), (68, "70B")],
    ..GPT2
};

pub const FALCON: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "falcon",
        about: "The GPT-2 family (layer norms with biases); attention and FFN from one norm, partial rotation, \
        Falcon 40B's second norm.",
        rope_type: ROPE_NEOX,
        ..GPT2.facts
    },
    created: falcon,
    positions: Positions::Rotary,
    biases: Biases::NoProjections,
    residual: Residual::SharedNorm,
    attn_norm_2: true,
    sizes: &[(32, "7B"), (60, "40B")],
    ..GPT2
};

pub const GPTNEOX: Gpt2Like = Gpt2Like {
    facts: Facts {
        name: "gptneox",
        about: "The GPT-2 family (layer norms with biases); parallel residual as the file says.",
        rope_type: ROPE_NEOX,
        read_keys: &[super::READS_NORM_EPS, &["use_parallel_residual"]],
        ..GPT2.facts
    },
    created: gptneox,
    positions: Positions::Rotary,
    residual: Residual::ParallelIfFile,
    sizes: &[],
    ..GPT2
};

/// GPT-NeoX's size labels by layer count and FFN width (llama.cpp's).
const GPTNEOX_SIZES: &[(u32, u32, &str)] = &[
    (6, 512, "14M"),
    (6, 2048, "70M"),
    (12, 3072, "160M"),
    (16, 8192, "1B"),
    (24, 4096, "410M"),
    (24, 8192, "1.4B"),
    (32, 10240, "2.8B"),
    (32, 16384, "6.9B"),
    (36, 20480, "12B"),
    (44, 24576, "20B"),
];

impl ArchSpec for Gpt2Like {
    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        (self.created)(hp)
    }

    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.norm_eps = meta.f32(&hp.key("attention.layer_norm_epsilon"))?;
        // Only a rope type other than "none" has its keys turned by a K-shift (llama.cpp's rule).
        hp.rope = self.facts.rope_type >= 0;
        let file_alibi = meta.f32_opt(&hp.key("attention.max_alibi_bias"))?;
        hp.max_alibi_bias = match self.positions {
            Positions::Alibi { fixed: Some(bias) } => bias,
            // MPT reads it too: its learned table is optional.
            Positions::Alibi { fixed: None } | Positions::Learned { optional: true } => file_alibi.unwrap_or(0.0),
            _ => 0.0,
        };
        if self.mpt {
            hp.clamp_kqv = meta.f32_opt(&hp.key("attention.clamp_kqv"))?.unwrap_or(0.0);
        }
        if self.residual == Residual::ParallelIfFile {
            hp.parallel_residual = meta.bool(&hp.key("use_parallel_residual"))?;
        }
        hp.size_label = match (self.facts.name, hp.n_layer, hp.n_embd) {
            ("bloom", 30, 2560) => "3B",
            ("bloom", 30, 4096) => "7B",
            ("gptneox", n, _) => GPTNEOX_SIZES
                .iter()
                .find(|(l, ff, _)| *l == n && *ff == hp.n_ff[0])
                .map_or("?B", |(_, _, s)| s),
            (_, n, _) => self.sizes.iter().find(|(l, _)| *l == n).map_or("?B", |(_, s)| s),
        };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, v) = (hp.n_embd, hp.n_vocab);
        let bias = self.biases != Biases::Optional;
        let projection_bias = matches!(self.biases, Biases::Required);
        let mut specs = vec![
            TensorSpec::new("output_norm.weight", &[e], true),
            TensorSpec::new("output_norm.bias", &[e], bias),
        ];
        if self.embeddings_from_output {
            specs.push(TensorSpec::new("token_embd.weight", &[e, v], true).unless("output.weight"));
            // Read by row for the embeddings, so kept in a plain layout.
            specs.push(TensorSpec::new("output.weight", &[e, v], true));
        } else {
            specs.push(TensorSpec::new("token_embd.weight", &[e, v], true));
            specs.push(TensorSpec::matmul("output.weight", &[e, v], false));
        }
        if self.output_bias {
            specs.push(TensorSpec::new("output.bias", &[v], true));
        }
        if let Positions::Learned { optional } = self.positions {
            specs.push(TensorSpec::new("position_embd.weight", &[e, hp.n_ctx_train], !optional));
        }
        if self.token_norm {
            specs.push(TensorSpec::new("token_embd_norm.weight", &[e], true));
            specs.push(TensorSpec::new("token_embd_norm.bias", &[e], true));
        }
        for il in 0..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            super::attention_tensors(hp, il, &mut specs);
            specs.extend([
                TensorSpec::new(b("attn_norm.weight"), &[e], true),
                TensorSpec::new(b("attn_norm.bias"), &[e], bias),
                TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true),
                TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true),
            ]);
            if self.attn_norm_2 {
                specs.push(TensorSpec::new(b("attn_norm_2.weight"), &[e], false));
                specs.push(TensorSpec::new(b("attn_norm_2.bias"), &[e], false));
            }
            match (self.residual, self.head_norms) {
                // Phi-2's and Falcon's FFNs read the attention's norm output.
                (Residual::SharedNorm, _) => {}
                (_, true) => specs.extend([
                    TensorSpec::new(b("ffn_norm.weight"), &[e], false),
                    TensorSpec::new(b("ffn_norm.bias"), &[e], false),
                    TensorSpec::new(b("attn_q_norm.weight"), &[hp.n_embd_head_k, hp.n_head[il]], false),
                    TensorSpec::new(b("attn_k_norm.weight"), &[hp.n_embd_head_k, hp.n_head_kv[il]], false),
                ]),
                _ => specs.extend([
                    TensorSpec::new(b("ffn_norm.weight"), &[e], true),
                    TensorSpec::new(b("ffn_norm.bias"), &[e], bias),
                ]),
            }
            if self.act == Act::SwiGlu {
                specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
            }
            if self.biases != Biases::NoProjections {
                specs.extend([
                    TensorSpec::new(b("attn_output.bias"), &[e], projection_bias),
                    TensorSpec::new(b("ffn_up.bias"), &[ff], projection_bias),
                    TensorSpec::new(b("ffn_down.bias"), &[e], projection_bias),
                ]);
                if self.act == Act::SwiGlu {
                    specs.push(TensorSpec::new(b("ffn_gate.bias"), &[ff], projection_bias));
                }
            }
            if self.mpt {
                // MPT's optional norms over whole queries and keys (applied with the query norm;
                // as wide as the embedding, as llama.cpp loads them) and the scales GELU's output
                // is divided by.
                specs.extend([
                    TensorSpec::new(b("attn_q_norm.weight"), &[e], false),
                    TensorSpec::new(b("attn_q_norm.bias"), &[e], false),
                    TensorSpec::new(b("attn_k_norm.weight"), &[e], false),
                    TensorSpec::new(b("attn_k_norm.bias"), &[e], false),
                    TensorSpec::new(b("ffn.act.scales"), &[ff], false),
                ]);
            }
        }
        specs
    }
}

/// GPT-2's layer (StarCoder's, Bloom's, GPT-NeoX's): layer norms with biases, the fused attention
/// projection, an ungated FFN, every bias.
const GPT2_LAYER: &str = "attn_norm.weight attn_norm.bias attn_qkv.weight attn_qkv.bias attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias";

/// GPT-2's and StarCoder's: learned positions.
fn gpt2(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight position_embd.weight output_norm.weight output_norm.bias output.weight",
        |_| GPT2_LAYER.into(),
    )
}

/// Bloom's: a norm of the token embeddings.
fn bloom(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight token_embd_norm.weight token_embd_norm.bias output_norm.weight output_norm.bias output.weight",
        |_| GPT2_LAYER.into(),
    )
}

/// GPT-NeoX's.
fn gptneox(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| GPT2_LAYER.into())
}

/// MPT's: GPT-2's with optional biases (all made without a file), a key norm and the FFN's
/// activation scales.
fn mpt(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight position_embd.weight output_norm.weight output_norm.bias output.weight",
        |_| format!("{GPT2_LAYER} attn_k_norm.weight attn_k_norm.bias ffn.act.scales"),
    )
}

/// CodeShell's: split projections.
fn codeshell(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias".into()
    })
}

/// StarCoder 2's (and Nemotron's): CodeShell's, the FFN's biases last.
fn starcoder2(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_up.weight ffn_down.bias ffn_up.bias".into()
    })
}

/// JAIS's: GPT-2's attention, a gated FFN with biases.
fn jais(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias attn_qkv.weight attn_qkv.bias attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_down.weight ffn_down.bias ffn_gate.weight ffn_gate.bias ffn_up.weight ffn_up.bias".into()
    })
}

/// JAIS 2's: split projections, the FFN up before down.
fn jais2(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_norm.weight ffn_norm.bias ffn_up.weight ffn_up.bias ffn_down.weight ffn_down.bias".into()
    })
}

/// Orion's: biased norms, a gated FFN without biases.
fn orion(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        format!("attn_norm.weight attn_norm.bias QKV attn_output.weight ffn_norm.weight ffn_norm.bias {GATED}")
    })
}

/// StableLM's: the output norm's bias first; optional per-head query and key norms.
fn stablelm(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight output_norm.bias output_norm.weight output.weight",
        |_| {
            format!("attn_norm.weight attn_norm.bias QKV attn_output.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight ffn_norm.bias {GATED}")
        },
    )
}

/// Phi-2's: an output bias, no FFN norm (attention and FFN in parallel).
fn phi2(hp: &HParams) -> Vec<String> {
    layered(hp, &format!("{BIASED_HEAD} output.bias"), |_| {
        "attn_norm.weight attn_norm.bias QKV attn_output.weight attn_output.bias ffn_down.weight ffn_down.bias ffn_up.weight ffn_up.bias".into()
    })
}

/// Falcon's: a second attention norm, the fused projection without biases.
fn falcon(hp: &HParams) -> Vec<String> {
    layered(hp, BIASED_HEAD, |_| {
        "attn_norm.weight attn_norm.bias attn_norm_2.weight attn_norm_2.bias attn_qkv.weight attn_output.weight ffn_down.weight ffn_up.weight".into()
    })
}

/// PocketTTS's: the head tied, its norm with a bias; normed attention and an ungated FFN, biases
/// on the norms only.
fn pockettts(hp: &HParams) -> Vec<String> {
    layered(
        hp,
        "token_embd.weight output_norm.weight output_norm.bias token_embd.weight",
        |_| {
            "attn_norm.weight attn_norm.bias QKV attn_output.weight ffn_norm.weight ffn_norm.bias ffn_down.weight \
         ffn_up.weight"
                .to_string()
        },
    )
}

/// Layer norm of `x` by `{name}.weight` and, when present, `{name}.bias`, named `label`.
pub(super) fn norm(b: &mut Builder, name: &str, x: TensorRef, label: &str, il: Option<usize>) -> Result<TensorRef> {
    let w = b.weight(&format!("{name}.weight"))?;
    let bias = b.weight_opt(&format!("{name}.bias"));
    let n = b.g.norm(x, b.hp.norm_eps)?;
    let mut y = b.g.mul(n, w)?;
    if let Some(bias) = bias {
        y = b.add(y, bias)?;
    }
    Ok(b.name(y, label, il))
}

impl Gpt2Like {
    /// The optional query and key norms: StableLM's per head (each where the layer has it), MPT's
    /// over whole projections (both, where the layer has the query norm).
    fn qk_norm(&self, b: &mut Builder, il: usize, q: TensorRef, k: TensorRef) -> Result<(TensorRef, TensorRef)> {
        if self.head_norms {
            let mut out = [q, k];
            for (t, which) in out.iter_mut().zip(["q", "k"]) {
                if b.layer_weight_opt(il, &format!("attn_{which}_norm.weight")).is_some() {
                    let name = format!("blk.{il}.attn_{which}_norm");
                    *t = norm(b, &name, *t, &format!("{}cur_normed", which.to_uppercase()), Some(il))?;
                }
            }
            return Ok((out[0], out[1]));
        }
        if b.layer_weight_opt(il, "attn_q_norm.weight").is_none() {
            return Ok((q, k));
        }
        let hp = b.hp;
        let nt = b.shape.n_tokens as i64;
        let mut out = [q, k];
        for (t, (which, n_head)) in out.iter_mut().zip([("q", hp.n_head[il]), ("k", hp.n_head_kv[il])]) {
            let flat = b.g.cont(*t)?;
            let flat = b.g.reshape(flat, &[i64::from(hp.n_embd_head_k * n_head), nt])?;
            let normed = norm(
                b,
                &format!("blk.{il}.attn_{which}_norm"),
                flat,
                &format!("attn_{which}_norm"),
                Some(il),
            )?;
            *t = b.heads(normed, hp.n_embd_head_k, n_head)?;
        }
        Ok((out[0], out[1]))
    }

    fn ffn(&self, b: &mut Builder, il: usize, x: TensorRef) -> Result<TensorRef> {
        let biased = Ffn {
            biased: true,
            ..Ffn::default()
        };
        match self.act {
            Act::Gelu => b.gelu_ffn(il, x),
            Act::SwiGlu => b.gated_ffn(il, x, biased),
            Act::ReluSqr => b.relu_sqr_ffn_named(il, x, "", biased),
        }
    }
}

impl Decoder for Gpt2Like {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        let mut x = match b.weight_opt("token_embd.weight") {
            Some(_) => b.embed_tokens()?,
            None => b.embed_rows("output.weight")?,
        };
        if let Some(table) = b.weight_opt("position_embd.weight") {
            let pos = b.positions()?;
            let p = b.g.get_rows(table, pos)?;
            x = b.add(x, p)?;
        }
        if self.token_norm {
            x = norm(b, "token_embd_norm", x, "norm", Some(0))?;
        }
        let head = hp.n_embd_head_k as f32;
        let kq_scale = if self.scale_by_head_dim {
            1.0 / head
        } else {
            1.0 / head.sqrt()
        };
        for il in 0..hp.n_layer as usize {
            let l = Some(il);
            let cur = norm(b, &format!("blk.{il}.attn_norm"), x, "attn_norm", l)?;
            let att_in = match b.layer_weight_opt(il, "attn_norm_2.weight") {
                Some(_) => norm(b, &format!("blk.{il}.attn_norm_2"), x, "attn_norm_2", l)?,
                None => cur,
            };
            let (q, k, v) = b.qkv(il, att_in, true)?;
            let (mut q, mut k) = self.qk_norm(b, il, q, k)?;
            if self.positions == Positions::Rotary {
                q = b.rope(q, il, None)?;
                k = b.rope(k, il, None)?;
            }
            let scale = if self.prescale_q {
                q = b.scale(q, kq_scale)?;
                1.0
            } else {
                kq_scale
            };
            let att = b.attention(il, q, k, v, scale, false)?;
            let att = b.layer_linear(il, "attn_output", att)?;
            let (att, residual) = b.last_layer_rows(il, att, x)?;
            let (cur, _) = b.last_layer_rows(il, cur, cur)?;
            let parallel = self.residual == Residual::ParallelIfFile && hp.parallel_residual;
            x = if self.residual == Residual::SharedNorm {
                let ffn = self.ffn(b, il, cur)?;
                let ffn = b.name(ffn, "ffn_out", l);
                let sum = b.add(att, ffn)?;
                b.add(sum, residual)?
            } else if parallel {
                let ffn_in = norm(b, &format!("blk.{il}.ffn_norm"), residual, "ffn_norm", l)?;
                let ffn = self.ffn(b, il, ffn_in)?;
                let ffn = b.name(ffn, "ffn_out", l);
                let sum = b.add(ffn, residual)?;
                b.add(sum, att)?
            } else {
                let h = b.add(att, residual)?;
                let h = b.name(h, "ffn_inp", l);
                let ffn_in = match b.layer_weight_opt(il, "ffn_norm.weight") {
                    Some(_) => norm(b, &format!("blk.{il}.ffn_norm"), h, "ffn_norm", l)?,
                    None => cur,
                };
                let ffn = self.ffn(b, il, ffn_in)?;
                let ffn = b.name(ffn, "ffn_out", l);
                b.add(ffn, h)?
            };
            x = b.layer_out(x, il)?;
        }
        let x = norm(b, "output_norm", x, "result_norm", None)?;
        b.output_head_unnormed(x).map(Some)
    }
}
