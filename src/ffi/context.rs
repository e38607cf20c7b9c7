//! Context creation, its getters and setters, and reading outputs.

use super::entry::entry;
use super::handle::{ctx, ctx_free, ctx_mut, ctx_new, memory_handle, CtxCell};
use super::params::context_params;
use super::sampler::is_our_chain;
use super::sampler_backend::attach;
use super::types::*;
use crate::context::SampledRow;
use crate::error::{Error, Result};
use crate::ggml::AbortCallback;
use crate::graph::Pooling;
use std::ffi::c_void;

/// # Safety
/// `model` must be NULL or a live model that outlives the context; callbacks in `params` must be
/// callable from the computing thread while the context lives; `params.samplers` must hold
/// `n_samplers` configurations whose chains outlive their use by the context.
#[no_mangle]
pub unsafe extern "C" fn llama_init_from_model(
    model: *mut llama_model,
    params: llama_context_params,
) -> *mut llama_context {
    entry!(std::ptr::null_mut(), {
        // SAFETY: forwarded contract on the callbacks.
        let p = unsafe { context_params(&params) }?;
        // SAFETY: forwarded contract on the sampler configurations.
        let configs = unsafe { super::sampler::c_slice(params.samplers, params.n_samplers, "samplers") }?;
        // SAFETY: as above.
        if let Some(c) = configs.iter().find(|c| !unsafe { is_our_chain(c.sampler) }) {
            return Err(Error::invalid(format!(
                "the backend sampler of seq_id {} must be a sampler chain (llama_sampler_chain_init)",
                c.seq_id
            )));
        }
        let ctx = ctx_new(model, p)?;
        for c in configs {
            // SAFETY: the context made above; a live chain (contract).
            match unsafe { attach(ctx, c.seq_id, c.sampler) } {
                Ok(true) => crate::log_info!("context: backend sampler for seq_id {} set", c.seq_id),
                Ok(false) => {}
                Err(e) => {
                    ctx_free(ctx)?;
                    return Err(e);
                }
            }
        }
        Ok(ctx)
    })
}

