//! `llama_model_quantize`: a model file rewritten with its tensors in other types, byte for byte
//! the file llama.cpp's quantizer writes. The file's metadata is kept (plus the new file type),
//! tensors go in llama.cpp's order (by layer, then name), each gets the type its rules choose
//! (`types.rs`), and ggml converts the rows. The file is written aside and renamed into place
//! only once complete, so a failure leaves no partial file.

mod types;

#[cfg(test)]
mod tests;

use super::hparams::HParams;
use super::metadata::{apply_overrides, KvOverride, Meta, OverrideValue};
use super::storage::{FileSource, LoadMode};
use super::{all_tensors, open_files, ArchLookup};
use crate::error::{Error, Result};
use crate::ggml::quant;
use crate::gguf::{GgufFile, MetaWriter, Sink, TensorEntry, TensorInfo, Value};
use regex::Regex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use types::{Chooser, Rules};

pub use types::default_type;

/// What `llama_model_quantize_params` asks for, converted and checked by the FFI layer.
pub struct QuantizeParams {
    /// Threads converting rows (at least 1).
    pub nthread: usize,
    pub ftype: i32,
    pub output_tensor_type: Option<u32>,
    pub token_embedding_type: Option<u32>,
    pub allow_requantize: bool,
    pub quantize_output_tensor: bool,
    pub only_copy: bool,
    pub pure: bool,
    pub keep_split: bool,
    pub dry_run: bool,
    /// Importance matrices by tensor name (one weight per column, per expert).
    pub imatrix: Option<HashMap<String, Vec<f32>>>,
    pub kv_overrides: Vec<KvOverride>,
    /// `--tensor-type` patterns and their types, first match wins.
    pub tensor_types: Vec<(Regex, u32)>,
    /// Layers to drop (the others are numbered anew).
    pub prune_layers: Vec<i32>,
    /// Most bytes of rows held in memory at once (0: llama.cpp's 8 GiB).
    pub max_buf_size: usize,
}

const DEFAULT_MAX_BUF_SIZE: usize = 8 << 30;
/// ggml's quantization format version (`GGML_QNT_VERSION`).
const QNT_VERSION: u32 = 2;
/// Rows are converted in chunks of at least this many values, a chunk per thread at a time.
const MIN_CHUNK: usize = 32 * 512;

/// One tensor to write: where its bytes are and what it becomes.
struct Job<'f> {
    info: &'f TensorInfo,
    /// Its name in the output (another block number when layers are pruned).
    name: String,
    split: usize,
    data: &'f [u8],
    new_type: u32,
    requires_imatrix: bool,
    imatrix_name: String,
}

/// The type rules for a model of architecture `arch` (the file's name for it) and `hp` quantized
/// to `ftype` with `p`.
fn rules(arch: &str, hp: &HParams, ftype: i32, p: &QuantizeParams) -> Rules {
    Rules {
        arch: arch.to_string(),
        ftype,
        n_expert: hp.n_expert,
        n_gqa: match (hp.n_head.first(), hp.n_head_kv.first()) {
            (Some(&h), Some(&kv)) if kv > 0 => h / kv,
            _ => 0,
        },
        n_layer: hp.n_layer,
        is_70b: hp.size_label == "70B",
        has_imatrix: p.imatrix.is_some(),
        only_copy: p.only_copy,
        pure: p.pure,
        quantize_output_tensor: p.quantize_output_tensor,
        output_tensor_type: p.output_tensor_type,
        token_embedding_type: p.token_embedding_type,
        overrides: p.tensor_types.clone(),
    }
}

/// The quantizer's choice of tensor types for one model and one set of parameters, without a file
/// (llama-ext.h's `quantize_state_impl`, which llama.cpp's test-quant-type-selection drives).
pub struct TypeSelection {
    rules: Rules,
}

/// A tensor whose type is to be chosen: its name, type, shape and number of dimensions.
pub struct TensorShape<'n> {
    pub name: &'n str,
    pub ggml_type: u32,
    pub ne: [u64; 4],
    pub n_dims: usize,
}

impl TypeSelection {
    pub fn new(arch: &str, hp: &HParams, p: &QuantizeParams) -> TypeSelection {
        TypeSelection {
            rules: rules(arch, hp, p.ftype, p),
        }
    }

