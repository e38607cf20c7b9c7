//! Qwen3-MoE: Qwen3 whose FFNs are experts (softmax routing, the picked weights normalised), as
//! wide as `expert_feed_forward_length`. The diffusion models built on it, LLaDA-MoE (the picked
//! weights not normalised) and RND1, attend both ways without a cache and leave the experts'
//! scales out; so does Qwen3-VL-MoE's language model, with interleaved M-RoPE.

use super::created::{layered, ATTN, EXPERTS, HEAD, KQ_NORMS};
use super::{llama, qwen3};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, Memory, TensorSpec, ROPE_IMROPE, ROPE_NEOX};

pub struct Qwen3Moe {
    facts: Facts,
    /// A diffusion model's experts: whether their picked weights are normalised.
    diffusion: Option<bool>,
    /// Qwen3-VL's: interleaved M-RoPE, unscaled experts.
    vl: bool,
}

/// What all read beside Qwen3-VL's keys.
const READS_EXPERTS: &[&str] = &["expert_feed_forward_length"];

pub const QWEN3MOE: Qwen3Moe = Qwen3Moe {
    facts: Facts {
        name: "qwen3moe",
        about: "Qwen3 with experts.",
        rope_type: ROPE_NEOX,
        read_keys: &[READS_EXPERTS, super::READS_RMS_EPS],
        ..Facts::BASE
    },
    diffusion: None,
    vl: false,
};

pub const QWEN3VLMOE: Qwen3Moe = Qwen3Moe {
    facts: Facts {
        name: "qwen3vlmoe",
        about: "Qwen3-VL's language model with experts: interleaved M-RoPE; deepstack layers add image features to \
            the first layers' outputs.",
        rope_type: ROPE_IMROPE,
        read_keys: &[READS_EXPERTS, qwen3::READS_VL],
        ..Facts::BASE
    },
    diffusion: None,
    vl: true,
};

/// A diffusion model on Qwen3-MoE's layers: attention both ways, no memory.
const DIFFUSION: Facts = Facts {
    saved_rules: &[super::HELD_CAUSAL],
    memory: Memory::None,
    is_diffusion: true,
    ..QWEN3MOE.facts
};

pub const LLADA_MOE: Qwen3Moe = Qwen3Moe {
    facts: Facts {
        name: "llada-moe",
        about: "LLaDA-MoE, a diffusion model on Qwen3-MoE's layers.",
        ..DIFFUSION
    },
    diffusion: Some(false),
    vl: false,
};

pub const RND1: Qwen3Moe = Qwen3Moe {
    facts: Facts {
        name: "rnd1",
        about: "RND1, a diffusion model on Qwen3-MoE's layers.",
        ..DIFFUSION
    },
    diffusion: Some(true),
    vl: false,
};

impl ArchSpec for Qwen3Moe {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_expert == 0 {
            return Err(Error::model(format!(
                "{} needs experts (expert_count)",
                self.facts.name
            )));
        }
        if self.vl {
            qwen3::load_vl(meta, hp)?;
        }
        // The diffusion models attend both ways.
        hp.causal &= self.diffusion.is_none();
        if hp.n_ff_exp == 0 {
            hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used;
        }
        // Size labels as llama.cpp derives them, for llama_model_desc.
        hp.size_label = match (self.facts.name, hp.n_layer) {
            ("qwen3moe", 48) | ("rnd1", 48) | ("qwen3vlmoe", 48) => "30B.A3B",
            ("qwen3moe", 94) | ("qwen3vlmoe", 94) => "235B.A22B",
            ("llada-moe", 16) => "A1.7B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        match self.facts.name {
            "llada-moe" => llada_moe(hp),
            _ => qwen3moe(hp),
        }
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = qwen3::tensors(hp, true);
        // LLaDA-MoE requires its own output head.
        for s in specs
            .iter_mut()
            .filter(|s| s.name == "output.weight" && self.facts.name == "llada-moe")
        {
            s.required = true;
        }
        specs
    }
}

/// Qwen3-MoE's (and Mellum's): Qwen 3's attention, then routed experts.
pub(super) fn qwen3moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} {KQ_NORMS} ffn_norm.weight {EXPERTS}"))
}

/// LLaDA-MoE's (and Maple's): query, then key norms, routed experts.
pub(super) fn llada_moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| {
        format!("{ATTN} attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {EXPERTS}")
    })
}

impl Decoder for Qwen3Moe {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        if self.diffusion.is_none() && !self.vl {
            return qwen3::build(b);
        }
        let variant = llama::Variant {
            qk_norm: true,
            no_cache: self.diffusion.is_some(),
            moe: Some(Moe {
                normalize: self.diffusion.unwrap_or(true),
                ..Moe::BASE
            }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}
