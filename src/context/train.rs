//! Training (`llama_opt_init`, `llama_opt_epoch`): llama.cpp's loop over ggml's optimizer. Each
//! datapoint of n_ctx tokens goes through the context as batches of n_batch tokens, every token
//! an output, the cache cleared first; each ubatch's graph is built anew with room for its
//! backward pass, and ggml computes the cross-entropy loss against the next tokens, the gradients
//! and (every n_batch / n_ubatch ubatches) an optimizer step on the trainable weights.

use super::batch::BatchInput;
use super::decode::Feed;
use super::{Context, DecodeStatus};
use crate::error::{Error, Result};
use crate::ggml::opt::{self, Dataset, EpochCallback, GetOptimizerParams, OptResult, Optimizer};
use crate::ggml::{ComputeStatus, TensorRef};
use crate::graph::{Builder, GraphParams, Shape};
use crate::kv::TokenPlace;
use std::ffi::c_void;

/// The model's tensors outside its layers that llama.cpp trains (its `llama_opt_init` list).
const MODEL_PARAMS: &[&str] = &[
    "token_types.weight",
    "position_embd.weight",
    "token_embd_norm.weight",
    "token_embd_norm.bias",
    "output_norm.weight",
    "output_norm.bias",
    "output.weight",
    "output.bias",
    "enc.output_norm.weight",
    "cls.weight",
    "cls.bias",
    "cls.output.weight",
    "cls.output.bias",
    "cls.norm.weight",
];

/// Never trained, as in llama.cpp (whose backward pass cannot reach them yet).
const FROZEN: &[&str] = &["token_embd.weight", "rope_freqs.weight"];

/// What `llama_opt_params` asks for.
pub struct OptSetup<'f> {
    /// Tokens per datapoint (0: the context's n_ctx).
    pub n_ctx_train: u32,
    /// Which F32 weights to train.
    pub filter: &'f mut dyn FnMut(TensorRef) -> bool,
    /// The caller's optimizer parameters, fetched once per optimizer step.
    pub get_opt_pars: (GetOptimizerParams, *mut c_void),
    pub optimizer: i32,
}

/// A context's training state.
pub(super) struct Training {
    opt: Optimizer,
    /// Tokens per datapoint trained on.
    n_ctx_train: usize,
    n_batch: usize,
    n_ubatch: usize,
    /// Whether training graphs attend to the ubatch's own keys and values (a ubatch is the whole
    /// context); decoding keeps using the cache.
    direct: bool,
    /// The datapoint being evaluated.
    pass: Option<Pass>,
}

impl Training {
    pub(super) fn in_pass(&self) -> bool {
        self.pass.is_some()
    }
}

/// One datapoint's evaluation and where it is reported.
#[derive(Clone, Copy)]
struct Report {
    train: bool,
    dataset: Dataset,
    result: OptResult,
    callback: EpochCallback,
    /// Ubatches of the loop before this datapoint, in the whole loop, and when the loop started.
    ibatch_before: i64,
    ibatch_max: i64,
    t_loop_start: i64,
}

struct Pass {
    /// The batch's labels.
    labels: Vec<i32>,
    /// The batch's first position in the datapoint.
    first: usize,
    /// The index in `labels` of the next ubatch's first token.
    next: usize,
    report: Report,
}

