//! Vocabulary getters, tokenization and detokenization.
//!
//! Failure values: a NULL vocabulary or an out-of-range token id is logged and remembered, and the
//! function returns NULL (text), 0.0 (score), `LLAMA_TOKEN_ATTR_UNDEFINED` (attribute), false
//! (predicates), `LLAMA_TOKEN_NULL` (special ids), `INT32_MIN` (`llama_tokenize`, `llama_detokenize`:
//! llama.h's failure value that no caller can mistake for a needed buffer size) or 0 (an empty piece,
//! `llama_token_to_piece`, which has no documented failure value).

use super::entry::entry;
use super::handle::vocab as vocab_ref;
use super::strings::write_bytes_or_needed;
use super::types::*;
use crate::error::{Error, Result};
use crate::vocab::{SpecialIds, Vocab, TOKEN_NULL};
use std::ffi::{c_char, c_int};

/// `f` on the vocabulary behind `v`.
fn with_vocab<T>(v: *const llama_vocab, f: impl FnOnce(&Vocab) -> Result<T>) -> Result<T> {
    f(&*vocab_ref(v)?)
}

/// A special token id.
fn special_id(v: *const llama_vocab, id: fn(&SpecialIds) -> i32) -> Result<llama_token> {
    with_vocab(v, |v| Ok(id(v.special_ids())))
}

fn n_tokens(v: *const llama_vocab) -> Result<i32> {
    with_vocab(v, |v| Ok(v.n_tokens() as i32))
}

fn text(v: *const llama_vocab, token: llama_token) -> Result<*const c_char> {
    // The text lives in the vocabulary, as long as the model.
    with_vocab(v, |v| Ok(v.text_with_nul(token)?.as_ptr().cast()))
}

fn score(v: *const llama_vocab, token: llama_token) -> Result<f32> {
    with_vocab(v, |v| v.score(token))
}

fn attr(v: *const llama_vocab, token: llama_token) -> Result<TokenAttr> {
    with_vocab(v, |v| Ok(TokenAttr(v.attr(token)? as c_int)))
}

fn is_eog(v: *const llama_vocab, token: llama_token) -> Result<bool> {
    {
        with_vocab(v, |v| {
            // LLAMA_TOKEN_NULL is a valid question ("no token"); other ids must exist.
            if token != TOKEN_NULL {
                v.check(token)?;
            }
            Ok(v.is_eog(token))
        })
    }
}

fn is_control(v: *const llama_vocab, token: llama_token) -> Result<bool> {
    with_vocab(v, |v| v.is_control(token))
}

