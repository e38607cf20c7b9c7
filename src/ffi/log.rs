//! Logging: `llama_log_set` / `llama_log_get`. Engine and ggml lines both reach the callback; it may
//! be called from ggml's worker threads as well as the caller's.

use super::entry::entry;
use super::types::*;
use crate::log::{self, Level};
use parking_lot::Mutex;
use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

/// The callback and user data last passed to `llama_log_set` (user data kept as an address so the
/// state is `Send`; it is only handed back to the caller's own callback).
static CURRENT: Mutex<Option<(unsafe extern "C" fn(ggml_log_level, *const c_char, *mut c_void), usize)>> =
    Mutex::new(None);

/// What `llama_log_get` reports when no callback was set: stderr, as the default sink writes.
unsafe extern "C" fn default_log_callback(level: ggml_log_level, text: *const c_char, _: *mut c_void) {
    if !text.is_null() {
        // SAFETY: the caller passes a NUL-terminated message.
        let t = unsafe { std::ffi::CStr::from_ptr(text) }.to_string_lossy();
        log::default_sink(Level::from_ggml(level), &t);
    }
}

/// Route all future log lines to `log_callback` (NULL restores the default: stderr).
///
/// # Safety
/// `log_callback` must be safe to call from any thread with `user_data` until it is replaced.
#[no_mangle]
pub unsafe extern "C" fn llama_log_set(log_callback: ggml_log_callback, user_data: *mut c_void) {
    entry!((), {
        crate::ggml::init();
        let Some(cb) = log_callback else {
            *CURRENT.lock() = None;
            log::set_sink(None);
            return Ok(());
        };
        let ud = user_data as usize;
        *CURRENT.lock() = Some((cb, ud));
        log::set_sink(Some(Arc::new(move |level: Level, text: &str| {
            let Ok(c) = CString::new(text.replace('\0', "\\0")) else {
                return;
            };
            // SAFETY: the caller registered `cb` with `ud` and promised it is callable from any thread.
            unsafe { cb(level as ggml_log_level, c.as_ptr(), ud as *mut c_void) };
        })));
        Ok(())
    })
}

/// # Safety
/// Each pointer must be NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn llama_log_get(log_callback: *mut ggml_log_callback, user_data: *mut *mut c_void) {
    entry!((), {
        let (cb, ud) = match *CURRENT.lock() {
            Some((cb, ud)) => (cb, ud as *mut c_void),
            None => (
                default_log_callback as unsafe extern "C" fn(_, _, _),
                std::ptr::null_mut(),
            ),
        };
        // SAFETY: the caller passes writable pointers or NULL.
        unsafe {
            if let Some(p) = log_callback.as_mut() {
                *p = Some(cb);
            }
            if let Some(p) = user_data.as_mut() {
                *p = ud;
            }
        }
        Ok(())
    })
}
