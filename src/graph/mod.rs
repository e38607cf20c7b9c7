//! Building the compute graph of one ubatch shape: the input tensors every architecture declares and
//! the layer primitives (norms, rotary embedding, attention over the KV cache, gated FFNs, output
//! head) the architectures wire together. No architecture is named here: each brings its body as a
//! `Decoder` (`arch/`).
//!
//! This file holds the `Builder`, its construction and the small pieces every part uses (weights,
//! projections, norms, names); each kind of layer has a file of its own, adding its `impl Builder`.

mod attention;
mod ffn;
mod indexer;
mod inputs;
pub mod lora;
mod moe;
mod output;
mod rope;
pub mod rotation;
mod shift;
mod ssm;

pub use ffn::{Ffn, RELU_SQR_FFN};
pub use inputs::{seq_index, set_bytes, set_f32, set_i32, set_i64, set_mask, GraphInput, Rotated, UbatchView};
pub use moe::{ExpertAct, Gating, Moe};
pub use rope::rope_factors;
pub use shift::{build_shift, ShiftGraph};
pub use ssm::DeltaNet;

use crate::error::{Error, Result};
use crate::ggml::{Graph, RawType, TensorRef};
use crate::kv::{KvCache, MemoryShape};
use crate::model::hparams::HParams;
use crate::model::lora::LoraAdapter;
use crate::model::Model;
use crate::recurrent::{Recurrent, Window};
use std::collections::HashMap;
use std::sync::Arc;

/// Everything that decides a graph's structure. Two ubatches with equal shapes run the same graph;
/// only the input tensors' contents differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    pub n_tokens: usize,
    /// Attention groups: the tokens are `n_streams` runs of `n_tokens / n_streams` (one per
    /// sequence), each attending on its own, as llama.cpp's per-sequence streams do.
    pub n_streams: usize,
    /// The KV cache stream the first group attends to (the others follow it).
    pub first_stream: usize,
    /// Rows of logits to compute (the tokens whose outputs were requested).
    pub n_outputs: usize,
    /// Cells of the KV cache attention covers.
    pub n_kv: usize,
    /// Cells of the sliding-window layers' cache attention covers (0 without such layers).
    pub n_kv_swa: usize,
    /// The streams each token's keys are stored in: 1, or with a cache that writes tokens of
    /// several sequences once per sequence (`kv::KvCache::writes`), their count (read from the
    /// first token's).
    pub kv_copies: usize,
    /// Positions block-sparse attention covers (0 without it).
    pub n_pos: usize,
    /// Sequences the ubatch holds, when embeddings are pooled per sequence (0 otherwise).
    pub n_seqs: usize,
    /// For a model with recurrent layers: the ubatch's sequence groups (its tokens are
    /// `n_seqs` runs of equal length) and the state cells the graph works on.
    pub recurrent: Option<RecurrentShape>,
    /// What the cache's per-ubatch state decides (its k-pools, its compressed caches' plans).
    pub memory: MemoryShape,
    /// The first layer takes embedding rows (`inp_embd`) instead of token ids.
    pub embd_input: bool,
    /// `llama_encode`'s graph (llama.cpp's encoder graph type): its tokens attend both ways, and
    /// an encoder-decoder model builds its encoder.
    pub encoder: bool,
    /// The encoder's outputs an encoder-decoder's decoder attends to (`Cross`; 0 otherwise).
    pub n_enc: usize,
}

/// What the last `llama_encode` of an encoder-decoder model left for its decoder (llama.cpp's
/// `llama_cross`): the encoder's final hidden states and each one's sequences, which the
/// decoder's cross-attention reads until the next encode.
#[derive(Debug, Clone, Default)]
pub struct Cross {
    /// [n_enc][n_embd], row-major.
    pub rows: Vec<f32>,
    pub seqs: Vec<crate::kv::SeqSet>,
}

/// The recurrent part of a graph's shape: llama.cpp bakes the state window into views, so a
/// graph is reused only while it stays put.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecurrentShape {
    pub n_seqs: usize,
    pub window: Window,
}

/// How embeddings are reduced (llama.h's `enum llama_pooling_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// One embedding per output token.
    None,
    /// Per sequence: the mean over its tokens in the ubatch.
    Mean,
    /// Per sequence: its first token's.
    Cls,
    /// Per sequence: its last token's.
    Last,
    /// Per sequence: the scores of the model's classifier head over its first token's (its last
    /// token's in a causal model), `n_cls_out` of them.
    Rank,
}