    /// Whether the quantizer converts a tensor at all (else it copies it).
    pub fn allows_quantization(&self, name: &str, n_dims: usize) -> bool {
        Chooser::new(&self.rules, std::iter::empty()).allows_quantization(name, n_dims)
    }

    /// The type of each of `tensors`, in file order, for a file of type `ftype`, as llama.cpp's
    /// `llama_quant_compute_types` chooses it: without an importance matrix, the counters the
    /// mixtures use taken from the names; `None` for a file type the quantizer cannot write.
    pub fn choose_all(&mut self, ftype: i32, tensors: &[TensorShape]) -> Vec<Option<u32>> {
        self.rules.ftype = ftype;
        self.rules.has_imatrix = false;
        let mut chooser = Chooser::new(&self.rules, tensors.iter().map(|t| t.name));
        let mut warn = |w: String| crate::log_warn!("{w}");
        tensors
            .iter()
            .map(|t| chooser.choose(t.name, t.ggml_type, t.ne, t.n_dims, &mut warn).ok())
            .collect()
    }
}

/// What llama-ext.h's `llama_quant_model_from_metadata` is given of a model
/// (`llama_quant_model_desc`).
pub struct ModelFacts<'a> {
    pub arch: &'a str,
    pub n_embd: u32,
    pub n_ff: u32,
    pub n_layer: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub n_expert: u32,
    pub n_embd_head_k: u32,
    pub n_embd_head_v: u32,
}

/// A model of those facts only, as llama.cpp makes one for its type-selection test: no vocabulary,
/// no weights, the architecture's own keys at their defaults; llama.cpp calls a Llama of 80
/// layers with grouped heads a 70B one.
pub fn model_of_facts(f: &ModelFacts, arch: ArchLookup) -> Result<super::Model> {
    let spec = arch(f.arch)?;
    let mut w = MetaWriter::default();
    let key = |k: &str| format!("{}.{k}", f.arch);
    w.set("general.architecture", Value::Str(f.arch.as_bytes().to_vec()));
    for (k, v) in [
        ("block_count", f.n_layer),
        ("context_length", 1),
        ("embedding_length", f.n_embd),
        ("feed_forward_length", f.n_ff),
        ("attention.head_count", f.n_head),
        ("attention.head_count_kv", f.n_head_kv),
        ("attention.key_length", f.n_embd_head_k),
        ("attention.value_length", f.n_embd_head_v),
        ("expert_count", f.n_expert),
        ("expert_used_count", u32::from(f.n_expert > 0)),
    ] {
        w.set(&key(k), Value::U32(v));
    }
    w.set("tokenizer.ggml.model", Value::Str(b"test".to_vec()));
    w.set(
        "tokenizer.ggml.tokens",
        Value::Array(crate::gguf::Array::Str(Vec::new())),
    );
    let g = GgufFile::parse_metadata(&w.encode()?)?;
    let mut hp = HParams::load_general(spec, &Meta(&g), 0)?;
    if f.arch == "llama" && f.n_layer == 80 && f.n_head != f.n_head_kv {
        hp.size_label = "70B";
    }
    super::Model::of_hparams(spec, hp, &g)
}

