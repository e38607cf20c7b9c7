#![no_main]
//! Tokenize: see `engine::ffi::fuzz::Target::Tokenize`.

use engine::ffi::fuzz::Target;

libfuzzer_sys::fuzz_target!(init: engine::ffi::fuzz::init(Target::Tokenize), |data: &[u8]| {
    engine::ffi::fuzz::run(Target::Tokenize, data);
});
