#![no_main]
//! SeqState: see `engine::ffi::fuzz::Target::SeqState`.

use engine::ffi::fuzz::Target;

libfuzzer_sys::fuzz_target!(init: engine::ffi::fuzz::init(Target::SeqState), |data: &[u8]| {
    engine::ffi::fuzz::run(Target::SeqState, data);
});
