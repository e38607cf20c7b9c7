//! Building the compute graph of one ubatch shape: the input tensors every architecture declares and
//! the layer primitives (norms, rotary embedding, attention over the KV cache, gated FFNs, output
//! head) the architectures wire together. No architecture is named here: each brings its body as a
//! `Decoder` (`arch/`).

pub mod dsv4;
mod indexer;
pub mod kpool;
pub mod lightning;
pub mod lora;
pub mod msa;
pub mod ple;
pub mod qsa;
pub mod rotation;
mod shift;
mod ssm;

pub use shift::{build_shift, ShiftGraph};
pub use ssm::DeltaNet;

use crate::error::{Error, Result};
use crate::ggml::{Graph, RawType, Scores, TensorRef};
use crate::kv::KvCache;
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
    /// The streams each token's keys are stored in: 1, or DeepSeek-V4's per-sequence caches'
    /// count for tokens of several sequences (written once per sequence, read from the first
    /// token's).
    pub kv_copies: usize,
    /// Positions MiniMax-M3's block-sparse attention covers (0 without it).
    pub n_pos: usize,
    /// Sequences the ubatch holds, when embeddings are pooled per sequence (0 otherwise).
    pub n_seqs: usize,
    /// For a model with recurrent layers: the ubatch's sequence groups (its tokens are
    /// `n_seqs` runs of equal length) and the state cells the graph works on.
    pub recurrent: Option<RecurrentShape>,
    /// GLM5-Next's k-pool indexer: the pools the graph scores and pools.
    pub kpool: Option<crate::kv::kpool::KpoolShape>,
    /// DeepSeek-V4's compressed caches: each one's plan sizes (`kv::compressed::Kind` order).
    pub comp: Option<[crate::kv::compressed::PlanShape; 3]>,
    /// The first layer takes embedding rows (`inp_embd`) instead of token ids.
    pub embd_input: bool,
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
    /// `k_rot`, values and the attention's output by `v_rot`; 0: none.
    pub k_rot: u32,
    pub v_rot: u32,
    /// The lightning indexer's keys are always rotated, by their whole head (0: no indexer).
    pub idx_rot: u32,
    /// MiniMax-M3's block-sparse attention runs: it needs flash attention and a stream per
    /// sequence (or one sequence); llama.cpp attends densely otherwise.
    pub msa: bool,
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
    pub v_rot: Option<TensorRef>,
    /// The Hadamard matrix of `GraphParams::idx_rot`; in graphs with a lightning indexer.
    pub idx_rot: Option<TensorRef>,
    /// Per-token query scales of attention temperature tuning (Llama 4, Mistral Large), F32
    /// [1, 1, n_tokens]; made by the first layer that uses it.
    pub attn_temp: Option<TensorRef>,
    /// Lightning attention's decay inputs (MiniMax-01); made by the first lightning layer.
    pub lightning: Option<lightning::LightningInputs>,
    /// Block-sparse attention's position maps (MiniMax-M3); made by the first sparse layer.
    pub msa: Option<msa::MsaInputs>,
    /// Qwen4-exp's sparse attention block maps, one set per block size.
    pub qsa: Vec<qsa::QsaInputs>,
    /// Qwen4-exp's PLE table rows, I32 [n_heads * n_tokens].
    pub ple_rows: Option<TensorRef>,
    /// GLM5-Next's k-pool indexer inputs; made by the first indexer layer.
    pub kpool: Option<kpool::KpoolInputs>,
    /// DeepSeek-V4's compressed caches' inputs (`kv::compressed::Kind` order), each made by the
    /// first layer using it.
    pub comp: [Option<dsv4::CompInputs>; 3],
    /// The LoRA adapters' scale factors; in graphs with an adapted weight.
    pub lora: Option<lora::LoraScales>,
}

/// A graph ready to run: its inputs, its logits output [n_vocab, n_outputs] (none from an
/// encoder) and, with embeddings, the embeddings output ([n_embd, n_outputs], or [n_embd, n_seqs]
/// pooled, [n_cls_out, n_seqs] ranked).
pub struct Built {
    pub graph: Graph,
    pub inputs: Inputs,
    pub logits: Option<TensorRef>,
    pub embd: Option<TensorRef>,
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

/// How a mixture-of-experts layer turns the router's logits into expert weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gating {
    /// Softmax over all experts, then pick the largest.
    Softmax,
    /// Each expert's sigmoid, then pick the largest.
    Sigmoid,
    /// Pick the largest logits, then softmax over the picked.
    SoftmaxWeight,
    /// sqrt(softplus) of each logit, then pick the largest (DeepSeek-V4).
    SqrtSoftplus,
}

impl Gating {
    /// llama.cpp's `expert_gating_func` value (the ones implemented here).
    pub fn from_llama(v: u32) -> Option<Gating> {
        match v {
            1 => Some(Gating::Softmax),
            2 => Some(Gating::Sigmoid),
            3 => Some(Gating::SoftmaxWeight),
            4 => Some(Gating::SqrtSoftplus),
            _ => None,
        }
    }
}

/// The experts' gated activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertAct {
    /// silu(gate) * up (SiLU of up alone without a gate).
    Silu,
    /// gpt-oss's clamped, sharpened SwiGLU.
    SwigluOai,
    /// relu(up)², experts without a gate (Nemotron-H).
    ReluSqr,
    /// relu(gate) * up (relu of up alone without a gate).
    Relu,
    /// gelu(gate) * up (gelu of up alone without a gate).
    Gelu,
    /// Kimi-K3's SiTU of gate and up (`Builder::situ`); needs a gate.
    Situ,
}

/// What varies between the mixture-of-experts layers of the architectures.
#[derive(Debug, Clone, Copy)]
pub struct Moe {
    pub gating: Gating,
    /// Divide the picked experts' weights by their sum.
    pub normalize: bool,
    pub act: ExpertAct,
    /// Multiply the experts' products by their per-expert scales (where llama.cpp's graph
    /// passes them).
    pub scaled: bool,
    /// A warm-up routes every expert (where llama.cpp's graph passes its warm-up count).
    pub warmup_all: bool,
    /// Llama 4's routing: experts picked by the raw logits, and each picked expert's weight
    /// multiplied into its input rather than into its output.
    pub weights_first: bool,
    /// GroveMoE's routing: experts picked by the sigmoid of the logits, weighted by `gating`.
    pub pick_by_sigmoid: bool,
}

impl Moe {
    /// What an architecture's experts do unless it says otherwise: SiLU experts picked and
    /// weighted by softmax, weights unnormalised and unscaled, every expert routed in a warm-up.
    pub const BASE: Moe = Moe {
        gating: Gating::Softmax,
        normalize: false,
        act: ExpertAct::Silu,
        scaled: false,
        warmup_all: true,
        weights_first: false,
        pick_by_sigmoid: false,
    };

    /// SiLU experts routed by the model's gating (`default` where it names none known), each
    /// picked weight normalised where `normalize`, every expert routed in a warm-up.
    pub fn silu(gating: u32, default: Gating, normalize: bool, scaled: bool) -> Moe {
        Moe {
            gating: Gating::from_llama(gating).unwrap_or(default),
            normalize,
            scaled,
            ..Moe::BASE
        }
    }
}

/// What varies between the architectures' gated FFNs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ffn {
    /// GELU rather than SiLU.
    pub gelu: bool,
    /// gpt-oss's clamped, sharpened SwiGLU rather than SiLU (MiniMax-M3's FFNs).
    pub oai: bool,
    /// Multiply each projection by its weight's scale.
    pub scaled: bool,
    /// Add each projection's bias.
    pub biased: bool,
}

/// The squared-ReLU FFN with its weights' scales and biases (Nemotron-H's).
pub const RELU_SQR_FFN: Ffn = Ffn {
    gelu: false,
    oai: false,
    scaled: true,
    biased: true,
};

/// gpt-oss's SwiGLU constants (llama.cpp's).
const OAI_ALPHA: f32 = 1.702;
const OAI_LIMIT: f32 = 7.0;

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

/// What a Hadamard matrix input rotates (`GraphParams::k_rot`, `v_rot`, `idx_rot`).
#[derive(Clone, Copy)]
enum Rotated {
    Keys,
    Values,
    IndexerKeys,
}