/// Quantize the model in `inputs` (one file, or all its splits in order) into `output`.
pub fn quantize(inputs: &[String], output: &str, p: &QuantizeParams, arch: ArchLookup) -> Result<()> {
    crate::ggml::init();
    default_type(p.ftype).ok_or_else(|| Error::invalid(format!("invalid output file type {}", p.ftype)))?;
    let sources: Vec<FileSource> = inputs.iter().map(|s| FileSource::Path(s.clone())).collect();
    let (_, files, mut ggufs) = open_files(&sources, LoadMode::Map, &mut |_| true)?;
    let file_kv = ggufs[0].metadata().to_vec();
    apply_overrides(&mut ggufs[0], &p.kv_overrides)?;
    let m = Meta(&ggufs[0]);
    let arch_name = m.str("general.architecture")?.to_string();
    let spec = arch(&arch_name)?;
    let n_vocab = match ggufs[0].get("tokenizer.ggml.tokens").and_then(Value::as_array) {
        Some(a) => u32::try_from(a.len()).map_err(|_| Error::model("vocabulary too large"))?,
        None => 0,
    };
    let hp = HParams::load(spec, &m, n_vocab)?;
    let tensors = all_tensors(&ggufs)?;
    let n_elements: u64 = tensors.iter().map(|(_, t)| t.n_elements()).sum();
    let file_ftype = super::ftype::of(&m, tensors.iter().map(|(_, t)| (t.name.clone(), t.ggml_type)))?;
    let ftype = if p.only_copy { file_ftype } else { p.ftype };

    let rules = rules(&arch_name, &hp, ftype, p);
    if let Some(im) = &p.imatrix {
        crate::log_info!(
            "llama_model_quantize_impl: have importance matrix data with {} entries",
            im.len()
        );
        if let Some((name, v)) = im
            .iter()
            .find_map(|(n, v)| v.iter().find(|x| !x.is_finite()).map(|x| (n, x)))
        {
            return Err(Error::invalid(format!(
                "imatrix contains non-finite value {v} (for {name})"
            )));
        }
    }

    let mut out_kv = MetaWriter::default();
    for (k, v) in file_kv {
        out_kv.set(&k, v);
    }
    out_kv.set("general.quantization_version", Value::U32(QNT_VERSION));
    out_kv.set("general.file_type", Value::U32(ftype as u32));
    for k in ["split.no", "split.count", "split.tensors.count"] {
        out_kv.remove(k);
    }
    for ov in &p.kv_overrides {
        let value = match &ov.value {
            OverrideValue::Float(f) => Value::F32(*f as f32),
            // llama.cpp writes integer overrides as u32 (of the magnitude).
            OverrideValue::Int(i) => Value::U32(i.unsigned_abs() as u32),
            OverrideValue::Bool(b) => Value::Bool(*b),
            OverrideValue::Str(s) => Value::Str(s.clone()),
        };
        out_kv.set(&ov.key, value);
    }

    // llama.cpp's order: by block number (others first), then by name.
    let mut order: Vec<(usize, &TensorInfo)> = tensors.clone();
    order.sort_by(|a, b| (block_of(&a.1.name), &a.1.name).cmp(&(block_of(&b.1.name), &b.1.name)));
    let mut pruner = Pruner::new(&p.prune_layers);
    let mut kept = Vec::with_capacity(order.len());
    for (fi, t) in order {
        let name = pruner.rename(&t.name)?;
        if name.is_empty() {
            crate::log_debug!("llama_model_quantize_impl: pruning tensor {}", t.name);
            continue;
        }
        kept.push((fi, t, name));
    }
    if !p.prune_layers.is_empty() {
        out_kv.set(&format!("{arch_name}.block_count"), Value::U32(pruner.next_id as u32));
    }
    if p.keep_split {
        kept.sort_by_key(|(fi, t, _)| (*fi, t.offset));
    }
    let n_split = if p.keep_split {
        kept.iter().map(|(fi, _, _)| fi + 1).max().unwrap_or(1)
    } else {
        1
    };

    let mut chooser = Chooser::new(&rules, kept.iter().map(|(_, _, n)| n.as_str()));
    let mut warn = |s: String| crate::log_warn!("{s}");
    let mut metas: Vec<MetaWriter> = (0..n_split).map(|_| MetaWriter::default()).collect();
    metas[0] = out_kv;
    let mut jobs = Vec::with_capacity(kept.len());
    let mut will_require_imatrix = false;
    for (fi, t, name) in kept {
        let n_dims = t.n_dims as usize;
        let allowed = chooser.allows_quantization(&name, n_dims);
        let new_type = if allowed {
            chooser
                .choose(&name, t.ggml_type, t.ne, n_dims, &mut warn)
                .map_err(Error::invalid)?
        } else {
            t.ggml_type
        };
        let requires_imatrix = types::requires_imatrix(&name, new_type, ftype);
        if p.imatrix.is_none() && allowed && requires_imatrix {
            if !p.dry_run {
                // As llama.cpp shows it, for llama-quantize's users.
                let rule = "=".repeat(76);
                crate::log_error!(
                    "\n{rule}\n ERROR: this quantization requires an importance matrix!\n        - offending tensor: {name}\n        - target type: {}\n{rule}\n",
                    crate::ggml::type_name(new_type)
                );
                return Err(Error::invalid(format!(
                    "this quantization requires an importance matrix (tensor {name}, type {})",
                    crate::ggml::type_name(new_type)
                )));
            }
            will_require_imatrix = true;
        }
        let split = if p.keep_split { fi } else { 0 };
        metas[split].add_tensor(TensorEntry {
            name: name.clone(),
            ne: t.ne,
            ggml_type: new_type,
        })?;
        let imatrix_name = if p.imatrix.is_some() {
            pruner.original(&name)?
        } else {
            String::new()
        };
        jobs.push(Job {
            info: t,
            data: tensor_bytes(&ggufs[fi], files[fi].bytes(), t)?,
            name,
            split,
            new_type,
            requires_imatrix,
            imatrix_name,
        });
    }
    if n_split > 1 {
        for (i, m) in metas.iter_mut().enumerate() {
            m.set("split.no", Value::U16(i as u16));
            m.set("split.count", Value::U16(n_split as u16));
            m.set("split.tensors.count", Value::I32(jobs.len() as i32));
        }
    }

    let out_paths: Vec<String> = if p.keep_split {
        (0..n_split)
            .map(|i| format!("{output}-{:05}-of-{n_split:05}.gguf", i + 1))
            .collect()
    } else {
        vec![output.to_string()]
    };
    let mut sink = if p.dry_run {
        None
    } else {
        Some(Sink::new(&out_paths, &metas)?)
    };
    let max_buf = if p.max_buf_size == 0 {
        DEFAULT_MAX_BUF_SIZE
    } else {
        p.max_buf_size
    };
    let (mut size_org, mut size_new) = (0u64, 0u64);
    for (i, job) in jobs.iter().enumerate() {
        let t = job.info;
        let mut line = format!(
            "[{:>4}/{:>4}] {:<36} - [{}], type = {:>6}, ",
            i + 1,
            tensors.len(),
            job.name,
            shape(&t.ne),
            crate::ggml::type_name(t.ggml_type)
        );
        let quantize = job.new_type != t.ggml_type;
        let new_size = if quantize {
            t.ne[1..].iter().product::<u64>()
                * quant::bytes_of(job.new_type, t.ne[0] as usize).map_err(|e| Error::invalid(e.to_string()))? as u64
        } else {
            t.size
        };
        let mib = |n: u64| n as f64 / 1024.0 / 1024.0;
        match sink.as_mut() {
            None => {
                will_require_imatrix |= quantize && job.requires_imatrix;
                line += &if quantize {
                    format!(
                        "size = {:8.2} MiB -> {:8.2} MiB ({})",
                        mib(t.size),
                        mib(new_size),
                        crate::ggml::type_name(job.new_type)
                    )
                } else {
                    format!("size = {:8.3} MiB", mib(t.size))
                };
            }
            Some(sink) => {
                if !quant::validate_rows(t.ggml_type, job.data) {
                    return Err(Error::model(format!("tensor '{}' has invalid data", t.name)));
                }
                sink.select(job.split)?;
                if quantize {
                    let imatrix = imatrix_for(p, job, &mut line)?;
                    if types::is_quantized(t.ggml_type) && !p.allow_requantize {
                        return Err(Error::invalid(format!(
                            "requantizing from type {} is disabled",
                            crate::ggml::type_name(t.ggml_type)
                        )));
                    }
                    line += &format!("converting to {} .. ", crate::ggml::type_name(job.new_type));
                    convert(job, imatrix, p.nthread, max_buf, sink)?;
                    line += &format!("size = {:8.2} MiB -> {:8.2} MiB", mib(t.size), mib(new_size));
                } else {
                    sink.write(job.data)?;
                    line += &format!("size = {:8.3} MiB", mib(t.size));
                }
                sink.pad(new_size)?;
            }
        }
        crate::log_info!("{line}");
        size_org += t.size;
        size_new += new_size;
    }
    if let Some(sink) = sink.take() {
        sink.finish()?;
    }
    let bpw = |n: u64| n as f64 * 8.0 / n_elements as f64;
    crate::log_info!(
        "llama_model_quantize_impl: model size  = {:8.2} MiB ({:.2} BPW)",
        size_org as f64 / 1024.0 / 1024.0,
        bpw(size_org)
    );
    crate::log_info!(
        "llama_model_quantize_impl: quant size  = {:8.2} MiB ({:.2} BPW)",
        size_new as f64 / 1024.0 / 1024.0,
        bpw(size_new)
    );
    if p.imatrix.is_none() && p.dry_run && will_require_imatrix {
        crate::log_warn!("llama_model_quantize_impl: WARNING: dry run completed successfully, but actually completing this quantization will require an imatrix!");
    }
    if chooser.n_fallback > 0 {
        crate::log_warn!(
            "llama_model_quantize_impl: WARNING: {} of {} tensor(s) required fallback quantization",
            chooser.n_fallback,
            tensors.len()
        );
    }
    Ok(())
}