impl Pooling {
    /// llama.h's `enum llama_pooling_type` value (-1, unspecified, is None).
    pub fn from_llama(v: i32) -> Option<Pooling> {
        Some(match v {
            0 => Pooling::None,
            1 => Pooling::Mean,
            2 => Pooling::Cls,
            3 => Pooling::Last,
            4 => Pooling::Rank,
            _ => return None,
        })
    }
}

/// How rotary positions are computed (the context works them out, `context/rope.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RopeParams {
    pub freq_base: f32,
    pub freq_scale: f32,
    pub n_ctx_orig: u32,
    pub ext_factor: f32,
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// LongRoPE models: use `rope_factors_long` (a sequence's context exceeds the trained one)
    /// rather than `rope_factors_short`.
    pub long_factors: bool,
}

/// Context parameters the graph depends on (fixed for the life of a context).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphParams {
    pub flash_attn: bool,
    pub causal: bool,
    /// A warm-up run: mixtures of experts route every expert (but sum the usual number).
    pub warmup: bool,
    pub rope: RopeParams,
    /// Output the final-norm hidden states too, pooled so (llama.h's `embeddings`).
    pub embeddings: Option<Pooling>,
    /// Walsh-Hadamard rotation sizes around a quantized cache (`rotation`): queries and keys by
    /// `k_rot`, values and the attention's output by `v_rot`; 0: none. The sliding-window
    /// layers' keys by `k_rot_swa` (their heads may be sized otherwise; llama.cpp sizes each of
    /// its caches' rotation by its own heads).
    pub k_rot: u32,
    pub k_rot_swa: u32,
    pub v_rot: u32,
    /// The lightning indexer's keys are always rotated, by their whole head (0: no indexer).
    pub idx_rot: u32,
    /// Block-sparse attention runs (a model with indexer blocks): it needs flash attention and a
    /// stream per sequence (or one sequence); llama.cpp attends densely otherwise.
    pub block_sparse: bool,
    /// Training with the whole context in each ubatch: attention reads the ubatch's own keys and
    /// values, not the cache, so that gradients reach their projections (as llama.cpp's
    /// `cparams.training`).
    pub training: bool,
}

/// The inputs of a built graph, set before every compute.
pub struct Inputs {
    /// Token ids, I32 [n_tokens] (None when the graph takes embeddings).
    pub tokens: Option<TensorRef>,
    /// Input embeddings, F32 [n_embd, n_tokens] (only when the graph takes them).
    pub embd: Option<TensorRef>,
    /// Positions, I32 [n_tokens]; only in graphs that rotate (a graph that never reads them
    /// would leave them without memory).
    pub pos: Option<TensorRef>,
    /// Cache rows the new K/V land in, I64 [n_tokens]; only in graphs that use the cache. The
    /// values' rows are a second input of the same rows, as in llama.cpp's graphs.
    pub kv_rows: Option<TensorRef>,
    pub v_rows: Option<TensorRef>,
    /// The same for the sliding-window layers, whose cells are their own.
    pub kv_rows_swa: Option<TensorRef>,
    pub v_rows_swa: Option<TensorRef>,
    /// Attention mask [n_kv, n_tokens] (F16 with flash attention, F32 otherwise); made by the
    /// first attention layer.
    pub mask: Option<TensorRef>,
    /// The sliding-window mask, made by the first sliding-window layer.
    pub mask_swa: Option<TensorRef>,
    /// The masks are the ubatch's own, [n_tokens, n_tokens] (attention without the cache, even
    /// in a context that keeps one), not the cache's.
    pub mask_in_ubatch: bool,
    /// Where each state cell of the window is copied from, I32 [window.n]; in graphs with
    /// recurrent layers.
    pub s_copy: Option<TensorRef>,
    /// Rows of the last layer to keep (the requested outputs), I32 [n_outputs]; None when all are.
    pub out_ids: Option<TensorRef>,
    /// Mean pooling weights, F32 [n_tokens, n_seqs]: 1/len where a token belongs to a sequence.
    pub mean: Option<TensorRef>,
    /// First or last pooling: the row of each sequence's token, I32 [n_seqs].
    pub cls: Option<TensorRef>,
    /// The Hadamard matrices of `GraphParams::k_rot` and `v_rot`, F32 [n, n]; in graphs that
    /// rotate.
    pub k_rot: Option<TensorRef>,
    pub k_rot_swa: Option<TensorRef>,
    pub v_rot: Option<TensorRef>,
    /// The Hadamard matrix of `GraphParams::idx_rot`; in graphs with a lightning indexer.
    pub idx_rot: Option<TensorRef>,
    /// Per-token query scales of attention temperature tuning, F32
    /// [1, 1, n_tokens]; made by the first layer that uses it.
    pub attn_temp: Option<TensorRef>,
    /// The LoRA adapters' scale factors; in graphs with an adapted weight.
    pub lora: Option<lora::LoraScales>,
    /// The inputs of the mechanisms the graph uses beyond these, each made by its first user.
    mechanisms: Vec<Box<dyn GraphInput>>,
}

