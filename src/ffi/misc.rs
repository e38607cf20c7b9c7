//! Library-wide queries: names of enum values, version, backend setup, system facts, split paths.

use super::entry::entry;
use super::strings::{c_str, write_c_str};
use super::types::*;
use crate::error::Error;
use std::ffi::{c_char, c_int, CString};
use std::sync::OnceLock;

/// A NUL-terminated static byte string as a C pointer.
fn static_c(s: &'static [u8]) -> *const c_char {
    debug_assert_eq!(s.last(), Some(&0));
    s.as_ptr().cast()
}

#[no_mangle]
pub extern "C" fn llama_ftype_name(ftype: Ftype) -> *const c_char {
    entry!(std::ptr::null(), { Ok(static_c(crate::model::ftype::name_c(ftype.0))) })
}

#[no_mangle]
pub extern "C" fn llama_flash_attn_type_name(flash_attn_type: FlashAttnType) -> *const c_char {
    entry!(std::ptr::null(), {
        Ok(static_c(match flash_attn_type.0 {
            v if v == llama_flash_attn_type::LLAMA_FLASH_ATTN_TYPE_AUTO as c_int => b"auto\0",
            v if v == llama_flash_attn_type::LLAMA_FLASH_ATTN_TYPE_DISABLED as c_int => b"disabled\0",
            v if v == llama_flash_attn_type::LLAMA_FLASH_ATTN_TYPE_ENABLED as c_int => b"enabled\0",
            v => return Err(Error::invalid(format!("unknown flash_attn_type {v}"))),
        }))
    })
}

const LOAD_MODE_NAMES: [(llama_load_mode, &[u8]); 6] = [
    (llama_load_mode::LLAMA_LOAD_MODE_AUTO, b"auto\0"),
    (llama_load_mode::LLAMA_LOAD_MODE_NONE, b"none\0"),
    (llama_load_mode::LLAMA_LOAD_MODE_MMAP, b"mmap\0"),
    (llama_load_mode::LLAMA_LOAD_MODE_MLOCK, b"mlock\0"),
    (llama_load_mode::LLAMA_LOAD_MODE_MMAP_MLOCK, b"mmap+mlock\0"),
    (llama_load_mode::LLAMA_LOAD_MODE_DIRECT_IO, b"dio\0"),
];

#[no_mangle]
pub extern "C" fn llama_load_mode_name(load_mode: LoadMode) -> *const c_char {
    entry!(std::ptr::null(), {
        LOAD_MODE_NAMES
            .iter()
            .find(|(m, _)| *m as c_int == load_mode.0)
            .map(|(_, n)| static_c(n))
            .ok_or_else(|| Error::invalid(format!("unknown load_mode {}", load_mode.0)))
    })
}

/// llama.cpp throws on an unknown name; we return AUTO and log the problem.
///
/// # Safety
/// `str` must be NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn llama_load_mode_from_str(str: *const c_char) -> LoadMode {
    entry!(LoadMode(llama_load_mode::LLAMA_LOAD_MODE_AUTO as c_int), {
        // SAFETY: forwarded contract.
        let s = unsafe { c_str(str, "str") }?;
        LOAD_MODE_NAMES
            .iter()
            .find(|(_, n)| &n[..n.len() - 1] == s)
            .map(|(m, _)| LoadMode(*m as c_int))
            .ok_or_else(|| Error::invalid(format!("unknown load mode: {}", String::from_utf8_lossy(s))))
    })
}

#[no_mangle]
pub extern "C" fn llama_version() -> *const c_char {
    entry!(std::ptr::null(), {
        Ok(static_c(concat!(env!("CARGO_PKG_VERSION"), "-engine\0").as_bytes()))
    })
}

#[no_mangle]
pub extern "C" fn llama_backend_init() {
    entry!((), {
        crate::ggml::init();
        Ok(())
    })
}

/// Nothing to release: ggml's backends are static and contexts free their own resources.
#[no_mangle]
pub extern "C" fn llama_backend_free() {
    entry!((), { Ok(()) })
}

#[no_mangle]
pub extern "C" fn llama_numa_init(numa: ggml_numa_strategy) {
    entry!((), {
        crate::ggml::numa_init(numa).map_err(|e| Error::invalid(e.to_string()))
    })
}

