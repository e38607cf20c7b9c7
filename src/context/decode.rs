//! One `llama_decode`: check the batch, find cache room for all of it, then per ubatch set the
//! inputs of the (reused when possible) graph, compute, and copy the requested logits out.

use super::batch::{resolve, split_equal, split_seq, split_simple, Batch, BatchInput, Limits, Ubatch};
use super::sampling::Layout;
use super::Context;
use crate::error::{Error, Result};
use crate::fallible;
use crate::ggml::{tensor_get_f32, ComputeStatus, Scheduler};
use crate::graph::{
    seq_index, set_bytes, set_f32, set_i32, set_i64, set_mask, Builder, Pooling, RecurrentShape, Shape, UbatchView,
};
use crate::kv::{sequences_of, MemoryShape, Placement, Planned, Slots, Split, TokenPlace, UbatchMemory, UbatchPlans};
use crate::model::hparams::Swa;
use crate::recurrent::{RsCells, SeqGroup};
use std::borrow::Cow;

/// Non-error outcomes llama.h distinguishes (return codes 0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeStatus {
    Ok,
    /// No room in the KV cache; nothing changed.
    NoSlot,
    /// The abort callback stopped the computation; finished ubatches stay in the cache.
    Aborted,
}

/// Where a ubatch went in the context's memories, and what takes it back.
struct Placed {
    kv: Option<Placement>,
    /// The recurrent cells as they were before.
    rs: Option<RsCells>,
}

/// What a ubatch feeds the graph's first layer.
pub(super) enum Feed {
    Tokens(Vec<i32>),
    /// Embedding rows, with M-RoPE their tokens' position sections.
    Embd {
        rows: Vec<f32>,
        sections: Vec<[i32; 4]>,
    },
}

impl Feed {
    /// The batch tokens `idx`'s input.
    fn of(batch: &Batch, idx: &[usize]) -> Feed {
        match &batch.embd {
            Some(e) => Feed::Embd {
                rows: e.rows_of(idx),
                sections: idx.iter().filter_map(|&i| e.sections.get(i).copied()).collect(),
            },
            None => Feed::Tokens(idx.iter().map(|&i| batch.tokens[i]).collect()),
        }
    }
}

