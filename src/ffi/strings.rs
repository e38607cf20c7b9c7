//! C strings in and out: reading caller-owned `const char *` and writing into caller buffers.

use crate::error::{Error, Result};
use std::ffi::{c_char, CStr};

/// Borrow a NUL-terminated string from C. `what` names the argument for the error message.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string that outlives the returned borrow.
pub(crate) unsafe fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a [u8]> {
    if p.is_null() {
        return Err(Error::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// Copy `s` into `buf` the way `snprintf(buf, size, "%s", s)` does: at most `size - 1` bytes and a
/// terminating NUL when `size > 0`. Returns the full length of `s` (so callers can detect truncation),
/// saturated to `i32::MAX`.
///
/// # Safety
/// `buf` must be NULL (then `size` is treated as 0) or valid for writes of `size` bytes.
pub(crate) unsafe fn write_c_str(buf: *mut c_char, size: usize, s: &[u8]) -> i32 {
    if !buf.is_null() && size > 0 {
        let n = s.len().min(size - 1);
        // SAFETY: `buf` is valid for `size` bytes and `n + 1 <= size`; `s` is a distinct Rust slice.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    i32::try_from(s.len()).unwrap_or(i32::MAX)
}

/// Copy `s` into `buf` without a terminator when it fits in `len` bytes; return its length, or minus
/// its length when it does not fit (llama.h's convention for pieces and detokenized text).
///
/// # Safety
/// `buf` must be NULL or valid for writes of `len` bytes (a negative `len` counts as 0).
pub(crate) unsafe fn write_bytes_or_needed(buf: *mut c_char, len: i32, s: &[u8]) -> i32 {
    let n = i32::try_from(s.len()).unwrap_or(i32::MAX);
    let cap = usize::try_from(len).unwrap_or(0);
    if s.len() > cap || (buf.is_null() && !s.is_empty()) {
        return -n;
    }
    if !s.is_empty() {
        // SAFETY: `buf` is non-NULL and valid for `cap >= s.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len()) };
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_c_str_truncates_like_snprintf() {
        let mut buf = [0x55 as c_char; 4];
        // SAFETY: buf is 4 bytes.
        let n = unsafe { write_c_str(buf.as_mut_ptr(), buf.len(), b"hello") };
        assert_eq!(n, 5);
        assert_eq!(buf.map(|c| c as u8), *b"hel\0");
        // SAFETY: NULL with size 0 writes nothing.
        assert_eq!(unsafe { write_c_str(std::ptr::null_mut(), 0, b"ab") }, 2);
    }

    #[test]
    fn write_bytes_reports_the_needed_size_when_short() {
        let mut buf = [0 as c_char; 3];
        // SAFETY: buf is 3 bytes.
        unsafe {
            assert_eq!(write_bytes_or_needed(buf.as_mut_ptr(), 3, b"abcd"), -4);
            assert_eq!(write_bytes_or_needed(buf.as_mut_ptr(), 3, b"abc"), 3);
            assert_eq!(write_bytes_or_needed(std::ptr::null_mut(), 0, b""), 0);
        }
        assert_eq!(buf.map(|c| c as u8), *b"abc");
    }
}