#[deprecated(note = "use llama_init_from_model instead")]
#[no_mangle]
pub unsafe extern "C" fn llama_new_context_with_model(
    model: *mut llama_model,
    params: llama_context_params,
) -> *mut llama_context {
    entry!(std::ptr::null_mut(), {
        // SAFETY: forwarded contract.
        Ok(unsafe { llama_init_from_model(model, params) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_free(ctx: *mut llama_context) {
    entry!((), { ctx_free(ctx) })
}

/// A getter over the context's resolved parameters.
fn param_getter<T>(p: *const llama_context, f: impl FnOnce(&CtxCell) -> T) -> Result<T> {
    Ok(f(&*ctx(p)?))
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_ctx(ctx: *const llama_context) -> u32 {
    entry!(0, { param_getter(ctx, |c| c.params.n_ctx) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_ctx_seq(ctx: *const llama_context) -> u32 {
    entry!(0, { param_getter(ctx, |c| c.params.n_ctx_seq) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_batch(ctx: *const llama_context) -> u32 {
    entry!(0, { param_getter(ctx, |c| c.params.n_batch) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_ubatch(ctx: *const llama_context) -> u32 {
    entry!(0, { param_getter(ctx, |c| c.params.n_ubatch) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_seq_max(ctx: *const llama_context) -> u32 {
    entry!(0, { param_getter(ctx, |c| c.params.n_seq_max) })
}

/// Recurrent-state rollback snapshots per sequence: as asked for, for an architecture that can
/// roll back, else 0 (llama.cpp clamps it so).
#[no_mangle]
pub unsafe extern "C" fn llama_n_rs_seq(ctx: *const llama_context) -> u32 {
    entry!(0, { param_getter(ctx, |c| c.params.n_rs_seq) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_model(ctx: *const llama_context) -> *const llama_model {
    entry!(std::ptr::null(), {
        param_getter(ctx, |c| c.model_handle as *const llama_model)
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_memory(ctx: *const llama_context) -> llama_memory_t {
    entry!(std::ptr::null_mut(), { memory_handle(ctx) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_pooling_type(ctx: *const llama_context) -> PoolingType {
    entry!(
        PoolingType(llama_pooling_type::LLAMA_POOLING_TYPE_UNSPECIFIED as std::ffi::c_int),
        {
            {
                param_getter(ctx, |c| {
                    PoolingType(match c.params.pooling {
                        Pooling::None => llama_pooling_type::LLAMA_POOLING_TYPE_NONE,
                        Pooling::Mean => llama_pooling_type::LLAMA_POOLING_TYPE_MEAN,
                        Pooling::Cls => llama_pooling_type::LLAMA_POOLING_TYPE_CLS,
                        Pooling::Last => llama_pooling_type::LLAMA_POOLING_TYPE_LAST,
                        Pooling::Rank => llama_pooling_type::LLAMA_POOLING_TYPE_RANK,
                    } as std::ffi::c_int)
                })
            }
        }
    )
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_n_threads(ctx: *mut llama_context, n_threads: i32, n_threads_batch: i32) {
    entry!((), {
        ctx_mut(ctx)?.set_n_threads(n_threads, n_threads_batch)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_threads(ctx: *mut llama_context) -> i32 {
    entry!(-1, { Ok(ctx_mut(ctx)?.params.n_threads) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_n_threads_batch(ctx: *mut llama_context) -> i32 {
    entry!(-1, { Ok(ctx_mut(ctx)?.params.n_threads_batch) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_embeddings(ctx: *mut llama_context, embeddings: bool) {
    entry!((), {
        ctx_mut(ctx)?.set_embeddings(embeddings);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_set_causal_attn(ctx: *mut llama_context, causal_attn: bool) {
    entry!((), {
        ctx_mut(ctx)?.set_causal(causal_attn);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_causal_attn(ctx: *const llama_context) -> bool {
    entry!(false, { Ok(ctx_mut(ctx)?.params.graph.causal) })
}

/// Warm-up decodes route every expert of a mixture-of-experts model, as llama.cpp's do.
#[deprecated(note = "user code should do warmup runs manually")]
#[no_mangle]
pub unsafe extern "C" fn llama_set_warmup(ctx: *mut llama_context, warmup: bool) {
    entry!((), {
        ctx_mut(ctx)?.set_warmup(warmup);
        Ok(())
    })
}

/// # Safety
/// `abort_callback` must be callable with its data from the computing thread until replaced.
#[no_mangle]
pub unsafe extern "C" fn llama_set_abort_callback(
    ctx: *mut llama_context,
    abort_callback: ggml_abort_callback,
    abort_callback_data: *mut c_void,
) {
    entry!((), {
        // SAFETY: forwarded contract.
        let cb = abort_callback.map(|f| unsafe { AbortCallback::new(f, abort_callback_data) });
        ctx_mut(ctx)?.set_abort(cb);
        Ok(())
    })
}

/// Computation is synchronous on the CPU: when llama_decode returns, results are ready.
#[no_mangle]
pub unsafe extern "C" fn llama_synchronize(ctx: *mut llama_context) {
    entry!((), {
        super::handle::ctx(ctx)?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_logits(ctx: *mut llama_context) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        let mut c = ctx_mut(ctx)?;
        // Pointers into the context's buffers are made from mutable borrows: clients write through
        // them (biases applied in place before sampling), as llama.h allows.
        let l = c.logits_mut();
        Ok(if l.is_empty() {
            std::ptr::null_mut()
        } else {
            l.as_mut_ptr()
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_logits_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        let mut c = ctx_mut(ctx)?;
        Ok(c.logits_ith_mut(i)?.as_mut_ptr())
    })
}

/// A threadpool comes from the client's own ggml, which is not the one linked (privately) into this
/// library, so its threads cannot run our graphs. Attaching is accepted and the context keeps
/// computing with its own `n_threads` / `n_threads_batch` (what a pool built from the same
/// parameters would give); what the pool's parameters add beyond the count (CPU mask, priority,
/// polling, strict placement) does not apply.
#[no_mangle]
pub unsafe extern "C" fn llama_attach_threadpool(
    ctx: *mut llama_context,
    threadpool: ggml_threadpool_t,
    threadpool_batch: ggml_threadpool_t,
) {
    let _ = (threadpool, threadpool_batch);
    entry!((), {
        let c = ctx_mut(ctx)?;
        crate::log_debug!(
            "llama_attach_threadpool: computing with this context's own {} / {} threads (the pool belongs to another ggml)",
            c.params.n_threads,
            c.params.n_threads_batch
        );
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_detach_threadpool(ctx: *mut llama_context) {
    entry!((), {
        super::handle::ctx(ctx)?;
        Ok(())
    })
}

/// The last decode's embeddings, [n_outputs][n_embd]; NULL when embeddings are off or pooled.
#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings(ctx: *mut llama_context) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        let mut c = ctx_mut(ctx)?;
        Ok(c.embeddings_mut().map_or(std::ptr::null_mut(), |e| e.as_mut_ptr()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        Ok(ctx_mut(ctx)?.embeddings_ith_mut(i)?.as_mut_ptr())
    })
}

/// The pooled embedding of a sequence; NULL when there is none (as in llama.cpp, without a log line).
#[no_mangle]
pub unsafe extern "C" fn llama_get_embeddings_seq(ctx: *mut llama_context, seq_id: llama_seq_id) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        let mut c = ctx_mut(ctx)?;
        Ok(c.embeddings_seq_mut(seq_id)
            .map_or(std::ptr::null_mut(), |e| e.as_mut_ptr()))
    })
}

/// The `llama_get_sampled_*` getters answer as llama.cpp: when no backend sampler was attached at
/// the last decode, no token, probabilities or candidates and n_vocab logits (to read with
/// `llama_get_logits_ith`), without a log line (`common` asks every token); otherwise what the
/// samplers left for the output (nothing for an output of a sequence without one), an invalid
/// index logged. The buffers stay valid until the next decode.
fn sampled<T>(p: *mut llama_context, i: i32, none: T, f: impl FnOnce(&mut SampledRow) -> T) -> Result<T> {
    let mut c = ctx_mut(p)?;
    Ok(c.sampled_row(i)?.map_or(none, f))
}

fn data_or_null<T>(v: &mut [T]) -> *mut T {
    if v.is_empty() {
        std::ptr::null_mut()
    } else {
        v.as_mut_ptr()
    }
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_token_ith(ctx: *mut llama_context, i: i32) -> llama_token {
    entry!(LLAMA_TOKEN_NULL, { sampled(ctx, i, LLAMA_TOKEN_NULL, |r| r.token) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_probs_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        sampled(ctx, i, std::ptr::null_mut(), |r| data_or_null(&mut r.probs))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_probs_count_ith(ctx: *mut llama_context, i: i32) -> u32 {
    entry!(0, { sampled(ctx, i, 0, |r| r.probs.len() as u32) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_logits_ith(ctx: *mut llama_context, i: i32) -> *mut f32 {
    entry!(std::ptr::null_mut(), {
        sampled(ctx, i, std::ptr::null_mut(), |r| data_or_null(&mut r.logits))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_logits_count_ith(ctx: *mut llama_context, i: i32) -> u32 {
    entry!(0, {
        let n_vocab = ctx_mut(ctx)?.n_vocab() as u32;
        sampled(ctx, i, n_vocab, |r| r.logits.len() as u32)
    })
}

/// The candidates' ids; every token id in order when the samplers left none (an invalid index
/// too, without a log line, as llama.cpp falls back).
#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_candidates_ith(ctx: *mut llama_context, i: i32) -> *mut llama_token {
    entry!(std::ptr::null_mut(), {
        let mut c = ctx_mut(ctx)?;
        let own = match c.sampled_row(i) {
            Ok(Some(r)) => Some(data_or_null(&mut r.candidates)).filter(|p| !p.is_null()),
            _ => None,
        };
        Ok(own.unwrap_or_else(|| c.all_token_ids_mut().as_mut_ptr()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_get_sampled_candidates_count_ith(ctx: *mut llama_context, i: i32) -> u32 {
    entry!(0, { sampled(ctx, i, 0, |r| r.candidates.len() as u32) })
}
