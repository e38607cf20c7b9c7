//! What loading (and saving) a model needs from its architecture: the keys it reads and the tensors
//! it expects.
//! `arch/` implements this for each architecture (with the graph each builds); the loader only
//! sees this trait, so the model layer knows no architecture.

use super::hparams::HParams;
use super::metadata::Meta;
use super::saver::Rule;
use crate::error::Result;

/// What an architecture is, as data: each field has a base value (`Facts::BASE`), so an
/// architecture states only where it differs (`&Facts { name: .., ..Facts::BASE }`).
pub struct Facts {
    /// `general.architecture` of its files.
    pub name: &'static str,
    /// A short note on what it is or how it differs from its kin (Markdown, one line): its line
    /// in docs/architectures.md, which a test in `arch` renders from the registry.
    pub about: &'static str,
    /// How positions are rotated (llama.h `enum llama_rope_type`).
    pub rope_type: i32,
    /// The hyper-parameter keys (without the `{arch}.` prefix) llama.cpp's loader reads for this
    /// architecture beyond those it reads for all (`saver::COMMON`), in groups that kin share: its
    /// saver writes the value it holds, so a key it does not read is saved with llama.cpp's
    /// default whatever the file says. Read from llama.cpp 0.3.36's `load_arch_hparams` (the keys
    /// its saver writes only).
    pub read_keys: &'static [&'static [&'static str]],
    /// The keys (without the prefix) whose value llama.cpp's loader arrives at otherwise for this
    /// architecture than for others (another default, or a value it sets itself), with how: its
    /// saver writes that value.
    pub saved_rules: &'static [(&'static str, Rule)],
    /// Layer tensors (named after `blk.N.`) llama.cpp loads into another member of its
    /// `llama_layer` than other architectures do, and that member: its saver writes them in that
    /// member's place (MiniMax-01's `attn_gate.weight` is its `wg`, others' `wqkv_gate`).
    pub layer_members: &'static [(&'static str, &'static str)],
    /// What a context keeps between calls.
    pub memory: Memory,
    /// Whether its recurrent state can keep rollback snapshots (`n_rs_seq`), as llama.cpp's
    /// `llm_arch_supports_rs_rollback` says.
    pub rollback: bool,
    /// Whether the graph ends in an output head (the token embeddings when the file has no
    /// `output.weight`); encoders have none.
    pub has_output_head: bool,
    /// Whether it is a diffusion model (`llama_model_is_diffusion`, llama.cpp's
    /// `llm_arch_is_diffusion`): its programs generate by unmasking, not token by token.
    pub is_diffusion: bool,
    /// Whether it has an encoder `llama_encode` runs while the context keeps its memory
    /// (`llama_model_has_encoder`), and a decoder `llama_decode` runs (`llama_model_has_decoder`).
    pub has_encoder: bool,
    pub has_decoder: bool,
    /// Whether llama.cpp's saver writes its models (`llama_model_saver_supports_arch`; it aborts
    /// on the others, whose `llama_model_save_to_file` is refused here with a log line).
    pub saved: bool,
    /// Layer weights (by base name, e.g. `attn_gate`) whose optional scales llama.cpp's generic
    /// pass does not create for this architecture: its loader keeps them in a member the pass
    /// does not look at.
    pub unscaled_weights: &'static [&'static str],
    /// Whether `llama_model_n_swa` reports its sliding window: not where other caches beside it
    /// make the window useless for rolling back (DeepSeek-V4, as llama.cpp answers).
    pub reports_window: bool,
}

impl Facts {
    /// A decoder with a KV cache and an output head, rotating as Llama does, reading no key of
    /// its own: what an architecture is unless it says otherwise.
    pub const BASE: Facts = Facts {
        name: "",
        about: "",
        rope_type: ROPE_NORMAL,
        read_keys: &[],
        saved_rules: &[],
        layer_members: &[],
        memory: Memory::KvCache,
        rollback: false,
        has_output_head: true,
        is_diffusion: false,
        has_encoder: false,
        has_decoder: true,
        saved: true,
        unscaled_weights: &[],
        reports_window: true,
    };

    /// Whether llama.cpp's loader reads `key` (without the prefix) for it.
    pub fn reads(&self, key: &str) -> bool {
        self.read_keys.iter().any(|group| group.contains(&key))
    }
}

/// llama.h's `LLAMA_ROPE_TYPE_NONE`: positions are not rotated. The other values are ggml's modes.
pub const ROPE_NONE: i32 = -1;
pub use crate::ggml::{ROPE_IMROPE, ROPE_MROPE, ROPE_NEOX, ROPE_NORMAL};