#[no_mangle]
pub extern "C" fn llama_time_us() -> i64 {
    entry!(0, { Ok(crate::ggml::time_us()) })
}

/// llama.cpp's `LLAMA_MAX_DEVICES`: the length of `llama_model_params.tensor_split`.
pub(crate) const MAX_DEVICES: usize = 16;

#[no_mangle]
pub extern "C" fn llama_max_devices() -> usize {
    entry!(0, { Ok(MAX_DEVICES) })
}

/// The largest `n_seq_max` a context accepts.
pub(crate) const MAX_PARALLEL_SEQUENCES: usize = 256;

#[no_mangle]
pub extern "C" fn llama_max_parallel_sequences() -> usize {
    entry!(0, { Ok(MAX_PARALLEL_SEQUENCES) })
}

#[no_mangle]
pub extern "C" fn llama_max_tensor_buft_overrides() -> usize {
    entry!(0, { Ok(super::params::MAX_TENSOR_BUFT_OVERRIDES) })
}

#[no_mangle]
pub extern "C" fn llama_supports_mmap() -> bool {
    entry!(false, { Ok(true) })
}

#[no_mangle]
pub extern "C" fn llama_supports_mlock() -> bool {
    entry!(false, { Ok(true) })
}

/// As llama.cpp answers: layers can go to a GPU or integrated GPU ggml knows, or to RPC servers
/// (ggml's RPC backend is built in).
#[no_mangle]
pub extern "C" fn llama_supports_gpu_offload() -> bool {
    entry!(false, {
        let gpu = crate::ggml::Device::all().into_iter().any(|d| {
            matches!(
                d.kind(),
                crate::ggml::DeviceKind::Gpu | crate::ggml::DeviceKind::IntegratedGpu
            )
        });
        Ok(gpu || crate::ggml::has_rpc())
    })
}

#[no_mangle]
pub extern "C" fn llama_supports_rpc() -> bool {
    entry!(false, { Ok(crate::ggml::has_rpc()) })
}

/// "<prefix>-%05d-of-%05d.gguf" with the 1-based split number; the length, or 0 if it does not fit.
///
/// # Safety
/// `split_path` must be valid for `maxlen` bytes; `path_prefix` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn llama_split_path(
    split_path: *mut c_char,
    maxlen: usize,
    path_prefix: *const c_char,
    split_no: i32,
    split_count: i32,
) -> i32 {
    entry!(0, {
        // SAFETY: forwarded contract.
        let prefix = unsafe { c_str(path_prefix, "path_prefix") }?;
        let mut s = prefix.to_vec();
        s.extend_from_slice(format!("-{:05}-of-{:05}.gguf", i64::from(split_no) + 1, split_count).as_bytes());
        if s.len() >= maxlen {
            return Ok(0);
        }
        // SAFETY: `split_path` holds `maxlen > s.len()` bytes.
        Ok(unsafe { write_c_str(split_path, maxlen, &s) })
    })
}

/// The prefix of `split_path` if it ends in the suffix for (split_no, split_count); its length, or 0.
///
/// # Safety
/// `split_prefix` must be valid for `maxlen` bytes; `split_path` NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn llama_split_prefix(
    split_prefix: *mut c_char,
    maxlen: usize,
    split_path: *const c_char,
    split_no: i32,
    split_count: i32,
) -> i32 {
    entry!(0, {
        // SAFETY: forwarded contract.
        let path = unsafe { c_str(split_path, "split_path") }?;
        let suffix = format!("-{:05}-of-{:05}.gguf", i64::from(split_no) + 1, split_count);
        match path.strip_suffix(suffix.as_bytes()) {
            Some(prefix) if !prefix.is_empty() => {
                // SAFETY: `split_prefix` is valid for `maxlen` bytes; at most maxlen-1 plus NUL written.
                unsafe { write_c_str(split_prefix, maxlen, prefix) };
                Ok(i32::try_from(prefix.len()).unwrap_or(i32::MAX))
            }
            _ => Ok(0),
        }
    })
}

#[no_mangle]
pub extern "C" fn llama_print_system_info() -> *const c_char {
    entry!(std::ptr::null(), {
        static INFO: OnceLock<CString> = OnceLock::new();
        Ok(INFO
            .get_or_init(|| CString::new(crate::ggml::system_info()).unwrap_or_default())
            .as_ptr())
    })
}
