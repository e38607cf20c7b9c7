//! The `*_default_params` functions and the conversion of caller-filled parameter structs into
//! checked engine parameters.

use super::entry::entry;
use super::strings::c_str;
use super::types::*;
use crate::context::{self, FlashAttn};
use crate::error::{Error, Result};
use crate::ggml::{AbortCallback, EvalCallback};
use crate::graph::Pooling;
use crate::model::hparams::RopeScaling;
use crate::model::{self, KvOverride, LoadParams, OverrideValue};
use std::ffi::{c_char, c_int, c_void};

/// llama.cpp's default thread count (`GGML_DEFAULT_N_THREADS`), whatever the machine: ggml's
/// single-token flash attention over 512 or more cells splits the cells among the threads, so the
/// count decides the bits of the result.
const DEFAULT_N_THREADS: i32 = 4;

pub(crate) fn model_default_params() -> llama_model_params {
    llama_model_params {
        devices: std::ptr::null_mut(),
        tensor_buft_overrides: std::ptr::null(),
        n_gpu_layers: -1,
        split_mode: SplitMode(llama_split_mode::LLAMA_SPLIT_MODE_LAYER as c_int),
        load_mode: LoadMode(llama_load_mode::LLAMA_LOAD_MODE_AUTO as c_int),
        lazy_mode: LazyMode(llama_lazy_mode::LLAMA_LAZY_MODE_AUTO as c_int),
        main_gpu: 0,
        tensor_split: std::ptr::null(),
        progress_callback: None,
        progress_callback_user_data: std::ptr::null_mut(),
        kv_overrides: std::ptr::null(),
        vocab_only: false,
        check_tensors: false,
        use_extra_bufts: true,
        no_host: false,
        no_alloc: false,
        load_mtp: false,
    }
}

pub(crate) fn context_default_params() -> llama_context_params {
    llama_context_params {
        n_ctx: 512,
        n_batch: 2048,
        n_ubatch: 512,
        n_seq_max: 1,
        n_rs_seq: 0,
        n_outputs_max: 0,
        n_outputs_max_per_seq: 1,
        n_threads: DEFAULT_N_THREADS,
        n_threads_batch: DEFAULT_N_THREADS,
        ctx_type: ContextType(llama_context_type::LLAMA_CONTEXT_TYPE_DEFAULT as c_int),
        rope_scaling_type: RopeScalingType(llama_rope_scaling_type::LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED as c_int),
        pooling_type: PoolingType(llama_pooling_type::LLAMA_POOLING_TYPE_UNSPECIFIED as c_int),
        attention_type: AttentionType(llama_attention_type::LLAMA_ATTENTION_TYPE_UNSPECIFIED as c_int),
        flash_attn_type: FlashAttnType(llama_flash_attn_type::LLAMA_FLASH_ATTN_TYPE_AUTO as c_int),
        rope_freq_base: 0.0,
        rope_freq_scale: 0.0,
        yarn_ext_factor: -1.0,
        yarn_attn_factor: -1.0,
        yarn_beta_fast: -1.0,
        yarn_beta_slow: -1.0,
        yarn_orig_ctx: 0,
        defrag_thold: -1.0,
        cb_eval: None,
        cb_eval_user_data: std::ptr::null_mut(),
        type_k: ggml_sys::ggml_type_GGML_TYPE_F16,
        type_v: ggml_sys::ggml_type_GGML_TYPE_F16,
        abort_callback: None,
        abort_callback_data: std::ptr::null_mut(),
        embeddings: false,
        offload_kqv: true,
        no_perf: true,
        op_offload: true,
        swa_full: true,
        kv_unified: false,
        samplers: std::ptr::null_mut(),
        n_samplers: 0,
        ctx_other: std::ptr::null_mut(),
    }
}

pub(crate) fn sampler_chain_default_params() -> llama_sampler_chain_params {
    llama_sampler_chain_params { no_perf: true }
}

/// llama.cpp's quantizer keeps at most this many bytes of rows in memory by default (8 GiB).
const QUANT_MAX_BUF_SIZE: usize = 8 << 30;

