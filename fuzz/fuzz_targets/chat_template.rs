#![no_main]
//! ChatTemplate: see `engine::ffi::fuzz::Target::ChatTemplate`.

use engine::ffi::fuzz::Target;

libfuzzer_sys::fuzz_target!(init: engine::ffi::fuzz::init(Target::ChatTemplate), |data: &[u8]| {
    engine::ffi::fuzz::run(Target::ChatTemplate, data);
});
