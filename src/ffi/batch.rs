//! Batches, decode, encode and the extended batch API.

use super::entry::entry;
use super::handle::{self, batch_ext, batch_ext_free, batch_ext_into_raw, ctx_mut};
use super::types::*;
use crate::context::{AddError, BatchExt, BatchInput, DecodeStatus};
use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ffi::c_void;

/// A batch over the caller's token array: sequence 0, positions and outputs left to the decoder.
#[no_mangle]
pub extern "C" fn llama_batch_get_one(tokens: *mut llama_token, n_tokens: i32) -> llama_batch {
    entry!(EMPTY_BATCH, {
        Ok(llama_batch {
            n_tokens,
            token: tokens,
            ..EMPTY_BATCH
        })
    })
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

/// `n` zeroed elements of `T` from the C heap (so C code may also free them), or NULL; also NULL,
/// without asking the allocator, for more bytes than any allocation can have (which allocators
/// built to catch mistakes, AddressSanitizer's, answer by stopping the process).
fn c_alloc<T>(n: usize) -> *mut T {
    let size = std::mem::size_of::<T>();
    if n.checked_mul(size).is_none_or(|bytes| bytes > isize::MAX as usize) {
        return std::ptr::null_mut();
    }
    // SAFETY: a size that fits an allocation; calloc returns NULL on failure.
    unsafe { libc::calloc(n.max(1), size).cast() }
}

/// What `llama_batch_init` allocated, by the address of the batch's `seq_id` array: the arrays and
/// each token's sequence id list. `llama_batch_free` frees exactly these, once; a batch it does not
/// know (from `llama_batch_get_one`, freed already, or never a batch) is refused with a log line.
struct Allocation {
    arrays: [usize; 6],
    seq_ids: Vec<usize>,
}

static BATCHES: Mutex<BTreeMap<usize, Allocation>> = Mutex::new(BTreeMap::new());

impl Allocation {
    fn of(b: &llama_batch, seq_ids: Vec<usize>) -> Allocation {
        let arrays = [
            b.token as usize,
            b.embd as usize,
            b.pos as usize,
            b.n_seq_id as usize,
            b.seq_id as usize,
            b.logits as usize,
        ];
        Allocation { arrays, seq_ids }
    }

    /// # Safety
    /// Every address is 0 or from `c_alloc`, not freed yet.
    unsafe fn release(self) {
        for p in self.seq_ids.into_iter().chain(self.arrays) {
            // SAFETY: per the contract, a calloc'd pointer or NULL.
            unsafe { libc::free(p as *mut c_void) };
        }
    }
}

/// Room for `n_tokens` tokens (or embeddings of `embd` floats when `embd` > 0), each with up to
/// `n_seq_max` sequence ids; zero-initialised. `seq_id` has one more entry, NULL, marking its end.
#[no_mangle]
pub extern "C" fn llama_batch_init(n_tokens: i32, embd: i32, n_seq_max: i32) -> llama_batch {
    entry!(EMPTY_BATCH, {
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
        let mut seq_ids = Vec::new();
        if ok {
            for i in 0..n {
                let ids: *mut llama_seq_id = c_alloc(s);
                if ids.is_null() {
                    ok = false;
                    break;
                }
                // SAFETY: `seq_id` has n + 1 zeroed slots; the last stays NULL, as llama.cpp's.
                unsafe { *b.seq_id.add(i) = ids };
                seq_ids.push(ids as usize);
            }
        }
        let allocation = Allocation::of(&b, seq_ids);
        if !ok {
            // SAFETY: every address is 0 or from c_alloc, freed once here.
            unsafe { allocation.release() };
            return Err(Error::invalid("out of memory allocating the batch"));
        }
        BATCHES.lock().insert(b.seq_id as usize, allocation);
        Ok(b)
    })
}

/// Free a batch from `llama_batch_init`: what it allocated, once.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_free(batch: llama_batch) {
    entry!((), {
        if batch.seq_id.is_null() && batch.token.is_null() && batch.embd.is_null() {
            // Nothing was allocated (a failed llama_batch_init): like free(NULL).
            return Ok(());
        }
        let allocation = BATCHES.lock().remove(&(batch.seq_id as usize)).ok_or_else(|| {
            Error::invalid(
                "not a batch from llama_batch_init, or freed already (a llama_batch_get_one batch \
                 owns nothing): nothing freed",
            )
        })?;
        // SAFETY: the allocation was recorded by llama_batch_init and is removed from the record
        // here, so it is freed once.
        unsafe { allocation.release() };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_encode(ctx: *mut llama_context, batch: llama_batch) -> i32 {
    entry!(-3, {
        let r = ctx_mut(ctx).and_then(|mut c| {
            // SAFETY: forwarded contract on the batch arrays.
            let input = unsafe { batch_input(&batch, c.input_layout(true)) }?;
            c.encode(&input)
        });
        Ok(decode_code("llama_encode", r))
    })
}

/// llama.h's return code for a decode outcome; the one place where decode errors become numbers.
fn decode_code(name: &'static str, r: crate::Result<DecodeStatus>) -> i32 {
    match r {
        Ok(DecodeStatus::Ok) => 0,
        Ok(DecodeStatus::NoSlot) => 1,
        Ok(DecodeStatus::Aborted) => 2,
        Err(e) => {
            super::entry::report(name, &e);
            match e {
                Error::InvalidArgument(_) => -1,
                // A failed allocation or computation is fatal (< -1).
                _ => -3,
            }
        }
    }
}

/// The caller's `llama_batch` as slices, after checking every pointer and count it relies on;
/// embedding rows are `n_embd` floats, and without token ids each takes `n_pos` positions.
///
/// # Safety
/// The arrays of `b` must hold `b.n_tokens` entries (and each `seq_id[i]` `n_seq_id[i]` entries,
/// `embd` `n_tokens * n_embd`, `pos` of embeddings `n_tokens * n_pos`), as llama.h requires, and
/// stay untouched during the call.
unsafe fn batch_input<'a>(b: &'a llama_batch, (n_embd, n_pos): (usize, usize)) -> crate::Result<BatchInput<'a>> {
    let n = usize::try_from(b.n_tokens)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Error::invalid(format!("n_tokens = {} must be positive", b.n_tokens)))?;
    if b.token.is_null() && b.embd.is_null() {
        return Err(Error::invalid("the batch has neither token ids nor embeddings"));
    }
    let n_embd_floats = n
        .checked_mul(n_embd)
        .ok_or_else(|| Error::invalid("n_tokens * n_embd overflows"))?;
    // SAFETY: embd holds n_tokens rows of the model's input width (llama.h's contract).
    let embd = unsafe { (!b.embd.is_null()).then(|| std::slice::from_raw_parts(b.embd.cast_const(), n_embd_floats)) };
    // SAFETY: the caller's arrays hold n_tokens entries (llama.h's contract), checked non-NULL.
    let slice = |p: *const i32| unsafe { (!p.is_null()).then(|| std::slice::from_raw_parts(p, n)) };
    let tokens = slice(b.token).unwrap_or_default();
    let n_pos = if b.token.is_null() { n * n_pos } else { n };
    // SAFETY: pos holds a position per token, or for embeddings n_pos sections of them.
    let pos = unsafe { (!b.pos.is_null()).then(|| std::slice::from_raw_parts(b.pos.cast_const(), n_pos)) };
    let seq_ids = match (b.n_seq_id.is_null(), b.seq_id.is_null()) {
        (true, true) => None,
        (false, false) => {
            let counts = slice(b.n_seq_id).unwrap_or_default();
            let mut v = Vec::with_capacity(n);
            for (i, &c) in counts.iter().enumerate() {
                // SAFETY: seq_id has n_tokens entries.
                let row = unsafe { *b.seq_id.add(i) };
                let count = usize::try_from(c)
                    .ok()
                    .filter(|&c| c > 0 && c <= crate::kv::MAX_SEQ)
                    .ok_or_else(|| Error::invalid(format!("n_seq_id[{i}] = {c} is out of range")))?;
                if row.is_null() {
                    return Err(Error::invalid(format!("seq_id[{i}] is NULL")));
                }
                // SAFETY: seq_id[i] holds n_seq_id[i] entries.
                v.push(unsafe { std::slice::from_raw_parts(row.cast_const(), count) });
            }
            Some(v)
        }
        _ => return Err(Error::invalid("n_seq_id and seq_id must both be set or both be NULL")),
    };
    // SAFETY: as above; int8 flags.
    let outputs = unsafe { (!b.logits.is_null()).then(|| std::slice::from_raw_parts(b.logits.cast_const(), n)) };
    Ok(BatchInput {
        tokens,
        embd,
        pos,
        seq_ids,
        outputs,
    })
}