/// The block number llama.cpp sorts a tensor by ("blk.N." names; -1 for the others).
fn block_of(name: &str) -> i64 {
    name.strip_prefix("blk.")
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap_or(-1)
        })
        .unwrap_or(-1)
}

/// `llama_format_tensor_shape`: every dimension, at least 5 wide.
fn shape(ne: &[u64; 4]) -> String {
    ne.iter().map(|d| format!("{d:5}")).collect::<Vec<_>>().join(", ")
}

/// The bytes of tensor `t` in a file.
fn tensor_bytes<'a>(g: &GgufFile, bytes: &'a [u8], t: &TensorInfo) -> Result<&'a [u8]> {
    let start = g.data_offset().checked_add(t.offset);
    start
        .and_then(|s| usize::try_from(s).ok())
        .and_then(|s| bytes.get(s..s.checked_add(usize::try_from(t.size).ok()?)?))
        .ok_or_else(|| Error::model(format!("tensor '{}' lies outside the file", t.name)))
}

/// The importance matrix of a tensor, when one was given and fits; a tensor that needs one and
/// has none is an error (llama.cpp: "the result will be garbage").
fn imatrix_for<'p>(p: &'p QuantizeParams, job: &Job, line: &mut String) -> Result<Option<&'p [f32]>> {
    let t = job.info;
    let mut found = None;
    if let Some(im) = &p.imatrix {
        match im.get(&job.imatrix_name) {
            None => {
                *line += &format!(
                    "\n====== llama_model_quantize_impl: did not find weights for {}\n",
                    job.name
                )
            }
            Some(v) if v.len() as u64 == t.ne[0] * t.ne[2] => found = Some(v.as_slice()),
            Some(v) => {
                let msg = format!(
                    "imatrix size {} is different from tensor size {} for {}",
                    v.len(),
                    t.ne[0] * t.ne[2],
                    job.name
                );
                if !types::is_token_embd(&job.name) {
                    return Err(Error::invalid(msg));
                }
                *line += &format!("\n====== llama_model_quantize_impl: {msg}\n");
            }
        }
    }
    if found.is_none() && job.requires_imatrix {
        return Err(Error::invalid(format!(
            "Missing importance matrix for tensor {} in a very low-bit quantization",
            job.name
        )));
    }
    Ok(found)
}