pub(crate) fn quantize_default_params() -> llama_model_quantize_params {
    llama_model_quantize_params {
        nthread: 0,
        ftype: Ftype(llama_ftype::LLAMA_FTYPE_MOSTLY_Q8_0 as c_int),
        output_tensor_type: ggml_sys::ggml_type_GGML_TYPE_COUNT,
        token_embedding_type: ggml_sys::ggml_type_GGML_TYPE_COUNT,
        allow_requantize: false,
        quantize_output_tensor: true,
        only_copy: false,
        pure: false,
        keep_split: false,
        dry_run: false,
        imatrix: std::ptr::null(),
        kv_overrides: std::ptr::null(),
        tt_overrides: std::ptr::null(),
        prune_layers: std::ptr::null(),
        max_buf_size: QUANT_MAX_BUF_SIZE,
    }
}

/// The caller's progress callback as a Rust closure.
pub(crate) struct Progress {
    cb: unsafe extern "C" fn(f32, *mut c_void) -> bool,
    user_data: *mut c_void,
}

impl Progress {
    pub(crate) fn call(&mut self, p: f32) -> bool {
        // SAFETY: the caller registered this callback with this user data for the duration of the
        // load call; it runs on the loading thread.
        unsafe { (self.cb)(p, self.user_data) }
    }
}

/// Check and convert `llama_model_params`. The progress callback is returned separately because
/// the load params borrow it.
///
/// # Safety
/// Pointers inside `p` must be NULL or valid as llama.h documents (kv_overrides terminated by an
/// entry with an empty key).
pub(crate) unsafe fn model_load_params<'p>(p: &llama_model_params) -> Result<(LoadParams<'p>, Option<Progress>)> {
    let (mode, mlock) = match p.load_mode.0 {
        m if m == llama_load_mode::LLAMA_LOAD_MODE_AUTO as c_int => (model::LoadMode::Map, false),
        m if m == llama_load_mode::LLAMA_LOAD_MODE_MMAP as c_int => (model::LoadMode::Map, false),
        m if m == llama_load_mode::LLAMA_LOAD_MODE_NONE as c_int => (model::LoadMode::Read, false),
        m if m == llama_load_mode::LLAMA_LOAD_MODE_MLOCK as c_int => (model::LoadMode::Read, true),
        m if m == llama_load_mode::LLAMA_LOAD_MODE_MMAP_MLOCK as c_int => (model::LoadMode::Map, true),
        m if m == llama_load_mode::LLAMA_LOAD_MODE_DIRECT_IO as c_int => {
            crate::log_warn!("load_mode dio: direct I/O is not implemented; reading with buffered I/O");
            (model::LoadMode::Read, false)
        }
        other => return Err(Error::invalid(format!("unknown load_mode {other}"))),
    };
    // SAFETY: forwarded contract on `kv_overrides`.
    let overrides = unsafe { kv_overrides(p.kv_overrides) }?;
    // SAFETY: forwarded contract on `devices` and `tensor_split`.
    let placement = unsafe { placement_params(p) }?;
    let progress = p.progress_callback.map(|cb| Progress {
        cb,
        user_data: p.progress_callback_user_data,
    });
    Ok((
        LoadParams {
            mode,
            mlock,
            vocab_only: p.vocab_only,
            check_tensors: p.check_tensors,
            extra_bufts: p.use_extra_bufts,
            overrides,
            placement,
            progress: None,
        },
        progress,
    ))
}

/// The environment variable naming RPC servers ("host:port,host:port"), llama.cpp's programs'
/// `--rpc`: a client that only has llama.h (llama-cpp-python, a C program) reaches servers with it.
const RPC_ENV: &str = "LLAMA_ARG_RPC";

