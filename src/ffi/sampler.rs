//! The sampler API.

use super::not_implemented;
use super::types::*;
use std::ffi::c_char;

#[no_mangle]
pub unsafe extern "C" fn llama_set_sampler(
    ctx: *mut llama_context,
    seq_id: llama_seq_id,
    smpl: *mut llama_sampler,
) -> bool {
    let _ = (ctx, seq_id, smpl);
    not_implemented("llama_set_sampler", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init(
    iface: *mut llama_sampler_i,
    ctx: llama_sampler_context_t,
) -> *mut llama_sampler {
    let _ = (iface, ctx);
    not_implemented("llama_sampler_init", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_name(smpl: *const llama_sampler) -> *const c_char {
    let _ = smpl;
    not_implemented("llama_sampler_name", std::ptr::null())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_accept(smpl: *mut llama_sampler, token: llama_token) {
    let _ = (smpl, token);
    not_implemented("llama_sampler_accept", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_apply(smpl: *mut llama_sampler, cur_p: *mut llama_token_data_array) {
    let _ = (smpl, cur_p);
    not_implemented("llama_sampler_apply", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_reset(smpl: *mut llama_sampler) {
    let _ = smpl;
    not_implemented("llama_sampler_reset", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_clone(smpl: *const llama_sampler) -> *mut llama_sampler {
    let _ = smpl;
    not_implemented("llama_sampler_clone", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_copy(src: *const llama_sampler, dst: *mut llama_sampler) {
    let _ = (src, dst);
    not_implemented("llama_sampler_copy", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_free(smpl: *mut llama_sampler) {
    let _ = smpl;
    not_implemented("llama_sampler_free", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_init(params: llama_sampler_chain_params) -> *mut llama_sampler {
    let _ = params;
    not_implemented("llama_sampler_chain_init", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_add(chain: *mut llama_sampler, smpl: *mut llama_sampler) {
    let _ = (chain, smpl);
    not_implemented("llama_sampler_chain_add", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_get(chain: *mut llama_sampler, i: i32) -> *mut llama_sampler {
    let _ = (chain, i);
    not_implemented("llama_sampler_chain_get", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_n(chain: *const llama_sampler) -> i32 {
    let _ = chain;
    not_implemented("llama_sampler_chain_n", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_chain_remove(chain: *mut llama_sampler, i: i32) -> *mut llama_sampler {
    let _ = (chain, i);
    not_implemented("llama_sampler_chain_remove", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_greedy() -> *mut llama_sampler {
    not_implemented("llama_sampler_init_greedy", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_dist(seed: u32) -> *mut llama_sampler {
    let _ = seed;
    not_implemented("llama_sampler_init_dist", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_top_k(k: i32) -> *mut llama_sampler {
    let _ = k;
    not_implemented("llama_sampler_init_top_k", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_top_p(p: f32, min_keep: usize) -> *mut llama_sampler {
    let _ = (p, min_keep);
    not_implemented("llama_sampler_init_top_p", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_min_p(p: f32, min_keep: usize) -> *mut llama_sampler {
    let _ = (p, min_keep);
    not_implemented("llama_sampler_init_min_p", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_typical(p: f32, min_keep: usize) -> *mut llama_sampler {
    let _ = (p, min_keep);
    not_implemented("llama_sampler_init_typical", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_temp(t: f32) -> *mut llama_sampler {
    let _ = t;
    not_implemented("llama_sampler_init_temp", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_temp_ext(t: f32, delta: f32, exponent: f32) -> *mut llama_sampler {
    let _ = (t, delta, exponent);
    not_implemented("llama_sampler_init_temp_ext", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_xtc(p: f32, t: f32, min_keep: usize, seed: u32) -> *mut llama_sampler {
    let _ = (p, t, min_keep, seed);
    not_implemented("llama_sampler_init_xtc", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_top_n_sigma(n: f32) -> *mut llama_sampler {
    let _ = n;
    not_implemented("llama_sampler_init_top_n_sigma", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_mirostat(
    n_vocab: i32,
    seed: u32,
    tau: f32,
    eta: f32,
    m: i32,
) -> *mut llama_sampler {
    let _ = (n_vocab, seed, tau, eta, m);
    not_implemented("llama_sampler_init_mirostat", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_mirostat_v2(seed: u32, tau: f32, eta: f32) -> *mut llama_sampler {
    let _ = (seed, tau, eta);
    not_implemented("llama_sampler_init_mirostat_v2", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_grammar(
    vocab: *const llama_vocab,
    grammar_str: *const c_char,
    grammar_root: *const c_char,
) -> *mut llama_sampler {
    let _ = (vocab, grammar_str, grammar_root);
    not_implemented("llama_sampler_init_grammar", std::ptr::null_mut())
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_grammar_lazy(
    vocab: *const llama_vocab,
    grammar_str: *const c_char,
    grammar_root: *const c_char,
    trigger_words: *mut *const c_char,
    num_trigger_words: usize,
    trigger_tokens: *const llama_token,
    num_trigger_tokens: usize,
) -> *mut llama_sampler {
    let _ = (
        vocab,
        grammar_str,
        grammar_root,
        trigger_words,
        num_trigger_words,
        trigger_tokens,
        num_trigger_tokens,
    );
    not_implemented("llama_sampler_init_grammar_lazy", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_grammar_lazy_patterns(
    vocab: *const llama_vocab,
    grammar_str: *const c_char,
    grammar_root: *const c_char,
    trigger_patterns: *mut *const c_char,
    num_trigger_patterns: usize,
    trigger_tokens: *const llama_token,
    num_trigger_tokens: usize,
) -> *mut llama_sampler {
    let _ = (
        vocab,
        grammar_str,
        grammar_root,
        trigger_patterns,
        num_trigger_patterns,
        trigger_tokens,
        num_trigger_tokens,
    );
    not_implemented("llama_sampler_init_grammar_lazy_patterns", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_penalties(
    n_vocab: i32,
    penalty_last_n: i32,
    penalty_repeat: f32,
    penalty_freq: f32,
    penalty_present: f32,
) -> *mut llama_sampler {
    let _ = (n_vocab, penalty_last_n, penalty_repeat, penalty_freq, penalty_present);
    not_implemented("llama_sampler_init_penalties", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_dry(
    vocab: *const llama_vocab,
    dry_multiplier: f32,
    dry_base: f32,
    dry_allowed_length: i32,
    dry_penalty_last_n: i32,
    seq_breakers: *mut *const c_char,
    num_breakers: usize,
) -> *mut llama_sampler {
    let _ = (
        vocab,
        dry_multiplier,
        dry_base,
        dry_allowed_length,
        dry_penalty_last_n,
        seq_breakers,
        num_breakers,
    );
    not_implemented("llama_sampler_init_dry", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_adaptive_p(target: f32, decay: f32, seed: u32) -> *mut llama_sampler {
    let _ = (target, decay, seed);
    not_implemented("llama_sampler_init_adaptive_p", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_logit_bias(
    n_vocab: i32,
    n_logit_bias: i32,
    logit_bias: *const llama_logit_bias,
) -> *mut llama_sampler {
    let _ = (n_vocab, n_logit_bias, logit_bias);
    not_implemented("llama_sampler_init_logit_bias", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_init_infill(vocab: *const llama_vocab) -> *mut llama_sampler {
    let _ = vocab;
    not_implemented("llama_sampler_init_infill", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_get_seed(smpl: *const llama_sampler) -> u32 {
    let _ = smpl;
    not_implemented("llama_sampler_get_seed", 0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_sampler_sample(
    smpl: *mut llama_sampler,
    ctx: *mut llama_context,
    idx: i32,
) -> llama_token {
    let _ = (smpl, ctx, idx);
    not_implemented("llama_sampler_sample", LLAMA_TOKEN_NULL)
}
