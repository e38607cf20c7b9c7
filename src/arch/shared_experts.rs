//! dots.llm1: Qwen3's layers (per-head query and key norms before NeoX rotation) with leading
//! dense layers, then experts routed by the file's gating function (an optional selection bias,
//! the picked weights normalised and scaled as the file says) beside shared experts, and its own
//! output head. Bailing MoE (Ling): the same FFNs in every layer, softmax-routed, without head
//! norms, rotating normally. DeepSeek (the first): leading dense layers, softmax-routed experts
//! whose weights are scaled but never normalised, an optional tied head. Bailing MoE 2 (Ling
//! 2.0): dots.llm1's layers with one fused query-key-value projection; shared experts as wide as
//! the file says; multi-token-prediction layers refused. GLM-4.5 (GLM-4 MoE): optional head norms,
//! NeoX rotation (M-RoPE when the file's sections ask), the FFN's norm named
//! `post_attention_norm`, leading dense layers, then experts routed by sigmoid (unless the file
//! says otherwise) with a required selection bias beside shared experts; an optional tied head;
//! multi-token-prediction layers refused.

use super::created::{self, layered, ATTN, BIASED_EXPERTS, EXPERTS, HEAD, KQ_NORMS, SHARED_GDU};
use super::{common_tensors, dense_lead, llama, qwen3};
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder, Gating, Moe};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec, ROPE_NEOX};

pub struct SharedExperts {
    facts: Facts,
    kind: Kind,
}

#[derive(PartialEq)]
enum Kind {
    /// Head norms, leading dense layers, gating and selection bias from the file.
    Dots,
    Bailing,
    DeepSeek,
    /// Dots' layers with a fused projection; the router and gating required.
    Bailing2,
    /// Optional head norms, `post_attention_norm`, sigmoid gating by default.
    Glm4Moe,
}

pub const DOTS1: SharedExperts = SharedExperts {
    facts: Facts {
        name: "dots1",
        about: "Head norms, leading dense layers, experts gated as the file says beside shared experts.",
        rope_type: ROPE_NEOX,
        read_keys: &[super::READS_SHARED_MOE, super::READS_GATING, super::READS_RMS_EPS],
        ..Facts::BASE
    },
    kind: Kind::Dots,
};
pub const BAILINGMOE: SharedExperts = SharedExperts {
    facts: Facts {
        name: "bailingmoe",
        about: "dots1's FFNs in every layer, no head norms.",
        read_keys: &[super::READS_SHARED_MOE, super::READS_RMS_EPS, &["expert_weights_norm"]],
        ..Facts::BASE
    },
    kind: Kind::Bailing,
};
pub const BAILINGMOE2: SharedExperts = SharedExperts {
    facts: Facts {
        name: "bailingmoe2",
        about: "Ling 2.0: dots1's layers with a fused projection; multi-token-prediction layers refused.",
        rope_type: ROPE_NEOX,
        read_keys: &[
            super::READS_SHARED_MOE,
            super::READS_GATING,
            super::READS_RMS_EPS,
            &["expert_shared_feed_forward_length"],
        ],
        ..Facts::BASE
    },
    kind: Kind::Bailing2,
};
pub const GLM4MOE: SharedExperts = SharedExperts {
    facts: Facts {
        name: "glm4moe",
        about: "GLM-4.5: optional head norms, M-RoPE when its sections ask, sigmoid-routed experts with a selection \
            bias beside shared experts; multi-token-prediction layers refused.",
        rope_type: ROPE_NEOX,
        read_keys: &[
            super::READS_SHARED_MOE,
            super::READS_GATING,
            super::READS_RMS_EPS,
            &["rope.dimension_sections"],
        ],
        saved_rules: &[super::HELD_GATING],
        ..Facts::BASE
    },
    kind: Kind::Glm4Moe,
};
pub const DEEPSEEK: SharedExperts = SharedExperts {
    facts: Facts {
        name: "deepseek",
        about: "DeepSeek's first MoE: leading dense layers, scaled unnormalised expert weights, shared experts.",
        read_keys: &[super::READS_SHARED_MOE, super::READS_RMS_EPS],
        ..Facts::BASE
    },
    kind: Kind::DeepSeek,
};

impl SharedExperts {
    /// Per-head query and key norms (optional for GLM-4.5), NeoX rotation, a selection bias.
    fn head_norms(&self) -> bool {
        matches!(self.kind, Kind::Dots | Kind::Bailing2 | Kind::Glm4Moe)
    }
}

