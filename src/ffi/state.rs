//! State save and restore: llama.cpp's state data and session files (`kv::Layout` describes the
//! layout). Sizes and reads report failure as 0 (false for the file calls) with a log line.

use super::entry::entry;
use super::handle::{ctx_mut, Ctx};
use super::strings::c_str;
use super::types::*;
use crate::error::{Error, Result};
use crate::kv::{SliceSource, Source};
use std::ffi::c_char;
use std::io::{Read, Write};

const SESSION_MAGIC: u32 = 0x6767_736e; // 'ggsn'
const SESSION_VERSION: u32 = 10;
const SEQ_MAGIC: u32 = 0x6767_7371; // 'ggsq'
const SEQ_VERSION: u32 = 3;
/// Sequence state in memory (not in files) starts with this and the source sequence id.
const SEQ_DATA_MAGIC: u32 = 0xaf14_3cd8;

/// A sequence's state as `llama_state_seq_get_data` gives it: the in-memory head, then the cells.
fn seq_data(c: &mut Ctx, seq: llama_seq_id, flags: llama_state_seq_flags) -> Result<Vec<u8>> {
    let body = c.seq_state_save(seq, swa_only(flags))?;
    let mut out = Vec::with_capacity(8 + body.len());
    out.extend_from_slice(&SEQ_DATA_MAGIC.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Caller memory of unknown length (llama.h's deprecated calls without a size): read as far as the
/// data says it goes, as llama.cpp does, but every count in it is checked against what this context
/// could have written before the bytes it announces are taken (`kv::state`), so corrupt data is
/// refused instead of read past.
struct UnboundedSource {
    p: *const u8,
    at: usize,
}

impl Source for UnboundedSource {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        // SAFETY: the caller of the deprecated function promises state data at `p`; it is read
        // only as far as its own structure says.
        let s = unsafe { std::slice::from_raw_parts(self.p.add(self.at), n) };
        self.at += n;
        Ok(s)
    }

    fn consumed(&self) -> usize {
        self.at
    }
}

/// # Safety
/// `src` is NULL or valid for `size` bytes (or, with `size == usize::MAX`, holds state data).
unsafe fn source<'a>(src: *const u8, size: usize) -> Result<Box<dyn Source + 'a>> {
    if src.is_null() {
        return Err(Error::invalid("src is NULL"));
    }
    if size == usize::MAX {
        return Ok(Box::new(UnboundedSource { p: src, at: 0 }));
    }
    // SAFETY: valid for `size` bytes by the contract.
    Ok(Box::new(SliceSource::new(unsafe {
        std::slice::from_raw_parts(src, size)
    })))
}

/// Copy `data` to `dst` if it fits in `size` bytes; its length, or an error.
///
/// # Safety
/// `dst` is NULL or valid for `size` bytes.
unsafe fn copy_out(data: &[u8], dst: *mut u8, size: usize) -> Result<usize> {
    if dst.is_null() {
        return Err(Error::invalid("dst is NULL"));
    }
    if data.len() > size {
        return Err(Error::invalid(format!(
            "the state takes {} bytes, the buffer holds {size}",
            data.len()
        )));
    }
    // SAFETY: `dst` is valid for `size >= data.len()` bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
    Ok(data.len())
}

pub(crate) fn swa_only(flags: llama_state_seq_flags) -> bool {
    flags & LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY != 0
}

fn state_size(ctx: *mut llama_context) -> Result<usize> {
    Ok(ctx_mut(ctx)?.state_save()?.len())
}

/// # Safety
/// As [`state_size`]; `dst` is valid for `size` bytes.
unsafe fn state_get(ctx: *mut llama_context, dst: *mut u8, size: usize) -> Result<usize> {
    let data = ctx_mut(ctx)?.state_save()?;
    // SAFETY: forwarded contract.
    unsafe { copy_out(&data, dst, size) }
}

/// # Safety
/// As [`state_size`]; `src` as [`source`].
unsafe fn state_set(ctx: *mut llama_context, src: *const u8, size: usize) -> Result<usize> {
    let mut c = ctx_mut(ctx)?;
    // SAFETY: forwarded contract.
    let mut src = unsafe { source(src, size) }?;
    c.state_load(src.as_mut())?;
    Ok(src.consumed())
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_get_size(ctx: *mut llama_context) -> usize {
    entry!(0, { state_size(ctx) })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_get_state_size(ctx: *mut llama_context) -> usize {
    entry!(0, { state_size(ctx) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_get_data(ctx: *mut llama_context, dst: *mut u8, size: usize) -> usize {
    // SAFETY: llama.h's contract on the arguments.
    entry!(0, { unsafe { state_get(ctx, dst, size) } })
}

/// Deprecated: `dst` must hold `llama_state_get_size` bytes.
#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_copy_state_data(ctx: *mut llama_context, dst: *mut u8) -> usize {
    // SAFETY: llama.h's contract: `dst` holds the whole state.
    entry!(0, { unsafe { state_get(ctx, dst, usize::MAX) } })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_set_data(ctx: *mut llama_context, src: *const u8, size: usize) -> usize {
    // SAFETY: llama.h's contract on the arguments.
    entry!(0, { unsafe { state_set(ctx, src, size) } })
}

/// Deprecated: reads as much as the state data at `src` says it holds.
#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_set_state_data(ctx: *mut llama_context, src: *const u8) -> usize {
    // SAFETY: llama.h's contract: `src` holds state data.
    entry!(0, { unsafe { state_set(ctx, src, usize::MAX) } })
}

/// The tokens argument of the save calls.
///
/// # Safety
/// `tokens` is NULL (only with `n == 0`) or valid for `n` tokens.
unsafe fn tokens_in<'a>(tokens: *const llama_token, n: usize) -> Result<&'a [llama_token]> {
    if n == 0 {
        return Ok(&[]);
    }
    if tokens.is_null() {
        return Err(Error::invalid(format!("tokens is NULL with n_token_count = {n}")));
    }
    // SAFETY: valid for `n` tokens by the contract.
    Ok(unsafe { std::slice::from_raw_parts(tokens, n) })
}

/// magic, version, token count and tokens: the head of both kinds of file.
fn file_head(magic: u32, version: u32, tokens: &[llama_token]) -> Result<Vec<u8>> {
    let n = u32::try_from(tokens.len()).map_err(|_| Error::invalid("too many tokens for a session file"))?;
    let mut out = Vec::with_capacity(12 + 4 * tokens.len());
    for v in [magic, version, n] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    tokens.iter().for_each(|t| out.extend_from_slice(&t.to_le_bytes()));
    Ok(out)
}

fn write_file(path: &[u8], head: &[u8], body: &[u8]) -> Result<usize> {
    let path = String::from_utf8_lossy(path).into_owned();
    let mut f = std::fs::File::create(&path).map_err(|e| Error::io("cannot create", &path, e))?;
    f.write_all(head)
        .and_then(|_| f.write_all(body))
        .map_err(|e| Error::io("cannot write", &path, e))?;
    Ok(head.len() + body.len())
}

/// A session file's head checked against `magic`/`version`, its tokens, and the rest of its bytes.
fn read_file(path: &[u8], magic: u32, version: u32) -> Result<(Vec<llama_token>, Vec<u8>)> {
    let path = String::from_utf8_lossy(path).into_owned();
    let mut bytes = Vec::new();
    std::fs::File::open(&path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::io("cannot read", &path, e))?;
    let mut src = SliceSource::new(&bytes);
    let mut word = || -> Result<u32> {
        let b = src.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (m, v) = (word()?, word()?);
    if m != magic || v != version {
        return Err(Error::invalid(format!(
            "'{path}' is not a state file of this kind: magic {m:#010x} version {v}, expected {magic:#010x} version {version}"
        )));
    }
    let n = word()? as usize;
    let raw = src
        .take(n.saturating_mul(4))
        .map_err(|_| Error::invalid(format!("'{path}' claims {n} tokens but is shorter")))?;
    let tokens = raw
        .chunks_exact(4)
        .map(|c| llama_token::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let rest = bytes[src.consumed()..].to_vec();
    Ok((tokens, rest))
}

/// The file's tokens must fit the caller's array and both out-pointers must be usable; checked
/// before the state is touched.
fn check_tokens_out(tokens: &[llama_token], out: *mut llama_token, capacity: usize, count: *mut usize) -> Result<()> {
    if tokens.len() > capacity {
        return Err(Error::invalid(format!(
            "the file holds {} tokens, more than n_token_capacity = {capacity}",
            tokens.len()
        )));
    }
    if count.is_null() || (out.is_null() && !tokens.is_empty()) {
        return Err(Error::invalid("tokens_out or n_token_count_out is NULL"));
    }
    Ok(())
}

/// Copy `tokens` out as llama.h's load calls do, after [`check_tokens_out`].
///
/// # Safety
/// `out` is valid for `capacity` tokens; `count` is valid for a write.
unsafe fn tokens_out(tokens: &[llama_token], out: *mut llama_token, count: *mut usize) {
    // SAFETY: checked by `check_tokens_out`; the buffers are valid by the contract.
    unsafe {
        if !tokens.is_empty() {
            std::ptr::copy_nonoverlapping(tokens.as_ptr(), out, tokens.len());
        }
        *count = tokens.len();
    }
}

/// # Safety
/// llama.h's contract for `llama_state_save_file`.
unsafe fn save_file(
    ctx: *mut llama_context,
    path: *const c_char,
    tokens: *const llama_token,
    n: usize,
) -> Result<bool> {
    // SAFETY: forwarded contract.
    let (mut c, path, tokens) = unsafe { (ctx_mut(ctx)?, c_str(path, "path_session")?, tokens_in(tokens, n)?) };
    let body = c.state_save()?;
    write_file(path, &file_head(SESSION_MAGIC, SESSION_VERSION, tokens)?, &body)?;
    Ok(true)
}

/// # Safety
/// llama.h's contract for `llama_state_load_file`.
unsafe fn load_file(
    ctx: *mut llama_context,
    path: *const c_char,
    out: *mut llama_token,
    capacity: usize,
    count: *mut usize,
) -> Result<bool> {
    // SAFETY: forwarded contract.
    let (mut c, path) = unsafe { (ctx_mut(ctx)?, c_str(path, "path_session")?) };
    let (tokens, rest) = read_file(path, SESSION_MAGIC, SESSION_VERSION)?;
    check_tokens_out(&tokens, out, capacity, count)?;
    let mut src = SliceSource::new(&rest);
    load_exactly(&mut c, &mut src, rest.len())?;
    // SAFETY: forwarded contract.
    unsafe { tokens_out(&tokens, out, count) };
    Ok(true)
}

/// Restore a whole state that must use all `len` bytes of `src`.
fn load_exactly(c: &mut Ctx, src: &mut SliceSource, len: usize) -> Result<()> {
    c.state_load(src)?;
    if src.consumed() != len {
        return Err(Error::invalid(format!(
            "the state data is {len} bytes but only {} were state",
            src.consumed()
        )));
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_load_file(
    ctx: *mut llama_context,
    path_session: *const c_char,
    tokens_out: *mut llama_token,
    n_token_capacity: usize,
    n_token_count_out: *mut usize,
) -> bool {
    // SAFETY: llama.h's contract on the arguments.
    entry!(false, {
        unsafe { load_file(ctx, path_session, tokens_out, n_token_capacity, n_token_count_out) }
    })
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
    // SAFETY: llama.h's contract on the arguments.
    entry!(false, {
        unsafe { load_file(ctx, path_session, tokens_out, n_token_capacity, n_token_count_out) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_save_file(
    ctx: *mut llama_context,
    path_session: *const c_char,
    tokens: *const llama_token,
    n_token_count: usize,
) -> bool {
    // SAFETY: llama.h's contract on the arguments.
    entry!(false, {
        unsafe { save_file(ctx, path_session, tokens, n_token_count) }
    })
}

#[deprecated]
#[no_mangle]
pub unsafe extern "C" fn llama_save_session_file(
    ctx: *mut llama_context,
    path_session: *const c_char,
    tokens: *const llama_token,
    n_token_count: usize,
) -> bool {
    // SAFETY: llama.h's contract on the arguments.
    entry!(false, {
        unsafe { save_file(ctx, path_session, tokens, n_token_count) }
    })
}

fn seq_size(ctx: *mut llama_context, seq: llama_seq_id, flags: llama_state_seq_flags) -> Result<usize> {
    Ok(seq_data(&mut *ctx_mut(ctx)?, seq, flags)?.len())
}

/// # Safety
/// As [`seq_size`]; `dst` is valid for `size` bytes.
unsafe fn seq_get(
    ctx: *mut llama_context,
    dst: *mut u8,
    size: usize,
    seq: llama_seq_id,
    flags: llama_state_seq_flags,
) -> Result<usize> {
    let data = seq_data(&mut *ctx_mut(ctx)?, seq, flags)?;
    // SAFETY: forwarded contract.
    unsafe { copy_out(&data, dst, size) }
}

/// # Safety
/// As [`seq_size`]; `src` is valid for `size` bytes.
unsafe fn seq_set(
    ctx: *mut llama_context,
    src: *const u8,
    size: usize,
    dest: llama_seq_id,
    flags: llama_state_seq_flags,
) -> Result<usize> {
    let mut c = ctx_mut(ctx)?;
    // SAFETY: forwarded contract.
    let mut src = unsafe { source(src, size) }?;
    let head = src.take(8)?;
    if head[..4] != SEQ_DATA_MAGIC.to_le_bytes() {
        return Err(Error::invalid("not sequence state data (wrong magic)"));
    }
    c.seq_state_load(dest, swa_only(flags), src.as_mut())?;
    Ok(src.consumed())
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_size(ctx: *mut llama_context, seq_id: llama_seq_id) -> usize {
    entry!(0, { seq_size(ctx, seq_id, LLAMA_STATE_SEQ_FLAGS_NONE) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_data(
    ctx: *mut llama_context,
    dst: *mut u8,
    size: usize,
    seq_id: llama_seq_id,
) -> usize {
    // SAFETY: llama.h's contract on the arguments.
    entry!(0, {
        unsafe { seq_get(ctx, dst, size, seq_id, LLAMA_STATE_SEQ_FLAGS_NONE) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_set_data(
    ctx: *mut llama_context,
    src: *const u8,
    size: usize,
    dest_seq_id: llama_seq_id,
) -> usize {
    // SAFETY: llama.h's contract on the arguments.
    entry!(0, {
        unsafe { seq_set(ctx, src, size, dest_seq_id, LLAMA_STATE_SEQ_FLAGS_NONE) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_save_file(
    ctx: *mut llama_context,
    filepath: *const c_char,
    seq_id: llama_seq_id,
    tokens: *const llama_token,
    n_token_count: usize,
) -> usize {
    entry!(0, {
        // SAFETY: llama.h's contract on the arguments.
        let (mut c, path, tokens) = unsafe {
            (
                ctx_mut(ctx)?,
                c_str(filepath, "filepath")?,
                tokens_in(tokens, n_token_count)?,
            )
        };
        let body = c.seq_state_save(seq_id, false)?;
        write_file(path, &file_head(SEQ_MAGIC, SEQ_VERSION, tokens)?, &body)
    })
}

/// Restores sequence `dest_seq_id` from a file and returns the file's size. With `tokens_out`
/// NULL it only reads the token count (into `n_token_count_out`) and returns the size of the head.
#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_load_file(
    ctx: *mut llama_context,
    filepath: *const c_char,
    dest_seq_id: llama_seq_id,
    tokens_out: *mut llama_token,
    n_token_capacity: usize,
    n_token_count_out: *mut usize,
) -> usize {
    entry!(0, {
        // SAFETY: llama.h's contract on the arguments.
        let (mut c, path) = unsafe { (ctx_mut(ctx)?, c_str(filepath, "filepath")?) };
        let (tokens, rest) = read_file(path, SEQ_MAGIC, SEQ_VERSION)?;
        let head = 12 + 4 * tokens.len();
        if tokens_out.is_null() {
            if n_token_count_out.is_null() {
                return Err(Error::invalid("n_token_count_out is NULL"));
            }
            // SAFETY: non-NULL and writable by the contract.
            unsafe { *n_token_count_out = tokens.len() };
            return Ok(head);
        }
        check_tokens_out(&tokens, tokens_out, n_token_capacity, n_token_count_out)?;
        let mut src = SliceSource::new(&rest);
        c.seq_state_load(dest_seq_id, false, &mut src)?;
        // SAFETY: forwarded contract.
        unsafe { self::tokens_out(&tokens, tokens_out, n_token_count_out) };
        Ok(head + src.consumed())
    })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_size_ext(
    ctx: *mut llama_context,
    seq_id: llama_seq_id,
    flags: llama_state_seq_flags,
) -> usize {
    entry!(0, { seq_size(ctx, seq_id, flags) })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_get_data_ext(
    ctx: *mut llama_context,
    dst: *mut u8,
    size: usize,
    seq_id: llama_seq_id,
    flags: llama_state_seq_flags,
) -> usize {
    // SAFETY: llama.h's contract on the arguments.
    entry!(0, { unsafe { seq_get(ctx, dst, size, seq_id, flags) } })
}

#[no_mangle]
pub unsafe extern "C" fn llama_state_seq_set_data_ext(
    ctx: *mut llama_context,
    src: *const u8,
    size: usize,
    dest_seq_id: llama_seq_id,
    flags: llama_state_seq_flags,
) -> usize {
    // SAFETY: llama.h's contract on the arguments.
    entry!(0, { unsafe { seq_set(ctx, src, size, dest_seq_id, flags) } })
}