/// The devices and the layer split `p` asks for. Without a device list, the RPC servers named by
/// `LLAMA_ARG_RPC` are registered first (an unreachable one fails the load), as llama.cpp's
/// programs register `--rpc` servers.
///
/// # Safety
/// `p.devices` must be NULL or a NULL-terminated array; `p.tensor_split` NULL or
/// `llama_max_devices()` floats, as llama.h documents.
unsafe fn placement_params(p: &llama_model_params) -> Result<model::placement::PlacementParams> {
    use model::placement::{PlacementParams, SplitMode};
    let devices = if p.devices.is_null() {
        if let Some(list) = std::env::var_os(RPC_ENV) {
            for endpoint in list
                .to_string_lossy()
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
            {
                crate::ggml::add_rpc_server(endpoint).map_err(|e| Error::invalid(format!("{RPC_ENV}: {e}")))?;
            }
        }
        None
    } else {
        let mut list = Vec::new();
        // SAFETY: the caller's array ends with NULL; bounded in case it does not.
        unsafe {
            let mut d = p.devices;
            while !(*d).is_null() {
                if list.len() == MAX_DEVICE_LIST {
                    return Err(Error::invalid(format!(
                        "devices: no NULL terminator within {MAX_DEVICE_LIST} entries"
                    )));
                }
                list.push(crate::ggml::Device::from_client((*d).cast()).map_err(|e| Error::invalid(e.to_string()))?);
                d = d.add(1);
            }
        }
        Some(list)
    };
    let split_mode = match p.split_mode.0 {
        m if m == llama_split_mode::LLAMA_SPLIT_MODE_NONE as c_int => SplitMode::None,
        m if m == llama_split_mode::LLAMA_SPLIT_MODE_LAYER as c_int => SplitMode::Layer,
        m if m == llama_split_mode::LLAMA_SPLIT_MODE_ROW as c_int => SplitMode::Row,
        m if m == llama_split_mode::LLAMA_SPLIT_MODE_TENSOR as c_int => {
            return Err(Error::NotImplemented(
                "split_mode TENSOR (tensor parallelism over a meta device) is not implemented",
            ))
        }
        other => return Err(Error::invalid(format!("unknown split_mode {other}"))),
    };
    let tensor_split = if p.tensor_split.is_null() {
        Vec::new()
    } else {
        // SAFETY: llama.h's array of llama_max_devices() proportions.
        unsafe { std::slice::from_raw_parts(p.tensor_split, super::misc::MAX_DEVICES) }.to_vec()
    };
    // SAFETY: forwarded contract on `tensor_buft_overrides`.
    let overrides = unsafe { tensor_overrides(p.tensor_buft_overrides) }?;
    Ok(PlacementParams {
        devices,
        n_gpu_layers: p.n_gpu_layers,
        split_mode,
        main_gpu: p.main_gpu,
        tensor_split,
        overrides,
    })
}

/// llama.cpp's `llama_max_tensor_buft_overrides()`: a longer list is taken for one without its
/// terminator.
pub(crate) const MAX_TENSOR_BUFT_OVERRIDES: usize = 4096;

/// The (pattern, buffer type) pairs up to the entry with a NULL pattern, each buffer type checked
/// to be one of the process's ggml.
///
/// # Safety
/// `p` must be NULL or an array terminated by an entry whose pattern is NULL, its patterns
/// NUL-terminated.
unsafe fn tensor_overrides(
    mut p: *const llama_model_tensor_buft_override,
) -> Result<Vec<(String, crate::ggml::BufferType)>> {
    let mut out = Vec::new();
    if p.is_null() {
        return Ok(out);
    }
    loop {
        // SAFETY: within the caller's terminated array.
        let ov = unsafe { &*p };
        if ov.pattern.is_null() {
            return Ok(out);
        }
        if out.len() == MAX_TENSOR_BUFT_OVERRIDES {
            return Err(Error::invalid(format!(
                "tensor_buft_overrides: no terminating entry within {MAX_TENSOR_BUFT_OVERRIDES}"
            )));
        }
        // SAFETY: a NUL-terminated pattern (the caller's contract).
        let pattern = std::str::from_utf8(unsafe { c_str(ov.pattern, "a tensor_buft_overrides pattern") }?)
            .map_err(|_| Error::invalid("tensor_buft_overrides: a pattern is not UTF-8"))?;
        let buft = crate::ggml::BufferType::from_client(ov.buft.cast())
            .map_err(|e| Error::invalid(format!("tensor_buft_overrides '{pattern}': {e}")))?;
        out.push((pattern.to_string(), buft));
        // SAFETY: the next entry of the terminated array.
        p = unsafe { p.add(1) };
    }
}