/// Converts a tensor's rows to its new type and writes them, a slab of rows at a time (at most
/// `max_buf` bytes in flight), each slab's chunks spread over `nthread` threads.
fn convert(job: &Job, imatrix: Option<&[f32]>, nthread: usize, max_buf: usize, sink: &mut Sink) -> Result<()> {
    let t = job.info;
    let n_per_row = t.ne[0] as usize;
    let rows_per_expert = t.ne[1] as usize;
    let rows_total = rows_per_expert * t.ne[2] as usize * t.ne[3] as usize;
    let src_row = quant::bytes_of(t.ggml_type, n_per_row).map_err(|e| Error::invalid(e.to_string()))?;
    let dst_row = quant::bytes_of(job.new_type, n_per_row).map_err(|e| Error::invalid(e.to_string()))?;
    let f32_row = if t.ggml_type == types::ty::F32 {
        0
    } else {
        n_per_row * 4
    };
    let slab_rows = (max_buf / (src_row + dst_row + f32_row)).clamp(1, rows_total.max(1));
    let chunk_rows = MIN_CHUNK.div_ceil(n_per_row).max(1);
    let mut floats = Vec::new();
    let mut out = Vec::new();
    for first in (0..rows_total).step_by(slab_rows) {
        let rows = slab_rows.min(rows_total - first);
        let src = &job.data[first * src_row..(first + rows) * src_row];
        floats.resize(rows * n_per_row, 0.0);
        quant::to_f32(t.ggml_type, src, &mut floats).map_err(|e| Error::invalid(e.to_string()))?;
        let values: &[f32] = &floats;
        out.resize(rows * dst_row, 0);
        // Pieces of at most a chunk, never across experts (each has its own importance weights).
        let mut pieces = Vec::new();
        let (mut rest_src, mut rest_dst, mut row) = (values, out.as_mut_slice(), first);
        while !rest_src.is_empty() {
            let n = chunk_rows
                .min(rows_per_expert - row % rows_per_expert)
                .min(rest_src.len() / n_per_row);
            let (s, s_rest) = rest_src.split_at(n * n_per_row);
            let (d, d_rest) = std::mem::take(&mut rest_dst).split_at_mut(n * dst_row);
            let w = imatrix.map(|m| {
                let e = row / rows_per_expert;
                &m[e * n_per_row..(e + 1) * n_per_row]
            });
            pieces.push((s, d, w));
            (rest_src, rest_dst, row) = (s_rest, d_rest, row + n);
        }
        let work = Mutex::new(pieces.into_iter());
        let failure: Mutex<Option<String>> = Mutex::new(None);
        let n_threads = nthread.clamp(1, rows.div_ceil(chunk_rows));
        std::thread::scope(|scope| {
            for _ in 0..n_threads {
                scope.spawn(|| loop {
                    let next = work.lock().map(|mut w| w.next()).unwrap_or(None);
                    let Some((s, d, w)) = next else { break };
                    let result = quant::quantize_rows(job.new_type, s, n_per_row, w, d)
                        .map_err(|e| e.to_string())
                        .and_then(|_| {
                            if quant::validate_rows(job.new_type, d) {
                                Ok(())
                            } else {
                                Err("quantized data validation failed".to_string())
                            }
                        });
                    if let Err(e) = result {
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                });
            }
        });
        if let Some(e) = failure.into_inner().ok().flatten() {
            return Err(Error::invalid(e));
        }
        sink.write(&out)?;
    }
    Ok(())
}

/// Block renumbering for `prune_layers`, as llama.cpp's `remap_layer` does it: blocks before
/// the first pruned one keep their number, later kept ones are numbered on from there.
struct Pruner<'a> {
    prune: &'a [i32],
    mapped: BTreeMap<i64, Option<i64>>,
    next_id: i64,
    pattern: Regex,
}

