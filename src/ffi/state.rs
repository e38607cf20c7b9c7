//! State save and restore.

use super::not_implemented;
use super::types::*;
use std::ffi::c_char;

#[no_mangle]
pub unsafe extern "C" fn llama_state_get_size(ctx: *mut llama_context) -> usize {
    let _ = ctx;
    not_implemented("llama_state_get_size", 0)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_get_state_size(ctx: *mut llama_context) -> usize {
    let _ = ctx;
    not_implemented("llama_get_state_size", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_get_data(ctx: *mut llama_context, dst: *mut u8, size: usize) -> usize {
    let _ = (ctx, dst, size);
    not_implemented("llama_state_get_data", 0)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_copy_state_data(ctx: *mut llama_context, dst: *mut u8) -> usize {
    let _ = (ctx, dst);
    not_implemented("llama_copy_state_data", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_set_data(ctx: *mut llama_context, src: *const u8, size: usize) -> usize {
    let _ = (ctx, src, size);
    not_implemented("llama_state_set_data", 0)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_set_state_data(ctx: *mut llama_context, src: *const u8) -> usize {
    let _ = (ctx, src);
    not_implemented("llama_set_state_data", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_load_file(
    ctx: *mut llama_context,
    path_session: *const c_char,
    tokens_out: *mut llama_token,
    n_token_capacity: usize,
    n_token_count_out: *mut usize,
) -> bool {
    let _ = (ctx, path_session, tokens_out, n_token_capacity, n_token_count_out);
    not_implemented("llama_state_load_file", false)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_load_session_file(
    ctx: *mut llama_context,
    path_session: *const c_char,
    tokens_out: *mut llama_token,
    n_token_capacity: usize,
    n_token_count_out: *mut usize,
) -> bool {
    let _ = (ctx, path_session, tokens_out, n_token_capacity, n_token_count_out);
    not_implemented("llama_load_session_file", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_save_file(
    ctx: *mut llama_context,
    path_session: *const c_char,
    tokens: *const llama_token,
    n_token_count: usize,
) -> bool {
    let _ = (ctx, path_session, tokens, n_token_count);
    not_implemented("llama_state_save_file", false)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_save_session_file(
    ctx: *mut llama_context,
    path_session: *const c_char,
    tokens: *const llama_token,
    n_token_count: usize,
) -> bool {
    let _ = (ctx, path_session, tokens, n_token_count);
    not_implemented("llama_save_session_file", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_size(ctx: *mut llama_context, seq_id: llama_seq_id) -> usize {
    let _ = (ctx, seq_id);
    not_implemented("llama_state_seq_get_size", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_data(
    ctx: *mut llama_context,
    dst: *mut u8,
    size: usize,
    seq_id: llama_seq_id,
) -> usize {
    let _ = (ctx, dst, size, seq_id);
    not_implemented("llama_state_seq_get_data", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_set_data(
    ctx: *mut llama_context,
    src: *const u8,
    size: usize,
    dest_seq_id: llama_seq_id,
) -> usize {
    let _ = (ctx, src, size, dest_seq_id);
    not_implemented("llama_state_seq_set_data", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_save_file(
    ctx: *mut llama_context,
    filepath: *const c_char,
    seq_id: llama_seq_id,
    tokens: *const llama_token,
    n_token_count: usize,
) -> usize {
    let _ = (ctx, filepath, seq_id, tokens, n_token_count);
    not_implemented("llama_state_seq_save_file", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_load_file(
    ctx: *mut llama_context,
    filepath: *const c_char,
    dest_seq_id: llama_seq_id,
    tokens_out: *mut llama_token,
    n_token_capacity: usize,
    n_token_count_out: *mut usize,
) -> usize {
    let _ = (
        ctx,
        filepath,
        dest_seq_id,
        tokens_out,
        n_token_capacity,
        n_token_count_out,
    );
    not_implemented("llama_state_seq_load_file", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_size_ext(
    ctx: *mut llama_context,
    seq_id: llama_seq_id,
    flags: llama_state_seq_flags,
) -> usize {
    let _ = (ctx, seq_id, flags);
    not_implemented("llama_state_seq_get_size_ext", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_data_ext(
    ctx: *mut llama_context,
    dst: *mut u8,
    size: usize,
    seq_id: llama_seq_id,
    flags: llama_state_seq_flags,
) -> usize {
    let _ = (ctx, dst, size, seq_id, flags);
    not_implemented("llama_state_seq_get_data_ext", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_set_data_ext(
    ctx: *mut llama_context,
    src: *const u8,
    size: usize,
    dest_seq_id: llama_seq_id,
    flags: llama_state_seq_flags,
) -> usize {
    let _ = (ctx, src, size, dest_seq_id, flags);
    not_implemented("llama_state_seq_set_data_ext", 0)
}