/// A device list longer than this is taken for one without its terminator.
const MAX_DEVICE_LIST: usize = 1024;

/// Read the override array up to its terminating entry (empty key).
///
/// # Safety
/// `p` must be NULL or point to an array terminated by an entry whose key starts with NUL.
unsafe fn kv_overrides(mut p: *const llama_model_kv_override) -> Result<Vec<KvOverride>> {
    let mut out = Vec::new();
    if p.is_null() {
        return Ok(out);
    }
    loop {
        // SAFETY: within the caller's terminated array.
        let ov = unsafe { &*p };
        if ov.key[0] == 0 {
            return Ok(out);
        }
        let key = key_of(&ov.key)?;
        // SAFETY: the tag says which union member the caller wrote.
        let value = unsafe {
            match ov.tag.0 {
                t if t == llama_model_kv_override_type::LLAMA_KV_OVERRIDE_TYPE_INT as c_int => {
                    OverrideValue::Int(ov.value.val_i64)
                }
                t if t == llama_model_kv_override_type::LLAMA_KV_OVERRIDE_TYPE_FLOAT as c_int => {
                    OverrideValue::Float(ov.value.val_f64)
                }
                t if t == llama_model_kv_override_type::LLAMA_KV_OVERRIDE_TYPE_BOOL as c_int => {
                    // Read the byte, not a `bool`: any value may arrive from C.
                    OverrideValue::Bool(*(std::ptr::addr_of!(ov.value.val_bool) as *const u8) != 0)
                }
                t if t == llama_model_kv_override_type::LLAMA_KV_OVERRIDE_TYPE_STR as c_int => {
                    OverrideValue::Str(bounded(&ov.value.val_str).to_vec())
                }
                other => {
                    return Err(Error::invalid(format!(
                        "kv override '{key}' has unknown type tag {other}"
                    )))
                }
            }
        };
        out.push(KvOverride { key, value });
        // SAFETY: the array continues until the terminator.
        p = unsafe { p.add(1) };
    }
}

/// The bytes of a fixed-size C string field, up to its NUL or its end.
fn bounded(field: &[c_char; 128]) -> &[u8] {
    // SAFETY: c_char and u8 have the same size and alignment.
    let bytes: &[u8; 128] = unsafe { &*(field as *const [c_char; 128] as *const [u8; 128]) };
    let n = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..n]
}

fn key_of(field: &[c_char; 128]) -> Result<String> {
    String::from_utf8(bounded(field).to_vec()).map_err(|_| Error::invalid("kv override key is not valid UTF-8"))
}

/// A path argument.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
pub(crate) unsafe fn path_arg(p: *const c_char, what: &str) -> Result<String> {
    // SAFETY: forwarded contract.
    let bytes = unsafe { c_str(p, what) }?;
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::invalid(format!("{what} is not valid UTF-8")))
}

#[no_mangle]
pub extern "C" fn llama_model_default_params() -> llama_model_params {
    entry!(model_default_params(), { Ok(model_default_params()) })
}

#[no_mangle]
pub extern "C" fn llama_context_default_params() -> llama_context_params {
    entry!(context_default_params(), { Ok(context_default_params()) })
}

#[no_mangle]
pub extern "C" fn llama_sampler_chain_default_params() -> llama_sampler_chain_params {
    entry!(sampler_chain_default_params(), { Ok(sampler_chain_default_params()) })
}

#[no_mangle]
pub extern "C" fn llama_model_quantize_default_params() -> llama_model_quantize_params {
    entry!(quantize_default_params(), { Ok(quantize_default_params()) })
}