impl<'a> Pruner<'a> {
    fn new(prune: &'a [i32]) -> Pruner<'a> {
        Pruner {
            prune,
            mapped: BTreeMap::new(),
            next_id: 0,
            pattern: Regex::new(r"blk\.(\d+)\.").expect("a valid pattern"),
        }
    }

    /// The output name of tensor `name`; empty when its block is pruned.
    fn rename(&mut self, name: &str) -> Result<String> {
        let prune = self.prune;
        let Some(&first) = prune.first() else {
            return Ok(name.to_string());
        };
        let Some(c) = self.pattern.captures(name) else {
            return Ok(name.to_string());
        };
        let digits = c.get(1).ok_or_else(|| Error::Internal("no block digits".into()))?;
        let blk: i64 = digits
            .as_str()
            .parse()
            .map_err(|_| Error::invalid(format!("block number of {name} out of range")))?;
        let next_id = &mut self.next_id;
        let new = *self.mapped.entry(blk).or_insert_with(|| {
            if prune.iter().any(|&p| i64::from(p) == blk) {
                None
            } else if blk < i64::from(first) {
                *next_id = blk + 1;
                Some(blk)
            } else {
                *next_id += 1;
                Some(*next_id - 1)
            }
        });
        Ok(new.map_or(String::new(), |n| {
            format!("{}{n}{}", &name[..digits.start()], &name[digits.end()..])
        }))
    }

    /// The input name of output tensor `name` (importance matrices name the input's blocks).
    fn original(&self, name: &str) -> Result<String> {
        if self.mapped.is_empty() {
            return Ok(name.to_string());
        }
        let Some(digits) = self.pattern.captures(name).and_then(|c| c.get(1)) else {
            return Ok(name.to_string());
        };
        let blk: Option<i64> = digits.as_str().parse().ok();
        let from = self
            .mapped
            .iter()
            .find(|(_, to)| to.is_some() && **to == blk)
            .map(|(from, _)| *from)
            .ok_or_else(|| Error::invalid(format!("imatrix mapping error for {name}")))?;
        Ok(format!("{}{from}{}", &name[..digits.start()], &name[digits.end()..]))
    }
}
