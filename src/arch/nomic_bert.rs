//! Nomic BERT (nomic-embed-text): BERT's encoder with rotary positions instead of a position
//! table and a SwiGLU FFN (whose biases llama.cpp loads but does not apply). Nomic BERT MoE
//! (nomic-embed-text-v2-moe): the same with BERT's GELU FFN, and GELU experts without a gate
//! instead in every `moe_every_n_layers`-th layer (the second of each period).

use super::bert;
use crate::error::Result;
use crate::ggml::TensorRef;
use crate::graph::{Builder, Decoder};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;
use crate::model::spec::{ArchSpec, Facts, TensorSpec};

/// Nomic BERT MoE's variant: rotation, GELU FFNs.
const NOMIC_MOE: bert::Variant = bert::Variant {
    rope: true,
    gated: false,
};

pub const NOMIC_BERT: bert::Member = bert::Member {
    facts: Facts {
        name: "nomic-bert",
        about: "An encoder with rotary positions and SwiGLU: no cache, `llama_encode`, which `llama_decode` \
            calls for it as llama.cpp does; one ubatch per batch.",
        ..bert::LAYER_NORMED
    },
    variant: bert::Variant {
        rope: true,
        gated: true,
    },
    size_label: |hp| if hp.n_layer == 12 { "137M" } else { "?B" },
};

pub struct NomicBertMoe;

/// Whether layer `il` has experts rather than an FFN.
fn has_experts(hp: &HParams, il: usize) -> bool {
    hp.moe_every_n_layers > 0 && il % hp.moe_every_n_layers as usize == 1
}

impl ArchSpec for NomicBertMoe {
    fn facts(&self) -> &Facts {
        &Facts {
            name: "nomic-bert-moe",
            about: "An encoder with rotary positions, GELU FFNs and GELU experts on every other layer: no cache, \
                `llama_encode`, which `llama_decode` calls for it as llama.cpp does; one ubatch per batch.",
            read_keys: &[super::READS_NORM_EPS, &["moe_every_n_layers"]],
            ..super::ENCODER
        }
    }

    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        bert::load_hparams(meta, hp)?;
        hp.moe_every_n_layers = meta.u32_opt(&hp.key("moe_every_n_layers"))?.unwrap_or(0);
        hp.size_label = if hp.n_layer == 12 { "475M" } else { "?B" };
        Ok(())
    }

    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec> {
        let (e, ne) = (hp.n_embd, hp.n_expert);
        let mut specs = bert::tensors(hp, NOMIC_MOE);
        for il in (0..hp.n_layer as usize).filter(|&il| has_experts(hp, il)) {
            let b = |s: &str| format!("blk.{il}.{s}");
            let ff = hp.n_ff[il];
            specs.retain(|s| !s.name.starts_with(&b("ffn_")));
            specs.push(TensorSpec::matmul(b("ffn_up_exps.weight"), &[e, ff, ne], true));
            specs.push(TensorSpec::matmul(b("ffn_down_exps.weight"), &[ff, e, ne], true));
            specs.push(TensorSpec::new(b("ffn_gate_inp.weight"), &[e, ne], true));
        }
        specs
    }

    fn created_tensors(&self, hp: &HParams) -> Vec<String> {
        let mut names = bert::bert(hp, NOMIC_MOE);
        for il in (0..hp.n_layer as usize).filter(|&il| has_experts(hp, il)) {
            let ffn = format!("blk.{il}.ffn_");
            if let Some(at) = names.iter().position(|n| n.starts_with(&ffn)) {
                names.retain(|n| !n.starts_with(&ffn));
                let experts = ["ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_inp.weight"];
                names.splice(at..at, experts.map(|n| format!("blk.{il}.{n}")));
            }
        }
        names
    }
}

impl Decoder for NomicBertMoe {
    fn takes_control_vector(&self) -> bool {
        false
    }

    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>> {
        bert::encoder(b, NOMIC_MOE)
    }
}
