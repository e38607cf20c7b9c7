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
use crate::model::saver::Rule;
use crate::model::spec::{ArchSpec, Memory, TensorSpec};

pub struct Qwen3Moe {
    name: &'static str,
    /// Its line in docs/architectures.md (`ArchSpec::about`).
    about: &'static str,
    /// A diffusion model's experts: whether their picked weights are normalised.
    diffusion: Option<bool>,
    /// Qwen3-VL's: interleaved M-RoPE, unscaled experts.
    vl: bool,
}

pub const QWEN3MOE: Qwen3Moe = Qwen3Moe {
    name: "qwen3moe",
    about: "Qwen3 with experts.",
    diffusion: None,
    vl: false,
};

pub const QWEN3VLMOE: Qwen3Moe = Qwen3Moe {
    name: "qwen3vlmoe",
    about: "Qwen3-VL's language model with experts: interleaved M-RoPE; deepstack layers add image features to \
        the first layers' outputs.",
    diffusion: None,
    vl: true,
};

pub const LLADA_MOE: Qwen3Moe = Qwen3Moe {
    name: "llada-moe",
    about: "LLaDA-MoE, a diffusion model on Qwen3-MoE's layers.",
    diffusion: Some(false),
    vl: false,
};

pub const RND1: Qwen3Moe = Qwen3Moe {
    name: "rnd1",
    about: "RND1, a diffusion model on Qwen3-MoE's layers.",
    diffusion: Some(true),
    vl: false,
};

impl ArchSpec for Qwen3Moe {
    fn name(&self) -> &'static str {
        self.name
    }

    fn is_diffusion(&self) -> bool {
        self.diffusion.is_some()
    }

    fn about(&self) -> &'static str {
        self.about
    }

    fn rope_type(&self) -> i32 {
        if self.vl {
            qwen3::IMROPE
        } else {
            2
        }
    }

    fn read_keys(&self) -> &'static [&'static str] {
        match self.vl {
            true => &[
                "expert_feed_forward_length",
                "n_deepstack_layers",
                "attention.layer_norm_rms_epsilon",
                "rope.dimension_sections",
            ],
            false => &["expert_feed_forward_length", "attention.layer_norm_rms_epsilon"],
        }
    }

    fn saved_rules(&self) -> &'static [(&'static str, Rule)] {
        match self.diffusion {
            Some(_) => &[super::HELD_CAUSAL],
            None => &[],
        }
    }

    fn memory(&self) -> Memory {
        match self.diffusion {
            Some(_) => Memory::None,
            None => Memory::KvCache,
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        if hp.n_expert == 0 {
            return Err(Error::model(format!("{} needs experts (expert_count)", self.name)));
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
        hp.size_label = match (self.name, hp.n_layer) {
            ("qwen3moe", 48) | ("rnd1", 48) | ("qwen3vlmoe", 48) => "30B.A3B",
            ("qwen3moe", 94) | ("qwen3vlmoe", 94) => "235B.A22B",
            ("llada-moe", 16) => "A1.7B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        match self.name {
            "llada-moe" => llada_moe(hp),
            _ => qwen3moe(hp),
        }
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let mut specs = qwen3::tensors(hp, true);
        // LLaDA-MoE requires its own output head.
        for s in specs
            .iter_mut()
            .filter(|s| s.name == "output.weight" && self.name == "llada-moe")
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
