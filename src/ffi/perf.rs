//! Performance counters.

use super::entry::entry;
use super::handle::{self, Ctx};
use super::types::*;

/// What llama_perf_context reports: milliseconds, and at least 1 in the token counts (as llama.cpp,
/// so per-token averages never divide by zero).
fn context_data(c: &Ctx) -> llama_perf_context_data {
    let p = &c.perf;
    llama_perf_context_data {
        t_start_ms: 1e-3 * p.t_start_us as f64,
        t_load_ms: 1e-3 * p.t_load_us as f64,
        t_p_eval_ms: 1e-3 * p.t_p_eval_us as f64,
        t_eval_ms: 1e-3 * p.t_eval_us as f64,
        n_p_eval: p.n_p_eval.max(1),
        n_eval: p.n_eval.max(1),
        n_reused: i32::try_from(c.counters.graphs_reused).unwrap_or(i32::MAX),
    }
}

const NO_CONTEXT_DATA: llama_perf_context_data = llama_perf_context_data {
    t_start_ms: 0.0,
    t_load_ms: 0.0,
    t_p_eval_ms: 0.0,
    t_eval_ms: 0.0,
    n_p_eval: 0,
    n_eval: 0,
    n_reused: 0,
};

#[no_mangle]
pub unsafe extern "C" fn llama_perf_context(ctx: *const llama_context) -> llama_perf_context_data {
    entry!(NO_CONTEXT_DATA, { Ok(context_data(&*handle::ctx_mut(ctx)?)) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_context_print(ctx: *const llama_context) {
    entry!((), {
        let d = context_data(&*handle::ctx_mut(ctx)?);
        let now_ms = 1e-3 * crate::ggml::time_us() as f64;
        let per = |ms: f64, n: i32| (ms / f64::from(n), 1e3 / ms * f64::from(n));
        let (p_ms, p_tps) = per(d.t_p_eval_ms, d.n_p_eval);
        let (e_ms, e_tps) = per(d.t_eval_ms, d.n_eval);
        crate::log_info!("llama_perf_context_print:        load time = {:10.2} ms", d.t_load_ms);
        crate::log_info!(
            "llama_perf_context_print: prompt eval time = {:10.2} ms / {:5} tokens ({p_ms:8.2} ms per token, {p_tps:8.2} tokens per second)",
            d.t_p_eval_ms,
            d.n_p_eval
        );
        crate::log_info!(
            "llama_perf_context_print:        eval time = {:10.2} ms / {:5} runs   ({e_ms:8.2} ms per token, {e_tps:8.2} tokens per second)",
            d.t_eval_ms,
            d.n_eval
        );
        crate::log_info!(
            "llama_perf_context_print:       total time = {:10.2} ms / {:5} tokens",
            now_ms - d.t_start_ms,
            d.n_p_eval + d.n_eval
        );
        crate::log_info!("llama_perf_context_print:    graphs reused = {:10}", d.n_reused);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_context_reset(ctx: *mut llama_context) {
    entry!((), {
        let mut c = handle::ctx_mut(ctx)?;
        c.perf.reset();
        c.counters.graphs_reused = 0;
        Ok(())
    })
}

const NO_SAMPLER_PERF: llama_perf_sampler_data = llama_perf_sampler_data {
    t_sample_ms: 0.0,
    n_sample: 0,
};

#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler(chain: *const llama_sampler) -> llama_perf_sampler_data {
    entry!(NO_SAMPLER_PERF, {
        // SAFETY: NULL or a live sampler (contract).
        unsafe { super::sampler::chain_perf(chain) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler_print(chain: *const llama_sampler) {
    entry!((), {
        // SAFETY: NULL or a live sampler (contract).
        let d = unsafe { super::sampler::chain_perf(chain) }?;
        crate::log_info!(
            "llama_perf_sampler_print:    samplers time = {:10.2} ms / {:5} runs",
            d.t_sample_ms,
            d.n_sample
        );
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_perf_sampler_reset(chain: *mut llama_sampler) {
    entry!((), {
        // SAFETY: NULL or a live sampler (contract).
        unsafe { super::sampler::chain_perf_reset(chain) }
    })
}