pub trait ArchSpec: Sync {
    /// Its facts.
    fn facts(&self) -> &Facts;

    /// Read the keys only this architecture has, and fill in what it derives.
    fn load_hparams(&self, meta: &Meta, hp: &mut HParams) -> Result<()>;

    /// The tensors a file of this architecture must (or may) contain, with their shapes.
    fn tensors(&self, hp: &HParams) -> Vec<TensorSpec>;

    /// The tensors llama.cpp's loader creates for this architecture when a model is made without
    /// a file (`llama_model_init_from_user`): every one it asks for, the optional ones included,
    /// in its order, a name again where llama.cpp makes a copy per layer (rotary factors); the
    /// weights' scales come after, added by the model layer. Checked against llama.cpp's calls.
    fn created_tensors(&self, hp: &HParams) -> Vec<String>;

    /// The block whose weights layer `il` runs (HRM-Text's cycles run the same blocks again
    /// under later layer numbers, and llama.cpp's generic pass gives every layer its own scales).
    fn weights_of_layer(&self, _hp: &HParams, il: usize) -> usize {
        il
    }
}

/// The memory an architecture's contexts keep (llama.cpp's `create_memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    /// Keys and values of past tokens, per layer.
    KvCache,
    /// One state per sequence and layer, updated token by token (Mamba).
    Recurrent,
    /// Both: a KV cache for the attention layers, recurrent state for the others.
    Hybrid,
    /// DeepSeek-V4's: a sliding-window cache of keys, beside which each compressing layer keeps
    /// keys compressed by 4 or 128 positions and rings of compressor states
    /// (`kv::compressed`).
    Compressed,
    /// None: every batch is encoded on its own (BERT-style encoders); `llama_decode` encodes.
    None,
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
    /// A tensor whose presence makes this one optional (separate projections a fused one
    /// replaces).
    pub unless: Option<String>,
    /// Another shape the file may give it instead (Laguna's attention gate: one value per head
    /// or per element).
    pub or_shape: Option<Vec<u64>>,
    /// The file may give it more rows (outermost dimension) than `shape` (a padded table).
    pub more_rows: bool,
    /// A table of ids the graph indexes with, which must be I32 (DeepSeek-V4's token-to-expert
    /// table).
    pub ids: bool,
}

impl TensorSpec {
    pub fn new(name: impl Into<String>, shape: &[u32], required: bool) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            shape: shape.iter().map(|&d| d.into()).collect(),
            required,
            matmul_only: false,
            unless: None,
            or_shape: None,
            more_rows: false,
            ids: false,
        }
    }

    /// The same, for a table of I32 ids.
    pub fn ids(self) -> TensorSpec {
        TensorSpec { ids: true, ..self }
    }

    /// The same, also accepting more rows than `shape` has.
    pub fn at_least(self) -> TensorSpec {
        TensorSpec {
            more_rows: true,
            ..self
        }
    }

    /// The same, also accepting `shape` instead.
    pub fn or_shape(self, shape: &[u32]) -> TensorSpec {
        TensorSpec {
            or_shape: Some(shape.iter().map(|&d| d.into()).collect()),
            ..self
        }
    }

    /// Required unless the file has `other` instead.
    pub fn unless(self, other: impl Into<String>) -> TensorSpec {
        TensorSpec {
            unless: Some(other.into()),
            ..self
        }
    }

    pub fn matmul(name: impl Into<String>, shape: &[u32], required: bool) -> TensorSpec {
        TensorSpec {
            matmul_only: true,
            ..TensorSpec::new(name, shape, required)
        }
    }
}

/// `specs` with, for each layer's matrix (`blk.*`, a left operand of matrix products), the
/// optional `.scale` its products are multiplied by and the `.input_scale` llama.cpp loads but
/// does not use (one value, or one per expert of a stack), as llama.cpp accepts them for every
/// architecture (per-tensor scales of formats such as NVFP4).
pub fn with_weight_scales(mut specs: Vec<TensorSpec>) -> Vec<TensorSpec> {
    let mut scales = Vec::new();
    for s in specs.iter().filter(|s| s.matmul_only && s.name.starts_with("blk.")) {
        let Some(stem) = s.name.strip_suffix(".weight") else {
            continue;
        };
        let n = s.shape.get(2).copied().unwrap_or(1);
        for suffix in ["scale", "input_scale"] {
            scales.push(TensorSpec {
                shape: vec![n],
                ..TensorSpec::new(format!("{stem}.{suffix}"), &[], false)
            });
        }
    }
    specs.append(&mut scales);
    specs
}
