#![no_main]
//! Model: see `engine::ffi::fuzz::Target::Model`.

use engine::ffi::fuzz::Target;

libfuzzer_sys::fuzz_target!(init: engine::ffi::fuzz::init(Target::Model), |data: &[u8]| {
    engine::ffi::fuzz::run(Target::Model, data);
});

// Half the time a GGUF field at a time (`engine::gguf::mutate`), half libFuzzer's own changes.
libfuzzer_sys::fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    match seed % 2 {
        0 => engine::ffi::fuzz::mutate_into(data, size, max_size, seed),
        _ => libfuzzer_sys::fuzzer_mutate(data, size, max_size),
    }
});
