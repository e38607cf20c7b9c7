//! Performance counters.

use super::not_implemented;
use super::types::*;

#[no_mangle]
pub unsafe extern "C" fn llama_perf_context(ctx: *const llama_context) -> llama_perf_context_data {
    let _ = ctx;
    not_implemented(
        "llama_perf_context",
        llama_perf_context_data {
            t_start_ms: 0.0,
            t_load_ms: 0.0,
            t_p_eval_ms: 0.0,
            t_eval_ms: 0.0,
            n_p_eval: 0,
            n_eval: 0,
            n_reused: 0,
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_context_print(ctx: *const llama_context) {
    let _ = ctx;
    not_implemented("llama_perf_context_print", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_context_reset(ctx: *mut llama_context) {
    let _ = ctx;
    not_implemented("llama_perf_context_reset", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler(chain: *const llama_sampler) -> llama_perf_sampler_data {
    let _ = chain;
    not_implemented(
        "llama_perf_sampler",
        llama_perf_sampler_data {
            t_sample_ms: 0.0,
            n_sample: 0,
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler_print(chain: *const llama_sampler) {
    let _ = chain;
    not_implemented("llama_perf_sampler_print", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler_reset(chain: *mut llama_sampler) {
    let _ = chain;
    not_implemented("llama_perf_sampler_reset", ())
}
