//! Vocabulary getters, tokenization and detokenization.

use super::not_implemented;
use super::types::*;
use std::ffi::{c_char, c_int, c_void};

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_n_vocab(vocab: *const llama_vocab) -> i32 {
    let _ = vocab;
    not_implemented("llama_n_vocab", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_type(vocab: *const llama_vocab) -> VocabType {
    let _ = vocab;
    not_implemented("llama_vocab_type", VocabType(0))
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_n_tokens(vocab: *const llama_vocab) -> i32 {
    let _ = vocab;
    not_implemented("llama_vocab_n_tokens", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_text(vocab: *const llama_vocab, token: llama_token) -> *const c_char {
    let _ = (vocab, token);
    not_implemented("llama_vocab_get_text", std::ptr::null())
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_score(vocab: *const llama_vocab, token: llama_token) -> f32 {
    let _ = (vocab, token);
    not_implemented("llama_vocab_get_score", 0.0)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_attr(vocab: *const llama_vocab, token: llama_token) -> TokenAttr {
    let _ = (vocab, token);
    not_implemented("llama_vocab_get_attr", TokenAttr(0))
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_is_eog(vocab: *const llama_vocab, token: llama_token) -> bool {
    let _ = (vocab, token);
    not_implemented("llama_vocab_is_eog", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_is_control(vocab: *const llama_vocab, token: llama_token) -> bool {
    let _ = (vocab, token);
    not_implemented("llama_vocab_is_control", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_bos(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_bos", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_eos(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_eos", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_eot(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_eot", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_sep(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_sep", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_nl(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_nl", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_pad(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_pad", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_mask(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_mask", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_add_bos(vocab: *const llama_vocab) -> bool {
    let _ = vocab;
    not_implemented("llama_vocab_get_add_bos", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_add_eos(vocab: *const llama_vocab) -> bool {
    let _ = vocab;
    not_implemented("llama_vocab_get_add_eos", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_add_sep(vocab: *const llama_vocab) -> bool {
    let _ = vocab;
    not_implemented("llama_vocab_get_add_sep", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_suppress_tokens(vocab: *const llama_vocab, n_suppress_tokens: *mut i32) -> *const llama_token {
    let _ = (vocab, n_suppress_tokens);
    not_implemented("llama_vocab_get_suppress_tokens", std::ptr::null())
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_pre(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_fim_pre", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_suf(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_fim_suf", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_mid(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_fim_mid", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_pad(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_fim_pad", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_rep(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_fim_rep", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_sep(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_fim_sep", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_get_text(vocab: *const llama_vocab, token: llama_token) -> *const c_char {
    let _ = (vocab, token);
    not_implemented("llama_token_get_text", std::ptr::null())
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_get_score(vocab: *const llama_vocab, token: llama_token) -> f32 {
    let _ = (vocab, token);
    not_implemented("llama_token_get_score", 0.0)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_get_attr(vocab: *const llama_vocab, token: llama_token) -> TokenAttr {
    let _ = (vocab, token);
    not_implemented("llama_token_get_attr", TokenAttr(0))
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_is_eog(vocab: *const llama_vocab, token: llama_token) -> bool {
    let _ = (vocab, token);
    not_implemented("llama_token_is_eog", false)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_is_control(vocab: *const llama_vocab, token: llama_token) -> bool {
    let _ = (vocab, token);
    not_implemented("llama_token_is_control", false)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_bos(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_bos", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_eos(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_eos", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_eot(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_eot", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_cls(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_cls", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_sep(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_sep", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_nl(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_nl", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_pad(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_pad", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_add_bos_token(vocab: *const llama_vocab) -> bool {
    let _ = vocab;
    not_implemented("llama_add_bos_token", false)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_add_eos_token(vocab: *const llama_vocab) -> bool {
    let _ = vocab;
    not_implemented("llama_add_eos_token", false)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_pre(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_fim_pre", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_suf(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_fim_suf", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_mid(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_fim_mid", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_pad(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_fim_pad", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_rep(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_fim_rep", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_sep(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_token_fim_sep", LLAMA_TOKEN_NULL)
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_cls(vocab: *const llama_vocab) -> llama_token {
    let _ = vocab;
    not_implemented("llama_vocab_cls", LLAMA_TOKEN_NULL)
}

#[no_mangle]
pub unsafe extern "C" fn llama_tokenize(vocab: *const llama_vocab, text: *const c_char, text_len: i32, tokens: *mut llama_token, n_tokens_max: i32, add_special: bool, parse_special: bool) -> i32 {
    let _ = (vocab, text, text_len, tokens, n_tokens_max, add_special, parse_special);
    not_implemented("llama_tokenize", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_token_to_piece(vocab: *const llama_vocab, token: llama_token, buf: *mut c_char, length: i32, lstrip: i32, special: bool) -> i32 {
    let _ = (vocab, token, buf, length, lstrip, special);
    not_implemented("llama_token_to_piece", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_detokenize(vocab: *const llama_vocab, tokens: *const llama_token, n_tokens: i32, text: *mut c_char, text_len_max: i32, remove_special: bool, unparse_special: bool) -> i32 {
    let _ = (vocab, tokens, n_tokens, text, text_len_max, remove_special, unparse_special);
    not_implemented("llama_detokenize", -1)
}
