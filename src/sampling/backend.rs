//! Backend sampling (llama.h's `backend_*` sampler interface): samplers attached to a context with
//! `llama_context_params.samplers` or `llama_set_sampler` add ops to the decode graph after the
//! logits, and the context reads back what they leave (a token, probabilities, filtered logits,
//! candidate ids). The built-in samplers' ops here are llama.cpp's, op for op, so the same ggml
//! gives the same numbers and tokens.

use super::rng::Mt19937;
use crate::ggml::{tensor_set, GgmlError, Graph, RawType, TensorRef};
use std::ffi::CStr;

const F32: RawType = ggml_sys::ggml_type_GGML_TYPE_F32;
const I32: RawType = ggml_sys::ggml_type_GGML_TYPE_I32;

/// What the samplers of one output row read and refine (llama.h's `struct llama_sampler_data`):
/// the row's logits, and what earlier samplers left.
#[derive(Debug, Clone, Copy)]
pub struct GraphData {
    pub logits: TensorRef,
    pub probs: Option<TensorRef>,
    pub sampled: Option<TensorRef>,
    pub candidates: Option<TensorRef>,
}

/// What a built-in sampler keeps of the graph it is part of. `llama_sampler_copy` leaves it as it
/// is in the destination, and a clone starts without a graph (as llama.cpp's samplers do).
#[derive(Debug, Default)]
pub struct GraphBound {
    /// `backend_init`'s answer (None: not initialised), which names show as "+" or "-".
    supported: Option<bool>,
    /// Up to more than one output per sequence: the dist sampler draws on a side stream then.
    multi_output: bool,
    /// The sampler's input tensors in the current graph.
    inputs: Vec<TensorRef>,
}

impl Clone for GraphBound {
    fn clone(&self) -> Self {
        GraphBound {
            supported: None,
            multi_output: self.multi_output,
            inputs: Vec::new(),
        }
    }
}