impl Context<'_> {
    /// Set the context up for training: choose the trainable weights (F32, accepted by the
    /// filter, among those llama.cpp trains), make the optimizer over the context's scheduler,
    /// and turn flash attention off (it has no backward pass).
    pub fn opt_init(&mut self, setup: OptSetup) -> Result<()> {
        if self.training.is_some() {
            return Err(Error::invalid("training is already set up on this context"));
        }
        self.require_weights("train")?;
        if !self.has_memory() {
            return Err(Error::invalid(
                "training decodes datapoints into the context's memory; this model only encodes",
            ));
        }
        if !self.devices.is_empty() {
            return Err(Error::invalid(
                "training with layers on another device is not supported yet (CPU only)",
            ));
        }
        let n_ctx = self.params.n_ctx;
        let n_ctx_train = match setup.n_ctx_train {
            0 => n_ctx,
            n => n,
        };
        // llama.cpp would read past each datapoint's n_ctx tokens.
        if n_ctx_train > n_ctx {
            return Err(Error::invalid(format!(
                "n_ctx_train = {n_ctx_train} exceeds the context's n_ctx = {n_ctx}"
            )));
        }
        let n_batch = self.params.n_batch.min(n_ctx_train);
        let n_ubatch = self.params.n_ubatch.min(n_batch);
        if n_ctx_train % n_batch != 0 || n_batch % n_ubatch != 0 {
            return Err(Error::invalid(format!(
                "training needs n_ctx_train ({n_ctx_train}) a multiple of n_batch ({n_batch}) and n_batch a multiple of n_ubatch ({n_ubatch})"
            )));
        }
        if self.params.graph.flash_attn && self.kv.value_types().any(crate::ggml::is_quantized) {
            return Err(Error::invalid(
                "training turns flash attention off, which a quantized V cache needs: use an F32 cache",
            ));
        }
        let params = self.choose_params(setup.filter)?;
        if !params.is_empty() && !self.model.weights_writable() {
            return Err(Error::invalid(
                "training writes the weights, which are mapped read-only: load the model with load_mode LLAMA_LOAD_MODE_NONE",
            ));
        }
        self.ensure_sched_nodes(self.training_graph_nodes())?;
        let opt = Optimizer::new(
            &self.sched,
            (n_batch / n_ubatch) as i32,
            setup.get_opt_pars,
            setup.optimizer,
        )
        .map_err(|e| Error::invalid(e.to_string()))?;
        params.into_iter().for_each(opt::set_param);
        if self.params.graph.flash_attn {
            crate::log_info!("opt_init: flash attention turned off: it has no backward pass");
        }
        self.params.graph.flash_attn = false;
        let direct = n_ubatch == n_ctx;
        if !direct {
            crate::log_warn!(
                "opt_init: n_ubatch ({n_ubatch}) != n_ctx ({n_ctx}): the K and V projections will not receive gradients"
            );
        }
        self.graph = None;
        self.sampling_graph = None;
        self.model.set_n_ctx_train(n_ctx_train);
        self.training = Some(Training {
            opt,
            n_ctx_train: n_ctx_train as usize,
            n_batch: n_batch as usize,
            n_ubatch: n_ubatch as usize,
            direct,
            pass: None,
        });
        Ok(())
    }

    /// The size of a training ubatch's graph (as `Builder::build` sizes it for the adapters).
    fn training_graph_nodes(&self) -> usize {
        training_nodes(crate::graph::max_nodes(self.model))
            + crate::graph::lora::extra_nodes(&self.loras)
            + self.cvec_layers.len()
    }

    /// The weights llama.cpp would train: of its list (the model's head and norms, every layer
    /// tensor), those in F32 the filter accepts, never the token embeddings or rope factors.
    fn choose_params(&self, filter: &mut dyn FnMut(TensorRef) -> bool) -> Result<Vec<TensorRef>> {
        let weights = self
            .model
            .weights()
            .ok_or_else(|| Error::invalid("the model has no weights"))?;
        let mut layer_tensors: Vec<(usize, String)> = weights
            .names()
            .filter_map(|n| {
                let il = n.strip_prefix("blk.")?.split('.').next()?.parse().ok()?;
                Some((il, n.to_string()))
            })
            .collect();
        layer_tensors.sort();
        let names = MODEL_PARAMS
            .iter()
            .map(|n| n.to_string())
            .chain(layer_tensors.into_iter().map(|(_, n)| n));
        let mut out = Vec::new();
        for name in names {
            let Some(t) = weights.get(&name) else { continue };
            if t.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_F32 || FROZEN.contains(&name.as_str()) {
                continue;
            }
            if filter(t) && !out.contains(&t) {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// One epoch: the datapoints before `idata_split` trained on (progress to the first callback,
    /// results added to the first result), the others evaluated.
    pub fn opt_epoch(
        &mut self,
        dataset: Dataset,
        results: [OptResult; 2],
        idata_split: i64,
        callbacks: [EpochCallback; 2],
    ) -> Result<()> {
        let Some(tr) = &self.training else {
            return Err(Error::invalid(
                "llama_opt_init has not set this context up for training",
            ));
        };
        let (n_ctx_train, n_ubatch) = (tr.n_ctx_train, tr.n_ubatch);
        let n_ctx = self.params.n_ctx as usize;
        let ndata = dataset.ndata();
        if !(0..=ndata).contains(&idata_split) {
            return Err(Error::invalid(format!(
                "idata_split = {idata_split} is outside the dataset's 0..={ndata} datapoints"
            )));
        }
        let i32t = ggml_sys::ggml_type_GGML_TYPE_I32;
        match dataset.tensors() {
            (Some(d), Some(l))
                if [d, l]
                    .into_iter()
                    .all(|t| t.ggml_type() == i32t && t.ne()[0] == n_ctx as i64) => {}
            _ => {
                return Err(Error::invalid(format!(
                    "the dataset must hold I32 tokens and I32 labels, n_ctx = {n_ctx} per datapoint"
                )))
            }
        }
        let n_vocab = self.n_vocab() as i32;
        let ubatch_per_ctx = (n_ctx / n_ubatch) as i64;
        let mut tokens = vec![0i32; n_ctx];
        let mut labels = vec![0i32; n_ctx];
        let loops = [(true, 0..idata_split), (false, idata_split..ndata)];
        for ((train, range), (result, callback)) in loops.into_iter().zip(results.into_iter().zip(callbacks)) {
            let t_loop_start = crate::ggml::time_us();
            let ibatch_max = (range.end - range.start) * ubatch_per_ctx;
            for idata in range.clone() {
                dataset.datapoint(idata, &mut tokens, &mut labels);
                if let Some((i, l)) = labels.iter().enumerate().find(|(_, &l)| !(0..n_vocab).contains(&l)) {
                    return Err(Error::invalid(format!(
                        "datapoint {idata}: label {i} is token {l}, outside the vocabulary (0..{n_vocab})"
                    )));
                }
                let report = Report {
                    train,
                    dataset,
                    result,
                    callback,
                    ibatch_before: (idata - range.start) * ubatch_per_ctx,
                    ibatch_max,
                    t_loop_start,
                };
                self.train_datapoint(&tokens[..n_ctx_train], &labels, report)?;
            }
        }
        Ok(())
    }

    /// One datapoint through the context, batch by batch, from an empty cache.
    fn train_datapoint(&mut self, tokens: &[i32], labels: &[i32], report: Report) -> Result<()> {
        let n_batch = self.training.as_ref().map_or(tokens.len(), |t| t.n_batch);
        self.memory_clear(true);
        for (k, chunk) in tokens.chunks(n_batch).enumerate() {
            let first = k * n_batch;
            let pos: Vec<i32> = (first..first + chunk.len()).map(|p| p as i32).collect();
            let outputs = vec![1i8; chunk.len()];
            let input = BatchInput {
                tokens: chunk,
                pos: Some(&pos),
                outputs: Some(&outputs),
                ..Default::default()
            };
            let batch_labels = labels
                .get(first..first + chunk.len())
                .ok_or_else(|| Error::Internal("a training batch past its labels".into()))?;
            if let Some(tr) = &mut self.training {
                tr.pass = Some(Pass {
                    labels: batch_labels.to_vec(),
                    first,
                    next: 0,
                    report,
                });
            }
            let status = self.decode(&input);
            if let Some(tr) = &mut self.training {
                tr.pass = None;
            }
            match status? {
                DecodeStatus::Ok => {}
                DecodeStatus::NoSlot => return Err(Error::invalid("no room in the cache for a training batch")),
                DecodeStatus::Aborted => return Err(Error::invalid("training aborted by the abort callback")),
            }
        }
        Ok(())
    }

    /// A training ubatch in place of a decode's computation: its graph built for the backward
    /// pass, evaluated by the optimizer against the ubatch's labels, progress reported.
    pub(super) fn train_ubatch(
        &mut self,
        shape: Shape,
        feed: &Feed,
        places: &[TokenPlace],
        outputs: &[bool],
        rows: [&[usize]; 2],
        seqs: &[usize],
    ) -> Result<ComputeStatus> {
        let mut tr = self
            .training
            .take()
            .ok_or_else(|| Error::Internal("a training ubatch without training".into()))?;
        let out = self.train_step(&mut tr, shape, (feed, places, outputs), rows, seqs);
        // The scheduler's memory is the optimizer's graph's now: the next decode builds anew.
        self.graph = None;
        self.training = Some(tr);
        out
    }

    fn train_step(
        &mut self,
        tr: &mut Training,
        shape: Shape,
        (feed, places, outputs): (&Feed, &[TokenPlace], &[bool]),
        rows: [&[usize]; 2],
        seqs: &[usize],
    ) -> Result<ComputeStatus> {
        let pass = tr
            .pass
            .as_mut()
            .ok_or_else(|| Error::Internal("a training ubatch outside a pass".into()))?;
        self.graph = None;
        self.sampling_graph = None;
        // The optimizer's scheduler was sized when training was set up and cannot be replaced.
        if self.training_graph_nodes() > self.sched_nodes {
            return Err(Error::invalid(
                "the LoRA adapters or control vector set since llama_opt_init need larger graphs: set them before",
            ));
        }
        let built = Builder::build(
            self.model,
            self.decoder()?,
            self.memories(),
            shape,
            (
                GraphParams {
                    training: tr.direct,
                    ..self.params.graph
                },
                self.adapters(),
            ),
            training_nodes(crate::graph::max_nodes(self.model)) - crate::graph::max_nodes(self.model),
        )?;
        let (Some(tokens), Some(logits)) = (built.inputs.tokens, built.logits) else {
            return Err(Error::invalid(
                "training needs a model whose graph goes from token ids to logits",
            ));
        };
        self.sched.check_supported(&built.graph)?;
        let n_vocab = logits.ne()[0] as usize;
        let n = places.len();
        let labels = pass
            .labels
            .get(pass.next..pass.next + n)
            .ok_or_else(|| Error::Internal("a training ubatch past its batch's labels".into()))?;
        let mut onehot = vec![0f32; n * n_vocab];
        for (i, &l) in labels.iter().enumerate() {
            let l = usize::try_from(l)
                .ok()
                .filter(|&l| l < n_vocab)
                .ok_or_else(|| Error::invalid(format!("label {l} is outside the model's {n_vocab} logits")))?;
            onehot[i * n_vocab + l] = 1.0;
        }
        self.graph = Some((shape, built));
        // The thread count stays what the last computation used, as in llama.cpp, whose training
        // sets none (it changes how ggml's reductions round).
        let copy_sources = self.rs.as_mut().map(|rs| rs.cells.take_copy_sources());
        let Some((_, built)) = &self.graph else {
            return Err(Error::Internal("no graph after building one".into()));
        };
        let report = pass.report;
        let set = || -> std::result::Result<Vec<u8>, String> {
            // A training pass plans no per-ubatch cache state.
            let state = (copy_sources.as_deref(), Default::default());
            self.set_inputs(feed, places, outputs, rows, seqs, state)
                .map_err(|e| e.to_string())?;
            Ok(onehot.iter().flat_map(|x| x.to_le_bytes()).collect())
        };
        tr.opt
            .step(&built.graph, (tokens, logits), report.train, set, report.result)
            .map_err(|e| Error::invalid(e.to_string()))?;
        let ibatch = report.ibatch_before + ((pass.first + pass.next) / tr.n_ubatch) as i64 + 1;
        pass.next += n;
        tr.opt.report(
            report.callback,
            report.train,
            report.dataset,
            report.result,
            ibatch,
            report.ibatch_max,
            report.t_loop_start,
        );
        Ok(ComputeStatus::Success)
    }
}

/// Graph nodes a training ubatch may need: its forward graph's `max`, four times over for the
/// backward pass and the optimizer step (llama.cpp's allowance).
fn training_nodes(max: usize) -> usize {
    4 * max
}