/// Where attention's values come from.
enum Values {
    /// This ubatch's values, stored in the layer's V cache beside the keys.
    Cached(TensorRef),
    /// The first `width` dimensions of each cached key (absorbed latent attention), each head's
    /// output then widened by `v_mla` ([width, head_v, n_head]).
    Latent { width: i64, v_mla: TensorRef },
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
                s_copy: None,
                out_ids,
                mean: None,
                cls: None,
                k_rot: None,
                v_rot: None,
                idx_rot: None,
                msa: None,
                qsa: Vec::new(),
                ple_rows: None,
                kpool: None,
                comp: [None; 3],
                attn_temp: None,
                lightning: None,
                lora: None,
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
        })
    }

    /// The final-norm hidden states, reduced per sequence as `pooling` says, as a graph output.
    fn pooled_embeddings(&mut self, pooling: Pooling) -> Result<TensorRef> {
        let h = self
            .hidden
            .ok_or_else(|| Error::Internal("the architecture built no output head".into()))?;
        let (nt, ns) = (self.shape.n_tokens as i64, self.shape.n_seqs as i64);
        let out = match pooling {
            Pooling::None => h,
            Pooling::Mean => {
                let w = self.g.input(ggml_sys::ggml_type_GGML_TYPE_F32, &[nt, ns], "inp_mean")?;
                self.inputs.mean = Some(w);
                let ht = self.g.permute(h, [1, 0, 2, 3])?;
                let ht = self.g.cont(ht)?;
                self.g.mul_mat(ht, w)?
            }
            Pooling::Cls | Pooling::Last | Pooling::Rank => {
                let rows = self.g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[ns], "inp_cls")?;
                self.inputs.cls = Some(rows);
                let picked = self.g.get_rows(h, rows)?;
                if pooling == Pooling::Rank {
                    self.classifier_head(picked)?
                } else {
                    picked
                }
            }
        };
        let out = self.dense_out(out)?;
        if pooling != Pooling::Rank && out.ne()[0] != i64::from(self.hp.embd_out()) {
            return Err(Error::model(format!(
                "the model's embeddings are {} wide, not the {} it declares (llama_model_n_embd_out): \
                 llama.cpp reads past its output here",
                out.ne()[0],
                self.hp.embd_out()
            )));
        }
        self.g.output(out);
        Ok(out)
    }

    /// The dense projection some embedding models end with (LFM2-ColBERT's `dense_2`, with an
    /// optional bias), applied to the pooled embeddings `x` where the model has it.
    fn dense_out(&mut self, mut x: TensorRef) -> Result<TensorRef> {
        if let Some(w) = self.weight_opt("dense_2.weight") {
            x = self.g.mul_mat(w, x)?;
        }
        if let Some(bias) = self.weight_opt("dense_2.bias") {
            x = self.g.add(x, bias)?;
        }
        Ok(x)
    }

    /// The classifier head of a ranking model over the pooled states `x` ([n_embd, n_seqs]):
    /// `cls` (with its bias) and tanh, then `cls.output` (with its bias), as llama.cpp applies
    /// them when present; Qwen3's rerankers end with a softmax over the labels.
    fn classifier_head(&mut self, mut x: TensorRef) -> Result<TensorRef> {
        if let Some(w) = self.weight_opt("cls.weight") {
            let b = self.weight_opt("cls.bias");
            x = self.linear(w, b, x)?;
            x = self.tanh(x)?;
        }
        if let Some(w) = self.weight_opt("cls.output.weight") {
            let b = self.weight_opt("cls.output.bias");
            x = self.linear(w, b, x)?;
        }
        if self.hp.rank_softmax {
            x = self.g.soft_max_rows(x)?;
        }
        Ok(x)
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

    /// Token embeddings of the input tokens, [n_embd, n_tokens].
    pub fn embed_tokens(&mut self) -> Result<TensorRef> {
        self.embed_rows("token_embd.weight")
    }

    /// The same, renamed `name` as the architecture's llama.cpp graph renames it (what a cb_eval
    /// callback sees).
    pub fn embed_tokens_as(&mut self, name: &str) -> Result<TensorRef> {
        let x = self.embed_tokens()?;
        Ok(self.name(x, name, None))
    }

    /// The input tokens' rows of the table `name` (a model without token embeddings reads its
    /// output head), or the caller's embedding rows, [n_embd, n_tokens]; times the model's
    /// embedding scale if it has one (Granite's, Grok's), as llama.cpp's `build_inp_embd`.
    pub fn embed_rows(&mut self, name: &str) -> Result<TensorRef> {
        let mut x = match self.inputs.embd {
            Some(rows) => rows,
            None => {
                let table = self.weight(name)?;
                let x = self.g.get_rows(table, self.token_ids()?)?;
                self.add_lora_rows(table, x)?
            }
        };
        if self.hp.n_deepstack > 0 {
            // Token rows are padded with zeros to the input's width, as llama.cpp pads them, so
            // that the deepstack layers add the same (zeros) to text as to the caller's rows.
            let (n_embd, n_inp) = (i64::from(self.hp.n_embd), i64::from(self.hp.n_embd_inp()));
            if self.inputs.embd.is_none() {
                x = self.g.pad(x, [n_inp - n_embd, 0, 0, 0])?;
            }
            self.deepstack = Some(x);
            x = self.g.view(x, &[n_embd, x.ne()[1]], &[x.nb()[1]], 0)?;
        }
        if self.hp.embedding_scale != 0.0 {
            x = self.scale(x, self.hp.embedding_scale)?;
        }
        Ok(self.name(x, "embd", None))
    }

    /// Whether the graph takes embedding rows rather than token ids.
    pub fn takes_embeddings(&self) -> bool {
        self.inputs.embd.is_some()
    }

    /// The token ids input; an architecture that reads the ids beyond their embeddings cannot
    /// take embeddings as input.
    pub fn token_ids(&self) -> Result<TensorRef> {
        self.inputs.tokens.ok_or_else(|| {
            Error::invalid(format!(
                "'{}' reads the token ids themselves (not only their embeddings): give it token ids, not embeddings",
                self.hp.arch_name
            ))
        })
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

    /// View [n_embd_head * n_head, n_tokens] as [n_embd_head, n_head, n_tokens].
    pub fn heads(&mut self, x: TensorRef, head_dim: u32, n_head: u32) -> Result<TensorRef> {
        let h = self
            .g
            .reshape(x, &[i64::from(head_dim), i64::from(n_head), self.shape.n_tokens as i64])?;
        // The reshaped projection keeps its name ("Qcur-3"), as llama.cpp names it.
        let name = x.name();
        if !name.is_empty() {
            self.g.set_name(h, &name);
        }
        Ok(h)
    }

    /// The positions input (made on first use: a graph that never reads it would leave it
    /// without memory).
    pub fn positions(&mut self) -> Result<TensorRef> {
        if let Some(pos) = self.inputs.pos {
            return Ok(pos);
        }
        let n = self.shape.n_tokens as i64 * i64::from(self.hp.n_pos_per_embd());
        let pos = self.g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[n], "inp_pos")?;
        Ok(*self.inputs.pos.insert(pos))
    }

    /// The cache rows of the ubatch's tokens, I64 [n_tokens] (made on first use).
    fn kv_rows(&mut self) -> Result<TensorRef> {
        self.rows_input(false, false)
    }

    /// The rows the keys (or with `values`, the values) are stored by: the full layers' cells, or
    /// with `sliding` the sliding-window layers' (made on first use; named as llama.cpp names
    /// both).
    fn rows_input(&mut self, values: bool, sliding: bool) -> Result<TensorRef> {
        let slot = match (values, sliding) {
            (false, false) => &mut self.inputs.kv_rows,
            (true, false) => &mut self.inputs.v_rows,
            (false, true) => &mut self.inputs.kv_rows_swa,
            (true, true) => &mut self.inputs.v_rows_swa,
        };
        if let Some(r) = *slot {
            return Ok(r);
        }
        let name = if values { "attn_inp_v_idxs" } else { "attn_inp_k_idxs" };
        let nt = (self.shape.n_tokens * self.shape.kv_copies.max(1)) as i64;
        let r = self.g.input(ggml_sys::ggml_type_GGML_TYPE_I64, &[nt], name)?;
        Ok(*slot.insert(r))
    }

    /// The attention mask input, or (`sliding`) the sliding-window one, [n_kv, n_tokens] (made
    /// on first use).
    fn mask(&mut self, sliding: bool) -> Result<TensorRef> {
        let slot = if sliding {
            &mut self.inputs.mask_swa
        } else {
            &mut self.inputs.mask
        };
        if let Some(m) = *slot {
            return Ok(m);
        }
        let name = if sliding {
            "attn_inp_kq_mask_swa"
        } else {
            "attn_inp_kq_mask"
        };
        let n_kv = if sliding { self.shape.n_kv_swa } else { self.shape.n_kv };
        let ne = [n_kv as i64, self.shape.n_tokens as i64];
        let m = self.g.input(mask_type(self.params.flash_attn), &ne, name)?;
        Ok(*slot.insert(m))
    }

    /// The final hidden states the embeddings are pooled from, where they are not the output
    /// head's input (an encoder's; MiniCPM3's, scaled before its head).
    pub fn set_hidden(&mut self, x: TensorRef) {
        self.hidden = Some(x);
    }

    /// Layer norm of `x` (mean and variance over each row), scaled by `w` and shifted by `b`.
    pub fn layer_norm(&mut self, x: TensorRef, w: TensorRef, b: TensorRef) -> Result<TensorRef> {
        let n = self.g.norm(x, self.hp.norm_eps)?;
        let n = self.g.mul(n, w)?;
        self.g.add(n, b).map_err(Error::from)
    }

    /// Rotate `x` ([head_dim, n_head, n_tokens]) of layer `il` by the input positions.
    pub fn rope(&mut self, x: TensorRef, il: usize, freq_factors: Option<TensorRef>) -> Result<TensorRef> {
        let (base, scale) = rope_freqs(self.hp, &self.params, il);
        let (ext_factor, attn_factor) = (self.params.rope.ext_factor, self.params.rope.attn_factor);
        self.rope_ext(x, base, scale, ext_factor, attn_factor, freq_factors)
    }

    /// Rotate `x` of layer `il` by the positions `pos` (as many per row of `x` as the model's
    /// rotation takes) rather than the tokens'.
    pub fn rope_at(&mut self, x: TensorRef, il: usize, pos: TensorRef) -> Result<TensorRef> {
        let (base, scale) = rope_freqs(self.hp, &self.params, il);
        let (ext_factor, attn_factor) = (self.params.rope.ext_factor, self.params.rope.attn_factor);
        self.rope_with(x, pos, base, scale, ext_factor, attn_factor, None)
    }

    /// Rotate `x` by the input positions with the given frequencies and YaRN factors (for the
    /// architectures whose layers rotate differently from the context's settings).
    pub fn rope_ext(
        &mut self,
        x: TensorRef,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        freq_factors: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let pos = self.positions()?;
        self.rope_with(x, pos, freq_base, freq_scale, ext_factor, attn_factor, freq_factors)
    }

    #[allow(clippy::too_many_arguments)]
    fn rope_with(
        &mut self,
        x: TensorRef,
        pos: TensorRef,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        freq_factors: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let p = self.params.rope;
        let mode = self.hp.rope_type;
        let sections = (self.hp.n_pos_per_embd() > 1).then_some(self.hp.rope_sections);
        self.g
            .rope(
                x,
                pos,
                freq_factors,
                self.hp.n_rot as i32,
                mode,
                sections,
                p.n_ctx_orig as i32,
                freq_base,
                freq_scale,
                ext_factor,
                attn_factor,
                p.beta_fast,
                p.beta_slow,
            )
            .map_err(Error::from)
    }

    /// Store this ubatch's K and V ([head_dim, n_head_kv, n_tokens]) in layer `il`'s cache rows,
    /// attend with `q` ([head_dim, n_head, n_tokens]) over the first n_kv cells, and return the
    /// heads' outputs merged, [n_embd_head_v * n_head, n_tokens].
    pub fn attention(
        &mut self,
        il: usize,
        q: TensorRef,
        k: TensorRef,
        v: TensorRef,
        kq_scale: f32,
        sliding: bool,
    ) -> Result<TensorRef> {
        self.attend(il, q, k, Values::Cached(v), kq_scale, sliding, None)
    }

    /// `attention` with `mask` ([n_kv, n_tokens]) in place of the attention mask (sparse
    /// attention's).
    pub fn attention_masked(
        &mut self,
        il: usize,
        (q, k, v): (TensorRef, TensorRef, TensorRef),
        kq_scale: f32,
        mask: TensorRef,
    ) -> Result<TensorRef> {
        self.attend(il, q, k, Values::Cached(v), kq_scale, false, Some(mask))
    }

    /// Absorbed multi-head latent attention (llama.cpp's attention over a keys-only cache): store
    /// `k` ([n_embd_head_k, 1, n_tokens]: the normed latent, then the rotated part), attend with
    /// `q` ([n_embd_head_k, n_head, n_tokens]) taking the values from the cached keys' first
    /// `n_lora_kv` dimensions, and widen each head's output by `v_mla` ([n_lora_kv, head_v,
    /// n_head]). Returns [head_v * n_head, n_tokens]. Never rotated by Hadamard, as in llama.cpp.
    /// `mask` ([n_kv, n_tokens]) replaces the attention mask (sparse attention's).
    pub fn attention_latent(
        &mut self,
        il: usize,
        q: TensorRef,
        k: TensorRef,
        v_mla: TensorRef,
        kq_scale: f32,
        mask: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let width = i64::from(self.hp.n_lora_kv);
        let sliding = is_sliding(self.hp, il);
        self.attend(il, q, k, Values::Latent { width, v_mla }, kq_scale, sliding, mask)
    }

    /// Attention over the cache; `mask` replaces the attention mask where sparse attention
    /// limits it.
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &mut self,
        il: usize,
        q: TensorRef,
        k: TensorRef,
        values: Values,
        kq_scale: f32,
        sliding: bool,
        mask: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let hp = self.hp;
        let nt = self.shape.n_tokens as i64;
        if sliding && hp.n_swa == 0 {
            return Err(Error::model("sliding-window layer without a window"));
        }
        // A sliding-window layer's keys are in the sliding layers' cells, with their own rows.
        let own_cells = self.kv.sliding_layer(il);
        if own_cells != sliding {
            return Err(Error::Internal(format!(
                "layer {il}: attends {} the sliding window but its keys are cached with the {} layers",
                if sliding { "through" } else { "without" },
                if own_cells { "sliding-window" } else { "full-attention" }
            )));
        }
        let n_kv = if own_cells {
            self.shape.n_kv_swa
        } else {
            self.shape.n_kv
        } as i64;
        let hk = i64::from(hp.n_embd_head_k);
        let n_head_kv = i64::from(hp.n_head_kv[il]);
        let kc = self.kv.k(il);
        // Per-head attention sinks, in the layers that have them (gpt-oss).
        let sinks = self.layer_weight_opt(il, "attn_sinks.weight");
        let cached = matches!(values, Values::Cached(_));
        // Rotated before a quantized cache stores them, as llama.cpp does.
        let k_rot = if cached { self.rotation(Rotated::Keys)? } else { None };
        let (q, k) = match k_rot {
            Some(rot) => (self.g.hadamard(rot, q)?, self.g.hadamard(rot, k)?),
            None => (q, k),
        };
        let v_rot = if cached { self.rotation(Rotated::Values)? } else { None };
        let v = match (values, v_rot) {
            (Values::Cached(v), Some(rot)) => Values::Cached(self.g.hadamard(rot, v)?),
            (values, _) => values,
        };
        // Queries, values, then keys, in llama.cpp's graph order (queries, keys, then values in
        // a model with sliding-window layers, whose caches llama.cpp keeps apart).
        let iswa = hp.has_sliding_layers();
        let vals = match v {
            Values::Cached(v) => Some(v),
            Values::Latent { .. } => None,
        };
        let order = if iswa {
            [Some(q), Some(k), vals]
        } else {
            [Some(q), vals, Some(k)]
        };
        for t in order.into_iter().flatten() {
            self.g.expand(t);
        }

        // Training reads the ubatch's keys and values directly (the cache holds no more).
        let direct = self.params.training && cached;
        if direct && (n_kv != nt || self.shape.n_streams > 1) {
            return Err(Error::Internal(format!(
                "training attends over {n_kv} cells in {} streams: needs the ubatch's {nt} in one",
                self.shape.n_streams
            )));
        }
        // Write first: the attention below reads the cache, including these rows.
        if !direct {
            let kv_rows = self.rows_input(false, own_cells)?;
            let k2 = self.merge_heads(k)?;
            let k_store = self.g.set_rows(kc, k2, kv_rows)?;
            self.g.expand(k_store);
        }

        let row = |t: TensorRef, n: i64| crate::ggml::row_size(t.ggml_type(), n);
        let mask = match mask {
            Some(m) => m,
            None => self.mask(sliding)?,
        };

        // Each group of tokens attends to its own stream's cells.
        let ns = self.shape.n_streams.max(1) as i64;
        let tps = nt / ns;
        let n_head = i64::from(hp.n_head[il]);
        let stream_rows = self.kv.layer_stream_size(il) as i64;
        let k_stream = row(kc, hk * n_head_kv * stream_rows);
        let s0 = self.shape.first_stream;
        // A view, not a reshape: queries may be strided views of a fused projection.
        let qnb = q.nb();
        let q = self
            .g
            .view(q, &[hk, n_head, tps, ns], &[qnb[1], qnb[2], qnb[2] * tps as usize], 0)?;
        let k_strides = [row(kc, hk), row(kc, hk * n_head_kv), k_stream];
        let kview = match direct {
            true => k,
            false => self.g.view(kc, &[hk, n_head_kv, n_kv, ns], &k_strides, k_stream * s0)?,
        };
        let (vview, hv, v_mla) = match v {
            Values::Cached(v) if direct => (v, i64::from(hp.n_embd_head_v), None),
            Values::Cached(v) => {
                let vc = self
                    .kv
                    .v(il)
                    .ok_or_else(|| Error::Internal(format!("layer {il} has no V cache")))?;
                let hv = i64::from(hp.n_embd_head_v);
                let v2 = self.merge_heads(v)?;
                let v_rows = self.rows_input(true, own_cells)?;
                let v_store = self.g.set_rows(vc, v2, v_rows)?;
                self.g.expand(v_store);
                let v_stream = row(vc, hv * n_head_kv * stream_rows);
                let vview = self.g.view(
                    vc,
                    &[hv, n_head_kv, n_kv, ns],
                    &[row(vc, hv), row(vc, hv * n_head_kv), v_stream],
                    v_stream * s0,
                )?;
                (vview, hv, None)
            }
            Values::Latent { width, v_mla } => {
                let vview = self
                    .g
                    .view(kc, &[width, n_head_kv, n_kv, ns], &k_strides, k_stream * s0)?;
                (vview, width, Some(v_mla))
            }
        };
        // Each head's output width, after latent attention's widening.
        let h_out = v_mla.map_or(hv, |w| w.ne()[1]);
        // As a 4-D view only where its shape differs (no extra node in llama.cpp's node order).
        let mask = if mask.ne() == [n_kv, tps, 1, ns] {
            mask
        } else {
            self.g.reshape(mask, &[n_kv, tps, 1, ns])?
        };

        // [head_dim, tokens, heads, streams].
        let q = self.g.permute(q, [0, 2, 1, 3])?;
        let kp = self.g.permute(kview, [0, 2, 1, 3])?;
        let vp = self.g.permute(vview, [0, 2, 1, 3])?;
        let scores = Scores {
            scale: kq_scale,
            max_bias: hp.max_alibi_bias,
            softcap: hp.attn_softcap,
        };
        let o = if self.params.flash_attn {
            if hp.kq_tanh_cap != 0.0 {
                return Err(Error::model(
                    "capped attention scores need attention without flash attention",
                ));
            }
            // Result [head_dim_v, n_head, tokens, streams].
            let o = self.g.flash_attn(q, kp, vp, mask, scores, sinks)?;
            match v_mla {
                // Widened as one matrix product per head, tokens in dimension 1 (as llama.cpp).
                Some(w) => {
                    let o = self.g.permute(o, [0, 2, 1, 3])?;
                    let o = self.g.mul_mat(w, o)?;
                    let o = self.g.permute(o, [0, 2, 1, 3])?;
                    self.g.cont(o)?
                }
                None => o,
            }
        } else {
            let mut kq = self.g.mul_mat(kp, q)?; // [n_kv, tokens, n_head, streams]
            if hp.kq_tanh_cap != 0.0 {
                kq = self.soft_cap(kq, hp.kq_tanh_scale, hp.kq_tanh_cap)?;
            }
            if hp.attn_softcap != 0.0 {
                kq = self.soft_cap(kq, 1.0, hp.attn_softcap)?;
            }
            let kq = self.g.soft_max(kq, mask, kq_scale, hp.max_alibi_bias, sinks)?;
            // V as [n_kv, head_dim, n_head_kv] so that V x KQ gives [head_dim, tokens, n_head].
            let vt = self.g.permute(vp, [1, 0, 2, 3])?;
            let vt = self.g.cont(vt)?;
            let mut kqv = self.g.mul_mat(vt, kq)?;
            if let Some(w) = v_mla {
                kqv = self.g.mul_mat(w, kqv)?;
            }
            let o = self.g.permute(kqv, [0, 2, 1, 3])?; // [head_dim, n_head, tokens, streams]
            self.g.cont(o)?
        };
        let o = self.g.reshape(o, &[h_out * n_head, nt])?;
        self.unrotate(o, v_rot)
    }

    /// Layer `il`'s attention output `att` ([head_v * n_head, n_tokens]) times its gate `gate`:
    /// one value per head, spread over the head, when `gate` is [n_head, n_tokens], otherwise one
    /// per element (the gated attentions of Spark 2.5, AFMoE and Laguna).
    pub fn gate_heads(&mut self, il: usize, att: TensorRef, gate: TensorRef) -> Result<TensorRef> {
        // Each head's width as the attention output has it (latent attention's widened heads).
        let n_head = i64::from(self.hp.n_head[il]);
        let (head, n_tokens) = (att.ne()[0] / n_head.max(1), att.ne()[1]);
        let gated = if gate.ne()[0] == n_head {
            let heads = self.g.reshape(att, &[head, n_head, n_tokens])?;
            let gate = self.g.reshape(gate, &[1, n_head, n_tokens])?;
            let gated = self.g.mul(heads, gate)?;
            self.g.reshape(gated, &[head * n_head, n_tokens])?
        } else {
            self.g.mul(att, gate)?
        };
        Ok(self.name(gated, "attn_gated", Some(il)))
    }

    /// The Hadamard matrix of the cache's keys, values or indexer keys, an input made by the first
    /// layer that needs it; None when they are not rotated.
    fn rotation(&mut self, of: Rotated) -> Result<Option<TensorRef>> {
        let (n, slot, name) = match of {
            Rotated::Keys => (self.params.k_rot, &mut self.inputs.k_rot, "attn_inp_k_rot"),
            Rotated::Values => (self.params.v_rot, &mut self.inputs.v_rot, "attn_inp_v_rot"),
            Rotated::IndexerKeys => (self.params.idx_rot, &mut self.inputs.idx_rot, "attn_inp_k_rot_lid"),
        };
        let n = i64::from(n);
        if n == 0 {
            return Ok(None);
        }
        if let Some(t) = *slot {
            return Ok(Some(t));
        }
        let t = self.g.input(ggml_sys::ggml_type_GGML_TYPE_F32, &[n, n], name)?;
        Ok(Some(*slot.insert(t)))
    }

    /// The attention's output rotated back from the values' rotation (the matrix is its own
    /// inverse).
    fn unrotate(&mut self, o: TensorRef, v_rot: Option<TensorRef>) -> Result<TensorRef> {
        match v_rot {
            Some(rot) => self.g.hadamard(rot, o).map_err(Error::from),
            None => Ok(o),
        }
    }

    /// Layer `il`'s rotary self-attention over the normed `cur`: per-head projections (with
    /// their biases and scales), rotation without frequency factors, attention over the cache
    /// (through the window on `sliding` layers). Returns the heads' output before the output
    /// projection ([head_v * n_head, n_tokens]).
    pub fn rotary_attention(&mut self, il: usize, cur: TensorRef, kq_scale: f32, sliding: bool) -> Result<TensorRef> {
        let l = Some(il);
        let (q, k, v) = self.qkv(il, cur, true)?;
        let q = self.rope(q, il, None)?;
        let k = self.rope(k, il, None)?;
        let (q, k, v) = (
            self.name(q, "Qcur", l),
            self.name(k, "Kcur", l),
            self.name(v, "Vcur", l),
        );
        let att = self.attention(il, q, k, v, kq_scale, sliding)?;
        Ok(self.name(att, "kqv_out", l))
    }

    /// Layer `il`'s attention over the normed `cur` with per-head query and key norms before the
    /// rotation (Qwen3's layout): projections with their biases and scales, the norms, rotation
    /// with `factors`, attention over the cache and the output projection.
    pub fn head_normed_attention(
        &mut self,
        il: usize,
        cur: TensorRef,
        kq_scale: f32,
        factors: Option<TensorRef>,
    ) -> Result<TensorRef> {
        let (q, k, v) = self.qkv(il, cur, true)?;
        let q = self.layer_rms_norm(il, q, "attn_q_norm.weight", "Qcur_normed")?;
        let k = self.layer_rms_norm(il, k, "attn_k_norm.weight", "Kcur_normed")?;
        let q = self.rope(q, il, factors)?;
        let k = self.rope(k, il, factors)?;
        let att = self.attention(il, q, k, v, kq_scale, false)?;
        let wo = self.layer_weight(il, "attn_output.weight")?;
        self.linear(wo, None, att)
    }

    /// Layer `il`'s pre-norm rotary attention over the stream `x`: `attn_norm`, attention
    /// (`rotary_attention`, full-sized layers), the output projection without a bias, and the
    /// residual sum (`ffn_inp`), the last layer keeping only the requested rows. Returns the sum
    /// and the layer's input (those rows of it in the last layer).
    pub fn pre_norm_attention(&mut self, il: usize, x: TensorRef, kq_scale: f32) -> Result<(TensorRef, TensorRef)> {
        let cur = self.layer_rms_norm(il, x, "attn_norm.weight", "attn_norm")?;
        let att = self.rotary_attention(il, cur, kq_scale, false)?;
        let wo = self.layer_weight(il, "attn_output.weight")?;
        let att = self.linear(wo, None, att)?;
        let (att, input) = self.last_layer_rows(il, att, x)?;
        let h = self.add(att, input)?;
        Ok((self.name(h, "ffn_inp", Some(il)), input))
    }

    /// Attention of the ubatch's tokens among themselves, without a cache (encoders): `q`, `k`,
    /// `v` are [head, n_head(_kv), n_tokens]; the mask ([n_tokens, n_tokens]) keeps each token to
    /// its own sequence. Returns [head_v * n_head, n_tokens].
    pub fn attention_no_cache(&mut self, q: TensorRef, k: TensorRef, v: TensorRef, kq_scale: f32) -> Result<TensorRef> {
        let (hv, n_head, nt) = (v.ne()[0], q.ne()[1], q.ne()[2]);
        let mask = self.mask(false)?;
        let q = self.g.permute(q, [0, 2, 1, 3])?;
        let k = self.g.permute(k, [0, 2, 1, 3])?;
        let v = self.g.permute(v, [0, 2, 1, 3])?;
        let f16 = ggml_sys::ggml_type_GGML_TYPE_F16;
        // An encoder's mask holds no distances: no ALiBi here.
        let scores = Scores {
            scale: kq_scale,
            max_bias: 0.0,
            softcap: self.hp.attn_softcap,
        };
        if self.params.flash_attn {
            // Flash attention reads F16 keys and values.
            let k = self.g.cast(k, f16)?;
            let v = self.g.cast(v, f16)?;
            let o = self.g.flash_attn(q, k, v, mask, scores, None)?;
            self.g.reshape(o, &[hv * n_head, nt]).map_err(Error::from)
        } else {
            let kq = self.g.mul_mat(k, q)?; // [n_tokens, n_tokens, n_head]
            let kq = self.g.soft_max(kq, mask, kq_scale, 0.0, None)?;
            let vt = self.g.permute(v, [1, 0, 2, 3])?;
            let vt = self.g.cont(vt)?;
            let kqv = self.g.mul_mat(vt, kq)?; // [head_v, n_tokens, n_head]
            let o = self.g.permute(kqv, [0, 2, 1, 3])?;
            let o = self.g.cont(o)?;
            self.g.reshape(o, &[hv * n_head, nt]).map_err(Error::from)
        }
    }

    /// [head, n_head, n_tokens] (heads adjacent, tokens possibly strided, as views of a fused
    /// projection are) as [head * n_head, n_tokens], without a copy.
    fn merge_heads(&mut self, x: TensorRef) -> Result<TensorRef> {
        let [head, n_head, n_tokens, _] = x.ne();
        let nb = x.nb();
        if nb[1] != crate::ggml::row_size(x.ggml_type(), head) {
            return Err(Error::Internal(format!("heads of {:?} are not adjacent", x.ne())));
        }
        self.g
            .view(x, &[head * n_head, n_tokens], &[nb[2]], 0)
            .map_err(Error::from)
    }

    /// Layer `il`'s queries, keys and values of `x`, from its separate projections or its fused
    /// `attn_qkv` (each with its bias and scale): per head, [head, n_head, n_tokens] (views of a
    /// fused projection), or flat and contiguous, [head * n_head, n_tokens].
    pub fn qkv(&mut self, il: usize, x: TensorRef, per_head: bool) -> Result<(TensorRef, TensorRef, TensorRef)> {
        self.qkv_scaled(il, x, per_head, true)
    }

    /// The same, leaving a fused projection's scale out unless `scaled` (OpenELM's graph does).
    pub fn qkv_scaled(
        &mut self,
        il: usize,
        x: TensorRef,
        per_head: bool,
        scaled: bool,
    ) -> Result<(TensorRef, TensorRef, TensorRef)> {
        let hp = self.hp;
        // llama.cpp clamps the projections it splits into heads when the model asks for it.
        let clamp = per_head && hp.clamp_kqv > 0.0;
        let Some(w) = self.layer_weight_opt(il, "attn_qkv.weight") else {
            let proj = |bd: &mut Builder, name: &str| -> Result<TensorRef> {
                // "Qcur-3" after the (scaled) product and again after the bias, as llama.cpp
                // names each projection.
                let label = format!("{}cur", name.trim_start_matches("attn_").to_uppercase());
                let w = bd.layer_weight(il, &format!("{name}.weight"))?;
                let t = bd.linear(w, None, x)?;
                let mut t = bd.name(t, &label, Some(il));
                if let Some(b) = bd.layer_weight_opt(il, &format!("{name}.bias")) {
                    t = bd.add(t, b)?;
                    t = bd.name(t, &label, Some(il));
                }
                if clamp {
                    bd.g.clamp(t, -hp.clamp_kqv, hp.clamp_kqv).map_err(Error::from)
                } else {
                    Ok(t)
                }
            };
            let q = proj(self, "attn_q")?;
            let k = proj(self, "attn_k")?;
            let v = proj(self, "attn_v")?;
            if !per_head {
                return Ok((q, k, v));
            }
            return Ok((
                self.heads(q, hp.n_embd_head_k, hp.n_head[il])?,
                self.heads(k, hp.n_embd_head_k, hp.n_head_kv[il])?,
                self.heads(v, hp.n_embd_head_v, hp.n_head_kv[il])?,
            ));
        };
        let bias = self.layer_weight_opt(il, "attn_qkv.bias");
        let qkv = if scaled {
            self.linear(w, bias, x)?
        } else {
            self.project(w, bias, x, Order::BiasThenScale { scaled: false })?
        };
        let mut qkv = self.name(qkv, "wqkv", Some(il));
        if clamp {
            qkv = self.g.clamp(qkv, -hp.clamp_kqv, hp.clamp_kqv)?;
        }
        self.split_qkv(il, qkv, per_head)
    }

    /// Layer `il`'s queries, keys and values out of the output of its fused projection: per
    /// head (views) or flat and contiguous, as `qkv` returns them.
    pub fn split_qkv(
        &mut self,
        il: usize,
        qkv: TensorRef,
        per_head: bool,
    ) -> Result<(TensorRef, TensorRef, TensorRef)> {
        let hp = self.hp;
        let (hk, hv) = (i64::from(hp.n_embd_head_k), i64::from(hp.n_embd_head_v));
        let (nh, nkv) = (i64::from(hp.n_head[il]), i64::from(hp.n_head_kv[il]));
        let nt = qkv.ne()[1];
        let row = |n: i64| crate::ggml::row_size(qkv.ggml_type(), n);
        let nb1 = qkv.nb()[1];
        let parts = [(hk, nh, 0), (hk, nkv, hk * nh), (hv, nkv, hk * nh + hk * nkv)];
        let mut out = Vec::with_capacity(3);
        for (head, n, start) in parts {
            let t = if per_head {
                self.g.view(qkv, &[head, n, nt], &[row(head), nb1], row(start))
            } else {
                self.g.view(qkv, &[head * n, nt], &[nb1], row(start))
            }?;
            out.push(if per_head { t } else { self.g.cont(t)? });
        }
        Ok((out[0], out[1], out[2]))
    }

    /// In the last layer, keep only the requested rows of a layer's output `a` and its residual
    /// `r`; other layers keep every row.
    pub fn last_layer_rows(&mut self, il: usize, a: TensorRef, r: TensorRef) -> Result<(TensorRef, TensorRef)> {
        if il + 1 < self.hp.n_layer as usize {
            return Ok((a, r));
        }
        Ok((self.select_outputs(a)?, self.select_outputs(r)?))
    }

    /// RMS norm of `x` by layer `il`'s weight `blk.{il}.{weight}`, named `{label}-{il}`.
    pub fn layer_rms_norm(&mut self, il: usize, x: TensorRef, weight: &str, label: &str) -> Result<TensorRef> {
        let w = self.layer_weight(il, weight)?;
        let n = self.g.rms_norm(x, self.hp.rms_eps)?;
        let n = self.name(n, "norm", Some(il));
        let y = self.g.mul(n, w)?;
        Ok(self.name(y, label, Some(il)))
    }

    /// The queries' temperature scales, one per token ([1, 1, n_tokens]; `HParams::attn_temp`).
    pub fn attn_temperature(&mut self) -> Result<TensorRef> {
        if let Some(t) = self.inputs.attn_temp {
            return Ok(t);
        }
        let nt = self.shape.n_tokens as i64;
        let t = self
            .g
            .input(ggml_sys::ggml_type_GGML_TYPE_F32, &[1, 1, nt], "inp_attn_scale")?;
        Ok(*self.inputs.attn_temp.insert(t))
    }

    /// The queries `q` scaled by attention temperature tuning where the model has it
    /// (`HParams::attn_temp`), unchanged otherwise.
    pub fn temperature_tuned(&mut self, q: TensorRef) -> Result<TensorRef> {
        if self.hp.attn_temp.scale == 0.0 {
            return Ok(q);
        }
        let t = self.attn_temperature()?;
        self.g.mul(q, t).map_err(Error::from)
    }

    /// The first `n_outputs` rows of `logits` (and of the hidden states), computed for every
    /// token: what llama.cpp hands back from a graph that never picks the requested rows
    /// (CogVLM's), whichever tokens asked for them. The output-row input goes unused.
    pub fn first_rows_as_outputs(&mut self, logits: TensorRef) -> Result<TensorRef> {
        self.inputs.out_ids = None;
        let n = self.shape.n_outputs as i64;
        let first = |g: &mut Graph, t: TensorRef| -> Result<TensorRef> {
            let v = g.view(t, &[t.ne()[0], n], &[t.nb()[1]], 0)?;
            g.cont(v).map_err(Error::from)
        };
        if let Some(h) = self.hidden {
            self.hidden = Some(first(&mut self.g, h)?);
        }
        first(&mut self.g, logits)
    }

    /// Keep only the rows of the requested outputs (applied once, in the last layer).
    pub fn select_outputs(&mut self, x: TensorRef) -> Result<TensorRef> {
        match self.inputs.out_ids {
            Some(ids) => self.g.get_rows(x, ids).map_err(Error::from),
            None => Ok(x),
        }
    }

    /// Kimi-K3's SiTU: `β·tanh(gate/β)·sigmoid(gate)` times `up`, itself `β'·tanh(up/β')` when
    /// the up branch's β' is set (`HParams::situ_beta`, `situ_linear_beta`).
    pub fn situ(&mut self, gate: TensorRef, up: TensorRef) -> Result<TensorRef> {
        let (beta, linear_beta) = (self.hp.situ_beta, self.hp.situ_linear_beta);
        let squashed = |bd: &mut Builder, x: TensorRef, b: f32| -> Result<TensorRef> {
            let t = bd.g.scale(x, 1.0 / b)?;
            let t = bd.g.tanh(t)?;
            bd.g.scale(t, b).map_err(Error::from)
        };
        let a = squashed(self, gate, beta)?;
        let s = self.g.sigmoid(gate)?;
        let a = self.g.mul(a, s)?;
        let up = if linear_beta > 0.0 {
            squashed(self, up, linear_beta)?
        } else {
            up
        };
        self.g.mul(a, up).map_err(Error::from)
    }

    /// down(situ(gate x, up x)) over `ffn_{gate,up,down}{suffix}`, unscaled and unbiased.
    pub fn situ_ffn(&mut self, il: usize, x: TensorRef, suffix: &str) -> Result<TensorRef> {
        let gate = self.layer_matmul(il, &format!("ffn_gate{suffix}.weight"), x)?;
        let up = self.layer_matmul(il, &format!("ffn_up{suffix}.weight"), x)?;
        let h = self.situ(gate, up)?;
        self.layer_matmul(il, &format!("ffn_down{suffix}.weight"), h)
    }

    /// down(act(gate x) * up x), as `ffn` says: the activation, and whether the weights' scales
    /// and biases apply (some of llama.cpp's architectures load them but leave them out).
    pub fn gated_ffn(&mut self, il: usize, x: TensorRef, ffn: Ffn) -> Result<TensorRef> {
        self.gated_ffn_named(il, x, ffn, "")
    }

    /// The same over `ffn_{up,gate,down}{suffix}` (a shared expert: "_shexp").
    pub fn gated_ffn_named(&mut self, il: usize, x: TensorRef, ffn: Ffn, suffix: &str) -> Result<TensorRef> {
        let [up, gate, down] = ["ffn_up", "ffn_gate", "ffn_down"].map(|n| format!("{n}{suffix}"));
        self.gated_ffn_of(il, x, ffn, [&up, &gate, &down])
    }

    /// The same over the layer's weights `[up, gate, down]` (their names without `.weight`).
    pub fn gated_ffn_of(
        &mut self,
        il: usize,
        x: TensorRef,
        ffn: Ffn,
        [up, gate, down]: [&str; 3],
    ) -> Result<TensorRef> {
        let l = Some(il);
        let up = self.ffn_projection(il, up, x, ffn, Some("ffn_up"))?;
        let gate = self.ffn_projection(il, gate, x, ffn, Some("ffn_gate"))?;
        let limit = self.hp.swiglu_clamp_shexp.get(il).copied().filter(|&l| l > 1e-6);
        let (h, act) = match (ffn.gelu, limit) {
            (true, _) => (self.g.geglu(gate, up)?, "ffn_geglu"),
            _ if ffn.oai => (self.g.swiglu_oai(gate, up, OAI_ALPHA, OAI_LIMIT)?, "ffn_swiglu_oai"),
            (false, Some(limit)) => (self.swiglu_clamped(gate, up, limit)?, "ffn_swiglu_limited"),
            (false, None) => (self.g.swiglu(gate, up)?, "ffn_swiglu"),
        };
        let h = self.name(h, act, l);
        self.ffn_projection(il, down, h, ffn, None)
    }

    /// SwiGLU with a limit, in the form the model uses (`HParams::swiglu_clamp_fused`).
    fn swiglu_clamped(&mut self, gate: TensorRef, up: TensorRef, limit: f32) -> Result<TensorRef> {
        if self.hp.swiglu_clamp_fused {
            return self.g.swiglu_clamp(gate, up, limit).map_err(Error::from);
        }
        let up = self.g.clamp(up, -limit, limit)?;
        let act = self.g.silu(gate)?;
        let act = self.g.clamp(act, f32::NEG_INFINITY, limit)?;
        self.g.mul(act, up).map_err(Error::from)
    }

    /// `blk.{il}.{name}.weight` times `x`, then its bias and its scale as `ffn` says (each step
    /// named after `label` when given).
    fn ffn_projection(
        &mut self,
        il: usize,
        name: &str,
        x: TensorRef,
        ffn: Ffn,
        label: Option<&str>,
    ) -> Result<TensorRef> {
        let w = self.layer_weight(il, &format!("{name}.weight"))?;
        let b = self
            .layer_weight_opt(il, &format!("{name}.bias"))
            .filter(|_| ffn.biased);
        let order = Order::BiasThenScale { scaled: ffn.scaled };
        self.project_named(w, b, x, order, label.map(|l| (l, il)))
    }

    /// A mixture-of-experts FFN over `x` ([n_embd, n_tokens]), as llama.cpp builds it: the router
    /// `ffn_gate_inp` picks `n_expert_used` experts per token, whose gated FFNs
    /// (`ffn_{gate,up,down}_exps`, the gate optional; SiLU) are mixed by the router's weights.
    pub fn moe_ffn(&mut self, il: usize, x: TensorRef, moe: Moe) -> Result<TensorRef> {
        self.moe_ffn_routed(il, x, x, moe)
    }

    /// The same with the router reading `router_x` rather than the experts' input `x` (which a
    /// latent projection may have narrowed).
    pub fn moe_ffn_routed(&mut self, il: usize, x: TensorRef, router_x: TensorRef, moe: Moe) -> Result<TensorRef> {
        let logits = self.router_logits(il, router_x)?;
        self.moe_ffn_from_logits(il, x, logits, moe)
    }

    /// The router's logits for `x`: `ffn_gate_inp` times it, plus the router's bias if any
    /// ([n_expert, n_tokens]).
    pub fn router_logits(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        let l = Some(il);
        let router = self.layer_weight(il, "ffn_gate_inp.weight")?;
        let mut logits = self.weight_mm(router, x)?;
        logits = self.name(logits, "ffn_moe_logits", l);
        if let Some(b) = self.layer_weight_opt(il, "ffn_gate_inp.bias") {
            logits = self.add(logits, b)?;
            logits = self.name(logits, "ffn_moe_logits_biased", l);
        }
        Ok(logits)
    }

    /// The experts over `x`, routed by `logits` (`router_logits`, computed where the architecture
    /// computes them).
    pub fn moe_ffn_from_logits(&mut self, il: usize, x: TensorRef, logits: TensorRef, moe: Moe) -> Result<TensorRef> {
        let (picked, weights) = self.moe_route(il, logits, moe)?;
        self.moe_experts(il, x, picked, weights, moe, "_exps")
    }

    /// How many experts a token picks: every one in a warm-up, as llama.cpp's does, so each
    /// expert's weights are read.
    pub fn moe_pick_count(&self, moe: Moe) -> i64 {
        if self.params.warmup && moe.warmup_all {
            i64::from(self.hp.n_expert)
        } else {
            i64::from(self.hp.n_expert_used)
        }
    }

    /// The experts each token picks from the router's `logits` ([n_expert, n_tokens]) and their
    /// weights: the picked ids, I32 [n_pick, n_tokens], and the weights, [1, n_pick, n_tokens].
    pub fn moe_route(&mut self, il: usize, logits: TensorRef, moe: Moe) -> Result<(TensorRef, TensorRef)> {
        // HY-V3 names the bias without its suffix.
        let bias = self
            .layer_weight_opt(il, "exp_probs_b.bias")
            .or_else(|| self.layer_weight_opt(il, "exp_probs_b"));
        self.moe_route_biased(il, logits, moe, bias)
    }

    /// The same with the per-expert selection bias `bias` (a per-expert bias steers the choice
    /// only; the weights come from the unbiased probabilities).
    pub fn moe_route_biased(
        &mut self,
        il: usize,
        logits: TensorRef,
        moe: Moe,
        bias: Option<TensorRef>,
    ) -> Result<(TensorRef, TensorRef)> {
        let l = Some(il);
        let n_pick = self.moe_pick_count(moe);
        let probs = self.moe_probs(il, logits, moe)?;
        let selection = if moe.weights_first {
            logits
        } else if moe.pick_by_sigmoid {
            self.g.sigmoid(logits)?
        } else if let Some(b) = bias {
            let biased = self.add(probs, b)?;
            self.name(biased, "ffn_moe_probs_biased", l)
        } else {
            probs
        };
        let picked = self.g.argsort_top_k(selection, n_pick)?;
        let picked = self.name(picked, "ffn_moe_topk", l);
        let weights = self.moe_weights(il, probs, picked, moe)?;
        Ok((picked, weights))
    }

    /// The router's `logits` turned into expert probabilities as `moe.gating` says.
    pub fn moe_probs(&mut self, il: usize, logits: TensorRef, moe: Moe) -> Result<TensorRef> {
        let probs = match moe.gating {
            Gating::Softmax => self.g.soft_max_rows(logits)?,
            Gating::Sigmoid => self.g.sigmoid(logits)?,
            Gating::SoftmaxWeight => logits,
            Gating::SqrtSoftplus => {
                let s = self.g.softplus(logits)?;
                self.g.sqrt(s)?
            }
        };
        Ok(self.name(probs, "ffn_moe_probs", Some(il)))
    }

    /// The weights of the `picked` experts ([n_pick, n_tokens]) read from `probs` ([n_expert,
    /// n_tokens]): softmaxed, normalised and scaled as `moe` and the model say.
    pub fn moe_weights(&mut self, il: usize, probs: TensorRef, picked: TensorRef, moe: Moe) -> Result<TensorRef> {
        let l = Some(il);
        let hp = self.hp;
        let [n_expert, n_tokens, ..] = probs.ne();
        let n_pick = picked.ne()[0];
        let probs = self.g.reshape(probs, &[1, n_expert, n_tokens])?;
        let mut weights = self.g.get_rows(probs, picked)?;
        weights = self.name(weights, "ffn_moe_weights", l);
        if moe.gating == Gating::SoftmaxWeight {
            let w = self.g.reshape(weights, &[n_pick, n_tokens])?;
            let w = self.g.soft_max_rows(w)?;
            weights = self.g.reshape(w, &[1, n_pick, n_tokens])?;
            weights = self.name(weights, "ffn_moe_weights_softmax", l);
        }
        if moe.normalize {
            let w = self.g.reshape(weights, &[n_pick, n_tokens])?;
            let sum = self.g.sum_rows(w)?;
            // The smallest normal F16, so a sum of zeros does not divide by zero.
            let sum = self.g.clamp(sum, 6.103_515_6e-5, f32::INFINITY)?;
            let w = self.g.div(w, sum)?;
            weights = self.g.reshape(w, &[1, n_pick, n_tokens])?;
            weights = self.name(weights, "ffn_moe_weights_norm", l);
        }
        if hp.expert_weights_scale != 0.0 && hp.expert_weights_scale != 1.0 {
            weights = self.scale(weights, hp.expert_weights_scale)?;
        }
        // Early, as llama.cpp does, so the node order (and any fusion) is the same.
        self.g.expand(weights);
        Ok(weights)
    }

    /// `x` through the `picked` experts of layer `il`'s stacks `ffn_{gate,up,down}{suffix}` (or
    /// `ffn_gate_up{suffix}`), weighted by `weights`, summed over the first `n_expert_used`.
    pub fn moe_experts(
        &mut self,
        il: usize,
        x: TensorRef,
        picked: TensorRef,
        weights: TensorRef,
        moe: Moe,
        suffix: &str,
    ) -> Result<TensorRef> {
        let l = Some(il);
        let hp = self.hp;
        let n_used = i64::from(hp.n_expert_used);
        let n_pick = picked.ne()[0];
        let [n_embd, n_tokens, ..] = x.ne();
        let mut x = self.g.reshape(x, &[n_embd, 1, n_tokens])?;
        if moe.weights_first {
            let repeated = self.g.repeat(x, [n_embd, n_pick, n_tokens, 1])?;
            x = self.g.mul(repeated, weights)?;
            x = self.name(x, "ffn_moe_weighted", l);
        }
        let (up, gate) = if self
            .layer_weight_opt(il, &format!("ffn_gate_up{suffix}.weight"))
            .is_some()
        {
            // Gate and up in one stack: one product, split into its halves.
            let gate_up = self.experts_linear(il, &format!("ffn_gate_up{suffix}"), x, picked, moe.scaled)?;
            let gate_up = self.name(gate_up, "ffn_moe_gate_up", l);
            let [n2, n_p, n_t, _] = gate_up.ne();
            let nb = gate_up.nb();
            let half = |bd: &mut Builder, at: usize| bd.g.view(gate_up, &[n2 / 2, n_p, n_t], &[nb[1], nb[2]], at);
            let gate = half(self, 0)?;
            let up = half(self, (n2 / 2) as usize * nb[0])?;
            (up, Some(gate))
        } else {
            let up = self.experts_linear(il, &format!("ffn_up{suffix}"), x, picked, moe.scaled)?;
            let up = self.name(up, "ffn_moe_up", l);
            let gate = if self.layer_weight_opt(il, &format!("ffn_gate{suffix}.weight")).is_some() {
                let gate = self.experts_linear(il, &format!("ffn_gate{suffix}"), x, picked, moe.scaled)?;
                Some(self.name(gate, "ffn_moe_gate", l))
            } else {
                None
            };
            (up, gate)
        };
        // A layer's SwiGLU limit, in the model's form.
        let limit = hp.swiglu_clamp_exp.get(il).copied().filter(|&l| l > 1e-6);
        let h = match (gate, moe.act) {
            (Some(gate), ExpertAct::Silu) => match limit {
                Some(limit) => Ok(self.swiglu_clamped(gate, up, limit)?),
                None => self.g.swiglu(gate, up),
            },
            (None, ExpertAct::Silu) => self.g.silu(up),
            (Some(gate), ExpertAct::SwigluOai) => self.g.swiglu_oai(gate, up, OAI_ALPHA, OAI_LIMIT),
            (None, ExpertAct::SwigluOai) => return Err(Error::model("gpt-oss experts need a gate")),
            (None, ExpertAct::ReluSqr) => self.g.relu(up).and_then(|h| self.g.sqr(h)),
            (Some(gate), ExpertAct::Relu) => self.g.reglu(gate, up),
            (None, ExpertAct::Relu) => self.g.relu(up),
            (Some(gate), ExpertAct::Gelu) => self.g.geglu(gate, up),
            (None, ExpertAct::Gelu) => self.g.gelu(up),
            (gate, ExpertAct::Situ) => {
                let gate = gate.ok_or_else(|| Error::model("SiTU experts need a gate"))?;
                Ok(self.situ(gate, up)?)
            }
            (Some(_), ExpertAct::ReluSqr) => {
                return Err(Error::model(
                    "squared-ReLU experts have no gate (llama.cpp has no gated form)",
                ))
            }
        }?;
        let experts = self.experts_linear(il, &format!("ffn_down{suffix}"), h, picked, moe.scaled)?;
        let experts = self.name(experts, "ffn_moe_down", l);
        let experts = if moe.weights_first {
            experts
        } else {
            self.g.mul(experts, weights)?
        };
        self.g.expand(experts);

        // Sum over the first n_used picked experts (all of them but in a warm-up): views first,
        // then the additions, in llama.cpp's order.
        let [_, nb1, nb2, _] = experts.nb();
        let mut views = Vec::with_capacity(n_used as usize);
        for i in 0..n_used as usize {
            let v = self.g.view(experts, &[n_embd, n_tokens], &[nb2], i * nb1)?;
            self.g.expand(v);
            views.push(v);
        }
        let mut out = views[0];
        for &v in &views[1..] {
            out = self.add(out, v)?;
            self.g.expand(out);
        }
        if n_used == 1 {
            out = self.g.cont(out)?;
        }
        Ok(self.name(out, "ffn_moe_out", l))
    }

    /// The picked experts' matrices of the stack `blk.{il}.{name}.weight` times `x` ([k, 1 or
    /// n_pick, n_tokens]), each times its expert's scale when `scaled` and the stack has scales,
    /// plus its expert's bias when the stack has biases.
    fn experts_linear(
        &mut self,
        il: usize,
        name: &str,
        x: TensorRef,
        picked: TensorRef,
        scaled: bool,
    ) -> Result<TensorRef> {
        let w = self.layer_weight(il, &format!("{name}.weight"))?;
        let mut y = self.g.mul_mat_id(w, x, picked)?;
        if let Some(s) = self.weight_scale(w).filter(|_| scaled) {
            let n_expert = s.ne()[0];
            let n_tokens = x.ne()[2];
            let s = self.g.reshape(s, &[1, n_expert, 1])?;
            let s = self.g.repeat(s, [1, n_expert, n_tokens, 1])?;
            let s = self.g.get_rows(s, picked)?;
            y = self.g.mul(y, s)?;
        }
        y = self.add_lora(w, x, y, Some(picked))?;
        if let Some(b) = self.layer_weight_opt(il, &format!("{name}.bias")) {
            y = self.g.add_id(y, b, picked)?;
        }
        Ok(y)
    }

    /// An ungated FFN with squared ReLU (Nemotron-H): projections with their biases and scales.
    pub fn relu_sqr_ffn(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        self.relu_sqr_ffn_named(il, x, "", RELU_SQR_FFN)
    }

    /// The same over `ffn_up{suffix}` and `ffn_down{suffix}` (a shared expert: "_shexp"), with
    /// the weights' scales and biases as `ffn` says.
    pub fn relu_sqr_ffn_named(&mut self, il: usize, x: TensorRef, suffix: &str, ffn: Ffn) -> Result<TensorRef> {
        let up = self.ffn_projection(il, &format!("ffn_up{suffix}"), x, ffn, Some("ffn_up"))?;
        let h = self.g.relu(up)?;
        let h = self.g.sqr(h)?;
        self.ffn_projection(il, &format!("ffn_down{suffix}"), h, ffn, None)
    }

    /// down(gelu(up x)), each with its bias (no scales), GELU's output divided by the layer's
    /// `ffn.act.scales` where it has them (MPT): BERT's and GPT-2's FFN.
    pub fn gelu_ffn(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        let ffn = Ffn {
            biased: true,
            ..Ffn::default()
        };
        let up = self.ffn_projection(il, "ffn_up", x, ffn, Some("ffn_up"))?;
        let mut h = self.g.gelu(up)?;
        if let Some(scales) = self.layer_weight_opt(il, "ffn.act.scales") {
            h = self.g.div(h, scales)?;
        }
        self.ffn_projection(il, "ffn_down", h, ffn, None)
    }

    /// down(swiglu(up x)): the gate and up projections fused in `ffn_up` (Phi-3), no biases or
    /// scales.
    pub fn fused_gated_ffn(&mut self, il: usize, x: TensorRef) -> Result<TensorRef> {
        self.fused_gated_ffn_named(il, x, "")
    }

    /// The same over `ffn_up{suffix}` and `ffn_down{suffix}` (a shared expert's, `_shexp`).
    pub fn fused_gated_ffn_named(&mut self, il: usize, x: TensorRef, suffix: &str) -> Result<TensorRef> {
        let up_w = self.layer_weight(il, &format!("ffn_up{suffix}.weight"))?;
        let down_w = self.layer_weight(il, &format!("ffn_down{suffix}.weight"))?;
        let up = self.weight_mm(up_w, x)?;
        let h = self.g.swiglu_fused(up)?;
        self.weight_mm(down_w, h)
    }

    /// Final norm and the output head ([n_vocab, n_outputs] logits). Models without a separate
    /// head reuse the token embeddings.
    pub fn output_head(&mut self, x: TensorRef) -> Result<TensorRef> {
        self.output_head_after("output_norm.weight", x)
    }

    /// The output head with its norm's weight named `norm` (LFM2's is `token_embd_norm`).
    pub fn output_head_after(&mut self, norm: &str, x: TensorRef) -> Result<TensorRef> {
        self.output_head_with(norm, x, false)
    }

    /// The output head of an architecture whose layers keep every row: the output rows are
    /// selected after the final norm.
    pub fn output_head_selecting(&mut self, x: TensorRef) -> Result<TensorRef> {
        self.output_head_with("output_norm.weight", x, true)
    }

    fn output_head_with(&mut self, norm: &str, x: TensorRef, select: bool) -> Result<TensorRef> {
        let norm_w = self.weight(norm)?;
        let x = self.g.rms_norm(x, self.hp.rms_eps)?;
        let x = self.name(x, "norm", None);
        let x = self.g.mul(x, norm_w)?;
        let x = if select { self.select_outputs(x)? } else { x };
        self.output_head_unnormed(x)
    }

    /// The output projection of hidden states `x` the architecture normalised itself.
    pub fn output_head_unnormed(&mut self, x: TensorRef) -> Result<TensorRef> {
        let bias = self.weight_opt("output.bias");
        self.output_projection(x, bias)
    }

    /// The output head of an architecture that loads the head's bias but leaves it out (Dream).
    pub fn output_head_without_bias(&mut self, x: TensorRef) -> Result<TensorRef> {
        let norm_w = self.weight("output_norm.weight")?;
        let x = self.rms_norm(x, norm_w)?;
        self.output_projection(x, None)
    }

    /// The output head over the already normalised `x` (which becomes `result_norm`, the hidden
    /// state embeddings read).
    pub fn output_projection(&mut self, x: TensorRef, bias: Option<TensorRef>) -> Result<TensorRef> {
        let x = self.name(x, "result_norm", None);
        self.hidden = Some(x);
        let head = match self.weight_opt("output.weight") {
            Some(w) => w,
            None => self.weight("token_embd.weight")?,
        };
        self.linear(head, bias, x)
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
    /// attention and logit soft caps, Grok's output scale for its attention scores).
    pub fn soft_cap(&mut self, x: TensorRef, scale: f32, cap: f32) -> Result<TensorRef> {
        let x = self.scale(x, scale / cap)?;
        let x = self.tanh(x)?;
        self.scale(x, cap)
    }
}

/// The rotary frequency factors of the model, if it has any: Llama 3's `rope_freqs`, or
/// LongRoPE's long or short factors as the context's length asks.
pub fn rope_factors(model: &Model, params: &GraphParams) -> Option<TensorRef> {
    let w = model.weights()?;
    w.get("rope_freqs.weight").or_else(|| {
        w.get(if params.rope.long_factors {
            "rope_factors_long.weight"
        } else {
            "rope_factors_short.weight"
        })
    })
}

/// Whether layer `il` attends through the sliding window.
pub fn is_sliding(hp: &HParams, il: usize) -> bool {
    hp.n_swa > 0 && hp.swa_layers.get(il).copied().unwrap_or(false)
}

/// The rotary base frequency and frequency scale of layer `il`: sliding-window layers keep the
/// model's own (llama.cpp's `rope_freq_base_train_swa` and `rope_freq_scale_train_swa`), the
/// others take the context's.
fn rope_freqs(hp: &HParams, params: &GraphParams, il: usize) -> (f32, f32) {
    if is_sliding(hp, il) {
        (hp.rope_freq_base_swa, hp.rope_freq_scale_swa)
    } else {
        (params.rope.freq_base, params.rope.freq_scale)
    }
}
