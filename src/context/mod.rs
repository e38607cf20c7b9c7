//! `Context`: one inference session over a model. It owns its CPU backend, ONE scheduler (made
//! here, kept for its life, with compute buffers reserved for the worst case up front), the KV
//! cache, the last built graph (reused while ubatch shapes repeat), the output buffer and the
//! performance counters.

pub mod batch;
mod cross;
mod cvec;
mod decode;
mod memory;
mod perf;
mod rope;
mod sampling;
mod shift;
mod state;
mod train;

pub use batch::{AddError, Batch, BatchExt, BatchInput};
pub use decode::DecodeStatus;
pub use perf::{Counters, PerfData};
pub use sampling::SampledRow;
pub use train::OptSetup;

use crate::arch::Architecture;
use crate::error::{Error, Result};
use crate::ggml::{
    is_quantized, AbortCallback, BufferType, BufferTypeId, CpuBackend, DeviceBackend, EvalCallback, RawType, Scheduler,
    TensorRef, MAX_THREADS,
};
use crate::graph::{Adapters, Builder, Built, Decoder, GraphParams, Pooling, RecurrentShape, Shape};
use crate::kv::{KvCache, MAX_SEQ};
use crate::model::hparams::RopeScaling;
use crate::model::lora::LoraAdapter;
use crate::model::spec::Memory;
use crate::model::Model;
use crate::recurrent::Recurrent;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

/// llama.cpp pads context sizes to this.
const CTX_PAD: u32 = 256;