impl Inputs {
    /// The mechanism inputs of type `T` made so far.
    pub fn of<T: GraphInput>(&self) -> impl Iterator<Item = &T> {
        self.mechanisms
            .iter()
            .filter_map(|m| (m.as_ref() as &dyn std::any::Any).downcast_ref::<T>())
    }

    /// Keep a mechanism's inputs, which fill themselves before every compute.
    pub fn add(&mut self, input: impl GraphInput) {
        self.mechanisms.push(Box::new(input));
    }

    /// Fill the mechanisms' inputs for the ubatch `ub`.
    pub fn set_mechanisms(&self, ub: &UbatchView) -> Result<()> {
        self.mechanisms.iter().try_for_each(|m| m.set(ub))
    }
}

/// A graph ready to run: its inputs, its logits output [n_vocab, n_outputs] (none from an
/// encoder) and, with embeddings, the embeddings output ([n_embd, n_outputs], or [n_embd, n_seqs]
/// pooled, [n_cls_out, n_seqs] ranked).
pub struct Built {
    pub graph: Graph,
    pub inputs: Inputs,
    pub logits: Option<TensorRef>,
    pub embd: Option<TensorRef>,
    /// The final-norm hidden states of the outputs, [n_embd, n_outputs] (what an encoder hands
    /// its decoder).
    pub hidden: Option<TensorRef>,
}

/// Mask element type for the chosen attention path.
pub fn mask_type(flash_attn: bool) -> RawType {
    if flash_attn {
        ggml_sys::ggml_type_GGML_TYPE_F16
    } else {
        ggml_sys::ggml_type_GGML_TYPE_F32
    }
}

/// Enough graph nodes for any supported architecture: an allowance per layer, and at least
/// llama.cpp's 8 per weight tensor, as the weights are leaves the scheduler must hold beside the
/// nodes (a model with every optional bias and scale has many).
pub fn max_nodes(model: &Model) -> usize {
    let per_layer = |h: &HParams| h.n_layer as usize * (64 + 2 * h.n_expert_used as usize);
    let per_weight = 8 * model.weights().map_or(0, |w| w.names().count());
    model.hparams.as_ref().map_or(0, per_layer).max(per_weight).max(1024)
}

/// What a context applies beyond the model: LoRA adapters (in order) and a control vector's
/// direction per layer (none where it does not apply).
#[derive(Clone, Copy, Default)]
pub struct Adapters<'a> {
    pub loras: &'a [Arc<LoraAdapter>],
    pub cvec: &'a [Option<TensorRef>],
}

/// An architecture's graph: from the inputs `Builder::build` declares to the logits (None for an
/// encoder, whose output is its hidden states, `Builder::set_hidden`).
pub trait Decoder: Sync {
    fn build(&self, b: &mut Builder) -> Result<Option<TensorRef>>;

    /// Whether llama.cpp's graph multiplies weight `stem` (`attn_q_a` for `blk.N.attn_q_a.weight`,
    /// `output` for `output.weight`) of `layer` without its LoRA adapters: its latent-attention,
    /// indexer and linear-attention projections call `ggml_mul_mat` rather than `build_lora_mm`.
    fn without_adapters(&self, _hp: &HParams, _stem: &str, _layer: Option<usize>) -> bool {
        false
    }

    /// Whether its graph adds the control vector (llama.h's is accepted, and has no effect, where
    /// llama.cpp's graph adds none).
    fn takes_control_vector(&self) -> bool {
        true
    }
}

/// Where a projection's weight scale goes: attention projections are scaled before their bias;
/// FFN projections after it, and only in the architectures whose graphs pass the scales.
#[derive(Clone, Copy)]
enum Order {
    ScaleThenBias,
    BiasThenScale { scaled: bool },
}

