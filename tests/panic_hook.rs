//! The engine's panic hook must not take panics away from the host program: a panic outside any
//! llama.h call reaches the hook that was installed before, while a panic inside one is reported
//! through the engine's log only. Its own test binary, because the panic hook is process-wide.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

extern crate engine;

extern "C" {
    fn llama_model_get_vocab(model: *const c_void) -> *const c_void;
}

static HOST_HOOK_CALLS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn panics_outside_the_engine_reach_the_hosts_hook() {
    std::panic::set_hook(Box::new(|_| {
        HOST_HOOK_CALLS.fetch_add(1, Ordering::SeqCst);
    }));
    // Any call installs the engine's hook, chained to the host's.
    // SAFETY: NULL is a documented argument (the function reports it and returns NULL).
    let vocab = unsafe { llama_model_get_vocab(std::ptr::null()) };
    assert!(vocab.is_null());
    assert_eq!(HOST_HOOK_CALLS.load(Ordering::SeqCst), 0);

    assert!(std::panic::catch_unwind(|| panic!("the host's own panic")).is_err());
    assert_eq!(
        HOST_HOOK_CALLS.load(Ordering::SeqCst),
        1,
        "the host's hook saw its panic"
    );
}