/// Returns 0 on success, 1 when the KV cache has no room (nothing changed), 2 when aborted
/// (finished ubatches stay), -1 for an invalid batch, and < -1 for a fatal error.
#[no_mangle]
pub unsafe extern "C" fn llama_decode(ctx: *mut llama_context, batch: llama_batch) -> i32 {
    entry!(-3, {
        let r = ctx_mut(ctx).and_then(|mut c| {
            // SAFETY: forwarded contract on the batch arrays.
            let input = unsafe { batch_input(&batch, c.input_layout(false)) }?;
            c.decode(&input)
        });
        Ok(decode_code("llama_decode", r))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_init(ctx: *mut llama_context) -> *mut llama_batch_ext {
    entry!(std::ptr::null_mut(), {
        let c = handle::ctx_mut(ctx)?;
        let (n_embd, n_pos) = c.input_layout(false);
        let b = BatchExt::new(
            c.params.n_batch as usize,
            c.params.n_seq_max as usize,
            c.n_vocab(),
            n_embd,
            n_pos,
        );
        Ok(batch_ext_into_raw(b))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_free(batch: *mut llama_batch_ext) {
    entry!((), { batch_ext_free(batch) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_clear(batch: *mut llama_batch_ext) {
    entry!((), {
        batch_ext(batch)?.clear();
        Ok(())
    })
}

/// Add an entry to the locked batch `b`; its index, or the (logged) `AddError` code.
fn add_token(name: &'static str, b: &mut BatchExt, seq_id: i32, id: Option<i32>) -> i32 {
    match b.add(seq_id, id) {
        Ok(i) => i as i32,
        Err(e) => {
            let why = match e {
                AddError::Full => format!("the batch is full ({} tokens)", b.len()),
                AddError::InvalidToken => format!("invalid token id {}", id.unwrap_or(-1)),
                AddError::InvalidSeq => format!("invalid sequence id {seq_id}"),
            };
            crate::log_error!("{name}: {why}");
            e as i32
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add(batch: *mut llama_batch_ext, seq_id: llama_seq_id) -> i32 {
    entry!(-1, {
        Ok(add_token("llama_batch_ext_add", &mut *batch_ext(batch)?, seq_id, None))
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_token(
    batch: *mut llama_batch_ext,
    seq_id: llama_seq_id,
    id: llama_token,
) -> i32 {
    entry!(-1, {
        Ok(add_token(
            "llama_batch_ext_add_token",
            &mut *batch_ext(batch)?,
            seq_id,
            Some(id),
        ))
    })
}

/// The row `embd` describes, read after checking it is there.
///
/// # Safety
/// `embd.data` must be NULL or hold `n_rows * n_embd` floats.
unsafe fn embd_row(embd: &llama_embd) -> Result<&[f32]> {
    if embd.data.is_null() {
        return Err(Error::invalid("the embedding's data is NULL"));
    }
    let n = embd
        .n_rows
        .checked_mul(embd.n_embd)
        .ok_or_else(|| Error::invalid("n_rows * n_embd overflows"))?;
    // SAFETY: per the contract, n_rows * n_embd readable floats.
    Ok(unsafe { std::slice::from_raw_parts(embd.data, n) })
}

/// Give entry `idx` of `batch` the embedding `embd`; false (logged) when refused.
///
/// # Safety
/// As `embd_row`.
unsafe fn set_embd(name: &str, batch: &mut BatchExt, idx: i32, embd: &llama_embd) -> bool {
    // SAFETY: forwarded contract.
    let set = unsafe { embd_row(embd) }
        .map_err(|e| e.to_string())
        .and_then(|row| batch.set_embd(idx, row));
    if let Err(why) = &set {
        crate::log_error!("{name}: {why}");
    }
    set.is_ok()
}

/// Add an entry whose input is the embedding row `embd`; its index, or -1 (full), -2 (a bad
/// embedding), -3 (a bad sequence id).
///
/// # Safety
/// `embd.data` must be NULL or hold `n_rows * n_embd` floats.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_embd(
    batch: *mut llama_batch_ext,
    seq_id: llama_seq_id,
    embd: llama_embd,
) -> i32 {
    entry!(-2, {
        // One lock over the add and its undo: a refused row removes this call's entry only.
        let mut b = batch_ext(batch)?;
        let idx = add_token("llama_batch_ext_add_embd", &mut b, seq_id, None);
        if idx < 0 {
            return Ok(idx);
        }
        // SAFETY: forwarded contract.
        if unsafe { set_embd("llama_batch_ext_add_embd", &mut b, idx, &embd) } {
            Ok(idx)
        } else {
            // llama.cpp keeps the entry; a failed add leaves the batch as it was here.
            b.remove_last();
            Ok(AddError::InvalidToken as i32)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_add_seq(batch: *mut llama_batch_ext, idx: i32, seq_id: llama_seq_id) -> bool {
    entry!(false, { Ok(batch_ext(batch)?.add_seq(idx, seq_id)) })
}

/// Give entry `idx` an embedding row besides its token id (the id still decides what a
/// decoder reads, as in llama.cpp); false (logged) for a bad index, size or a second row.
///
/// # Safety
/// `embd.data` must be NULL or hold `n_rows * n_embd` floats.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_embd_token(
    batch: *mut llama_batch_ext,
    idx: i32,
    embd: llama_embd,
) -> bool {
    entry!(false, {
        let mut b = batch_ext(batch)?;
        // SAFETY: forwarded contract.
        Ok(unsafe { set_embd("llama_batch_ext_set_embd_token", &mut b, idx, &embd) })
    })
}

/// Carried-over hidden state (MTP, deepstack) is for architectures this library does not run;
/// llama.cpp 0.3.36 accepts none either: false, with a log line.
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_embd_state(
    batch: *mut llama_batch_ext,
    idx: i32,
    embd: llama_embd,
) -> bool {
    let _ = (idx, embd);
    entry!(false, {
        drop(batch_ext(batch)?);
        crate::log_warn!(
            "llama_batch_ext_set_embd_state: no architecture takes a state embedding (llama.cpp's returns false too)"
        );
        Ok(false)
    })
}

/// Output embeddings and logits are the same flag (llama.h: "for now, this is equivalent").
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_output_embd(batch: *mut llama_batch_ext, idx: i32, value: bool) -> bool {
    entry!(false, {
        // SAFETY: forwarded contract.
        Ok(unsafe { llama_batch_ext_set_output_logits(batch, idx, value) })
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_output_logits(batch: *mut llama_batch_ext, idx: i32, value: bool) -> bool {
    entry!(false, { Ok(batch_ext(batch)?.set_output(idx, value)) })
}

/// # Safety
/// `pos` must be NULL or point to the entry's positions: one for a token id; for an embedding
/// one per position section of the model (four with M-RoPE, else one).
#[no_mangle]
pub unsafe extern "C" fn llama_batch_ext_set_pos(batch: *mut llama_batch_ext, idx: i32, pos: *const llama_pos) -> bool {
    entry!(false, {
        let mut b = batch_ext(batch)?;
        match b.pos_count(idx) {
            Some(n) if !pos.is_null() => {
                // SAFETY: per the contract, n readable positions.
                let p = unsafe { std::slice::from_raw_parts(pos, n) };
                Ok(b.set_pos(idx, p))
            }
            _ => Ok(false),
        }
    })
}

/// Decode or encode an extended batch; return codes as llama_decode's.
#[no_mangle]
pub unsafe extern "C" fn llama_process(
    ctx: *mut llama_context,
    r#type: ProcessType,
    batch: *mut llama_batch_ext,
) -> i32 {
    entry!(-3, {
        let encode = match r#type.0 {
            t if t == llama_process_type::LLAMA_PROCESS_TYPE_ENCODE as std::ffi::c_int => true,
            t if t == llama_process_type::LLAMA_PROCESS_TYPE_DECODE as std::ffi::c_int => false,
            t => {
                crate::log_error!("llama_process: unknown process type {t}");
                return Ok(-1);
            }
        };
        let r = ctx_mut(ctx).and_then(|mut c| {
            batch_ext(batch)?.with_input(|input| if encode { c.encode(input) } else { c.decode(input) })
        });
        Ok(decode_code("llama_process", r))
    })
}
