//! Chat templates.

use super::entry::entry;
use super::strings::c_str;
use super::types::*;
use crate::chat::{self, Message, BUILTIN};
use crate::error::Error;
use std::ffi::c_char;

/// Format `chat` with the template `tmpl` (a builtin name or a model's Jinja template, recognised
/// by its markers; NULL means chatml). Returns the formatted length and copies it to `buf` as
/// `strncpy(buf, text, length)` would; -1 for a template none of the known formats matches.
///
/// # Safety
/// `tmpl` is NULL or a NUL-terminated string; `chat` points to `n_msg` messages whose strings are
/// NUL-terminated; `buf` is NULL or valid for `length` bytes (llama.h's contract).
#[no_mangle]
pub unsafe extern "C" fn llama_chat_apply_template(
    tmpl: *const c_char,
    chat: *const llama_chat_message,
    n_msg: usize,
    add_ass: bool,
    buf: *mut c_char,
    length: i32,
) -> i32 {
    entry!(-1, {
        let tmpl = if tmpl.is_null() {
            b"chatml".as_slice()
        } else {
            // SAFETY: non-NULL and NUL-terminated by the contract.
            unsafe { c_str(tmpl, "tmpl") }?
        };
        if chat.is_null() && n_msg > 0 {
            return Err(Error::invalid(format!("chat is NULL with n_msg = {n_msg}")));
        }
        let mut messages = Vec::with_capacity(n_msg);
        for i in 0..n_msg {
            // SAFETY: `chat` holds `n_msg` messages (checked non-NULL above when n_msg > 0).
            let m = unsafe { &*chat.add(i) };
            let at = |e: Error| Error::invalid(format!("chat[{i}]: {e}"));
            // SAFETY: the message strings are NULL (refused) or NUL-terminated by the contract.
            let role = unsafe { c_str(m.role, "role") }.map_err(at)?;
            // SAFETY: as above.
            let content = unsafe { c_str(m.content, "content") }.map_err(at)?;
            messages.push(Message { role, content });
        }
        let Some(format) = chat::detect(tmpl) else {
            crate::log_error!(
                "llama_chat_apply_template: the template is none of the known chat formats (a Jinja template \
                 needs a Jinja engine; pass one of llama_chat_builtin_templates instead)"
            );
            return Ok(-1);
        };
        let text = chat::apply(format, &messages, add_ass);
        let n = i32::try_from(text.len())
            .map_err(|_| Error::invalid(format!("the formatted chat is too long ({} bytes)", text.len())))?;
        if !buf.is_null() && length > 0 {
            let cap = length as usize;
            let k = text.len().min(cap);
            // SAFETY: `buf` is valid for `length` bytes; `k <= length`; like strncpy, the rest of
            // the buffer is filled with NULs.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), k);
                std::ptr::write_bytes(buf.cast::<u8>().add(k), 0, cap - k);
            }
        }
        Ok(n)
    })
}

/// The names of the builtin templates: up to `len` of them into `output`; returns how many exist.
///
/// # Safety
/// `output` is NULL or valid for writing `len` pointers.
#[no_mangle]
pub unsafe extern "C" fn llama_chat_builtin_templates(output: *mut *const c_char, len: usize) -> i32 {
    entry!(-1, {
        if output.is_null() && len > 0 {
            crate::log_warn!("llama_chat_builtin_templates: output is NULL with len = {len}; only counting");
        } else {
            for (i, (name, _)) in BUILTIN.iter().take(len).enumerate() {
                // SAFETY: `output` is valid for `len` pointers and `i < len`; the names are static.
                unsafe { *output.add(i) = name.as_ptr() };
            }
        }
        Ok(BUILTIN.len() as i32)
    })
}
