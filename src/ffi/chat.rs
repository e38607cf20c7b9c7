//! Chat templates.

use super::not_implemented;
use super::types::*;
use std::ffi::c_char;

#[no_mangle]
pub unsafe extern "C" fn llama_chat_apply_template(
    tmpl: *const c_char,
    chat: *const llama_chat_message,
    n_msg: usize,
    add_ass: bool,
    buf: *mut c_char,
    length: i32,
) -> i32 {
    let _ = (tmpl, chat, n_msg, add_ass, buf, length);
    not_implemented("llama_chat_apply_template", -1)
}

#[no_mangle]
pub unsafe extern "C" fn llama_chat_builtin_templates(output: *mut *const c_char, len: usize) -> i32 {
    let _ = (output, len);
    not_implemented("llama_chat_builtin_templates", -1)
}