fn flag(v: *const llama_vocab, get: fn(&Vocab) -> bool) -> Result<bool> {
    with_vocab(v, |v| Ok(get(v)))
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_n_vocab(vocab: *const llama_vocab) -> i32 {
    entry!(-1, { n_tokens(vocab) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_type(vocab: *const llama_vocab) -> VocabType {
    entry!(VocabType(0), {
        with_vocab(vocab, |v| Ok(VocabType(v.vocab_type() as c_int)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_n_tokens(vocab: *const llama_vocab) -> i32 {
    entry!(-1, { n_tokens(vocab) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_text(vocab: *const llama_vocab, token: llama_token) -> *const c_char {
    entry!(std::ptr::null(), { text(vocab, token) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_score(vocab: *const llama_vocab, token: llama_token) -> f32 {
    entry!(0.0, { score(vocab, token) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_attr(vocab: *const llama_vocab, token: llama_token) -> TokenAttr {
    entry!(TokenAttr(0), { attr(vocab, token) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_is_eog(vocab: *const llama_vocab, token: llama_token) -> bool {
    entry!(false, { is_eog(vocab, token) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_is_control(vocab: *const llama_vocab, token: llama_token) -> bool {
    entry!(false, { is_control(vocab, token) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_bos(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.bos) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_eos(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.eos) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_eot(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.eot) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_sep(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.sep) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_nl(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.nl) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_pad(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.pad) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_mask(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.mask) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_add_bos(vocab: *const llama_vocab) -> bool {
    entry!(false, { flag(vocab, Vocab::add_bos) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_add_eos(vocab: *const llama_vocab) -> bool {
    entry!(false, { flag(vocab, Vocab::add_eos) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_add_sep(vocab: *const llama_vocab) -> bool {
    entry!(false, { flag(vocab, Vocab::add_sep) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_get_suppress_tokens(
    vocab: *const llama_vocab,
    n_suppress_tokens: *mut i32,
) -> *const llama_token {
    entry!(std::ptr::null(), {
        with_vocab(vocab, |v| {
            let ids = v.suppress_tokens();
            if !n_suppress_tokens.is_null() {
                // SAFETY: a non-NULL count pointer is writable by llama.h's contract.
                unsafe { *n_suppress_tokens = ids.len() as i32 };
            }
            // Like an empty std::vector's data(): NULL when there are none.
            Ok(if ids.is_empty() { std::ptr::null() } else { ids.as_ptr() })
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_pre(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_pre) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_suf(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_suf) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_mid(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_mid) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_pad(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_pad) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_rep(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_rep) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_vocab_fim_sep(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_sep) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_get_text(vocab: *const llama_vocab, token: llama_token) -> *const c_char {
    entry!(std::ptr::null(), { text(vocab, token) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_get_score(vocab: *const llama_vocab, token: llama_token) -> f32 {
    entry!(0.0, { score(vocab, token) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_get_attr(vocab: *const llama_vocab, token: llama_token) -> TokenAttr {
    entry!(TokenAttr(0), { attr(vocab, token) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_is_eog(vocab: *const llama_vocab, token: llama_token) -> bool {
    entry!(false, { is_eog(vocab, token) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_is_control(vocab: *const llama_vocab, token: llama_token) -> bool {
    entry!(false, { is_control(vocab, token) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_bos(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.bos) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_eos(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.eos) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_eot(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.eot) })
}

// Deprecated in llama.h; like llama.cpp it returns the BOS token.
#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_cls(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.bos) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_sep(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.sep) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_nl(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.nl) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_pad(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.pad) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_add_bos_token(vocab: *const llama_vocab) -> bool {
    entry!(false, { flag(vocab, Vocab::add_bos) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_add_eos_token(vocab: *const llama_vocab) -> bool {
    entry!(false, { flag(vocab, Vocab::add_eos) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_pre(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_pre) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_suf(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_suf) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_mid(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_mid) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_pad(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_pad) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_rep(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_rep) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_token_fim_sep(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.fim_sep) })
}

// Deprecated in llama.h; like llama.cpp it returns the BOS token.
#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_vocab_cls(vocab: *const llama_vocab) -> llama_token {
    entry!(TOKEN_NULL, { special_id(vocab, |s| s.bos) })
}

/// A caller's array of `len` items as a slice; NULL is allowed when `len` is 0.
///
/// # Safety
/// A non-NULL `p` must be valid for reads of `len` items for the returned lifetime.
unsafe fn input<'a, T>(p: *const T, len: i32, what: &str) -> Result<&'a [T]> {
    let len = usize::try_from(len).map_err(|_| Error::invalid(format!("{what} length {len} is negative")))?;
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL but its length is {len}")));
    }
    // SAFETY: non-NULL and valid for `len` items by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_tokenize(
    vocab: *const llama_vocab,
    text: *const c_char,
    text_len: i32,
    tokens: *mut llama_token,
    n_tokens_max: i32,
    add_special: bool,
    parse_special: bool,
) -> i32 {
    entry!(i32::MIN, {
        with_vocab(vocab, |v| {
            // SAFETY: `text` holds `text_len` bytes by llama.h's contract.
            let text = unsafe { input(text.cast::<u8>(), text_len, "text") }?;
            let ids = v.tokenize(text, add_special, parse_special)?;
            let n = i32::try_from(ids.len())
                .ok()
                .filter(|&n| n < i32::MAX)
                .ok_or_else(|| Error::invalid(format!("{} tokens exceed the int32_t range", ids.len())))?;
            if n > n_tokens_max || (tokens.is_null() && n > 0) {
                return Ok(-n);
            }
            if n > 0 {
                // SAFETY: `tokens` is non-NULL and holds `n_tokens_max >= n` items by llama.h's contract.
                unsafe { std::ptr::copy_nonoverlapping(ids.as_ptr(), tokens, ids.len()) };
            }
            Ok(n)
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_token_to_piece(
    vocab: *const llama_vocab,
    token: llama_token,
    buf: *mut c_char,
    length: i32,
    lstrip: i32,
    special: bool,
) -> i32 {
    entry!(0, {
        with_vocab(vocab, |v| {
            let piece = v.piece(token, lstrip, special)?;
            // SAFETY: `buf` is NULL or holds `length` bytes by llama.h's contract.
            Ok(unsafe { write_bytes_or_needed(buf, length, piece) })
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_detokenize(
    vocab: *const llama_vocab,
    tokens: *const llama_token,
    n_tokens: i32,
    text: *mut c_char,
    text_len_max: i32,
    remove_special: bool,
    unparse_special: bool,
) -> i32 {
    entry!(i32::MIN, {
        with_vocab(vocab, |v| {
            // llama.cpp treats a negative count as no tokens.
            // SAFETY: `tokens` holds `n_tokens` ids by llama.h's contract.
            let ids = unsafe { input(tokens, n_tokens.max(0), "tokens") }?;
            let out = v.detokenize(ids, remove_special, unparse_special)?;
            let raw_len = i32::try_from(out.raw_len)
                .map_err(|_| Error::invalid(format!("{} bytes of text exceed the int32_t range", out.raw_len)))?;
            // The buffer must hold the text before spaces are cleaned up, as in llama.cpp.
            if raw_len > text_len_max {
                return Ok(-raw_len);
            }
            // SAFETY: `text` is NULL or holds `text_len_max` bytes by llama.h's contract.
            Ok(unsafe { write_bytes_or_needed(text, text_len_max, &out.text) })
        })
    })
}