/// Check and convert `llama_context_params`.
///
/// # Safety
/// The callbacks in `p` must be callable with their data from the computing thread while the
/// context lives (llama.h leaves that to the caller).
pub(crate) unsafe fn context_params(p: &llama_context_params) -> Result<context::Params> {
    let enum_in = |what: &str, v: c_int, ok: &[c_int]| -> Result<c_int> {
        if ok.contains(&v) {
            Ok(v)
        } else {
            Err(Error::invalid(format!("{what} = {v} is not a valid value")))
        }
    };
    let fa = enum_in("flash_attn_type", p.flash_attn_type.0, &[-1, 0, 1])?;
    let attention = enum_in("attention_type", p.attention_type.0, &[-1, 0, 1])?;
    if enum_in("ctx_type", p.ctx_type.0, &[0, 1])? != 0 {
        return Err(Error::NotImplemented("multi-token-prediction contexts (ctx_type MTP)"));
    }
    let rope_scaling = match enum_in("rope_scaling_type", p.rope_scaling_type.0, &[-1, 0, 1, 2, 3])? {
        -1 => None,
        0 => Some(RopeScaling::None),
        1 => Some(RopeScaling::Linear),
        2 => Some(RopeScaling::Yarn),
        _ => Some(RopeScaling::LongRope),
    };
    let pooling = Pooling::from_llama(enum_in("pooling_type", p.pooling_type.0, &[-1, 0, 1, 2, 3, 4])?);
    if p.n_seq_max as usize > super::misc::MAX_PARALLEL_SEQUENCES {
        return Err(Error::invalid(format!(
            "n_seq_max = {} exceeds llama_max_parallel_sequences() = {}",
            p.n_seq_max,
            super::misc::MAX_PARALLEL_SEQUENCES
        )));
    }
    // SAFETY: forwarded contract on the callbacks.
    let abort = p
        .abort_callback
        .map(|f| unsafe { AbortCallback::new(f, p.abort_callback_data) });
    // SAFETY: as above.
    let cb_eval = p.cb_eval.map(|f| unsafe { EvalCallback::new(f, p.cb_eval_user_data) });
    Ok(context::Params {
        n_ctx: p.n_ctx,
        n_batch: p.n_batch,
        n_ubatch: p.n_ubatch,
        n_seq_max: p.n_seq_max,
        n_outputs_max: p.n_outputs_max,
        n_outputs_max_per_seq: p.n_outputs_max_per_seq,
        n_rs_seq: p.n_rs_seq,
        n_threads: p.n_threads,
        n_threads_batch: p.n_threads_batch,
        type_k: p.type_k,
        type_v: p.type_v,
        offload_kqv: p.offload_kqv,
        op_offload: p.op_offload,
        flash_attn: match fa {
            -1 => FlashAttn::Auto,
            0 => FlashAttn::Off,
            _ => FlashAttn::On,
        },
        kv_unified: p.kv_unified,
        swa_full: p.swa_full,
        causal: match attention {
            -1 => None,
            a => Some(a == 0),
        },
        embeddings: p.embeddings,
        pooling,
        no_perf: p.no_perf,
        rope_freq_base: p.rope_freq_base,
        rope_freq_scale: p.rope_freq_scale,
        rope_scaling,
        yarn_ext_factor: p.yarn_ext_factor,
        yarn_attn_factor: p.yarn_attn_factor,
        yarn_beta_fast: p.yarn_beta_fast,
        yarn_beta_slow: p.yarn_beta_slow,
        yarn_orig_ctx: p.yarn_orig_ctx,
        abort,
        cb_eval,
    })
}

/// Entries read from a caller's terminated list before it is taken for one without a terminator.
const MAX_LIST: usize = 1 << 20;

/// Reads a caller's array up to its terminating entry (`done` says which), at most `MAX_LIST`.
///
/// # Safety
/// `p` must be NULL or point to an array that `done` finds the end of.
unsafe fn terminated<T>(mut p: *const T, what: &str, done: impl Fn(&T) -> bool) -> Result<Vec<&T>> {
    let mut out = Vec::new();
    if p.is_null() {
        return Ok(out);
    }
    loop {
        // SAFETY: within the caller's terminated array.
        let item = unsafe { &*p };
        if done(item) {
            return Ok(out);
        }
        if out.len() == MAX_LIST {
            return Err(Error::invalid(format!(
                "{what}: no terminating entry within {MAX_LIST}"
            )));
        }
        out.push(item);
        // SAFETY: the array continues until its terminator.
        p = unsafe { p.add(1) };
    }
}

