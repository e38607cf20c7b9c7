//! LoRA adapters and control vectors.

use super::handle::ctx_mut;
use super::types::*;
use super::{guard, not_implemented};
use std::ffi::c_char;

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_init(
    model: *mut llama_model,
    path_lora: *const c_char,
) -> *mut llama_adapter_lora {
    let _ = (model, path_lora);
    not_implemented("llama_adapter_lora_init", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_init_from_file_ptr(
    model: *mut llama_model,
    file: *mut libc::FILE,
) -> *mut llama_adapter_lora {
    let _ = (model, file);
    not_implemented("llama_adapter_lora_init_from_file_ptr", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_val_str(
    adapter: *const llama_adapter_lora,
    key: *const c_char,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    let _ = (adapter, key, buf, buf_size);
    not_implemented("llama_adapter_meta_val_str", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_count(adapter: *const llama_adapter_lora) -> i32 {
    let _ = adapter;
    not_implemented("llama_adapter_meta_count", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_key_by_index(
    adapter: *const llama_adapter_lora,
    i: i32,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    let _ = (adapter, i, buf, buf_size);
    not_implemented("llama_adapter_meta_key_by_index", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_meta_val_str_by_index(
    adapter: *const llama_adapter_lora,
    i: i32,
    buf: *mut c_char,
    buf_size: usize,
) -> i32 {
    let _ = (adapter, i, buf, buf_size);
    not_implemented("llama_adapter_meta_val_str_by_index", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_lora_free(adapter: *mut llama_adapter_lora) {
    let _ = adapter;
    not_implemented("llama_adapter_lora_free", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_get_alora_n_invocation_tokens(adapter: *const llama_adapter_lora) -> u64 {
    let _ = adapter;
    not_implemented("llama_adapter_get_alora_n_invocation_tokens", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_adapter_get_alora_invocation_tokens(
    adapter: *const llama_adapter_lora,
) -> *const llama_token {
    let _ = adapter;
    not_implemented("llama_adapter_get_alora_invocation_tokens", std::ptr::null())
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_adapters_lora(
    ctx: *mut llama_context,
    adapters: *mut *mut llama_adapter_lora,
    n_adapters: usize,
    scales: *mut f32,
) -> i32 {
    let _ = scales;
    if n_adapters > 0 && !adapters.is_null() {
        return not_implemented("llama_set_adapters_lora", -1);
    }
    // No adapters: what the context already has. `common` sets this at every start and llama-server
    // on every batch, so it succeeds quietly.
    guard("llama_set_adapters_lora", -1, || {
        // SAFETY: NULL or a live context by contract.
        unsafe { ctx_mut(ctx) }?;
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
    if !data.is_null() {
        return not_implemented("llama_set_adapter_cvec", -1);
    }
    // NULL data clears the control vector, which this context never has: done.
    guard("llama_set_adapter_cvec", -1, || {
        // SAFETY: NULL or a live context by contract.
        unsafe { ctx_mut(ctx) }?;
        Ok(0)
    })
}
