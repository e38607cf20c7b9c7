#![no_main]
//! ControlVector: see `engine::ffi::fuzz::Target::ControlVector`.

use engine::ffi::fuzz::Target;

libfuzzer_sys::fuzz_target!(init: engine::ffi::fuzz::init(Target::ControlVector), |data: &[u8]| {
    engine::ffi::fuzz::run(Target::ControlVector, data);
});