pub struct Builder<'a> {
    pub g: Graph,
    pub model: &'a Model,
    /// The architecture's body, asked for its facts while its graph is built.
    decoder: &'a dyn Decoder,
    pub hp: &'a HParams,
    pub kv: &'a KvCache,
    pub rs: Option<&'a Recurrent>,
    pub shape: Shape,
    pub params: GraphParams,
    pub inputs: Inputs,
    /// The final-norm hidden states the output head reads (the embeddings).
    hidden: Option<TensorRef>,
    /// The state-copy input's views for the ubatch's sequences and the window's other cells.
    rs_copy: Option<(TensorRef, TensorRef)>,
    /// The LoRA adapters and control vector the graph applies.
    adapters: Adapters<'a>,
    /// The scales input's slot of each (adapter, weight) used so far.
    lora_slots: HashMap<(usize, String), usize>,
    /// Input rows `n_embd_inp` wide, whose features after the first `n_embd` values the first
    /// layers add to their outputs (deepstack; `HParams::n_deepstack`).
    deepstack: Option<TensorRef>,
}

/// A ggml error met while building a graph says so: ggml's messages name the op that failed, and
/// the same op also fails in other places (sampler graphs, cache copies).
fn in_graph(e: Error) -> Error {
    match e {
        Error::Ggml(msg) => Error::Ggml(format!("graph: {msg}")),
        e => e,
    }
}

