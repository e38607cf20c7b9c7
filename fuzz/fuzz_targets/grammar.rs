#![no_main]
//! Grammar: see `engine::ffi::fuzz::Target::Grammar`.

use engine::ffi::fuzz::Target;

libfuzzer_sys::fuzz_target!(init: engine::ffi::fuzz::init(Target::Grammar), |data: &[u8]| {
    engine::ffi::fuzz::run(Target::Grammar, data);
});