/// A thread count as ggml takes it: up to its maximum; zero or less means at least one thread.
fn thread_count(n: i32) -> Result<i32> {
    if n > MAX_THREADS {
        return Err(Error::invalid(format!(
            "{n} threads: at most {MAX_THREADS} are supported"
        )));
    }
    Ok(n.max(1))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlashAttn {
    Auto,
    On,
    Off,
}

/// What `llama_context_params` asks for, converted and range-checked by the FFI layer.
#[derive(Clone)]
pub struct Params {
    /// 0: the model's training context.
    pub n_ctx: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    /// Outputs a batch may ask for (0: n_batch).
    pub n_outputs_max: u32,
    /// Outputs of one sequence a batch may ask for when it has a backend sampler (0: as many as
    /// `n_outputs_max`).
    pub n_outputs_max_per_seq: u32,
    /// Recurrent-state snapshots kept per sequence for rolling back (0: none).
    pub n_rs_seq: u32,
    pub n_threads: i32,
    pub n_threads_batch: i32,
    pub type_k: RawType,
    pub type_v: RawType,
    /// A layer's KV cache and recurrent states on that layer's device (else on the CPU).
    pub offload_kqv: bool,
    /// Let a device run ops whose weights are on the CPU when its backend asks (ggml's op offload).
    pub op_offload: bool,
    pub flash_attn: FlashAttn,
    pub kv_unified: bool,
    /// The sliding-window layers' cache as large as the full layers' (else sized for the window).
    pub swa_full: bool,
    pub causal: Option<bool>,
    pub embeddings: bool,
    /// None: the model's choice (none for the architectures we run).
    pub pooling: Option<Pooling>,
    pub no_perf: bool,
    /// None: the model's.
    pub rope_scaling: Option<RopeScaling>,
    /// 0: the model's value.
    pub rope_freq_base: f32,
    pub rope_freq_scale: f32,
    /// Negative: the default.
    pub yarn_ext_factor: f32,
    pub yarn_attn_factor: f32,
    pub yarn_beta_fast: f32,
    pub yarn_beta_slow: f32,
    pub yarn_orig_ctx: u32,
    pub abort: Option<AbortCallback>,
    pub cb_eval: Option<EvalCallback>,
}

/// The values a context actually uses (what the `llama_n_*` getters report).
#[derive(Debug, Clone, Copy)]
pub struct Resolved {
    pub n_ctx: u32,
    pub n_ctx_seq: u32,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub n_seq_max: u32,
    pub n_outputs_max: u32,
    pub n_outputs_max_per_seq: u32,
    /// As asked for where the architecture can roll its recurrent state back, else 0.
    pub n_rs_seq: u32,
    pub n_threads: i32,
    pub n_threads_batch: i32,
    pub graph: GraphParams,
    pub embeddings: bool,
    pub pooling: Pooling,
    pub no_perf: bool,
    pub kv_unified: bool,
}

pub struct Context<'m> {
    pub model: &'m Model,
    /// The model's architecture: its graph body and the memory it keeps (None on a vocab-only
    /// model).
    arch: Option<&'static dyn Architecture>,
    pub params: Resolved,
    // Drop order: graph, scheduler, memories, then the backend they all use.
    graph: Option<(Shape, Built)>,
    /// The backend samplers' part of `graph`.
    sampling_graph: Option<sampling::SamplingGraph>,
    /// Set up by `opt_init`; its optimizer uses `sched` (and goes before it).
    training: Option<train::Training>,
    sched: Scheduler,
    /// Graph nodes the scheduler was made for.
    sched_nodes: usize,
    cb_eval: Option<EvalCallback>,
    op_offload: bool,
    /// The attention cache (without layers when the architecture keeps none).
    pub kv: KvCache,
    /// Recurrent states, for architectures with recurrent layers.
    pub rs: Option<Recurrent>,
    backend: CpuBackend,
    /// Backends of the devices holding the model's offloaded layers (the scheduler puts them
    /// before the CPU's).
    devices: Vec<DeviceBackend>,
    /// Logits of the last decode's outputs, row-major [n_outputs][n_vocab].
    logits: Vec<f32>,
    /// With embeddings and no pooling: the outputs' embeddings, [n_outputs][n_embd].
    embd: Vec<f32>,
    /// With pooled embeddings: each sequence's, from the last decode that held it.
    embd_seq: BTreeMap<usize, Vec<f32>>,
    /// Per token of the last batch, its row in `logits` (-1: no output).
    output_ids: Vec<i32>,
    /// Every token id in order: the candidates llama.h reports when no backend sampler ran.
    all_token_ids: Vec<i32>,
    /// The Hadamard matrices of the cache's rotations (keys, values, indexer keys, sliding-window
    /// layers' keys) as input bytes, made once; empty when not rotated.
    rotation_bytes: [Vec<u8>; 4],
    /// Backend samplers and what they left.
    sampling: sampling::Sampling,
    n_outputs: usize,
    reuse_graphs: bool,
    /// The LoRA adapters applied (those set with a scale other than 0, in the order given) and
    /// their scales; graphs are built for the adapters, the scales are their inputs.
    loras: Vec<Arc<LoraAdapter>>,
    lora_scales: Vec<f32>,
    /// The control vector, and its direction per layer where it applies (the graph reads them;
    /// empty for an architecture whose llama.cpp graph has none).
    cvec: cvec::ControlVector,
    cvec_layers: Vec<Option<TensorRef>>,
    pub perf: PerfData,
    pub counters: Counters,
    /// The last graph `reserve_graph` made, kept for its caller.
    reserved: Option<crate::graph::Built>,
    /// An encoder-decoder's encoder outputs from the last `llama_encode`, for its decoder.
    cross: Option<crate::graph::Cross>,
}

fn pad(x: u32, n: u32) -> u32 {
    x.div_ceil(n).saturating_mul(n)
}

