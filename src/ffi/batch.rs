//! Batches, decode, encode and the extended batch API.

use super::types::*;
use super::{guard, not_implemented};
use crate::error::Error;
use std::ffi::c_void;

/// A batch over the caller's token array: sequence 0, positions and outputs left to the decoder.
#[no_mangle]
pub extern "C" fn llama_batch_get_one(tokens: *mut llama_token, n_tokens: i32) -> llama_batch {
    llama_batch {
        n_tokens,
        token: tokens,
        ..EMPTY_BATCH
    }
}

const EMPTY_BATCH: llama_batch = llama_batch {
    n_tokens: 0,
    token: std::ptr::null_mut(),
    embd: std::ptr::null_mut(),
    pos: std::ptr::null_mut(),
    n_seq_id: std::ptr::null_mut(),
    seq_id: std::ptr::null_mut(),
    logits: std::ptr::null_mut(),
};

/// `n` zeroed elements of `T` from the C heap (so C code may also free them), or NULL.
fn c_alloc<T>(n: usize) -> *mut T {
    // SAFETY: calloc checks `n * size` for overflow itself and returns NULL on failure.
    unsafe { libc::calloc(n.max(1), std::mem::size_of::<T>()).cast() }
}

/// Room for `n_tokens` tokens (or embeddings of `embd` floats when `embd` > 0), each with up to
/// `n_seq_max` sequence ids; zero-initialised. `seq_id` has one more entry, NULL, marking its end.
#[no_mangle]
pub extern "C" fn llama_batch_init(n_tokens: i32, embd: i32, n_seq_max: i32) -> llama_batch {
    guard("llama_batch_init", EMPTY_BATCH, || {
        let (Ok(n), Ok(e), Ok(s)) = (
            usize::try_from(n_tokens),
            usize::try_from(embd),
            usize::try_from(n_seq_max),
        ) else {
            return Err(Error::invalid(format!(
                "n_tokens {n_tokens}, embd {embd} and n_seq_max {n_seq_max} must not be negative"
            )));
        };
        if n == 0 || s == 0 {
            return Err(Error::invalid("n_tokens and n_seq_max must be positive"));
        }
        let mut b = EMPTY_BATCH;
        if e > 0 {
            b.embd = c_alloc(
                n.checked_mul(e)
                    .ok_or_else(|| Error::invalid("n_tokens * embd overflows"))?,
            );
        } else {
            b.token = c_alloc(n);
        }
        b.pos = c_alloc(n);
        b.n_seq_id = c_alloc(n);
        b.seq_id = c_alloc(n + 1);
        b.logits = c_alloc(n);
        let data = if e > 0 { b.embd.cast::<c_void>() } else { b.token.cast() };
        let mut ok = [data, b.pos.cast(), b.n_seq_id.cast(), b.seq_id.cast(), b.logits.cast()]
            .iter()
            .all(|p| !p.is_null());
        if ok {
            for i in 0..n {
                let ids: *mut llama_seq_id = c_alloc(s);
                // SAFETY: `seq_id` has n + 1 zeroed slots; a NULL entry ends the list for free.
                unsafe { *b.seq_id.add(i) = ids };
                if ids.is_null() {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            // SAFETY: every pointer is NULL or from c_alloc; seq_id entries end at the first NULL.
            unsafe { free_batch(b) };
            return Err(Error::invalid("out of memory allocating the batch"));
        }
        Ok(b)
    })
}

/// # Safety
/// Every pointer is NULL or from `c_alloc`; `seq_id`, if set, ends with a NULL entry.
unsafe fn free_batch(b: llama_batch) {
    // SAFETY: per the contract above, every freed pointer came from calloc.
    unsafe {
        if !b.seq_id.is_null() {
            let mut i = 0;
            while !(*b.seq_id.add(i)).is_null() {
                libc::free((*b.seq_id.add(i)).cast());
                i += 1;
            }
        }
        for p in [
            b.token.cast::<c_void>(),
            b.embd.cast(),
            b.pos.cast(),
            b.n_seq_id.cast(),
            b.seq_id.cast(),
            b.logits.cast(),
        ] {
            libc::free(p);
        }
    }
}

/// Free a batch from `llama_batch_init`.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_free(batch: llama_batch) {
    // SAFETY: the caller passes a batch made by llama_batch_init (whose seq_id ends with NULL).
    guard("llama_batch_free", (), || {
        unsafe { free_batch(batch) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_encode(ctx: *mut llama_context, batch: llama_batch) -> i32 {
    let _ = (ctx, batch);
    not_implemented("llama_encode", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_decode(ctx: *mut llama_context, batch: llama_batch) -> i32 {
    let _ = (ctx, batch);
    not_implemented("llama_decode", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_init(ctx: *mut llama_context) -> *mut llama_batch_ext {
    let _ = ctx;
    not_implemented("llama_batch_ext_init", std::ptr::null_mut())
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_free(batch: *mut llama_batch_ext) {
    let _ = batch;
    not_implemented("llama_batch_ext_free", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_clear(batch: *mut llama_batch_ext) {
    let _ = batch;
    not_implemented("llama_batch_ext_clear", ())
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add(batch: *mut llama_batch_ext, seq_id: llama_seq_id) -> i32 {
    let _ = (batch, seq_id);
    not_implemented("llama_batch_ext_add", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_token(
    batch: *mut llama_batch_ext,
    seq_id: llama_seq_id,
    id: llama_token,
) -> i32 {
    let _ = (batch, seq_id, id);
    not_implemented("llama_batch_ext_add_token", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_embd(
    batch: *mut llama_batch_ext,
    seq_id: llama_seq_id,
    embd: llama_embd,
) -> i32 {
    let _ = (batch, seq_id, embd);
    not_implemented("llama_batch_ext_add_embd", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_seq(batch: *mut llama_batch_ext, idx: i32, seq_id: llama_seq_id) -> bool {
    let _ = (batch, idx, seq_id);
    not_implemented("llama_batch_ext_add_seq", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_embd_token(
    batch: *mut llama_batch_ext,
    idx: i32,
    embd: llama_embd,
) -> bool {
    let _ = (batch, idx, embd);
    not_implemented("llama_batch_ext_set_embd_token", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_output_embd(batch: *mut llama_batch_ext, idx: i32, value: bool) -> bool {
    let _ = (batch, idx, value);
    not_implemented("llama_batch_ext_set_output_embd", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_output_logits(batch: *mut llama_batch_ext, idx: i32, value: bool) -> bool {
    let _ = (batch, idx, value);
    not_implemented("llama_batch_ext_set_output_logits", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_pos(batch: *mut llama_batch_ext, idx: i32, pos: *const llama_pos) -> bool {
    let _ = (batch, idx, pos);
    not_implemented("llama_batch_ext_set_pos", false)
}

#[no_mangle]
pub unsafe extern "C" fn llama_process(
    ctx: *mut llama_context,
    r#type: ProcessType,
    batch: *mut llama_batch_ext,
) -> i32 {
    let _ = (ctx, r#type, batch);
    not_implemented("llama_process", -1)
}