impl<'a> Builder<'a> {
    /// Build the graph of `shape` for `model`, whose architecture's body is `decoder`, over the
    /// context's attention cache `kv` and recurrent states `rs`, applying the LoRA adapters
    /// and control vector `adapters`, with room for `extra_nodes` more (what backend samplers append).
    pub fn build(
        model: &'a Model,
        decoder: &'a dyn Decoder,
        memories: (&'a KvCache, Option<&'a Recurrent>),
        shape: Shape,
        settings: (GraphParams, Adapters<'a>),
        extra_nodes: usize,
    ) -> Result<Built> {
        Self::assemble(model, decoder, memories, shape, settings, extra_nodes).map_err(in_graph)
    }

    /// `build`, its ggml errors not yet marked as the graph's.
    fn assemble(
        model: &'a Model,
        decoder: &'a dyn Decoder,
        (kv, rs): (&'a KvCache, Option<&'a Recurrent>),
        shape: Shape,
        (params, adapters): (GraphParams, Adapters<'a>),
        extra_nodes: usize,
    ) -> Result<Built> {
        let hp = model
            .hparams
            .as_ref()
            .ok_or_else(|| Error::invalid("the model was loaded vocab-only"))?;
        let mut g =
            Graph::new(max_nodes(model) + extra_nodes + lora::extra_nodes(adapters.loras) + adapters.cvec.len())?;
        let nt = shape.n_tokens as i64;
        let i32t = ggml_sys::ggml_type_GGML_TYPE_I32;
        let tokens = match shape.embd_input {
            false => Some(g.input(i32t, &[nt], "inp_tokens")?),
            true => None,
        };
        let embd = match shape.embd_input {
            true => Some(g.input(
                ggml_sys::ggml_type_GGML_TYPE_F32,
                &[i64::from(hp.n_embd_inp()), nt],
                "inp_embd",
            )?),
            false => None,
        };
        let out_ids = if shape.n_outputs < shape.n_tokens {
            Some(g.input(i32t, &[shape.n_outputs as i64], "out_ids")?)
        } else {
            None
        };
        let mut b = Builder {
            g,
            model,
            decoder,
            hp,
            kv,
            rs,
            shape,
            params,
            inputs: Inputs {
                tokens,
                embd,
                pos: None,
                kv_rows: None,
                v_rows: None,
                kv_rows_swa: None,
                v_rows_swa: None,
                mask: None,
                mask_swa: None,
                mask_in_ubatch: false,
                s_copy: None,
                out_ids,
                mean: None,
                cls: None,
                k_rot: None,
                k_rot_swa: None,
                v_rot: None,
                idx_rot: None,
                attn_temp: None,
                lora: None,
                mechanisms: Vec::new(),
            },
            hidden: None,
            rs_copy: None,
            adapters,
            lora_slots: HashMap::new(),
            deepstack: None,
        };
        let logits = decoder.build(&mut b)?;
        // An encoder's graph computes its hidden states even when nobody asks for embeddings.
        if let Some(out) = logits.or(b.hidden) {
            b.g.output(out);
        }
        let embd = match params.embeddings {
            Some(pooling) => Some(b.pooled_embeddings(pooling)?),
            None => None,
        };
        Ok(Built {
            graph: b.g,
            inputs: b.inputs,
            logits,
            embd,
            hidden: b.hidden,
        })
    }

    /// A weight tensor; `None` when the (optional) tensor is absent.
    pub fn weight_opt(&self, name: &str) -> Option<TensorRef> {
        self.model.weights().and_then(|w| w.get(name))
    }

    pub fn weight(&self, name: &str) -> Result<TensorRef> {
        self.weight_opt(name)
            .ok_or_else(|| Error::model(format!("missing tensor '{name}'")))
    }

    /// `blk.{il}.{name}`.
    pub fn layer_weight(&self, il: usize, name: &str) -> Result<TensorRef> {
        self.weight(&format!("blk.{il}.{name}"))
    }

    pub fn layer_weight_opt(&self, il: usize, name: &str) -> Option<TensorRef> {
        self.weight_opt(&format!("blk.{il}.{name}"))
    }

    /// Give `t` the name llama.cpp's graphs give the same value ("attn_norm-3", "result_norm"),
    /// which `cb_eval` clients select tensors by (llama-eval-callback, llama-imatrix,
    /// llama-cvector-generator's `l_out-N`).
    pub fn name(&mut self, t: TensorRef, name: &str, il: Option<usize>) -> TensorRef {
        match il {
            Some(il) => self.g.set_name(t, &format!("{name}-{il}")),
            None => self.g.set_name(t, name),
        }
        t
    }

    /// The output of layer `il`: `x` plus the control vector's direction for the layer, if any
    /// (llama.cpp's `build_cvec`), named `l_out`.
    pub fn layer_out(&mut self, x: TensorRef, il: usize) -> Result<TensorRef> {
        let x = self.add_cvec(x, il)?;
        let x = self.name(x, "l_out", Some(il));
        self.add_deepstack(x, il)
    }

    /// `x` plus layer `il`'s deepstack features (the input rows' values `n_embd·(il+1)` on), in
    /// the first `n_deepstack` layers.
    fn add_deepstack(&mut self, x: TensorRef, il: usize) -> Result<TensorRef> {
        let Some(rows) = self.deepstack.filter(|_| il < self.hp.n_deepstack as usize) else {
            return Ok(x);
        };
        let n_embd = self.hp.n_embd as usize;
        let features = self.g.view(
            rows,
            &[n_embd as i64, rows.ne()[1]],
            &[rows.nb()[1]],
            (il + 1) * n_embd * std::mem::size_of::<f32>(),
        )?;
        let x = self.g.add(x, features)?;
        Ok(self.name(x, "deepstack_out", Some(il)))
    }

    /// `x` plus the control vector's direction for layer `il`, if any.
    pub fn add_cvec(&mut self, x: TensorRef, il: usize) -> Result<TensorRef> {
        match self.adapters.cvec.get(il).copied().flatten() {
            Some(dir) => self.g.add(x, dir).map_err(Error::from),
            None => Ok(x),
        }
    }

    /// RMS norm of `x` scaled by the weight `w`.
    pub fn rms_norm(&mut self, x: TensorRef, w: TensorRef) -> Result<TensorRef> {
        let n = self.g.rms_norm(x, self.hp.rms_eps)?;
        self.g.mul(n, w).map_err(Error::from)
    }

    /// `blk.{il}.{name}.weight` times `x`, plus `blk.{il}.{name}.bias` when present.
    pub fn layer_linear(&mut self, il: usize, name: &str, x: TensorRef) -> Result<TensorRef> {
        let w = self.layer_weight(il, &format!("{name}.weight"))?;
        let bias = self.layer_weight_opt(il, &format!("{name}.bias"));
        self.linear(w, bias, x)
    }

    /// The optional per-tensor (or per-expert) scale of the weight `w` (`<name>.scale` beside
    /// `<name>.weight`), which its products are multiplied by.
    fn weight_scale(&self, w: TensorRef) -> Option<TensorRef> {
        let name = w.name();
        self.weight_opt(&format!("{}.scale", name.strip_suffix(".weight")?))
    }

    /// `blk.{il}.{name}` times `x`, without bias or scale (where llama.cpp's graph leaves them out).
    pub fn layer_matmul(&mut self, il: usize, name: &str, x: TensorRef) -> Result<TensorRef> {
        let w = self.layer_weight(il, name)?;
        self.weight_mm(w, x)
    }

    /// `w x`, times `w`'s scale when it has one, plus the bias `b` when there is one.
    pub fn linear(&mut self, w: TensorRef, b: Option<TensorRef>, x: TensorRef) -> Result<TensorRef> {
        self.project(w, b, x, Order::ScaleThenBias)
    }

    /// `w x` times the scale `s` llama.cpp keeps under another name than `w`'s, with `w`'s
    /// adapters.
    pub fn linear_scaled(&mut self, w: TensorRef, s: Option<TensorRef>, x: TensorRef) -> Result<TensorRef> {
        let mut y = self.g.mul_mat(w, x)?;
        if let Some(s) = s {
            y = self.g.mul(y, s)?;
        }
        self.add_lora(w, x, y, None)
    }

    /// `w x` with its bias and scale in the order llama.cpp applies them.
    fn project(&mut self, w: TensorRef, b: Option<TensorRef>, x: TensorRef, order: Order) -> Result<TensorRef> {
        self.project_named(w, b, x, order, None)
    }

    /// `project`, with each step named as llama.cpp's FFNs name them where `label` is given
    /// ("ffn_up-3", then "ffn_up_b-3" after the bias and "ffn_up_s-3" after the scale).
    fn project_named(
        &mut self,
        w: TensorRef,
        b: Option<TensorRef>,
        x: TensorRef,
        order: Order,
        label: Option<(&str, usize)>,
    ) -> Result<TensorRef> {
        let mut y = self.g.mul_mat(w, x)?;
        let step = |bd: &mut Builder, t: TensorRef, suffix: &str| match label {
            Some((l, il)) => bd.name(t, &format!("{l}{suffix}"), Some(il)),
            None => t,
        };
        let (bias_first, scaled) = match order {
            Order::ScaleThenBias => (false, true),
            Order::BiasThenScale { scaled } => (true, scaled),
        };
        // The adapters' parts join the product before its bias and scale, except where the
        // scale is applied first (llama.cpp's `build_lora_mm` with the weight's scale).
        if bias_first {
            y = self.add_lora(w, x, y, None)?;
        }
        y = step(self, y, "");
        if let (Some(b), true) = (b, bias_first) {
            y = self.g.add(y, b)?;
            y = step(self, y, "_b");
        }
        if let Some(s) = self.weight_scale(w).filter(|_| scaled) {
            y = self.g.mul(y, s)?;
            y = step(self, y, "_s");
        }
        if !bias_first {
            y = self.add_lora(w, x, y, None)?;
        }
        if let (Some(b), false) = (b, bias_first) {
            y = self.g.add(y, b)?;
        }
        Ok(y)
    }

    /// Layer norm of `x` (mean and variance over each row), scaled by `w` and shifted by `b`.
    pub fn layer_norm(&mut self, x: TensorRef, w: TensorRef, b: TensorRef) -> Result<TensorRef> {
        let n = self.g.norm(x, self.hp.norm_eps)?;
        let n = self.g.mul(n, w)?;
        self.g.add(n, b).map_err(Error::from)
    }

    /// RMS norm of `x` by layer `il`'s weight `blk.{il}.{weight}`, named `{label}-{il}`.
    pub fn layer_rms_norm(&mut self, il: usize, x: TensorRef, weight: &str, label: &str) -> Result<TensorRef> {
        let w = self.layer_weight(il, weight)?;
        let n = self.g.rms_norm(x, self.hp.rms_eps)?;
        let n = self.name(n, "norm", Some(il));
        let y = self.g.mul(n, w)?;
        Ok(self.name(y, label, Some(il)))
    }

    pub fn add(&mut self, a: TensorRef, b: TensorRef) -> Result<TensorRef> {
        self.g.add(a, b).map_err(Error::from)
    }

    pub fn scale(&mut self, a: TensorRef, s: f32) -> Result<TensorRef> {
        self.g.scale(a, s).map_err(Error::from)
    }

    pub fn tanh(&mut self, a: TensorRef) -> Result<TensorRef> {
        self.g.tanh(a).map_err(Error::from)
    }

    /// cap * tanh(x * scale / cap): soft capping as llama.cpp builds it (scale 1 for the
    /// attention and logit soft caps, an output scale for attention scores).
    pub fn soft_cap(&mut self, x: TensorRef, scale: f32, cap: f32) -> Result<TensorRef> {
        let x = self.scale(x, scale / cap)?;
        let x = self.tanh(x)?;
        self.scale(x, cap)
    }
}

/// Whether layer `il` attends through the sliding window.
pub fn is_sliding(hp: &HParams, il: usize) -> bool {
    hp.n_swa > 0 && hp.swa_layers.get(il).copied().unwrap_or(false)
}
