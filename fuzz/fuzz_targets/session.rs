#![no_main]
//! Session: see `engine::ffi::fuzz::Target::Session`.

use engine::ffi::fuzz::Target;

libfuzzer_sys::fuzz_target!(init: engine::ffi::fuzz::init(Target::Session), |data: &[u8]| {
    engine::ffi::fuzz::run(Target::Session, data);
});
