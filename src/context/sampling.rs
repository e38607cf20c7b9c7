//! Backend sampling in a context: the samplers attached per sequence, their ops appended to the
//! decode graph after the logits (one set per output row of a sequence that has a sampler), and
//! what they leave per output row for the `llama_get_sampled_*` getters.

use super::Context;
use crate::error::{Error, Result};
use crate::ggml::{tensor_get_f32, tensor_read, Graph, TensorRef};
use crate::sampling::backend::{probe_nodes, GraphData, SeqSampler};
use crate::sampling::TOKEN_NULL;
use std::collections::BTreeMap;

/// Per sequence with a sampler: the ubatch's output rows it samples (ascending). A graph is built
/// for one layout and reused only with the same.
pub type Layout = Vec<(usize, Vec<usize>)>;

/// What the samplers left for one output row (empty vectors: nothing of that kind).
#[derive(Debug, Clone, Default)]
pub struct SampledRow {
    pub token: i32,
    pub logits: Vec<f32>,
    pub probs: Vec<f32>,
    pub candidates: Vec<i32>,
}

/// The tensors to read back for one output row of the graph.
struct RowTensors {
    /// The row among the ubatch's outputs.
    row: usize,
    sampled: Option<TensorRef>,
    probs: Option<TensorRef>,
    logits: Option<TensorRef>,
    candidates: Option<TensorRef>,
}

/// The sampling part of the current graph.
pub(super) struct SamplingGraph {
    layout: Layout,
    generation: u64,
    rows: Vec<RowTensors>,
}

#[derive(Default)]
pub struct Sampling {
    /// Per sequence: its sampler and the graph nodes it adds per row.
    samplers: BTreeMap<usize, (Box<dyn SeqSampler>, usize)>,
    /// Bumped whenever the samplers change: a graph built for others is not reused.
    generation: u64,
    /// The last decode's rows; None when no sampler was attached then (llama.cpp then has no
    /// sampling buffers at all, which the getters tell apart from an unsampled row).
    rows: Option<Vec<SampledRow>>,
}

impl Sampling {
    pub fn is_empty(&self) -> bool {
        self.samplers.is_empty()
    }

    pub fn has(&self, seq: usize) -> bool {
        self.samplers.contains_key(&seq)
    }

    /// Which of the ubatch's outputs (their primary sequences, in output order) each sampler takes.
    pub fn layout(&self, output_seqs: impl Iterator<Item = usize>) -> Layout {
        let mut by_seq: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (row, seq) in output_seqs.enumerate() {
            if self.has(seq) {
                by_seq.entry(seq).or_default().push(row);
            }
        }
        by_seq.into_iter().collect()
    }

    /// Graph nodes the samplers of `layout` add.
    pub fn extra_nodes(&self, layout: &Layout) -> usize {
        layout
            .iter()
            .map(|(seq, rows)| self.samplers.get(seq).map_or(0, |s| s.1 + 2) * rows.len())
            .sum::<usize>()
            + usize::from(!layout.is_empty())
    }

    /// Append the samplers' ops over `logits` ([n_vocab, n_outputs]) to `g`, as llama.cpp does:
    /// every sampler forgets its last graph, then each samples its rows of a padded copy of the
    /// logits (ops that edit their input in place must not touch the logits handed out). A graph
    /// without logits (an encoder's) samples nothing.
    pub(super) fn build(&mut self, g: &mut Graph, logits: Option<TensorRef>, layout: Layout) -> Result<SamplingGraph> {
        self.samplers.values_mut().for_each(|s| s.0.reset());
        let mut rows = Vec::new();
        if let (Some(logits), false) = (logits, layout.is_empty()) {
            let padded = g.pad_rows(logits, 1)?;
            let [n_vocab, ..] = padded.ne();
            let row_bytes = padded.nb()[1];
            for (seq, seq_rows) in &layout {
                let (sampler, _) = self
                    .samplers
                    .get_mut(seq)
                    .ok_or_else(|| Error::Internal(format!("no sampler for sequence {seq}")))?;
                for (i, &row) in seq_rows.iter().enumerate() {
                    let view = g.view(padded, &[n_vocab], &[], row * row_bytes)?;
                    g.set_name(view, &format!("logits_seq_{seq}_{i}"));
                    let mut d = GraphData {
                        logits: view,
                        probs: None,
                        sampled: None,
                        candidates: None,
                    };
                    sampler
                        .build(g, &mut d)
                        .map_err(|e| Error::Ggml(format!("backend sampler of sequence {seq}: {e}")))?;
                    for t in [Some(d.logits), d.probs, d.sampled, d.candidates].into_iter().flatten() {
                        g.output(t);
                    }
                    rows.push(RowTensors {
                        row,
                        sampled: d.sampled,
                        probs: d.probs,
                        logits: Some(d.logits),
                        candidates: d.candidates,
                    });
                }
            }
        }
        Ok(SamplingGraph {
            layout,
            generation: self.generation,
            rows,
        })
    }

    /// Fill the inputs of the samplers in `graph` before a compute (llama.cpp fills only the
    /// samplers the ubatch uses).
    pub(super) fn set_inputs(&mut self, graph: &SamplingGraph) -> Result<()> {
        for (seq, _) in &graph.layout {
            if let Some((s, _)) = self.samplers.get_mut(seq) {
                s.set_input()
                    .map_err(|e| Error::Ggml(format!("backend sampler of sequence {seq}: {e}")))?;
            }
        }
        Ok(())
    }