impl ArchSpec for SharedExperts {
    fn facts(&self) -> &Facts {
        &self.facts
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        hp.rms_eps = meta.f32(&hp.key("attention.layer_norm_rms_epsilon"))?;
        super::check_equal_head_sizes(hp)?;
        // llama.cpp's key and value projections are as wide as its queries.
        let dots = self.kind == Kind::Dots;
        let gated_by_file = matches!(self.kind, Kind::Dots | Kind::Bailing2);
        if matches!(self.kind, Kind::Bailing2 | Kind::Glm4Moe) {
            super::refuse_mtp(meta, hp)?;
            super::check_experts(hp)?;
        }
        if self.kind == Kind::Glm4Moe {
            load_glm4moe(meta, hp)?;
        }
        if dots && hp.n_head_kv.iter().zip(&hp.n_head).any(|(kv, q)| kv != q) {
            return Err(Error::model("dots1 needs as many KV heads as query heads"));
        }
        // Bailing MoE's files have the key too; its layers are all experts whatever it says.
        if self.kind != Kind::Bailing {
            hp.n_layer_dense_lead = meta.u32_opt(&hp.key("leading_dense_block_count"))?.unwrap_or(0);
        }
        meta.u32(&hp.key("expert_feed_forward_length"))?;
        let shared = meta.u32(&hp.key("expert_shared_count"))?;
        let shared_width = match self.kind {
            Kind::Bailing2 => meta.u32_opt(&hp.key("expert_shared_feed_forward_length"))?.unwrap_or(0),
            _ => 0,
        };
        hp.expert_weights_scale = meta.f32_opt(&hp.key("expert_weights_scale"))?.unwrap_or(0.0);
        // DeepSeek's graph never normalises, whatever the file says.
        if self.kind != Kind::DeepSeek {
            hp.expert_weights_norm = meta.bool_opt(&hp.key("expert_weights_norm"))?.unwrap_or(false);
        }
        if hp.n_layer_dense_lead < hp.n_layer {
            super::check_experts(hp)?;
        }
        if gated_by_file && (hp.n_layer_dense_lead < hp.n_layer || self.kind == Kind::Bailing2) {
            // llama.cpp has no gating of its own for these: the file must say.
            let gating = meta.u32(&hp.key("expert_gating_func"))?;
            if Gating::from_llama(gating).is_none() {
                return Err(Error::NotImplemented("shared experts with that expert gating function"));
            }
            hp.expert_gating_func = gating;
        }
        if self.kind == Kind::Glm4Moe && hp.n_ff_exp == 0 {
            hp.n_ff_exp = hp.n_ff[0] / hp.n_expert_used;
        }
        // llama.cpp's GLM-4.5 graph calls the shared experts whether or not the file has them.
        if self.kind == Kind::Glm4Moe && shared == 0 && hp.n_layer_dense_lead < hp.n_layer {
            return Err(Error::NotImplemented(
                "glm4moe without shared experts (expert_shared_count 0)",
            ));
        }
        hp.n_ff_shexp = if shared_width > 0 { shared_width } else { hp.n_ff_exp } * shared;
        hp.size_label = match (&self.kind, hp.n_layer, hp.n_ff_exp) {
            (Kind::Dots, 62, _) => "142B",
            (Kind::Bailing, 28, _) | (Kind::DeepSeek, _, 1408) => "16B",
            (Kind::Bailing, 88, _) => "290B",
            (Kind::DeepSeek, _, 1792) => "20B",
            (Kind::Bailing2, 20, _) => "16B.A1B",
            (Kind::Bailing2, 32, _) => "100B.A6B",
            (Kind::Glm4Moe, 46, _) => "106B.A12B",
            (Kind::Glm4Moe, 48, _) => "102B.A12B",
            (Kind::Glm4Moe, 92, _) => "355B.A32B",
            _ => "?B",
        };
        Ok(())
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        match self.kind {
            Kind::DeepSeek => deepseek(hp),
            Kind::Dots => dots1(hp),
            Kind::Bailing => bailingmoe(hp),
            Kind::Glm4Moe => glm4moe(hp),
            Kind::Bailing2 => bailingmoe2(hp),
        }
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let common = |hp: &HParams, experts: bool| {
            let mut specs = Vec::new();
            common_tensors(hp, experts, &mut specs);
            specs
        };
        let mut specs = if self.head_norms() {
            qwen3::tensors(hp, true)
        } else {
            common(hp, true)
        };
        match self.kind {
            Kind::Dots | Kind::Bailing2 | Kind::Glm4Moe => dense_lead(hp, &mut specs, |d| qwen3::tensors(d, false)),
            Kind::DeepSeek => dense_lead(hp, &mut specs, |d| common(d, false)),
            Kind::Bailing => {}
        }
        if self.kind == Kind::Glm4Moe {
            for s in specs.iter_mut() {
                if s.name.ends_with("ffn_norm.weight") {
                    s.name = s.name.replace("ffn_norm", "post_attention_norm");
                }
                // Only GLM-4.5's largest model has head norms.
                if s.name.ends_with("attn_q_norm.weight") || s.name.ends_with("attn_k_norm.weight") {
                    s.required = false;
                }
            }
        }
        if self.kind == Kind::Bailing2 {
            // One fused projection, required, without biases.
            let separate = ["attn_q.", "attn_k.", "attn_v.", "attn_qkv.bias", "attn_output.bias"];
            specs.retain(|s| !separate.iter().any(|n| s.name.contains(n)));
            for s in specs.iter_mut().filter(|s| s.name.ends_with("attn_qkv.weight")) {
                s.required = true;
            }
        }
        // DeepSeek's and GLM-4.5's heads may be tied to the embeddings.
        if !matches!(self.kind, Kind::DeepSeek | Kind::Glm4Moe) {
            super::require_output(&mut specs);
        }
        for il in hp.n_layer_dense_lead as usize..hp.n_layer as usize {
            let b = |s: &str| format!("blk.{il}.{s}");
            if self.head_norms() {
                let required = self.kind == Kind::Glm4Moe;
                specs.push(TensorSpec::new(b("exp_probs_b.bias"), &[hp.n_expert], required));
            }
            super::shared_expert_tensors(hp, il, &mut specs);
        }
        specs
    }
}

