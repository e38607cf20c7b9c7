//! LoRA adapters and control vectors.

use super::entry::entry;
use super::types::*;
use crate::error::Error;
use std::ffi::c_char;

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_init(
    model: *mut llama_model,
    path_lora: *const c_char,
) -> *mut llama_adapter_lora {
    let _ = (model, path_lora);
    entry!(std::ptr::null_mut(), not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_init_from_file_ptr(
    model: *mut llama_model,
    file: *mut libc::FILE,
) -> *mut llama_adapter_lora {
    let _ = (model, file);
    entry!(std::ptr::null_mut(), not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_val_str(
    adapter: *const llama_adapter_lora,
    key: *const c_char,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    let _ = (adapter, key, buf, buf_size);
    entry!(-1, not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_count(adapter: *const llama_adapter_lora) -> i32 {
    let _ = adapter;
    entry!(-1, not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_key_by_index(
    adapter: *const llama_adapter_lora,
    i: i32,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    let _ = (adapter, i, buf, buf_size);
    entry!(-1, not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_val_str_by_index(
    adapter: *const llama_adapter_lora,
    i: i32,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    let _ = (adapter, i, buf, buf_size);
    entry!(-1, not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_free(adapter: *mut llama_adapter_lora) {
    let _ = adapter;
    entry!((), not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_get_alora_n_invocation_tokens(adapter: *const llama_adapter_lora) -> u64 {
    let _ = adapter;
    entry!(0, not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_get_alora_invocation_tokens(
    adapter: *const llama_adapter_lora,
) -> *const llama_token {
    let _ = adapter;
    entry!(std::ptr::null(), not_implemented)
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_adapters_lora(
    ctx: *mut llama_context,
    adapters: *mut *mut llama_adapter_lora,
    n_adapters: usize,
    scales: *mut f32,
) -> i32 {
    let _ = scales;
    entry!(-1, {
        if n_adapters > 0 && !adapters.is_null() {
            return Err(Error::NotImplemented("llama_set_adapters_lora"));
        }
        // No adapters: what the context already has. `common` sets this at every start and
        // llama-server on every batch, so it succeeds quietly.
        super::handle::ctx(ctx)?;
        Ok(0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_adapter_cvec(
    ctx: *mut llama_context,
    data: *const f32,
    len: usize,
    n_embd: i32,
    il_start: i32,
    il_end: i32,
) -> i32 {
    let _ = (len, n_embd, il_start, il_end);
    entry!(-1, {
        if !data.is_null() {
            return Err(Error::NotImplemented("llama_set_adapter_cvec"));
        }
        // NULL data clears the control vector, which this context never has: done.
        super::handle::ctx(ctx)?;
        Ok(0)
    })
}