impl<'m> Context<'m> {
    /// A context over `model`. On a vocab-only model (no hyper-parameters, no weights) it is what
    /// llama.cpp gives there: tokenizer, chat templates and parameter getters work, it has no
    /// memory, and decoding is refused.
    pub fn new(model: &'m Model, p: Params) -> Result<Context<'m>> {
        let hp = model.hparams.as_ref();
        let n_seq_max = p.n_seq_max.max(1);
        if n_seq_max as usize > MAX_SEQ {
            return Err(Error::invalid(format!("n_seq_max = {n_seq_max} exceeds {MAX_SEQ}")));
        }
        // Unspecified: as the model says (encoders attend both ways).
        let causal = p.causal.unwrap_or(hp.is_none_or(|h| h.causal));
        let n_ctx_asked = if p.n_ctx == 0 {
            model.n_ctx_train().unwrap_or(0)
        } else {
            p.n_ctx
        };
        let mut n_ctx = pad(n_ctx_asked, CTX_PAD);
        let n_ctx_seq = if p.kv_unified {
            n_ctx
        } else {
            let per = pad(n_ctx / n_seq_max, CTX_PAD);
            n_ctx = per.saturating_mul(n_seq_max);
            per
        };
        if n_ctx_seq == 0 && !p.kv_unified {
            return Err(Error::invalid(
                "n_ctx_seq == 0: give n_ctx (the model has no training context to default to)",
            ));
        }
        if (n_ctx == 0 && hp.is_some()) || n_ctx > (1 << 24) {
            return Err(Error::invalid(format!("n_ctx = {n_ctx} is out of range")));
        }
        if p.n_batch == 0 {
            return Err(Error::invalid("n_batch must be positive"));
        }
        // Bounded by the context size asked for, before padding, as llama.cpp bounds it.
        let n_batch = if causal { n_ctx_asked.min(p.n_batch) } else { p.n_batch };
        let n_ubatch = n_batch.min(if p.n_ubatch == 0 { n_batch } else { p.n_ubatch });
        let n_outputs_max = if p.n_outputs_max == 0 { n_batch } else { p.n_outputs_max };
        let n_outputs_max_per_seq = match p.n_outputs_max_per_seq {
            0 => n_outputs_max,
            n => n.min(n_outputs_max),
        };
        check_cache_type("type_k", p.type_k)?;
        check_cache_type("type_v", p.type_v)?;
        let capped = hp.is_some_and(|h| h.kq_tanh_cap != 0.0);
        if capped && p.flash_attn != FlashAttn::Off {
            crate::log_warn!("context: flash attention cannot cap attention scores as this model needs: turned off");
        }
        let flash_attn = p.flash_attn != FlashAttn::Off && !capped;
        if let (true, Some(hp)) = (flash_attn, hp) {
            for il in 0..hp.n_layer as usize {
                check_head_blocks("K", "k", p.type_k, hp.head_k(il))?;
                check_head_blocks("V", "v", p.type_v, hp.head_v(il))?;
            }
        }
        if !flash_attn && is_quantized(p.type_v) {
            return Err(Error::invalid("a quantized V cache (type_v) requires flash attention"));
        }
        let pooling = p
            .pooling
            .or_else(|| hp.and_then(|h| Pooling::from_llama(h.pooling_type)))
            .unwrap_or(Pooling::None);
        let arch = match hp {
            Some(hp) => Some(crate::arch::find(hp.arch_name)?),
            None => None,
        };
        let memory = arch.map_or(Memory::None, |a| a.facts().memory);
        // A latent cache's values are its keys: one type for both, as llama.cpp requires.
        if hp.is_some_and(|h| h.kv_latent()) && p.type_k != p.type_v {
            return Err(Error::invalid(format!(
                "this model's cache holds latent keys that are also its values: type_k ({}) and type_v ({}) must be the same",
                crate::ggml::type_name(p.type_k),
                crate::ggml::type_name(p.type_v)
            )));
        }
        // Only a KV cache is rotated (llama.cpp's encoders and recurrent layers keep none).
        let cached = matches!(memory, Memory::KvCache | Memory::Hybrid | Memory::Compressed);
        let idx_rot = hp
            .filter(|hp| cached && hp.indexer.hadamard)
            .map_or(0, |hp| hp.indexer.head_size);
        let ((k_rot, k_rot_swa), v_rot) = match hp {
            Some(hp) if cached => {
                let disabled = crate::graph::rotation::disabled_by_env();
                if disabled {
                    crate::log_warn!("context: attention rotation force disabled (LLAMA_ATTN_ROT_DISABLE)");
                }
                // A keys-only cache has no values to rotate. Whether to rotate is the first layer's
                // heads' call; each set of cells then rotates by its own heads.
                let head_v = if hp.kv_latent() { 0 } else { hp.head_v(0) };
                let (k, v) = crate::graph::rotation::sizes(p.type_k, p.type_v, hp.head_k(0), head_v, disabled);
                let of = |head: u32| {
                    if k > 0 {
                        crate::graph::rotation::key_size(head)
                    } else {
                        0
                    }
                };
                ((of(hp.n_embd_head_k), of(hp.n_embd_head_k_swa)), v)
            }
            _ => ((0, 0), 0),
        };
        let graph = GraphParams {
            flash_attn,
            causal,
            warmup: false,
            rope: rope::settings(&p, hp, n_ctx_seq),
            embeddings: p.embeddings.then_some(pooling),
            k_rot,
            k_rot_swa,
            v_rot,
            idx_rot,
            block_sparse: flash_attn && (n_seq_max == 1 || !p.kv_unified) && hp.is_some_and(|hp| hp.indexer.block > 0),
            training: false,
        };
        let (n_threads, n_threads_batch) = (thread_count(p.n_threads)?, thread_count(p.n_threads_batch)?);
        // Each computation sets its thread count; until one has, ggml's default holds (what
        // llama.cpp's training uses when nothing was decoded first).
        let backend = CpuBackend::new(crate::ggml::DEFAULT_THREADS)?;
        let devices = model
            .placement
            .used_devices()
            .into_iter()
            .map(DeviceBackend::new)
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // Each layer's caches on its device (with offload_kqv), else on the CPU.
        let n_layer = hp.map_or(0, |h| h.n_layer as usize);
        let cache_bufts = (0..n_layer)
            .map(|il| match p.offload_kqv {
                true => model.placement.layer_buffer_type(il),
                false => Ok(BufferType::cpu()),
            })
            .collect::<Result<Vec<_>>>()?;
        let cache_buft = |il: usize| cache_bufts.get(il).copied().unwrap_or_else(BufferType::cpu);
        // Compressed caches keep a stream per sequence whatever kv_unified says, as llama.cpp's.
        let unified = p.kv_unified && memory != Memory::Compressed;
        let n_stream = if unified { 1 } else { n_seq_max };
        let n_rs_seq = if arch.is_some_and(|a| a.facts().rollback) {
            p.n_rs_seq
        } else {
            0
        };
        let kv = match hp {
            Some(hp) if matches!(memory, Memory::KvCache | Memory::Hybrid | Memory::Compressed) => {
                let seqs_per_stream = if unified { n_seq_max } else { 1 };
                let sliding = crate::kv::sliding_size(
                    hp,
                    n_ctx_seq as usize,
                    p.swa_full,
                    seqs_per_stream as usize,
                    n_ubatch as usize,
                );
                if memory == Memory::Compressed {
                    // The indexer's keys are compressed with the others, not kept per cell.
                    let raw = crate::model::hparams::HParams {
                        indexer: Default::default(),
                        ..hp.clone()
                    };
                    let mut kv = KvCache::new(
                        &raw,
                        n_ctx_seq as usize,
                        sliding,
                        n_stream as usize,
                        (p.type_k, p.type_v),
                        !flash_attn,
                        &cache_buft,
                    )?;
                    kv.attach_compressed(crate::kv::compressed::Store::new(
                        &hp.compress_ratios,
                        hp.n_embd_head_k as usize,
                        hp.indexer.head_size as usize,
                        p.type_k,
                        n_ctx_seq as usize,
                        n_seq_max as usize,
                        n_rs_seq as usize,
                        &cache_buft,
                    )?);
                    kv
                } else {
                    KvCache::new(
                        hp,
                        n_ctx_seq as usize,
                        sliding,
                        n_stream as usize,
                        (p.type_k, p.type_v),
                        !flash_attn,
                        &cache_buft,
                    )?
                }
            }
            _ => KvCache::without_layers(n_ctx as usize),
        };
        let rs = match hp {
            Some(hp) if matches!(memory, Memory::Recurrent | Memory::Hybrid) => {
                Some(Recurrent::new(hp, n_seq_max as usize, n_rs_seq as usize, &cache_buft)?)
            }
            _ => None,
        };
        let sched_nodes = crate::graph::max_nodes(model);
        let sched = Scheduler::new(&backend, &devices, sched_nodes, p.op_offload)?;
        if let Some(cb) = p.cb_eval {
            sched.set_eval_callback(cb);
        }
        let abort = p.abort;
        let reuse_graphs = std::env::var("ENGINE_GRAPH_REUSE").map_or(true, |v| v != "0");
        if !reuse_graphs {
            crate::log_warn!("context: graph reuse disabled (ENGINE_GRAPH_REUSE=0)");
        }
        let mut ctx = Context {
            model,
            arch,
            params: Resolved {
                n_ctx,
                n_ctx_seq,
                n_batch,
                n_ubatch,
                n_seq_max,
                n_outputs_max,
                n_outputs_max_per_seq,
                n_rs_seq,
                n_threads,
                n_threads_batch,
                graph,
                embeddings: p.embeddings,
                pooling,
                no_perf: p.no_perf,
                kv_unified: p.kv_unified,
            },
            graph: None,
            sampling_graph: None,
            loras: Vec::new(),
            lora_scales: Vec::new(),
            cvec: cvec::ControlVector::default(),
            cvec_layers: Vec::new(),
            sched,
            sched_nodes,
            cb_eval: p.cb_eval,
            op_offload: p.op_offload,
            kv,
            rs,
            backend,
            devices,
            logits: Vec::new(),
            embd: Vec::new(),
            embd_seq: BTreeMap::new(),
            output_ids: Vec::new(),
            all_token_ids: (0..model.vocab.n_tokens() as i32).collect(),
            rotation_bytes: [k_rot, v_rot, idx_rot, k_rot_swa]
                .map(|n| crate::graph::rotation::matrix_bytes(n as usize)),
            sampling: sampling::Sampling::default(),
            n_outputs: 0,
            reuse_graphs,
            perf: PerfData::new(model),
            counters: Counters::default(),
            reserved: None,
            cross: None,
            training: None,
        };
        ctx.set_abort(abort);
        if hp.is_none() {
            crate::log_info!("context: on a vocab-only model: tokenizer only, no memory, decoding is refused");
            return Ok(ctx);
        }
        ctx.reserve()?;
        crate::log_info!(
            "context: n_ctx = {n_ctx} (per sequence {n_ctx_seq}), n_batch = {n_batch}, n_ubatch = {n_ubatch}, \
             n_seq_max = {n_seq_max}, flash_attn = {flash_attn}, compute buffer {:.2} MiB",
            ctx.sched.buffer_bytes() as f64 / (1024.0 * 1024.0)
        );
        Ok(ctx)
    }

    /// Size the compute buffers once, for the largest graph this context can run, then for the
    /// single-token graph generation uses.
    fn reserve(&mut self) -> Result<()> {
        let n_ubatch = self.params.n_ubatch as usize;
        for n_tokens in [n_ubatch, 1] {
            let built = self.build_worst_case(n_tokens, 1, n_tokens)?;
            self.sched.reserve(&built.graph)?;
        }
        self.counters.compute_buffer_bytes = self.sched.buffer_bytes();
        Ok(())
    }

    /// The graph of a ubatch of `n_tokens` tokens of `n_seqs` sequences with `n_outputs` outputs
    /// over the whole memory (every cell in use, as llama.cpp's worst case), reserved in the
    /// scheduler and kept until the next call (llama-ext.h's `llama_graph_reserve`).
    pub fn reserve_graph(&mut self, n_tokens: usize, n_seqs: usize, n_outputs: usize) -> Result<&crate::ggml::Graph> {
        if n_tokens == 0 || n_tokens > self.params.n_ubatch as usize || n_outputs > n_tokens {
            return Err(Error::invalid(format!(
                "a graph of {n_tokens} tokens and {n_outputs} outputs (n_ubatch is {})",
                self.params.n_ubatch
            )));
        }
        if n_seqs == 0 || n_seqs > self.params.n_seq_max as usize {
            return Err(Error::invalid(format!(
                "a graph of {n_seqs} sequences (n_seq_max is {})",
                self.params.n_seq_max
            )));
        }
        let built = self.build_worst_case(n_tokens, n_seqs, n_outputs)?;
        self.sched.reserve(&built.graph)?;
        Ok(&self.reserved.insert(built).graph)
    }

    fn build_worst_case(&self, n_tokens: usize, n_seqs: usize, n_outputs: usize) -> Result<crate::graph::Built> {
        let shape = Shape {
            n_tokens,
            n_streams: 1,
            first_stream: 0,
            n_outputs,
            // Without a cache, tokens attend to the ubatch.
            n_kv: if self.uses_kv() {
                self.kv.stream_size()
            } else {
                n_tokens
            },
            kv_copies: 1,
            n_kv_swa: if !self.uses_kv() {
                n_tokens
            } else if self.kv.has_sliding() {
                self.kv.stream_size_of(true)
            } else {
                0
            },
            n_pos: self.block_sparse_positions(self.kv.stream_size()),
            n_seqs: self.pooled_seqs(self.params.n_seq_max as usize),
            // The whole recurrent memory, as llama.cpp reserves it.
            recurrent: self.rs.as_ref().map(|rs| RecurrentShape {
                n_seqs,
                window: crate::recurrent::Window {
                    head: 0,
                    n: rs.size(),
                    zero: 0,
                },
            }),
            memory: self.kv.worst_case_shape(n_tokens, self.params.n_seq_max as usize),
            embd_input: false,
            encoder: false,
            n_enc: self.n_enc_reserved(),
        };
        Builder::build(
            self.model,
            self.decoder()?,
            self.memories(),
            shape,
            (self.params.graph, Adapters::default()),
            0,
        )
    }

    /// Apply the LoRA adapters `adapters` at their scales from the next decode on: those with a
    /// scale of 0 are left out, and an adapter given twice counts once (at its first scale), as
    /// in llama.cpp. Only a change of adapters builds graphs anew; new scales are inputs.
    pub fn set_loras(&mut self, adapters: Vec<(Arc<LoraAdapter>, f32)>) {
        let mut loras: Vec<Arc<LoraAdapter>> = Vec::new();
        let mut scales = Vec::new();
        for (a, s) in adapters {
            if s != 0.0 && !loras.iter().any(|l| Arc::ptr_eq(l, &a)) {
                loras.push(a);
                scales.push(s);
            }
        }
        let same = loras.len() == self.loras.len() && loras.iter().zip(&self.loras).all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            self.graph = None;
            self.sampling_graph = None;
            self.loras = loras;
        }
        self.lora_scales = scales;
    }

