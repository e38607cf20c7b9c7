//! The one way into the engine from C. Every exported function's body is a single [`entry!`]:
//! the body runs as a closure returning `Result`, a panic is caught, and an error or a panic is
//! logged with the function's name, remembered for `llama_engine_last_error()`, and turned into the
//! failure value the function documents. A test (below) reads src/ffi and fails if an exported
//! function is written any other way.

use crate::error::{Error, Result};
use std::cell::{Cell, RefCell};
use std::ffi::CString;
use std::panic::{catch_unwind, AssertUnwindSafe, PanicHookInfo};

/// `entry!(fail, { body })`: the body of an exported function. `body` evaluates to
/// `Result<T>`; the function returns its `Ok` value, or `fail` after reporting the error. The
/// function's name in messages is the enclosing function's. `entry!(fail, not_implemented)` is the
/// body of a function the engine does not implement yet. `entry!(as "name", fail, { body })` names
/// the function for messages: for callbacks the engine hands to C (a sampler's vtable), reported as
/// the llama.h function that calls them.
macro_rules! entry {
    ($fail:expr, not_implemented) => {{
        fn here() {}
        let name = $crate::ffi::entry::enclosing_fn(::std::any::type_name_of_val(&here));
        $crate::ffi::entry::enter(name, $fail, || Err($crate::error::Error::NotImplemented(name)))
    }};
    (as $name:literal, $fail:expr, $body:block) => {
        $crate::ffi::entry::enter($name, $fail, || $body)
    };
    ($fail:expr, $body:block) => {{
        fn here() {}
        $crate::ffi::entry::enter(
            $crate::ffi::entry::enclosing_fn(::std::any::type_name_of_val(&here)),
            $fail,
            || $body,
        )
    }};
}
pub(crate) use entry;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// Where the last panic on this thread happened, recorded by the panic hook.
    static PANIC_AT: RefCell<String> = const { RefCell::new(String::new()) };
    /// How many entries are running on this thread (callbacks can nest them).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The last panic an entry caught on this thread, for the fuzzer, to which it is a crash.
    #[cfg(any(test, feature = "fuzzing"))]
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The panic an entry caught on this thread since the last call, with where it happened.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn take_caught_panic() -> Option<String> {
    CAUGHT.with(|c| c.borrow_mut().take())
}

/// The name of the function a `here` item was declared in, from its type name
/// (`engine::ffi::context::llama_n_ctx::here`).
pub(crate) fn enclosing_fn(type_name: &'static str) -> &'static str {
    let path = type_name.strip_suffix("::here").unwrap_or(type_name);
    path.rsplit("::").next().unwrap_or(path)
}

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Panics inside an entry are reported once, through the log, with where they happened; the hook
/// only records the location. Any other panic of the process goes to the hook that was there before.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous: Hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if DEPTH.with(Cell::get) == 0 {
                return previous(info);
            }
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

/// Counts this thread's running entries while alive, also when the body unwinds.
struct Depth;

impl Depth {
    fn enter() -> Depth {
        DEPTH.with(|d| d.set(d.get() + 1));
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.with(|d| d.set(d.get() - 1));
    }
}

/// What [`entry!`] expands to: run `body` for the C function `name`; an `Err` or a panic returns
/// `fail` after reporting it.
pub(crate) fn enter<T>(name: &'static str, fail: T, body: impl FnOnce() -> Result<T>) -> T {
    install_panic_hook();
    let depth = Depth::enter();
    let outcome = catch_unwind(AssertUnwindSafe(body));
    drop(depth);
    match outcome {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            report(name, &e);
            fail
        }
        Err(payload) => {
            let at = PANIC_AT.with(|p| std::mem::take(&mut *p.borrow_mut()));
            let msg = format!("{} (at {at})", panic_message(payload.as_ref()));
            #[cfg(any(test, feature = "fuzzing"))]
            CAUGHT.with(|c| *c.borrow_mut() = Some(format!("{name}: {msg}")));
            report(name, &Error::Internal(msg));
            fail
        }
    }
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

    fn probe_fn(fail_with: Option<Error>) -> i32 {
        entry!(-7, {
            match fail_with {
                Some(e) => Err(e),
                None => panic!("boom {}", 1),
            }
        })
    }

    #[test]
    fn a_panic_becomes_the_failure_value_and_a_message() {
        assert_eq!(probe_fn(None), -7);
        let msg = last_error();
        assert!(
            msg.starts_with("probe_fn: internal error: boom 1 (at src/ffi/entry.rs:"),
            "{msg}"
        );
    }

    #[test]
    fn an_error_is_remembered_with_the_function_name() {
        assert_eq!(probe_fn(Some(Error::invalid("model is NULL"))), -7);
        assert_eq!(last_error(), "probe_fn: invalid argument: model is NULL");
    }

    #[test]
    fn not_implemented_says_so() {
        fn llama_probe() -> usize {
            entry!(0, not_implemented)
        }
        assert_eq!(llama_probe(), 0);
        assert_eq!(last_error(), "not implemented yet: llama_probe");
    }

    /// The exported functions of `src`: (name, body without comments and `let _ = ...;` lines).
    fn exported_bodies(src: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut rest = src;
        while let Some(at) = ["#[no_mangle]", "#[export_name"]
            .iter()
            .filter_map(|a| rest.find(a))
            .min()
        {
            rest = &rest[at + 1..];
            let sig = rest.find("fn ").expect("an exported fn");
            let name: String = rest[sig + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let open = rest.find("{\n").expect("a body");
            let close = rest[open..].find("\n}\n").expect("the end of the body") + open;
            let mut body = rest[open + 2..close]
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            // Naming unused parameters (`let _ = (a, b);`) may come first.
            while body.starts_with("let _ =") {
                body = body[body.find(';').map_or(body.len(), |i| i + 1)..]
                    .trim_start()
                    .to_string();
            }
            out.push((name, body));
            rest = &rest[close..];
        }
        out
    }

    #[test]
    fn every_exported_function_is_one_entry() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/ffi");
        let mut names = Vec::new();
        let mut bypass = Vec::new();
        for file in std::fs::read_dir(dir).expect("src/ffi") {
            let path = file.expect("a directory entry").path();
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("entry.rs") {
                continue;
            }
            let src = std::fs::read_to_string(&path).expect("a source file");
            for (name, body) in exported_bodies(&src) {
                if !(body.starts_with("entry!(") && body.ends_with(')')) {
                    bypass.push(format!("{}: {name}", path.display()));
                }
                names.push(name);
            }
        }
        assert!(bypass.is_empty(), "exported without entry!: {bypass:#?}");
        // Every function of the generated header and of llama-ext.h was seen.
        let header = include_str!("../../include/llama.h");
        let missing: Vec<_> = header
            .split('(')
            .filter_map(|before| {
                let ident = before.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next()?;
                ident.starts_with("llama_").then_some(ident)
            })
            .filter(|f| !names.iter().any(|n| n == f))
            .collect();
        assert!(missing.is_empty(), "header functions not found in src/ffi: {missing:?}");
        assert_eq!(
            names.len(),
            256 + 22 + 2 + 1,
            "exported functions: llama.h's 255, the last-error extension, llama-ext.h's 22, unicode.h's 2, \
             llama-sampler.cpp's DRY testing constructor"
        );
    }
}