/// DeepSeek's (the first): dense leading layers, then routed and shared experts.
fn deepseek(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        format!(
            "{ATTN} ffn_norm.weight {}",
            created::dense_lead(hp, il, &format!("{EXPERTS} {SHARED_GDU}"))
        )
    })
}

/// dots.llm1's: DeepSeek's with key and query norms and the router's selection bias.
fn dots1(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let experts = format!("ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {SHARED_GDU}");
        format!(
            "{ATTN} {KQ_NORMS} ffn_norm.weight {}",
            created::dense_lead(hp, il, &experts)
        )
    })
}

/// Ling's (`bailingmoe`): every layer routed and shared experts.
fn bailingmoe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |_| format!("{ATTN} ffn_norm.weight {EXPERTS} {SHARED_GDU}"))
}

/// GLM-4.5's: query and key norms, a norm after the attention, dense leading layers, then
/// experts with the router's selection bias and shared ones.
fn glm4moe(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        let experts = format!("ffn_gate_inp.weight exp_probs_b.bias ffn_gate_exps.weight ffn_down_exps.weight ffn_up_exps.weight {SHARED_GDU}");
        format!(
            "{ATTN} attn_q_norm.weight attn_k_norm.weight post_attention_norm.weight {}",
            created::dense_lead(hp, il, &experts)
        )
    })
}

/// Ling 2's (`bailingmoe2`): the fused projection, query and key norms, dense leading layers.
fn bailingmoe2(hp: &HParams) -> Vec<String> {
    layered(hp, HEAD, |il| {
        format!(
            "attn_norm.weight attn_qkv.weight attn_output.weight attn_q_norm.weight attn_k_norm.weight ffn_norm.weight {}",
            created::dense_lead(hp, il, BIASED_EXPERTS)
        )
    })
}

impl Decoder for SharedExperts {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        let hp = b.hp;
        if self.kind == Kind::Glm4Moe {
            super::refuse_embeddings_without_mrope(b)?;
        }
        let variant = llama::Variant {
            qk_norm: self.head_norms(),
            ffn_norm: (self.kind == Kind::Glm4Moe).then_some("post_attention_norm.weight"),
            no_wo_bias: self.kind == Kind::Glm4Moe,
            moe: Some(Moe {
                gating: Gating::from_llama(hp.expert_gating_func).unwrap_or(Gating::Softmax),
                normalize: hp.expert_weights_norm,
                ..Moe::BASE
            }),
            ..llama::Variant::BASE
        };
        llama::decoder(b, variant)
    }
}

/// GLM-4.5's rotation (M-RoPE when the first two sections are nonzero) and its routing, sigmoid
/// unless the file names another.
fn load_glm4moe(meta: &Meta, hp: &mut HParams) -> Result<()> {
    if meta.i32_array(&hp.key("rope.dimension_sections"), 4)?.is_some() {
        super::load_rope_sections(meta, hp)?;
    }
    if hp.rope_sections[0] > 0 && hp.rope_sections[1] > 0 {
        hp.rope_type = crate::ggml::ROPE_MROPE;
    }
    super::load_sigmoid_routing(meta, hp)?;
    Ok(())
}