    /// Set the control vector (`data` None clears it) for layers `range`; a new set of layers
    /// builds the graph anew, new directions are written where the graph reads them.
    pub fn set_cvec(&mut self, data: Option<&[f32]>, n_embd: i32, range: (i32, i32)) -> Result<()> {
        if self.cvec.set(self.model, data, n_embd, range)? {
            self.graph = None;
            self.sampling_graph = None;
            self.cvec_layers = if self.arch.is_some_and(|a| !a.takes_control_vector()) {
                Vec::new()
            } else {
                self.cvec.active_layers(self.model)
            };
        }
        Ok(())
    }

    /// What the graph applies beyond the model.
    fn adapters(&self) -> Adapters<'_> {
        Adapters {
            loras: &self.loras,
            cvec: &self.cvec_layers,
        }
    }

    /// The graph body of the model's architecture.
    fn decoder(&self) -> Result<&'static dyn Decoder> {
        self.arch
            .map(|a| a as &'static dyn Decoder)
            .ok_or_else(|| Error::invalid("the model was loaded vocab-only"))
    }

    /// Whether the model has weights to run (it was not loaded vocab-only).
    pub fn can_decode(&self) -> bool {
        self.model.hparams.is_some()
    }

    /// Whether the context keeps a memory (`llama_get_memory` is not NULL): not on a vocab-only
    /// model, nor for an encoder.
    pub fn has_memory(&self) -> bool {
        self.memory_kind() != Memory::None
    }

    /// What graphs read and write across ubatches: the attention cache and recurrent states.
    fn memories(&self) -> (&KvCache, Option<&Recurrent>) {
        (&self.kv, self.rs.as_ref())
    }

    pub fn n_vocab(&self) -> usize {
        self.model.vocab.n_tokens()
    }

    /// New thread counts; out-of-range counts are refused and the current ones kept.
    pub fn set_n_threads(&mut self, n_threads: i32, n_threads_batch: i32) -> Result<()> {
        let counts = (thread_count(n_threads)?, thread_count(n_threads_batch)?);
        (self.params.n_threads, self.params.n_threads_batch) = counts;
        Ok(())
    }

    /// Switch causal attention on or off; the graph inputs (the mask) change, not the graph.
    pub fn set_causal(&mut self, causal: bool) {
        self.params.graph.causal = causal;
    }

    /// Mark the next decodes as warm-up runs (llama_set_warmup), which route every expert so all
    /// weights are touched; a change builds the next graph anew.
    pub fn set_warmup(&mut self, warmup: bool) {
        if self.params.graph.warmup != warmup {
            self.params.graph.warmup = warmup;
            self.graph = None;
        }
    }

    /// Install or remove the abort callback.
    pub fn set_abort(&mut self, cb: Option<AbortCallback>) {
        self.backend.set_abort_callback(cb);
    }

    /// Turn embeddings output on or off (llama_set_embeddings); the next decode builds its graph.
    pub fn set_embeddings(&mut self, on: bool) {
        self.params.embeddings = on;
        self.params.graph.embeddings = on.then_some(self.params.pooling);
        self.graph = None;
    }

    /// The `n_seqs` of a graph shape: sequences when embeddings are pooled, else 0.
    pub(super) fn pooled_seqs(&self, n: usize) -> usize {
        match self.params.graph.embeddings {
            Some(p) if p != Pooling::None => n,
            _ => 0,
        }
    }

    /// What an input embedding is: its floats, and the positions it takes (M-RoPE's sections;
    /// an encoder reads one).
    pub fn input_layout(&self, encode: bool) -> (usize, usize) {
        let n_pos = self.model.hparams.as_ref().map_or(1, |hp| hp.n_pos_per_embd() as usize);
        let n_embd = self.model.hparams.as_ref().map_or(0, |hp| hp.n_embd_inp() as usize);
        (n_embd, if encode { 1 } else { n_pos })
    }

    /// The width of the embeddings the context gives.
    fn n_embd_out(&self) -> usize {
        self.model.hparams.as_ref().map_or(0, |hp| hp.embd_out() as usize)
    }

    /// Logits of output row `i` (negative: from the end), as llama_get_logits_ith resolves it.
    pub fn logits_ith(&self, i: i32) -> Result<&[f32]> {
        let rows = self.logits_rows(i)?;
        Ok(&self.logits[rows])
    }

    /// The same, writable: llama.h hands out the logits buffer for clients to change in place.
    pub fn logits_ith_mut(&mut self, i: i32) -> Result<&mut [f32]> {
        let rows = self.logits_rows(i)?;
        Ok(&mut self.logits[rows])
    }

    fn logits_rows(&self, i: i32) -> Result<Range<usize>> {
        let n_vocab = self.n_vocab();
        let row = self.output_row(i, "logits")?;
        let rows = row * n_vocab..(row + 1) * n_vocab;
        if rows.end > self.logits.len() {
            return Err(Error::invalid(format!("invalid logits id {i}: no output for it")));
        }
        Ok(rows)
    }

    /// Embeddings of output row `i` (negative: from the end), when embeddings are on and not
    /// pooled; writable (llama.h hands the buffer out mutably).
    pub fn embeddings_ith_mut(&mut self, i: i32) -> Result<&mut [f32]> {
        let rows = self.embeddings_rows(i)?;
        Ok(&mut self.embd[rows])
    }

    fn embeddings_rows(&self, i: i32) -> Result<Range<usize>> {
        if !self.params.embeddings || self.params.pooling != Pooling::None {
            return Err(Error::invalid(
                "no per-token embeddings: the context has embeddings off or pooled (use llama_get_embeddings_seq)",
            ));
        }
        let n = self.n_embd_out();
        let row = self.output_row(i, "embeddings")?;
        let rows = row * n..(row + 1) * n;
        if rows.end > self.embd.len() {
            return Err(Error::invalid(format!("invalid embeddings id {i}: no output for it")));
        }
        Ok(rows)
    }

    /// All output rows' embeddings of the last decode, [n_outputs][n_embd], writable (llama.h
    /// hands the buffer out mutably); None without them.
    pub fn embeddings_mut(&mut self) -> Option<&mut [f32]> {
        let on = self.params.embeddings && self.params.pooling == Pooling::None;
        let n = (self.n_outputs * self.n_embd_out()).min(self.embd.len());
        on.then(|| &mut self.embd[..n])
    }

    /// The pooled embedding of sequence `seq` from the last decode that held it, writable.
    pub fn embeddings_seq_mut(&mut self, seq: i32) -> Option<&mut [f32]> {
        usize::try_from(seq)
            .ok()
            .and_then(|s| self.embd_seq.get_mut(&s))
            .map(Vec::as_mut_slice)
    }

    /// The row of output `i` (as llama.h resolves `_ith` indices) among the last decode's outputs.
    fn output_row(&self, i: i32, what: &str) -> Result<usize> {
        Ok(if i < 0 {
            let j = self.n_outputs as i64 + i64::from(i);
            if j < 0 {
                return Err(Error::invalid(format!(
                    "invalid {what} id {i}: negative index out of range [-{}, 0)",
                    self.n_outputs
                )));
            }
            j as usize
        } else {
            let Some(&j) = self.output_ids.get(i as usize) else {
                return Err(Error::invalid(format!(
                    "invalid {what} id {i}: out of range [0, {}) of the last batch",
                    self.output_ids.len()
                )));
            };
            if j < 0 {
                return Err(Error::invalid(format!(
                    "invalid {what} id {i}: batch.logits[{i}] was not set, so there is no output for it"
                )));
            }
            j as usize
        })
    }

    /// All output rows of the last decode, [n_outputs][n_vocab], writable (llama.h hands the
    /// buffer out mutably).
    pub fn logits_mut(&mut self) -> &mut [f32] {
        let n = self.n_outputs * self.n_vocab();
        &mut self.logits[..n]
    }

    pub fn n_outputs(&self) -> usize {
        self.n_outputs
    }

    /// Bytes per buffer type as (model weights, this context's cache, compute buffers), ordered by
    /// buffer type: what llama.cpp's `llama_get_memory_breakdown` reports.
    pub fn memory_breakdown(&self) -> Vec<(BufferTypeId, [usize; 3])> {
        let mut out: BTreeMap<BufferTypeId, [usize; 3]> = BTreeMap::new();
        let weights = self.model.weights().map(|w| w.memory_breakdown()).unwrap_or_default();
        for (part, entries) in [(0, weights), (1, self.memory_buffers())] {
            for (buft, bytes) in entries {
                out.entry(buft).or_default()[part] += bytes;
            }
        }
        if self.can_decode() {
            for (buft, bytes) in self.sched.buffers() {
                out.entry(buft).or_default()[2] += bytes;
            }
        }
        out.into_iter().collect()
    }

    /// 0, 1, ..., n_vocab - 1 (mutable because llama.h hands it out as `llama_token *`).
    pub fn all_token_ids_mut(&mut self) -> &mut [i32] {
        &mut self.all_token_ids
    }
}

