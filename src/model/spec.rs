//! What loading a model needs from its architecture: the keys it reads and the tensors it expects.
//! `arch/` implements this for each architecture (with the graph each builds); the loader only
//! sees this trait, so the model layer knows no architecture.

use super::hparams::HParams;
use super::metadata::Meta;
use crate::error::Result;

pub trait ArchSpec: Sync {
    /// `general.architecture` of its files.
    fn name(&self) -> &'static str;

    /// How positions are rotated (llama.h `enum llama_rope_type`: 0 normal, 2 NeoX).
    fn rope_type(&self) -> i32;

    /// Read the keys only this architecture has, and fill in what it derives.
    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()>;

    /// The tensors a file of this architecture must (or may) contain, with their shapes.
    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec>;
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
    pub fn new(name: impl Into<String>, shape: &[u32], required: bool) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            shape: shape.iter().map(|&d| d.into()).collect(),
            required,
            matmul_only: false,
        }
    }

    pub fn matmul(name: impl Into<String>, shape: &[u32], required: bool) -> TensorSpec {
        TensorSpec {
            matmul_only: true,
            ..TensorSpec::new(name, shape, required)
        }
    }
}
