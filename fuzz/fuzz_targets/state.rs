#![no_main]
//! State: see `engine::ffi::fuzz::Target::State`.

use engine::ffi::fuzz::Target;

libfuzzer_sys::fuzz_target!(init: engine::ffi::fuzz::init(Target::State), |data: &[u8]| {
    engine::ffi::fuzz::run(Target::State, data);
});