/// Flash attention reads the cache per head: a quantized type's blocks must not straddle heads
/// (llama.cpp refuses such a context with the same message).
fn check_head_blocks(what: &str, kv: &str, t: RawType, head: u32) -> Result<()> {
    let block = crate::ggml::block_size(t);
    if is_quantized(t) && i64::from(head) % block != 0 {
        return Err(Error::invalid(format!(
            "{what} cache type {} with block size {block} does not divide n_embd_head_{kv}={head}",
            crate::ggml::type_name(t)
        )));
    }
    Ok(())
}

/// KV cache types ggml can write rows of and attend over on the CPU.
fn check_cache_type(what: &str, t: RawType) -> Result<()> {
    use ggml_sys::*;
    let ok = [
        ggml_type_GGML_TYPE_F32,
        ggml_type_GGML_TYPE_F16,
        ggml_type_GGML_TYPE_BF16,
        ggml_type_GGML_TYPE_Q8_0,
        ggml_type_GGML_TYPE_Q4_0,
        ggml_type_GGML_TYPE_Q4_1,
        ggml_type_GGML_TYPE_Q5_0,
        ggml_type_GGML_TYPE_Q5_1,
        ggml_type_GGML_TYPE_IQ4_NL,
    ];
    if ok.contains(&t) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} = {} is not a supported KV cache type",
            crate::ggml::type_name(t)
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests;