/// A `ggml_type` field: `GGML_TYPE_COUNT` (or above) means "not set"; a removed type is refused.
fn optional_type(t: ggml_type, what: &str) -> Result<Option<u32>> {
    if t >= ggml_sys::ggml_type_GGML_TYPE_COUNT {
        return Ok(None);
    }
    crate::gguf::type_traits(t)
        .map(|_| Some(t))
        .ok_or_else(|| Error::invalid(format!("{what}: ggml type {t} is not supported")))
}

/// # Safety
/// The pointers in `p` must be NULL or valid as llama.h documents (terminated lists: an imatrix
/// entry with a NULL name, a kv override with an empty key, a tensor type with a NULL pattern,
/// a prune list ending in -1; imatrix data valid for `size` floats).
pub(crate) unsafe fn quantize_params(p: &llama_model_quantize_params) -> Result<model::quantize::QuantizeParams> {
    let nthread = match usize::try_from(p.nthread) {
        Ok(n) if n > 0 => n,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    // SAFETY: forwarded contract.
    let imatrix = unsafe { terminated(p.imatrix, "imatrix", |e| e.name.is_null()) }?;
    let imatrix = if p.imatrix.is_null() {
        None
    } else {
        let mut map = std::collections::HashMap::with_capacity(imatrix.len());
        for e in imatrix {
            // SAFETY: a non-NULL name is NUL-terminated (forwarded contract).
            let name = String::from_utf8_lossy(unsafe { c_str(e.name, "an imatrix name") }?).into_owned();
            let data = if e.size == 0 {
                Vec::new()
            } else if e.data.is_null() {
                return Err(Error::invalid(format!("imatrix '{name}': {} values at NULL", e.size)));
            } else {
                // SAFETY: `data` is valid for `size` floats (forwarded contract).
                unsafe { std::slice::from_raw_parts(e.data, e.size) }.to_vec()
            };
            map.insert(name, data);
        }
        Some(map)
    };
    // SAFETY: forwarded contract.
    let tensor_types = unsafe { terminated(p.tt_overrides, "tensor_types", |e| e.pattern.is_null()) }?
        .into_iter()
        .map(|e| {
            // SAFETY: a non-NULL pattern is NUL-terminated (forwarded contract).
            let pattern = String::from_utf8_lossy(unsafe { c_str(e.pattern, "a tensor type pattern") }?).into_owned();
            let re = regex::Regex::new(&pattern)
                .map_err(|err| Error::invalid(format!("tensor type pattern '{pattern}': {err}")))?;
            let t = optional_type(e.r#type, "tensor_types")?
                .ok_or_else(|| Error::invalid(format!("tensor type pattern '{pattern}' has no type")))?;
            Ok((re, t))
        })
        .collect::<Result<Vec<_>>>()?;
    // SAFETY: forwarded contract.
    let prune_layers = unsafe { terminated(p.prune_layers, "prune_layers", |&l| l == -1) }?
        .into_iter()
        .copied()
        .collect();
    Ok(model::quantize::QuantizeParams {
        nthread,
        ftype: p.ftype.0,
        output_tensor_type: optional_type(p.output_tensor_type, "output_tensor_type")?,
        token_embedding_type: optional_type(p.token_embedding_type, "token_embedding_type")?,
        allow_requantize: p.allow_requantize,
        quantize_output_tensor: p.quantize_output_tensor,
        only_copy: p.only_copy,
        pure: p.pure,
        keep_split: p.keep_split,
        dry_run: p.dry_run,
        imatrix,
        // SAFETY: forwarded contract.
        kv_overrides: unsafe { kv_overrides(p.kv_overrides) }?,
        tensor_types,
        prune_layers,
        max_buf_size: p.max_buf_size,
    })
}
