//! LoRA adapters and control vectors.

use super::entry::entry;
use super::handle;
use super::model::{file_source, meta_by_index, meta_lookup};
use super::params::path_arg;
use super::sampler::c_slice;
use super::strings::write_c_str;
use super::types::*;
use crate::error::{Error, Result};
use crate::model::lora::LoraAdapter;
use crate::model::FileSource;
use std::ffi::c_char;
use std::sync::Arc;

/// # Safety
/// `path_lora` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_init(
    model: *mut llama_model,
    path_lora: *const c_char,
) -> *mut llama_adapter_lora {
    entry!(std::ptr::null_mut(), {
        // SAFETY: forwarded contract.
        let path = unsafe { path_arg(path_lora, "path_lora") }?;
        load(model, &FileSource::Path(path))
    })
}

/// # Safety
/// `file` NULL or a live `FILE*` positioned at the adapter's GGUF.
#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_init_from_file_ptr(
    model: *mut llama_model,
    file: *mut libc::FILE,
) -> *mut llama_adapter_lora {
    entry!(std::ptr::null_mut(), {
        // SAFETY: forwarded contract.
        let source = unsafe { file_source(file) }?;
        load(model, &source)
    })
}

fn load(model: *mut llama_model, source: &FileSource) -> Result<*mut llama_adapter_lora> {
    let m = handle::model(model)?;
    crate::log_info!("lora: loading adapter from '{}'", source.name());
    let adapter = LoraAdapter::load(&m, source)?;
    Ok(handle::adapter_into_raw(adapter, model))
}

/// # Safety
/// `key` NULL or NUL-terminated; `buf` valid for `buf_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_val_str(
    adapter: *const llama_adapter_lora,
    key: *const c_char,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    entry!(-1, {
        // SAFETY: an empty string is written on failure, as llama.h promises.
        unsafe { write_c_str(buf, buf_size, b"") };
        let a = adapter_of(adapter)?;
        // SAFETY: forwarded contract.
        unsafe { meta_lookup(a.meta(), key, buf, buf_size) }
    })
}

fn adapter_of(adapter: *const llama_adapter_lora) -> Result<Arc<LoraAdapter>> {
    handle::adapter(adapter).map(|(a, _)| a)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_count(adapter: *const llama_adapter_lora) -> i32 {
    entry!(-1, { Ok(adapter_of(adapter)?.meta().len() as i32) })
}

/// # Safety
/// `buf` valid for `buf_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_key_by_index(
    adapter: *const llama_adapter_lora,
    i: i32,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    entry!(-1, {
        // SAFETY: forwarded contract.
        unsafe { meta_by_index(adapter_of(adapter), |a| a.meta(), i, (buf, buf_size), |kv| &kv.0) }
    })
}

/// # Safety
/// `buf` valid for `buf_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_val_str_by_index(
    adapter: *const llama_adapter_lora,
    i: i32,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    entry!(-1, {
        // SAFETY: forwarded contract.
        unsafe { meta_by_index(adapter_of(adapter), |a| a.meta(), i, (buf, buf_size), |kv| &kv.1) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_free(adapter: *mut llama_adapter_lora) {
    entry!((), { handle::adapter_free(adapter) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_get_alora_n_invocation_tokens(adapter: *const llama_adapter_lora) -> u64 {
    entry!(0, {
        if adapter.is_null() {
            return Ok(0);
        }
        Ok(adapter_of(adapter)?.alora_tokens().len() as u64)
    })
}

/// The tokens stay valid while the adapter lives (its handle, or a context applying it).
#[no_mangle]
pub unsafe extern "C" fn llama_adapter_get_alora_invocation_tokens(
    adapter: *const llama_adapter_lora,
) -> *const llama_token {
    entry!(std::ptr::null(), {
        let a = adapter_of(adapter)?;
        let tokens = a.alora_tokens();
        Ok(if tokens.is_empty() {
            std::ptr::null()
        } else {
            tokens.as_ptr()
        })
    })
}

/// # Safety
/// `adapters` and `scales` NULL or valid for `n_adapters` elements.
#[no_mangle]
pub unsafe extern "C" fn llama_set_adapters_lora(
    ctx: *mut llama_context,
    adapters: *mut *mut llama_adapter_lora,
    n_adapters: usize,
    scales: *mut f32,
) -> i32 {
    entry!(-1, {
        let cell = handle::ctx(ctx)?;
        // SAFETY: forwarded contract (n_adapters elements each, or none).
        let (handles, scales) = unsafe {
            (
                c_slice(adapters.cast_const(), n_adapters, "adapters")?,
                c_slice(scales.cast_const(), n_adapters, "scales")?,
            )
        };
        let mut list = Vec::with_capacity(n_adapters);
        for (&h, &s) in handles.iter().zip(scales) {
            let (a, model) = handle::adapter(h)?;
            if model as usize != cell.model_handle {
                return Err(Error::invalid(format!(
                    "adapter {h:p} was loaded for another model than the context's"
                )));
            }
            list.push((a, s));
        }
        handle::ctx_mut(ctx)?.set_loras(list);
        Ok(0)
    })
}

/// # Safety
/// `data` NULL or valid for `len` floats.
#[no_mangle]
pub unsafe extern "C" fn llama_set_adapter_cvec(
    ctx: *mut llama_context,
    data: *const f32,
    len: usize,
    n_embd: i32,
    il_start: i32,
    il_end: i32,
) -> i32 {
    entry!(-1, {
        let mut c = handle::ctx_mut(ctx)?;
        let data = if data.is_null() {
            None
        } else {
            // SAFETY: forwarded contract.
            Some(unsafe { c_slice(data, len, "data") }?)
        };
        c.set_cvec(data, n_embd, (il_start, il_end))?;
        Ok(0)
    })
}
