//! Architectures: hyper-parameters read from GGUF keys, the tensors each one expects, and the
//! graph each builds from the shared primitives in `graph/`.

pub(crate) mod gemma3;
pub(crate) mod llama;

use crate::error::{Error, Result};
use crate::model::hparams::HParams;
use crate::model::metadata::Meta;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Llama and the families that share its graph (Mistral, SmolLM, ...); Qwen2 adds biases.
    Llama,
    Qwen2,
    Gemma3,
}

impl Arch {
    pub fn from_name(name: &str) -> Result<Arch> {
        match name {
            "llama" => Ok(Arch::Llama),
            "qwen2" => Ok(Arch::Qwen2),
            "gemma3" => Ok(Arch::Gemma3),
            other => Err(Error::model(format!(
                "unknown or unsupported architecture '{other}' (supported: llama, qwen2, gemma3)"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// How positions are rotated (llama.h `enum llama_rope_type`: 0 normal, 2 NeoX).
    pub fn rope_type(self) -> i32 {
        match self {
            Arch::Llama => 0,
            Arch::Qwen2 | Arch::Gemma3 => 2,
        }
    }

    /// Read the keys only this architecture has, and fill in what it derives.
    pub fn load_hparams(self, meta: &Meta, hp: &mut HParams) -> Result<()> {
        match self {
            Arch::Llama | Arch::Qwen2 => llama::load_hparams(self, meta, hp),
            Arch::Gemma3 => gemma3::load_hparams(meta, hp),
        }
    }

    /// The tensors a file of this architecture must (or may) contain, with their shapes.
    pub fn tensors(self, hp: &HParams) -> Vec<TensorSpec> {
        match self {
            Arch::Llama | Arch::Qwen2 => llama::tensors(self, hp),
            Arch::Gemma3 => gemma3::tensors(hp),
        }
    }
}

/// One expected tensor: its GGUF name, its shape (ggml order, innermost first), whether a file
/// may leave it out, and whether the graph uses it only as the left operand of matrix products
/// (such weights may be stored in a layout only those products read: `ggml::ExtraBufferType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<u64>,
    pub required: bool,
    pub matmul_only: bool,
}

impl TensorSpec {
    fn new(name: impl Into<String>, shape: &[u32], required: bool) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            shape: shape.iter().map(|&d| d.into()).collect(),
            required,
            matmul_only: false,
        }
    }

    fn matmul(name: impl Into<String>, shape: &[u32], required: bool) -> TensorSpec {
        TensorSpec {
            matmul_only: true,
            ..TensorSpec::new(name, shape, required)
        }
    }
}

/// Tensors every decoder of this family has: embeddings, output norm, an optional separate output
/// head, and per layer the attention projections (with optional biases) and the gated FFN.
fn common_tensors(hp: &HParams, specs: &mut Vec<TensorSpec>) {
    let (e, v) = (hp.n_embd, hp.n_vocab);
    specs.push(TensorSpec::new("token_embd.weight", &[e, v], true));
    specs.push(TensorSpec::new("output_norm.weight", &[e], true));
    specs.push(TensorSpec::matmul("output.weight", &[e, v], false));
    for il in 0..hp.n_layer as usize {
        let b = |s: &str| format!("blk.{il}.{s}");
        let q = hp.n_embd_head_k * hp.n_head[il];
        let k = hp.n_embd_head_k * hp.n_head_kv[il];
        let vv = hp.n_embd_head_v * hp.n_head_kv[il];
        let ff = hp.n_ff[il];
        specs.push(TensorSpec::new(b("attn_norm.weight"), &[e], true));
        specs.push(TensorSpec::matmul(b("attn_q.weight"), &[e, q], true));
        specs.push(TensorSpec::matmul(b("attn_k.weight"), &[e, k], true));
        specs.push(TensorSpec::matmul(b("attn_v.weight"), &[e, vv], true));
        specs.push(TensorSpec::new(b("attn_q.bias"), &[q], false));
        specs.push(TensorSpec::new(b("attn_k.bias"), &[k], false));
        specs.push(TensorSpec::new(b("attn_v.bias"), &[vv], false));
        specs.push(TensorSpec::matmul(b("attn_output.weight"), &[q, e], true));
        specs.push(TensorSpec::new(b("ffn_norm.weight"), &[e], true));
        specs.push(TensorSpec::matmul(b("ffn_gate.weight"), &[e, ff], true));
        specs.push(TensorSpec::matmul(b("ffn_up.weight"), &[e, ff], true));
        specs.push(TensorSpec::matmul(b("ffn_down.weight"), &[ff, e], true));
    }
}
