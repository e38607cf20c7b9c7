//! ENGINE EXTENSIONS: functions libengine.so adds to the llama.h API. They are not part of llama.cpp;
//! portable programs should look them up with dlsym or guard their use.

use super::entry::entry;
use std::ffi::c_char;

/// ENGINE EXTENSION (not in llama.cpp's llama.h). The message of the last failed llama_* call on
/// the calling thread ("" if none). The string stays valid until the next failure on this thread.
#[no_mangle]
pub extern "C" fn llama_engine_last_error() -> *const c_char {
    entry!(c"".as_ptr(), { Ok(super::entry::last_error_ptr()) })
}
