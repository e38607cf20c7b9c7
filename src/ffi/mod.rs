//! The `extern "C"` surface of llama.h, one file per area. Every exported function runs its body
//! through [`guard`]: no panic unwinds into C, every failure is logged with its reason, remembered for
//! `llama_engine_last_error()`, and turned into the failure value llama.h documents.

#![allow(clippy::missing_safety_doc)] // each exported function's contract is its llama.h documentation

pub mod types;

mod adapter;
mod batch;
mod chat;
mod context;
mod handle;
mod log;
mod memory;
mod misc;
mod model;
mod opt;
mod params;
mod perf;
mod sampler;
mod state;
mod strings;
mod vocab;
// Last, so the extensions close the generated header.
mod engine_ext;
/// cbindgen:ignore
mod llama_ext;

use crate::error::{Error, Result};
use std::cell::RefCell;
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// Where the last panic on this thread happened, recorded by the panic hook.
    static PANIC_AT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Replace the default panic hook (which prints to stderr) with one that only records the location,
/// so a caught panic is reported once, through the log, with where it happened.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let at = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            PANIC_AT.with(|p| *p.borrow_mut() = at);
        }));
    });
}

fn remember(msg: &str) {
    let c = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// The message of the last failure on this thread (empty if none); valid until the next failure.
pub(crate) fn last_error_ptr() -> *const std::ffi::c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Log and remember a failure of the C function `name`.
pub(crate) fn report(name: &str, err: &Error) {
    let msg = match err {
        // The issue tracker and users grep for this exact form.
        Error::NotImplemented(_) => err.to_string(),
        _ => format!("{name}: {err}"),
    };
    crate::log_error!("{msg}");
    remember(&msg);
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

/// Run the body of the C function `name`. An `Err` or a panic returns `fail` after reporting it.
pub(crate) fn guard<T>(name: &'static str, fail: T, body: impl FnOnce() -> Result<T>) -> T {
    install_panic_hook();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            report(name, &e);
            fail
        }
        Err(payload) => {
            let at = PANIC_AT.with(|p| std::mem::take(&mut *p.borrow_mut()));
            report(
                name,
                &Error::Internal(format!("{} (at {at})", panic_message(payload.as_ref()))),
            );
            fail
        }
    }
}

/// The body of an exported function that the engine does not implement yet.
pub(crate) fn not_implemented<T>(name: &'static str, fail: T) -> T {
    guard(name, fail, || Err(Error::NotImplemented(name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: the pointer comes from the thread-local CString, alive for this thread.
        unsafe { CStr::from_ptr(last_error_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn committed_header_equals_generated() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/llama.h"));
        let committed =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/llama.h")).expect("include/llama.h");
        assert!(
            generated == committed,
            "include/llama.h differs from what cbindgen generates: build without CI set to regenerate it, then commit it"
        );
    }

    #[test]
    fn a_panic_becomes_the_failure_value_and_a_message() {
        let r = guard("probe_fn", -7, || -> Result<i32> { panic!("boom {}", 1) });
        assert_eq!(r, -7);
        let msg = last_error();
        assert!(
            msg.starts_with("probe_fn: internal error: boom 1 (at src/ffi/mod.rs:"),
            "{msg}"
        );
    }

    #[test]
    fn an_error_is_remembered_with_the_function_name() {
        let r = guard("probe_fn", false, || Err(Error::invalid("model is NULL")));
        assert!(!r);
        assert_eq!(last_error(), "probe_fn: invalid argument: model is NULL");
    }

    #[test]
    fn not_implemented_says_so() {
        assert_eq!(not_implemented("llama_probe", 0usize), 0);
        assert_eq!(last_error(), "not implemented yet: llama_probe");
    }
}
