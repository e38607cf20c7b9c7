//! Context creation, its getters and setters, and reading outputs.

use super::not_implemented;
use super::types::*;
use std::ffi::c_void;

#[no_mangle]
pub unsafe extern "C" fn llama_attach_threadpool(
    ctx: *mut llama_context,
    threadpool: ggml_threadpool_t,
    threadpool_batch: ggml_threadpool_t,
) {
    let _ = (ctx, threadpool, threadpool_batch);
    not_implemented("llama_attach_threadpool", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_detach_threadpool(ctx: *mut llama_context) {
    let _ = ctx;
    not_implemented("llama_detach_threadpool", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_init_from_model(
    model: *mut llama_model,
    params: llama_context_params,
) -> *mut llama_context {
    let _ = (model, params);
    not_implemented("llama_init_from_model", std::ptr::null_mut())
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_new_context_with_model(
    model: *mut llama_model,
    params: llama_context_params,
) -> *mut llama_context {
    let _ = (model, params);
    not_implemented("llama_new_context_with_model", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_free(ctx: *mut llama_context) {
    let _ = ctx;
    not_implemented("llama_free", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_ctx(ctx: *const llama_context) -> u32 {
    let _ = ctx;
    not_implemented("llama_n_ctx", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_ctx_seq(ctx: *const llama_context) -> u32 {
    let _ = ctx;
    not_implemented("llama_n_ctx_seq", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_batch(ctx: *const llama_context) -> u32 {
    let _ = ctx;
    not_implemented("llama_n_batch", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_ubatch(ctx: *const llama_context) -> u32 {
    let _ = ctx;
    not_implemented("llama_n_ubatch", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_seq_max(ctx: *const llama_context) -> u32 {
    let _ = ctx;
    not_implemented("llama_n_seq_max", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_rs_seq(ctx: *const llama_context) -> u32 {
    let _ = ctx;
    not_implemented("llama_n_rs_seq", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_model(ctx: *const llama_context) -> *const llama_model {
    let _ = ctx;
    not_implemented("llama_get_model", std::ptr::null())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_memory(ctx: *const llama_context) -> llama_memory_t {
    let _ = ctx;
    not_implemented("llama_get_memory", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_pooling_type(ctx: *const llama_context) -> PoolingType {
    let _ = ctx;
    not_implemented("llama_pooling_type", PoolingType(-1))
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_n_threads(ctx: *mut llama_context, n_threads: i32, n_threads_batch: i32) {
    let _ = (ctx, n_threads, n_threads_batch);
    not_implemented("llama_set_n_threads", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_threads(ctx: *mut llama_context) -> i32 {
    let _ = ctx;
    not_implemented("llama_n_threads", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_threads_batch(ctx: *mut llama_context) -> i32 {
    let _ = ctx;
    not_implemented("llama_n_threads_batch", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_embeddings(ctx: *mut llama_context, embeddings: bool) {
    let _ = (ctx, embeddings);
    not_implemented("llama_set_embeddings", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_causal_attn(ctx: *mut llama_context, causal_attn: bool) {
    let _ = (ctx, causal_attn);
    not_implemented("llama_set_causal_attn", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_causal_attn(ctx: *const llama_context) -> bool {
    let _ = ctx;
    not_implemented("llama_get_causal_attn", false)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_set_warmup(ctx: *mut llama_context, warmup: bool) {
    let _ = (ctx, warmup);
    not_implemented("llama_set_warmup", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_abort_callback(
    ctx: *mut llama_context,
    abort_callback: ggml_abort_callback,
    abort_callback_data: *mut c_void,
) {
    let _ = (ctx, abort_callback, abort_callback_data);
    not_implemented("llama_set_abort_callback", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_synchronize(ctx: *mut llama_context) {
    let _ = ctx;
    not_implemented("llama_synchronize", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_logits(ctx: *mut llama_context) -> *mut f32 {
    let _ = ctx;
    not_implemented("llama_get_logits", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_logits_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    let _ = (ctx, i);
    not_implemented("llama_get_logits_ith", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings(ctx: *mut llama_context) -> *mut f32 {
    let _ = ctx;
    not_implemented("llama_get_embeddings", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    let _ = (ctx, i);
    not_implemented("llama_get_embeddings_ith", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings_seq(ctx: *mut llama_context, seq_id: llama_seq_id) -> *mut f32 {
    let _ = (ctx, seq_id);
    not_implemented("llama_get_embeddings_seq", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_token_ith(ctx: *mut llama_context, i: i32) -> llama_token {
    let _ = (ctx, i);
    not_implemented("llama_get_sampled_token_ith", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_probs_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    let _ = (ctx, i);
    not_implemented("llama_get_sampled_probs_ith", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_probs_count_ith(ctx: *mut llama_context, i: i32) -> u32 {
    let _ = (ctx, i);
    not_implemented("llama_get_sampled_probs_count_ith", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_logits_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    let _ = (ctx, i);
    not_implemented("llama_get_sampled_logits_ith", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_logits_count_ith(ctx: *mut llama_context, i: i32) -> u32 {
    let _ = (ctx, i);
    not_implemented("llama_get_sampled_logits_count_ith", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_candidates_ith(ctx: *mut llama_context, i: i32) -> *mut llama_token {
    let _ = (ctx, i);
    not_implemented("llama_get_sampled_candidates_ith", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_candidates_count_ith(ctx: *mut llama_context, i: i32) -> u32 {
    let _ = (ctx, i);
    not_implemented("llama_get_sampled_candidates_count_ith", 0)
}