impl GraphBound {
    /// `names` as llama.cpp shows them: plain before `backend_init`, then "+name" (runs in the
    /// graph) or "-name" (cannot).
    pub fn name(&self, names: [&'static CStr; 3]) -> &'static CStr {
        match self.supported {
            None => names[0],
            Some(true) => names[1],
            Some(false) => names[2],
        }
    }

    /// `backend_init`'s bookkeeping: the answer, the output limit, no graph yet.
    pub fn init_as(&mut self, supported: bool, n_outputs_max_per_seq: u32) {
        self.supported = Some(supported);
        self.multi_output = n_outputs_max_per_seq > 1;
        self.inputs.clear();
    }

    pub fn multi_output(&self) -> bool {
        self.multi_output
    }
}

/// A built-in sampler's part in the graph.
pub trait GraphPart {
    fn bound(&mut self) -> &mut GraphBound;

    /// Whether the sampler can run in the graph with up to `n_outputs_max_per_seq` outputs per
    /// sequence.
    fn supports(&self, _n_outputs_max_per_seq: u32) -> bool {
        true
    }

    /// Add the sampler's ops for one output row.
    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> Result<(), GgmlError>;

    /// Fill the sampler's inputs before a compute.
    fn set_input(&mut self) -> Result<(), GgmlError> {
        Ok(())
    }

    /// A new batch begins (its outputs are sampled as one transaction).
    fn begin(&mut self) {}

    /// `backend_init`: remember the answer and the output limit.
    fn init(&mut self, n_outputs_max_per_seq: u32) -> bool {
        let ok = self.supports(n_outputs_max_per_seq);
        self.bound().init_as(ok, n_outputs_max_per_seq);
        ok
    }

    /// `backend_reset`: forget the tensors of the last graph.
    fn forget_graph(&mut self) {
        self.bound().inputs.clear();
    }
}

/// A sampler attached to one sequence of a context, as the context drives it. The FFI layer
/// implements it over a `llama_sampler` chain.
pub trait SeqSampler: Send {
    /// Add the ops of the row `d` describes.
    fn build(&mut self, g: &mut Graph, d: &mut GraphData) -> Result<(), GgmlError>;
    /// Fill the inputs of the last built graph.
    fn set_input(&mut self) -> Result<(), GgmlError>;
    /// A graph is about to be built.
    fn reset(&mut self);
    /// A batch begins.
    fn begin(&mut self);
    /// False once the client freed the sampler.
    fn is_live(&self) -> bool;
}

/// Tensors the probe's graph may hold (llama.cpp probes with ggml's default graph size).
const PROBE_NODES: usize = 2048;

/// Graph nodes `s` adds per output row: its ops built once over a row of `n_vocab` logits, as
/// llama.cpp probes a chain (the most of nodes and tensor descriptions, since a client's sampler
/// may make tensors that are no nodes).
pub fn probe_nodes(s: &mut dyn SeqSampler, n_vocab: usize) -> Result<usize, GgmlError> {
    let mut g = Graph::new(PROBE_NODES)?;
    let logits = g.new_tensor(F32, &[n_vocab as i64])?;
    let mut d = GraphData {
        logits,
        probs: None,
        sampled: None,
        candidates: None,
    };
    s.reset();
    let built = s.build(&mut g, &mut d);
    s.reset();
    built?;
    for t in [Some(d.logits), d.probs, d.sampled, d.candidates].into_iter().flatten() {
        g.expand(t);
    }
    Ok((g.n_nodes().max(0) as usize).max(g.n_tensors()))
}

fn n_elements(t: TensorRef) -> i64 {
    t.ne().iter().product()
}

/// `t` as one row (ggml_reshape_1d), as llama.cpp flattens before each sampler.
fn flat(g: &mut Graph, t: TensorRef) -> Result<TensorRef, GgmlError> {
    g.reshape(t, &[n_elements(t)])
}

/// The rows of `t` (one value per row) picked by `idx`.
fn pick(g: &mut Graph, t: TensorRef, idx: TensorRef) -> Result<TensorRef, GgmlError> {
    let rows = g.reshape(t, &[1, n_elements(t)])?;
    g.get_rows(rows, idx)
}

fn named(g: &mut Graph, t: TensorRef, name: &str) -> TensorRef {
    g.set_name(t, name);
    t
}

/// The most likely candidate alone (greedy, or a temperature of zero or less), kept as the row's
/// only logit and candidate.
fn keep_argmax(g: &mut Graph, d: &mut GraphData, name: &str) -> Result<TensorRef, GgmlError> {
    let logits = flat(g, d.logits)?;
    let max_idx = g.argmax(logits)?;
    Ok(named(g, max_idx, name))
}

pub(super) fn greedy(g: &mut Graph, d: &mut GraphData) -> Result<(), GgmlError> {
    let idx = keep_argmax(g, d, "greedy_argmax")?;
    d.sampled = Some(idx);
    Ok(())
}

/// llama.cpp's temperature in the graph: scale by 1/t, or keep only the best candidate.
pub(super) fn temperature(g: &mut Graph, d: &mut GraphData, t: f32) -> Result<(), GgmlError> {
    if t > 0.0 {
        d.logits = g.scale(d.logits, 1.0 / t)?;
        return Ok(());
    }
    let max_idx = keep_argmax(g, d, "temp_max_idx")?;
    d.candidates = Some(match d.candidates {
        Some(c) => pick(g, c, max_idx)?,
        None => max_idx,
    });
    let logits = flat(g, d.logits)?;
    d.logits = pick(g, logits, max_idx)?;
    Ok(())
}

/// Entropy-driven temperature (temp-ext), llama.cpp's formulation in ggml ops.
pub(super) fn temperature_ext(
    g: &mut Graph,
    d: &mut GraphData,
    t: f32,
    delta: f32,
    exponent: f32,
) -> Result<(), GgmlError> {
    if delta <= 0.0 || t <= 0.0 {
        return temperature(g, d, t);
    }
    let logits = flat(g, d.logits)?;
    let min_temp = 0.0f32.max(t - delta);
    let max_temp = t + delta;
    let max_entropy = (logits.ne()[0] as f32).ln();
    let probs = g.soft_max_rows(logits)?;
    let probs = g.clamp(probs, 1e-10, 1.0)?;
    let log_probs = g.log(probs)?;
    let p_log_p = g.mul(probs, log_probs)?;
    let sum = g.sum(p_log_p)?;
    let entropy = g.scale(sum, -1.0)?;
    let norm_entropy = g.scale(entropy, 1.0 / max_entropy)?;
    let log_norm = g.log(norm_entropy)?;
    let scaled = g.scale(log_norm, exponent)?;
    let pow = g.exp(scaled)?;
    let dyn_temp = g.scale_bias(pow, max_temp - min_temp, min_temp)?;
    let out = g.div(logits, dyn_temp)?;
    d.logits = named(g, out, "temp_ext_scaled_logits");
    Ok(())
}

/// Keep the `k` best candidates (ggml's top-k; `k` above the row's length keeps them all).
pub(super) fn top_k(g: &mut Graph, d: &mut GraphData, k: i32) -> Result<(), GgmlError> {
    let logits = flat(g, d.logits)?;
    let k = i64::from(k).min(logits.ne()[0]);
    let top = g.top_k(logits, k)?;
    let top = named(g, top, "top_k");
    d.candidates = Some(match d.candidates {
        Some(c) => pick(g, c, top)?,
        None => top,
    });
    let rows = pick(g, logits, top)?;
    d.logits = named(g, rows, "top_k_rows");
    Ok(())
}

/// Mask (-inf) what lies past the nucleus `p` of the sorted row, keeping the candidate that
/// crosses it; the row comes out sorted, best first.
pub(super) fn top_p(g: &mut Graph, d: &mut GraphData, p: f32) -> Result<(), GgmlError> {
    let logits = flat(g, d.logits)?;
    let n = logits.ne()[0];
    let sorted_idx = g.argsort_desc(logits)?;
    let sorted = pick(g, logits, sorted_idx)?;
    let sorted = g.reshape(sorted, &[n])?;
    let softmax = g.soft_max_rows(sorted)?;
    d.candidates = Some(match d.candidates {
        Some(c) => pick(g, c, sorted_idx)?,
        None => sorted_idx,
    });
    let cdf = g.cumsum(softmax)?;
    let cdf_scaled = g.scale_bias(cdf, -1.0, p)?;
    let mask = g.step(cdf_scaled)?;
    let idxf = g.sum(mask)?;
    let idxf = g.clamp(idxf, 0.0, (n - 1) as f32)?;
    let ones = g.scale_bias(idxf, 0.0, 1.0)?;
    let mask_rows = g.reshape(mask, &[1, n])?;
    let idx = g.cast(idxf, I32)?;
    let mask_rows = g.set_rows(mask_rows, ones, idx)?;
    let mask = g.reshape(mask_rows, &[n])?;
    let bias = g.log(mask)?;
    let out = g.add(sorted, bias)?;
    d.logits = named(g, out, "top_p_logits");
    Ok(())
}

/// Mask (-inf) the candidates below `p` times the best one's probability.
pub(super) fn min_p(g: &mut Graph, d: &mut GraphData, p: f32) -> Result<(), GgmlError> {
    let logits = flat(g, d.logits)?;
    let max_idx = g.argmax(logits)?;
    let max_logit = pick(g, logits, max_idx)?;
    let threshold = g.scale_bias(max_logit, 1.0, p.ln())?;
    let sub = g.sub(logits, threshold)?;
    let mask = g.step(sub)?;
    let bias = g.log(mask)?;
    let out = g.add(logits, bias)?;
    d.logits = named(g, out, "min_p_logits");
    Ok(())
}

/// The dist sampler in the graph: one uniform input per row, the first candidate whose running
/// probability passes it.
pub(super) fn dist(g: &mut Graph, d: &mut GraphData, bound: &mut GraphBound) -> Result<(), GgmlError> {
    let name = format!("uniform_{}", bound.inputs.len());
    let uniform = g.input(F32, &[1], &name)?;
    bound.inputs.push(uniform);
    let logits = flat(g, d.logits)?;
    let n = logits.ne()[0];
    let probs = g.soft_max_rows(logits)?;
    let probs = named(g, probs, "dist_probs");
    let cumsum = g.cumsum(probs)?;
    let diff = g.sub(cumsum, uniform)?;
    let mask = g.step(diff)?;
    let idxf = g.sum(mask)?;
    let idxf = g.clamp(idxf, 1.0, n as f32)?;
    let idxf = g.scale_bias(idxf, -1.0, n as f32)?;
    let idx = g.cast(idxf, I32)?;
    let sampled = match d.candidates {
        Some(c) => pick(g, c, idx)?,
        None => idx,
    };
    d.sampled = Some(named(g, sampled, "dist_sampled_token"));
    d.probs = Some(probs);
    Ok(())
}

/// The dist sampler's random draws for the rows of the current graph, in row order; with several
/// outputs per sequence they come from `side` (committed to the main stream as tokens are
/// accepted), else from `main`.
pub(super) fn dist_set_input(
    bound: &GraphBound,
    main: &mut Mt19937,
    side: &mut Mt19937,
    drawn: &mut usize,
) -> Result<(), GgmlError> {
    let rng = if bound.multi_output { side } else { main };
    for &t in &bound.inputs {
        let u = rng.uniform_f64() as f32;
        tensor_set(t, &u.to_le_bytes())?;
        if bound.multi_output {
            *drawn += 1;
        }
    }
    Ok(())
}

/// The repetition penalties in the graph, over the history `count` (token, occurrences) fed as
/// inputs of a fixed length `min(last_n, n_vocab)`.
pub(super) struct PenaltyOps {
    pub n_vocab: usize,
    pub last_n: usize,
    pub repeat: f32,
    pub freq: f32,
    pub present: f32,
}

impl PenaltyOps {
    fn n_max(&self) -> usize {
        self.last_n.min(self.n_vocab)
    }

    pub(super) fn build(&self, g: &mut Graph, d: &mut GraphData, bound: &mut GraphBound) -> Result<(), GgmlError> {
        let n_max = self.n_max() as i64;
        let ids = g.input(I32, &[n_max], "penalties_token_ids")?;
        let counts = g.input(I32, &[n_max], "penalties_counts")?;
        bound.inputs = vec![ids, counts];
        let logits = flat(g, d.logits)?;
        let mut counts_f32 = g.cast(counts, F32)?;
        let mut gathered = logits;
        if let Some(c) = d.candidates {
            let candidates = flat(g, c)?;
            let n_candidates = candidates.ne()[0];
            if n_candidates != logits.ne()[0] {
                return Err(GgmlError::new(format!(
                    "penalties: {n_candidates} candidates for {} logits",
                    logits.ne()[0]
                )));
            }
            let zeros = g.new_tensor(F32, &[1, self.n_vocab as i64])?;
            let count_rows = g.fill(zeros, 0.0)?;
            let scatter = g.reshape(counts_f32, &[1, n_max])?;
            let count_rows = g.set_rows(count_rows, scatter, ids)?;
            let picked = g.get_rows(count_rows, candidates)?;
            counts_f32 = g.reshape(picked, &[n_candidates])?;
        } else {
            if logits.ne()[0] != self.n_vocab as i64 {
                return Err(GgmlError::new(format!(
                    "penalties: {} logits for a vocabulary of {}",
                    logits.ne()[0],
                    self.n_vocab
                )));
            }
            let rows = g.reshape(logits, &[1, logits.ne()[0]])?;
            let picked = g.get_rows(rows, ids)?;
            gathered = g.reshape(picked, &[n_max])?;
        }
        let active = g.step(counts_f32)?;
        let ones = g.fill(active, 1.0)?;
        let inactive = g.sub(ones, active)?;
        let mut penalized = gathered;
        if self.repeat != 1.0 {
            let pos = g.step(penalized)?;
            let ones = g.fill(pos, 1.0)?;
            let neg = g.sub(ones, pos)?;
            let pos_scale = g.scale(pos, 1.0 / self.repeat)?;
            let neg_scale = g.scale(neg, self.repeat)?;
            let scale = g.add(pos_scale, neg_scale)?;
            // Inactive entries scale by 1: -inf (masked by top-p) times 0 would be NaN.
            let scale = g.mul(scale, active)?;
            let scale = g.add(scale, inactive)?;
            penalized = g.mul(gathered, scale)?;
        }
        if self.freq != 0.0 {
            let f = g.scale(counts_f32, self.freq)?;
            penalized = g.sub(penalized, f)?;
        }
        if self.present != 0.0 {
            let p = g.scale(active, self.present)?;
            penalized = g.sub(penalized, p)?;
        }
        d.logits = if d.candidates.is_some() {
            penalized
        } else {
            let n = logits.ne()[0];
            let rows = g.reshape(logits, &[1, n])?;
            let scatter = g.reshape(penalized, &[1, n_max])?;
            let rows = g.set_rows(rows, scatter, ids)?;
            g.reshape(rows, &[n])?
        };
        Ok(())
    }

    /// The history as the inputs want it: distinct tokens in id order with their counts, padded
    /// to the fixed length with a token absent from the history and a count of 0.
    pub(super) fn set_input(&self, bound: &GraphBound, count: &[(i32, i32)]) -> Result<(), GgmlError> {
        let [ids, counts] = bound.inputs[..] else {
            return Ok(());
        };
        let n_max = self.n_max();
        if count.len() > n_max {
            return Err(GgmlError::new(format!(
                "penalties: {} distinct tokens for {n_max} slots",
                count.len()
            )));
        }
        let mut entries = count.to_vec();
        entries.sort_unstable_by_key(|e| e.0);
        let mut filler = 0;
        while entries.binary_search_by_key(&filler, |e| e.0).is_ok() {
            filler += 1;
        }
        if entries.len() < n_max && filler as usize >= self.n_vocab {
            return Err(GgmlError::new("penalties: no free token id to pad the history with"));
        }
        entries.resize(n_max, (filler, 0));
        let bytes = |f: fn(&(i32, i32)) -> i32| entries.iter().flat_map(|e| f(e).to_le_bytes()).collect::<Vec<u8>>();
        tensor_set(ids, &bytes(|e| e.0))?;
        tensor_set(counts, &bytes(|e| e.1))
    }
}

/// Logit biases in the graph: the biases scattered into a zero row, added. One pair of inputs
/// serves every row of the graph.
pub(super) fn logit_bias(
    g: &mut Graph,
    d: &mut GraphData,
    bound: &mut GraphBound,
    n_vocab: usize,
    n: usize,
) -> Result<(), GgmlError> {
    if n_elements(d.logits) != n_vocab as i64 {
        return Err(GgmlError::new(format!(
            "logit bias: {} logits for a vocabulary of {n_vocab} (put it before samplers that shrink the row)",
            n_elements(d.logits)
        )));
    }
    if bound.inputs.is_empty() {
        let bias = g.input(F32, &[1, n as i64], "logit_bias")?;
        let idxs = g.input(I32, &[n as i64], "logit_idxs")?;
        bound.inputs = vec![bias, idxs];
    }
    let (bias, idxs) = (bound.inputs[0], bound.inputs[1]);
    let zeros = g.fill(d.logits, 0.0)?;
    let rows = g.reshape(zeros, &[1, n_vocab as i64])?;
    let rows = g.set_rows(rows, bias, idxs)?;
    let row = g.reshape(rows, &[n_vocab as i64])?;
    d.logits = g.add(d.logits, row)?;
    Ok(())
}

pub(super) fn logit_bias_set_input(bound: &GraphBound, biases: &[(i32, f32)]) -> Result<(), GgmlError> {
    let [bias, idxs] = bound.inputs[..] else {
        return Ok(());
    };
    let b: Vec<u8> = biases.iter().flat_map(|e| e.1.to_le_bytes()).collect();
    let i: Vec<u8> = biases.iter().flat_map(|e| e.0.to_le_bytes()).collect();
    tensor_set(bias, &b)?;
    tensor_set(idxs, &i)
}

#[cfg(test)]
mod tests {
    use super::super::candidates::test_util::from_logits;
    use super::super::{Candidates, Dist, Greedy, LogitBias, MinP, Penalties, Sampler, Temp, TopK, TopP};
    use super::*;
    use crate::ggml::{tensor_get_f32, tensor_read, CpuBackend, Scheduler};

    const LOGITS: [f32; 12] = [0.5, -1.0, 3.0, 2.5, 0.0, -3.0, 1.5, 2.9, -0.5, 0.25, 1.0, -2.0];

    /// What one row's graph part left, computed.
    struct Out {
        logits: Vec<f32>,
        candidates: Option<Vec<i32>>,
        sampled: Option<i32>,
        probs: Option<Vec<f32>>,
    }

    fn ints(t: TensorRef) -> Vec<i32> {
        let mut b = vec![0u8; t.nbytes()];
        tensor_read(t, 0, &mut b).unwrap();
        b.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    fn floats(t: TensorRef) -> Vec<f32> {
        let mut v = vec![0f32; t.nbytes() / 4];
        tensor_get_f32(t, &mut v).unwrap();
        v
    }

    fn run(s: &mut dyn Sampler) -> Out {
        let part = s.graph_part().expect("a graph part");
        assert!(part.init(1));
        let backend = CpuBackend::new(1).unwrap();
        let mut g = Graph::new(256).unwrap();
        let logits = g.input(F32, &[LOGITS.len() as i64], "logits").unwrap();
        let mut d = GraphData {
            logits,
            probs: None,
            sampled: None,
            candidates: None,
        };
        part.build(&mut g, &mut d).unwrap();
        for t in [Some(d.logits), d.probs, d.sampled, d.candidates].into_iter().flatten() {
            g.output(t);
        }
        let sched = Scheduler::new(&backend, &[], 256, true).unwrap();
        sched.alloc(&g).unwrap();
        tensor_set(
            logits,
            &LOGITS.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        )
        .unwrap();
        part.set_input().unwrap();
        sched.compute(&g);
        Out {
            logits: floats(d.logits),
            candidates: d.candidates.map(ints),
            sampled: d.sampled.map(|t| ints(t)[0]),
            probs: d.probs.map(floats),
        }
    }

    /// The CPU sampler's surviving candidates, by id.
    fn cpu(s: &mut dyn Sampler) -> Vec<(i32, f32)> {
        let mut v = from_logits(&LOGITS);
        let mut c = Candidates::new(&mut v, -1, false);
        s.apply(&mut c);
        let mut kept: Vec<(i32, f32)> = c.data().iter().map(|d| (d.id, d.logit)).collect();
        kept.sort_by_key(|k| k.0);
        kept
    }

    /// The graph's rows that were not masked, by id.
    fn kept(o: &Out) -> Vec<(i32, f32)> {
        let ids: Vec<i32> = o
            .candidates
            .clone()
            .unwrap_or_else(|| (0..o.logits.len() as i32).collect());
        let mut kept: Vec<(i32, f32)> = ids
            .into_iter()
            .zip(o.logits.iter().copied())
            .filter(|k| k.1 != f32::NEG_INFINITY)
            .collect();
        kept.sort_by_key(|k| k.0);
        kept
    }

    fn assert_same(graph: &[(i32, f32)], cpu: &[(i32, f32)]) {
        assert_eq!(graph.len(), cpu.len(), "{graph:?} vs {cpu:?}");
        for (a, b) in graph.iter().zip(cpu) {
            assert!(a.0 == b.0 && (a.1 - b.1).abs() < 1e-5, "{graph:?} vs {cpu:?}");
        }
    }

    #[test]
    fn filters_in_the_graph_keep_what_the_cpu_keeps() {
        let makers: [fn() -> Box<dyn Sampler>; 6] = [
            || TopK::boxed(3),
            || MinP::boxed(0.3, 1),
            || TopP::boxed(0.8, 1),
            || Temp::boxed(0.5),
            || LogitBias::boxed(12, vec![(4, 5.0), (11, -1.0)]),
            || {
                let mut p = Penalties::boxed(12, 8, 1.3, 0.2, 0.1);
                [2, 2, 7, 5].into_iter().for_each(|t| p.accept(t));
                p
            },
        ];
        for make in makers {
            let out = run(make().as_mut());
            assert_same(&kept(&out), &cpu(make().as_mut()));
        }
    }

    #[test]
    fn greedy_and_zero_temperature_keep_the_best() {
        let out = run(&mut Greedy::default());
        assert_eq!(out.sampled, Some(2));
        let out = run(Temp::boxed(0.0).as_mut());
        assert_eq!((out.candidates, out.logits), (Some(vec![2]), vec![3.0]));
    }

    #[test]
    fn dist_draws_where_the_uniform_falls() {
        let mut s = Dist::new(42);
        let out = run(&mut s);
        let probs = out.probs.unwrap();
        let token = out.sampled.unwrap() as usize;
        let u = Mt19937::new(42).uniform_f64() as f32;
        let before: f32 = probs[..token].iter().sum();
        assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(
            before <= u + 1e-5 && u <= before + probs[token] + 1e-5,
            "u {u} in {probs:?} at {token}"
        );
        assert_eq!(s.name(), c"+dist");
    }
}