    /// Whether `graph` was built for this layout and these samplers.
    pub(super) fn fits(&self, graph: &SamplingGraph, layout: &Layout) -> bool {
        graph.generation == self.generation && graph.layout == *layout
    }

    /// A batch of `n_outputs` outputs begins: clear the rows, start each sampler's transaction.
    pub(super) fn begin(&mut self, n_outputs: usize) {
        if self.samplers.is_empty() {
            self.rows = None;
            return;
        }
        let empty = SampledRow {
            token: TOKEN_NULL,
            ..SampledRow::default()
        };
        self.rows = Some(vec![empty; n_outputs]);
        self.samplers.values_mut().for_each(|s| s.0.begin());
    }

    /// Read what `graph` computed into the rows of the batch's outputs (`dst[i]`: the batch row of
    /// the ubatch's output `i`).
    pub(super) fn read(&mut self, graph: &SamplingGraph, dst: &[usize], n_vocab: usize) -> Result<()> {
        let Some(rows) = self.rows.as_mut() else {
            return Ok(());
        };
        for r in &graph.rows {
            let out = dst
                .get(r.row)
                .and_then(|&d| rows.get_mut(d))
                .ok_or_else(|| Error::Internal(format!("sampled row {} has no output", r.row)))?;
            if let Some(t) = r.sampled {
                out.token = read_i32(t, 1)?.first().copied().unwrap_or(TOKEN_NULL);
            }
            if let Some(t) = r.logits {
                out.logits = read_f32(t, n_vocab)?;
            }
            if let Some(t) = r.probs {
                out.probs = read_f32(t, n_vocab)?;
            }
            if let Some(t) = r.candidates {
                out.candidates = read_i32(t, n_vocab)?;
            }
        }
        Ok(())
    }
}

fn n_elements(t: TensorRef, max: usize) -> Result<usize> {
    let n = t.ne().iter().product::<i64>() as usize;
    if n > max {
        return Err(Error::Ggml(format!(
            "a backend sampler left {n} values for a row of {max}"
        )));
    }
    Ok(n)
}

fn read_f32(t: TensorRef, max: usize) -> Result<Vec<f32>> {
    let mut v = vec![0f32; n_elements(t, max)?];
    tensor_get_f32(t, &mut v)?;
    Ok(v)
}

fn read_i32(t: TensorRef, max: usize) -> Result<Vec<i32>> {
    if t.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_I32 {
        return Err(Error::Ggml("a backend sampler left token ids that are not I32".into()));
    }
    let mut b = vec![0u8; 4 * n_elements(t, max)?];
    tensor_read(t, 0, &mut b)?;
    Ok(b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

impl Context<'_> {
    /// Attach `sampler` to sequence `seq` (replacing any other); the next graph includes it.
    pub fn attach_sampler(&mut self, seq: i32, mut sampler: Box<dyn SeqSampler>) -> Result<()> {
        let s = self.sampler_seq(seq)?;
        let n_nodes = probe_nodes(sampler.as_mut(), self.n_vocab())
            .map_err(|e| Error::invalid(format!("backend sampler for seq_id {seq}: {e}")))?;
        self.sampling.samplers.insert(s, (sampler, n_nodes));
        self.sampling.generation += 1;
        Ok(())
    }

    /// Detach the sampler of `seq`, if any.
    pub fn detach_sampler(&mut self, seq: i32) -> Result<()> {
        let s = self.sampler_seq(seq)?;
        if self.sampling.samplers.remove(&s).is_some() {
            self.sampling.generation += 1;
        }
        Ok(())
    }

    /// `seq` as a sequence a backend sampler may be attached to.
    pub fn sampler_seq(&self, seq: i32) -> Result<usize> {
        usize::try_from(seq)
            .ok()
            .filter(|&s| s < self.params.n_seq_max as usize)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "seq_id {seq} is out of range [0, {}) for a backend sampler",
                    self.params.n_seq_max
                ))
            })
    }

    /// Before a batch (`output_seqs`: the sequences of its outputs): drop samplers their owner
    /// freed, refuse more outputs per sequence than backend sampling was set up for.
    pub(super) fn check_sampling(&mut self, output_seqs: &[usize]) -> Result<()> {
        let before = self.sampling.samplers.len();
        self.sampling.samplers.retain(|seq, s| {
            let live = s.0.is_live();
            if !live {
                crate::log_warn!("backend sampler of sequence {seq} was freed: detached");
            }
            live
        });
        if self.sampling.samplers.len() != before {
            self.sampling.generation += 1;
        }
        let limit = self.params.n_outputs_max_per_seq as usize;
        for &seq in self.sampling.samplers.keys() {
            let n = output_seqs.iter().filter(|&&s| s == seq).count();
            if n > limit {
                return Err(Error::invalid(format!(
                    "backend sampling supports at most {limit} outputs per sequence (seq_id {seq} had {n})"
                )));
            }
        }
        Ok(())
    }

    /// What the backend samplers left for output `i` (negative: from the end). None: no sampler
    /// was attached at the last decode.
    pub fn sampled_row(&mut self, i: i32) -> Result<Option<&mut SampledRow>> {
        if self.sampling.rows.is_none() {
            return Ok(None);
        }
        let row = self.output_row(i, "backend sampled")?;
        let rows = self.sampling.rows.as_mut().map_or(&mut [][..], |r| &mut r[..]);
        rows.get_mut(row)
            .map(Some)
            .ok_or_else(|| Error::invalid(format!("invalid backend sampled id {i}: no output for it")))
    }
}