impl Context<'_> {
    /// Refuse `what` ("decode", "encode") on a vocab-only model, or when a device's RPC server is
    /// gone (before anything changes, so the memory stays as it was).
    pub(super) fn require_weights(&self, what: &str) -> Result<()> {
        if !self.can_decode() {
            return Err(Error::invalid(format!(
                "the model was loaded vocab-only: this context can tokenize and apply chat templates, not {what}"
            )));
        }
        self.devices
            .iter()
            .try_for_each(|d| d.check_connection())
            .map_err(Error::from)
    }

    /// Make room for a batch's outputs (`outputs` per token) and map each token to its output row
    /// (-1: none); what the last call produced is gone.
    fn prepare_outputs(&mut self, outputs: &[bool]) -> Result<()> {
        let n_outputs = outputs.iter().filter(|&&o| o).count();
        let n_vocab = self.n_vocab();
        fallible::grow(&mut self.logits, n_outputs * n_vocab, 0.0, "logits")?;
        if self.params.graph.embeddings == Some(Pooling::None) {
            let n = n_outputs * self.n_embd_out();
            fallible::grow(&mut self.embd, n, 0.0, "embeddings")?;
        }
        self.embd_seq.clear();
        self.output_ids.clear();
        let mut next_row = 0;
        for &o in outputs {
            self.output_ids.push(if o { next_row } else { -1 });
            next_row += i32::from(o);
        }
        self.n_outputs = 0;
        self.sampling.begin(n_outputs);
        Ok(())
    }

    /// A learned position table has one row per trained position: a token past
    /// it has no embedding (llama.cpp reads outside the table and aborts), so such a batch is
    /// refused before anything changes.
    fn check_positions(&self, batch: &Batch) -> Result<()> {
        let Some(table) = self.model.weights().and_then(|w| w.get("position_embd.weight")) else {
            return Ok(());
        };
        let rows = table.ne()[1];
        match batch.places.iter().enumerate().find(|(_, p)| i64::from(p.pos) >= rows) {
            Some((i, p)) => Err(Error::invalid(format!(
                "token {i} is at position {}, past the model's learned position table ({rows} positions)",
                p.pos
            ))),
            None => Ok(()),
        }
    }

    /// What batches are checked against (`output_all`: every token an output; `encode`: for
    /// `encode`, whose embeddings take the positions `input_layout` says).
    fn limits(&self, output_all: bool, encode: bool) -> Limits {
        let hp = self.model.hparams.as_ref();
        let (n_embd, n_pos_per_embd) = self.input_layout(encode);
        Limits {
            n_vocab: self.n_vocab(),
            n_seq_max: self.params.n_seq_max as usize,
            n_batch: self.params.n_batch as usize,
            output_all,
            n_pos_per_embd,
            n_embd,
            // n-gram embeddings hash an image's rows as its token (llama.cpp's choice).
            embd_token: hp
                .and_then(|h| h.ple.as_ref())
                .map_or(-1, |p| if p.image_token != 0 { p.image_token } else { p.eos } as i32),
        }
    }

    pub fn decode(&mut self, input: &BatchInput) -> Result<DecodeStatus> {
        self.require_weights("decode")?;
        if !self.has_memory() {
            // An encoder has no cache to decode into: llama.cpp encodes instead.
            return self.encode(input);
        }
        // An encoder-decoder's decoder attends to what the last encode left.
        self.n_enc()?;
        let t0 = crate::ggml::time_us();
        let this = &*self;
        let batch = resolve(input, &self.limits(self.params.embeddings, false), &|s| {
            this.memory_seq_pos_max(s)
        })?;
        self.check_positions(&batch)?;
        let n_outputs = batch.n_outputs();
        if n_outputs > self.params.n_outputs_max as usize {
            return Err(Error::invalid(format!(
                "the batch asks for {n_outputs} outputs; the context allows {} (n_outputs_max)",
                self.params.n_outputs_max
            )));
        }
        if !self.sampling.is_empty() {
            let output_seqs: Vec<usize> = (0..batch.len())
                .filter(|&i| batch.outputs[i])
                .flat_map(|i| batch.places[i].seqs.iter())
                .collect();
            self.check_sampling(&output_seqs)?;
        }
        self.apply_pending_shift()?;
        let Some(ubatches) = self.split(&batch) else {
            return Ok(DecodeStatus::NoSlot);
        };
        let places_of = |ub: &Ubatch| -> Vec<TokenPlace> { ub.idx.iter().map(|&i| batch.places[i]).collect() };

        // Room for every ubatch first, placed in turn as they will be (the cache's cells chosen
        // then, as llama.cpp chooses them), so that "no slot" leaves the memory untouched.
        let planned: Vec<Vec<TokenPlace>> = ubatches.iter().map(places_of).collect();
        let written: Vec<Cow<[TokenPlace]>> = planned.iter().map(|p| self.kv.writes(p)).collect::<Result<_>>()?;
        let plan = match self.uses_kv() {
            true => self.kv.plan(&written),
            false => Some((Vec::new(), Planned::default())),
        };
        let plan = match plan {
            Some(p) if self.recurrent_fits(&planned, &ubatches) => Some(p),
            Some((_, before)) => {
                self.kv.undo_plan(before);
                None
            }
            None => None,
        };
        let Some((plans, before)) = plan else {
            match &self.rs {
                Some(rs) => crate::log_warn!(
                    "decode: no recurrent state cell for the batch's sequences ({} of {} used)",
                    rs.cells.used(),
                    rs.size()
                ),
                None => crate::log_warn!(
                    "decode: no KV cache room for {} tokens ({} of {} cells used)",
                    batch.len(),
                    self.kv.used(),
                    self.kv.size(false)
                ),
            }
            return Ok(DecodeStatus::NoSlot);
        };
        let groups: Vec<(&[TokenPlace], usize)> = planned
            .iter()
            .map(|p| &p[..])
            .zip(ubatches.iter().map(|u| u.n_streams))
            .collect();
        let states = match self.kv.plan_states(&groups) {
            Ok(p) => p,
            Err(e) => {
                self.kv.undo_plan(before);
                return Err(e);
            }
        };
        if let Err(e) = self.prepare_outputs(&batch.outputs) {
            self.kv.undo_plan(before);
            return Err(e);
        }

        // Each finished ubatch's placement, to take back if a later one fails.
        let mut done = Vec::with_capacity(ubatches.len());
        for (k, ub) in ubatches.iter().enumerate() {
            match self.decode_ubatch(&batch, ub, (places_of(ub), &written[k]), plans.get(k), states.of(k)) {
                Ok(Some(placement)) => {
                    if k == 0 {
                        self.kv.first_ubatch_computed();
                    }
                    done.push(placement);
                }
                Ok(None) => return Ok(DecodeStatus::Aborted),
                Err(e) => {
                    done.into_iter().rev().for_each(|p| self.unplace(p));
                    self.kv.undo_plan(before);
                    return Err(e);
                }
            }
        }
        self.n_outputs = n_outputs;
        let dt = crate::ggml::time_us() - t0;
        if !self.params.no_perf {
            if batch.len() > 1 {
                self.perf.t_p_eval_us += dt;
                self.perf.n_p_eval += batch.len() as i32;
            } else {
                self.perf.t_eval_us += dt;
                self.perf.n_eval += 1;
            }
        }
        Ok(DecodeStatus::Ok)
    }

    /// `llama_encode`: the whole batch as one ubatch, attending within each sequence (both ways),
    /// every token an output; embeddings come out as the context pools them. The memory is left
    /// as it was; an encoder-decoder keeps the outputs for its decoder (`cross.rs`).
    pub fn encode(&mut self, input: &BatchInput) -> Result<DecodeStatus> {
        self.require_weights("encode")?;
        // An encoder keeps no memory, but for an architecture whose contexts keep one beside it.
        if self.has_memory() && !self.arch.is_some_and(|a| a.facts().has_encoder) {
            return Err(Error::invalid(format!(
                "llama_encode needs an encoder model; '{}' decodes (use llama_decode)",
                self.model.hparams.as_ref().map_or("", |h| h.arch_name)
            )));
        }
        let t0 = crate::ggml::time_us();
        // Positions continue the memory's, where the context keeps one beside the encoder.
        let this = &*self;
        let mut batch = resolve(input, &self.limits(false, true), &|s| this.memory_seq_pos_max(s))?;
        self.check_positions(&batch)?;
        batch.outputs.fill(true);
        let n = batch.len();
        if n > self.params.n_ubatch as usize {
            return Err(Error::invalid(format!(
                "an encoder takes the batch in one ubatch: n_tokens = {n} exceeds n_ubatch = {}; create the \
                 context with a larger n_ubatch",
                self.params.n_ubatch
            )));
        }
        self.prepare_outputs(&batch.outputs)?;
        let seqs = sequences_of(&batch.places);
        let shape = Shape {
            n_tokens: n,
            n_streams: 1,
            first_stream: 0,
            n_outputs: n,
            n_kv: n,
            n_kv_swa: n,
            kv_copies: 1,
            n_pos: 0,
            n_seqs: self.pooled_seqs(seqs.len()),
            recurrent: None,
            memory: MemoryShape::default(),
            embd_input: batch.embd.is_some(),
            encoder: true,
            n_enc: 0,
        };
        let ub = Ubatch {
            idx: (0..n).collect(),
            n_streams: 1,
        };
        let computed = self.compute_ubatch(
            shape,
            Layout::new(),
            &Feed::of(&batch, &ub.idx),
            &batch.places,
            &batch.outputs,
            [&[], &[]],
            &seqs,
            UbatchMemory::default(),
        )?;
        if !finished(computed)? {
            return Ok(DecodeStatus::Aborted);
        }
        self.copy_outputs(&batch, &ub, shape, &seqs)?;
        self.keep_encoder_output(&batch.places)?;
        self.n_outputs = n;
        if !self.params.no_perf {
            self.perf.t_p_eval_us += crate::ggml::time_us() - t0;
            self.perf.n_p_eval += n as i32;
        }
        Ok(DecodeStatus::Ok)
    }

    /// The batch's ubatches, as llama.cpp splits for this context's memory; None (logged) when
    /// the batch cannot be split so.
    fn split(&self, batch: &Batch) -> Option<Vec<Ubatch>> {
        let n_ubatch = self.params.n_ubatch as usize;
        if self.rs.is_some() {
            // Recurrent state advances a whole sequence at a time: the same count of tokens from
            // several sequences per ubatch (sequences with consecutive ids, unless a hybrid
            // model's attention cache is unified), or, with embeddings, one sequence per ubatch.
            let split = if self.params.embeddings {
                split_seq(batch, n_ubatch)
            } else {
                let sequential = !(self.uses_kv() && self.kv.n_stream() == 1);
                split_equal(batch, n_ubatch, sequential, self.rollback_tail()?)
            };
            if split.is_none() {
                crate::log_error!(
                    "decode: a token belongs to several sequences, which recurrent state cannot hold \
                     (give each token one sequence)"
                );
            }
            return split;
        }
        // A split cache (one stream per sequence) takes the same count of tokens from consecutive
        // sequences per ubatch, which also decides which attention kernel ggml uses; a unified
        // cache takes consecutive chunks. The cache says where it differs (`kv::Split`).
        let shared = batch.places.iter().any(|p| p.seqs.iter().nth(1).is_some());
        match self.kv.split(shared) {
            Split::BySequences => split_seq(batch, n_ubatch),
            Split::Equal { keep_tail } => {
                let tail = if keep_tail { self.rollback_tail()? } else { 0 };
                let split = split_equal(batch, n_ubatch, true, tail);
                if split.is_none() {
                    crate::log_error!(
                        "decode: a token belongs to several sequences, which needs one cache for all of them: \
                         create the context with kv_unified = true"
                    );
                }
                split
            }
            Split::Simple => Some(split_simple(batch.len(), n_ubatch)),
        }
    }

    /// The tokens at a sequence's end that stay in one ubatch, so that its rollback snapshots are
    /// of consecutive steps: its last n_rs_seq + 1 (none without snapshots). None (logged) when a
    /// ubatch cannot hold them.
    fn rollback_tail(&self) -> Option<usize> {
        let (n_rs, n_ubatch) = (self.params.n_rs_seq as usize, self.params.n_ubatch as usize);
        if n_rs > 0 && n_ubatch <= n_rs + 1 {
            crate::log_error!(
                "decode: n_rs_seq = {n_rs} rollback snapshots need n_ubatch > n_rs_seq + 1 (n_ubatch = {n_ubatch})"
            );
            return None;
        }
        Some(if n_rs > 0 { n_rs + 1 } else { 0 })
    }

    /// Whether the recurrent states have a cell for each ubatch's sequences, taken in turn (the
    /// states are as before afterwards); true without recurrent layers.
    fn recurrent_fits(&mut self, planned: &[Vec<TokenPlace>], ubatches: &[Ubatch]) -> bool {
        let Some(rs) = &mut self.rs else {
            return true;
        };
        let before = rs.cells.clone();
        let fits = planned
            .iter()
            .zip(ubatches)
            .all(|(places, ub)| rs.cells.find_slot(&groups_of(places, ub.n_streams)));
        rs.cells = before;
        fits
    }

    /// Occupy memory for a ubatch's tokens (`places`, in `n_groups` equal runs of one sequence
    /// each), the cache's in the cells `plan` chose; None, with nothing changed, when there is no
    /// room.
    fn place(&mut self, places: &[TokenPlace], n_groups: usize, plan: Option<&Slots>) -> Option<Placed> {
        let kv = match (self.uses_kv(), plan) {
            (false, _) => None,
            (true, Some(plan)) => Some(self.kv.place_planned(places, plan)?),
            (true, None) => Some(self.kv.place(places)?),
        };
        let rs = match &mut self.rs {
            Some(rs) => {
                let before = rs.cells.clone();
                if !rs.cells.find_slot(&groups_of(places, n_groups)) {
                    rs.cells = before;
                    kv.into_iter().for_each(|p| self.kv.rollback(p));
                    return None;
                }
                Some(before)
            }
            None => None,
        };
        Some(Placed { kv, rs })
    }

    /// Take a placement back: the memory's bookkeeping is as before `place`.
    fn unplace(&mut self, p: Placed) {
        if let (Some(before), Some(rs)) = (p.rs, &mut self.rs) {
            rs.cells = before;
        }
        if let Some(kv) = p.kv {
            self.kv.rollback(kv);
        }
    }

    /// Place, build or reuse, set inputs, compute, copy outputs for one ubatch (the batch tokens
    /// `ub.idx`, in that order, at `places`). Returns where it went in the memory, or None when
    /// the abort callback stopped it (its cells are free again; earlier ubatches stay).
    fn decode_ubatch(
        &mut self,
        batch: &Batch,
        ub: &Ubatch,
        (places, written): (Vec<TokenPlace>, &[TokenPlace]),
        plan: Option<&Slots>,
        states: UbatchPlans,
    ) -> Result<Option<Placed>> {
        let feed = Feed::of(batch, &ub.idx);
        let outputs: Vec<bool> = ub.idx.iter().map(|&i| batch.outputs[i]).collect();
        let placed = self
            .place(written, ub.n_streams, plan)
            .ok_or_else(|| Error::Internal("memory room found for the batch vanished".into()))?;
        let seqs = sequences_of(&places);
        let step = match placed.kv {
            Some(_) => self.kv.placed_step(&places),
            None => None,
        };
        let memory = states.with_step(step.as_ref());
        let (rows, mut streams) = placed.kv.as_ref().map_or(([&[][..], &[][..]], (0, 1)), |p| {
            ([&p.rows[..], &p.sliding_rows[..]], p.streams)
        });
        // Tokens written once per sequence attend in the first token's stream.
        let kv_copies = written.len() / places.len().max(1);
        if kv_copies > 1 {
            streams = (self.kv.stream_of(places[0].primary_seq), 1);
        }
        let shape = Shape {
            n_tokens: places.len(),
            n_streams: streams.1,
            first_stream: streams.0,
            n_outputs: outputs.iter().filter(|&&o| o).count(),
            n_kv: if placed.kv.is_some() {
                self.kv.n_kv(false, streams)
            } else {
                0
            },
            n_kv_swa: if placed.kv.is_some() && self.kv.has_sliding() {
                self.kv.n_kv(true, streams)
            } else {
                0
            },
            kv_copies,
            n_pos: self.block_sparse_positions(self.kv.pos_max().map_or(0, |p| p as usize + 1)),
            n_seqs: self.pooled_seqs(seqs.len()),
            recurrent: self.rs.as_ref().map(|rs| RecurrentShape {
                n_seqs: ub.n_streams,
                window: rs.cells.window(),
            }),
            memory: memory.shape(),
            embd_input: batch.embd.is_some(),
            encoder: false,
            n_enc: self.n_enc()?,
        };
        let layout = self.sampling.layout(
            places
                .iter()
                .zip(&outputs)
                .filter(|(_, &o)| o)
                .map(|(p, _)| p.primary_seq),
        );
        let status = self
            .compute_ubatch(shape, layout, &feed, &places, &outputs, rows, &seqs, memory)
            .and_then(finished)
            .and_then(|done| {
                // Training reads nothing back: the optimizer keeps the loss.
                if done && !self.training.as_ref().is_some_and(|t| t.in_pass()) {
                    self.copy_outputs(batch, ub, shape, &seqs)?;
                }
                Ok(done)
            });
        match status {
            Ok(true) => Ok(Some(placed)),
            // Aborted: this ubatch's cells hold nothing valid; earlier ubatches stay.
            Ok(false) => {
                self.unplace(placed);
                Ok(None)
            }
            Err(e) => {
                self.unplace(placed);
                Err(e)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn compute_ubatch(
        &mut self,
        shape: Shape,
        layout: Layout,
        feed: &Feed,
        places: &[TokenPlace],
        outputs: &[bool],
        rows: [&[usize]; 2],
        seqs: &[usize],
        memory: UbatchMemory,
    ) -> Result<ComputeStatus> {
        if self.training.as_ref().is_some_and(|t| t.in_pass()) {
            return self.train_ubatch(shape, feed, places, outputs, rows, seqs);
        }
        self.prepare_graph(shape, layout)?;
        let n_threads = if places.len() == 1 {
            self.params.n_threads
        } else {
            self.params.n_threads_batch
        };
        self.backend.set_n_threads(n_threads);
        let copy_sources = self.rs.as_mut().map(|rs| rs.cells.take_copy_sources());
        self.set_inputs(feed, places, outputs, rows, seqs, (copy_sources.as_deref(), memory))?;
        if let Some(sg) = &self.sampling_graph {
            self.sampling.set_inputs(sg)?;
        }
        let Some((_, built)) = &self.graph else {
            return Err(Error::Internal("no graph after preparing one".into()));
        };
        Ok(self.sched.compute(&built.graph))
    }

    /// Copy the ubatch's logits (and embeddings) to their rows of the batch's outputs.
    fn copy_outputs(&mut self, batch: &Batch, ub: &Ubatch, shape: Shape, seqs: &[usize]) -> Result<()> {
        let Some((_, built)) = &self.graph else {
            return Err(Error::Internal("no graph after computing one".into()));
        };
        // The graph's logit rows follow the ubatch's outputs; each goes to its batch row (an
        // encoder computes none).
        let n_vocab = self.n_vocab();
        let dst_rows = ub
            .idx
            .iter()
            .filter(|&&i| batch.outputs[i])
            .map(|&i| self.output_ids[i] as usize);
        if let Some(logits) = built.logits {
            let mut rows = fallible::filled(shape.n_outputs * n_vocab, 0f32, "logits read back")?;
            tensor_get_f32(logits, &mut rows)?;
            for (src, dst) in rows.chunks_exact(n_vocab).zip(dst_rows.clone()) {
                self.logits[dst * n_vocab..(dst + 1) * n_vocab].copy_from_slice(src);
            }
        }
        if let Some(sg) = &self.sampling_graph {
            let dst: Vec<usize> = dst_rows.clone().collect();
            self.sampling.read(sg, &dst, n_vocab)?;
        }
        if let (Some(embd), Some(pooling)) = (built.embd, self.params.graph.embeddings) {
            // A ranking head gives its scores per sequence, not an embedding.
            let n_embd = match pooling {
                Pooling::Rank => self.model.hparams.as_ref().map_or(1, |h| h.n_cls_out() as usize),
                _ => self.n_embd_out(),
            };
            let n_rows = if pooling == Pooling::None {
                shape.n_outputs
            } else {
                seqs.len()
            };
            let mut rows = fallible::filled(n_rows * n_embd, 0f32, "embeddings read back")?;
            tensor_get_f32(embd, &mut rows)?;
            if pooling == Pooling::None {
                for (src, dst) in rows.chunks_exact(n_embd).zip(dst_rows) {
                    self.embd[dst * n_embd..(dst + 1) * n_embd].copy_from_slice(src);
                }
            } else {
                for (src, &seq) in rows.chunks_exact(n_embd).zip(seqs) {
                    self.embd_seq.insert(seq, src.to_vec());
                }
            }
        }
        Ok(())
    }

    /// Make the graph for `shape` (and the backend samplers' `layout`) current: the previous one
    /// when both repeat (nothing built or allocated), otherwise a new one allocated in the
    /// reserved compute buffers.
    fn prepare_graph(&mut self, shape: Shape, layout: Layout) -> Result<()> {
        let same_sampling = self
            .sampling_graph
            .as_ref()
            .is_some_and(|sg| self.sampling.fits(sg, &layout));
        if self.reuse_graphs && same_sampling && self.graph.as_ref().is_some_and(|(s, _)| *s == shape) {
            self.counters.graphs_reused += 1;
            return Ok(());
        }
        self.graph = None;
        self.sampling_graph = None;
        let extra = self.sampling.extra_nodes(&layout);
        let mut built = Builder::build(
            self.model,
            self.decoder()?,
            self.memories(),
            shape,
            (self.params.graph, self.adapters()),
            extra,
        )?;
        let sampling_graph = self.sampling.build(&mut built.graph, built.logits, layout)?;
        self.ensure_sched_nodes(
            crate::graph::max_nodes(self.model) + extra + crate::graph::lora::extra_nodes(&self.loras),
        )?;
        self.sched.alloc(&built.graph)?;
        self.counters.graphs_built += 1;
        let size = self.sched.buffer_bytes();
        if size > self.counters.compute_buffer_bytes {
            self.counters.compute_buffer_grows += 1;
            self.counters.compute_buffer_bytes = size;
        }
        self.graph = Some((shape, built));
        self.sampling_graph = Some(sampling_graph);
        Ok(())
    }

    /// A scheduler able to hold graphs of `n` nodes (made anew when backend samplers need more).
    pub(super) fn ensure_sched_nodes(&mut self, n: usize) -> Result<()> {
        if n <= self.sched_nodes {
            return Ok(());
        }
        // The optimizer holds the scheduler (sized for training graphs when it was made).
        if self.training.is_some() {
            return Err(Error::invalid(format!(
                "a graph of {n} nodes exceeds the {} the training context's scheduler holds",
                self.sched_nodes
            )));
        }
        self.sched = Scheduler::new(&self.backend, &self.devices, n, self.op_offload)?;
        if let Some(cb) = self.cb_eval {
            self.sched.set_eval_callback(cb);
        }
        self.sched_nodes = n;
        Ok(())
    }

    /// Positions block-sparse attention covers when `top` are in use: in steps of 256
    /// (llama.cpp's `get_n_pos`); 0 without it.
    pub(super) fn block_sparse_positions(&self, top: usize) -> usize {
        match self.params.graph.block_sparse {
            true => top.next_multiple_of(256).max(256),
            false => 0,
        }
    }

    /// Fill the current graph's inputs for the ubatch at `places`: the common ones here, the
    /// mechanisms' from the ubatch's view (`state`: the recurrent cells' copy sources and the
    /// cache's per-ubatch state).
    pub(super) fn set_inputs(
        &self,
        feed: &Feed,
        places: &[TokenPlace],
        outputs: &[bool],
        rows: [&[usize]; 2],
        seqs: &[usize],
        (copy_sources, memory): (Option<&[i32]>, UbatchMemory),
    ) -> Result<()> {
        let Some((shape, built)) = &self.graph else {
            return Err(Error::Internal("no graph to set inputs of".into()));
        };
        let hp = self
            .model
            .hparams
            .as_ref()
            .ok_or_else(|| Error::invalid("vocab-only model"))?;
        let inp = &built.inputs;
        match (feed, inp.tokens, inp.embd) {
            (Feed::Tokens(ids), Some(t), _) => set_i32(t, ids)?,
            (Feed::Embd { rows, .. }, _, Some(t)) => set_f32(t, rows)?,
            _ => return Err(Error::Internal("the graph's input does not match the batch's".into())),
        }
        if let Some(l) = &inp.lora {
            set_f32(l.input, &l.values(&self.loras, &self.lora_scales))?;
        }
        if let Some(pos_input) = inp.pos {
            let mut pos: Vec<i32> = places.iter().map(|p| p.pos).collect();
            if pos_input.ne()[0] as usize == 4 * places.len() {
                let n = pos.len();
                match feed {
                    // Embeddings come with their sections (an image's 2D grid).
                    Feed::Embd { sections, .. } if sections.len() == n => {
                        pos = (0..4).flat_map(|j| sections.iter().map(move |s| s[j])).collect();
                    }
                    // A multi-dimensional rope over text: three copies of the positions, then zeros.
                    _ => {
                        pos.extend_from_within(..);
                        pos.extend_from_within(..n);
                        pos.resize(4 * n, 0);
                    }
                }
            }
            set_i32(pos_input, &pos)?;
        }
        // The rows of the full layers' cells, then the sliding layers'.
        for ((keys, values), (rows, sliding)) in [(inp.kv_rows, inp.v_rows), (inp.kv_rows_swa, inp.v_rows_swa)]
            .into_iter()
            .zip(rows.into_iter().zip([false, true]))
        {
            if let Some(t) = keys {
                set_i64(t, rows.iter().map(|&r| r as i64))?;
            }
            if let Some(t) = values {
                set_i64(t, self.kv.value_indices(sliding, rows))?;
            }
        }
        for (rot, bytes) in [inp.k_rot, inp.v_rot, inp.idx_rot, inp.k_rot_swa]
            .into_iter()
            .zip(&self.rotation_bytes)
        {
            if let Some(rot) = rot {
                set_bytes(rot, bytes)?;
            }
        }
        let causal = self.params.graph.causal;
        let alibi = hp.max_alibi_bias > 0.0;
        // Attention within the ubatch (an encoder's, or a graph that attends without the cache
        // its context keeps): each token to its own (first) sequence, both ways in
        // `llama_encode` whatever the context's causal setting (llama.cpp's encode).
        let in_ubatch = inp.mask_in_ubatch || !self.has_memory();
        let ubatch_causal = causal && !shape.encoder;
        if let Some(m) = inp.mask {
            let mask = if in_ubatch {
                ubatch_mask(places, None, alibi, ubatch_causal)
            } else {
                self.kv
                    .mask(places, shape.n_kv, causal || hp.non_causal_sliding_only, false, alibi)
            };
            set_mask(m, &mask)?;
        }
        if let (Some(t), Some(sources)) = (inp.s_copy, copy_sources) {
            set_i32(t, sources)?;
        }
        if let Some(m) = inp.mask_swa {
            let mask = if in_ubatch {
                ubatch_mask(places, Some(hp.swa()), alibi, ubatch_causal)
            } else {
                self.kv.mask(places, shape.n_kv_swa, causal, true, alibi)
            };
            set_mask(m, &mask)?;
        }
        if let Some(t) = inp.attn_temp {
            let scales: Vec<f32> = places.iter().map(|p| hp.attn_temp.at(p.pos)).collect();
            set_f32(t, &scales)?;
        }
        inp.set_mechanisms(&UbatchView {
            places,
            seqs,
            shape,
            hp,
            params: &self.params.graph,
            kv: &self.kv,
            memory,
            cross: self.cross.as_ref(),
        })?;
        if let Some(ids) = inp.out_ids {
            let rows: Vec<i32> = (0..outputs.len() as i32).filter(|&i| outputs[i as usize]).collect();
            set_i32(ids, &rows)?;
        }
        let seq_idx = |s: usize| seq_index(seqs, s);
        if let Some(w) = inp.mean {
            // Each sequence's tokens weigh 1/count in its column.
            let n = places.len();
            let mut count = vec![0u32; seqs.len()];
            places
                .iter()
                .for_each(|p| p.seqs.iter().for_each(|s| count[seq_idx(s)] += 1));
            let mut m = vec![0f32; n * seqs.len()];
            for (i, p) in places.iter().enumerate() {
                for s in p.seqs.iter() {
                    let k = seq_idx(s);
                    m[k * n + i] = 1.0 / count[k] as f32;
                }
            }
            set_f32(w, &m)?;
        }
        if let Some(c) = inp.cls {
            // Each sequence's first token (lowest position, earliest row) or last one (highest
            // position, latest row), as llama.cpp picks them; a causal model ranks its last
            // (not in `llama_encode`, which attends both ways).
            let last = self.params.pooling == Pooling::Last || (self.params.pooling == Pooling::Rank && ubatch_causal);
            let mut target: Vec<Option<(i32, i32)>> = vec![None; seqs.len()];
            for (i, p) in places.iter().enumerate() {
                for s in p.seqs.iter() {
                    let t = &mut target[seq_idx(s)];
                    let better = match *t {
                        None => true,
                        Some((pos, _)) => (last && p.pos >= pos) || (!last && p.pos < pos),
                    };
                    if better {
                        *t = Some((p.pos, i as i32));
                    }
                }
            }
            let rows: Vec<i32> = target.iter().map(|t| t.map_or(0, |(_, r)| r)).collect();
            set_i32(c, &rows)?;
        }
        Ok(())
    }
}

/// Whether a computation ran to its end (false: the abort callback stopped it); a failure is an
/// error.
fn finished(status: ComputeStatus) -> Result<bool> {
    match status {
        ComputeStatus::Success => Ok(true),
        ComputeStatus::Aborted => Ok(false),
        ComputeStatus::Failed(code) => Err(Error::Ggml(format!("graph compute failed with status {code}"))),
    }
}

/// A ubatch's `n` runs of equal length, one sequence (set) each, as the recurrent slot search
/// takes them.
fn groups_of(places: &[TokenPlace], n: usize) -> Vec<SeqGroup> {
    let per = places.len() / n.max(1);
    places
        .chunks(per.max(1))
        .map(|run| SeqGroup {
            primary: run[0].primary_seq,
            seqs: run[0].seqs,
            n_tokens: run.len(),
            last_pos: run[run.len() - 1].pos,
        })
        .collect()
}

/// The attention mask of a ubatch's tokens among themselves, [n_tokens][n_tokens]: a token sees
/// the tokens of its first sequence (not later ones when `causal`; within `swa`, for the sliding
/// layers' mask), at minus their distance with `alibi`, as llama.cpp's cacheless mask.
fn ubatch_mask(places: &[TokenPlace], swa: Option<Swa>, alibi: bool, causal: bool) -> Vec<f32> {
    let n = places.len();
    let mut mask = vec![f32::NEG_INFINITY; n * n];
    for (i1, p1) in places.iter().enumerate() {
        for (i0, p0) in places.iter().enumerate() {
            let seen = p0.primary_seq == p1.primary_seq
                && !(causal && p0.pos > p1.pos)
                && !swa.is_some_and(|w| w.hides(p1.pos, p0.pos));
            if seen {
                mask[i1 * n + i0] = if alibi { -(p0.pos.abs_diff(p1.pos) as f32) } else { 0.0 };
            }
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::SeqSet;

    fn place(pos: i32, seq: usize) -> TokenPlace {
        TokenPlace {
            pos,
            seqs: SeqSet::single(seq),
            primary_seq: seq,
            ext: crate::kv::CellExt::default(),
        }
    }

    /// An encoder's tokens see their whole sequence (and only it).
    #[test]
    fn encoder_masks_keep_tokens_to_their_sequence() {
        let places = [place(0, 0), place(1, 0), place(0, 1)];
        let ninf = f32::NEG_INFINITY;
        assert_eq!(
            ubatch_mask(&places, None, false, false),
            [0.0, 0.0, ninf, 0.0, 0.0, ninf, ninf, ninf, 0.0]
        );
        // Causal: not the later token of its sequence.
        assert_eq!(
            ubatch_mask(&places, None, false, true),
            [0.0, ninf, ninf, 0.0, 0.0, ninf, ninf, ninf, 0.0]
        );
        // A symmetric window of 2 sees one position each way.
        let places = [place(0, 0), place(1, 0), place(2, 0)];
        let mask = ubatch_mask(&places, Some(Swa::Symmetric(2)), false, false);
        assert_eq!(mask, [0.0, 0.0, ninf, 0.0, 0.0, 0.0, ninf, 0.0, 0.0]);
        // ALiBi's distances.
        let mask = ubatch_mask(&places, None, true, false);
        assert_eq!(mask, [0.0, -1.0, -2.0, -1.0, 0.0, -1.0, -2.0, -1.0, 0.0]);
    }
}
