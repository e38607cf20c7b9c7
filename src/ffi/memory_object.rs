//! The C++ face of a memory handle. llama.cpp's own tests call a context's memory through
//! llama.cpp's internal interface `llama_memory_i` (`llama_get_memory(ctx)->state_write(io)`), so a
//! memory handle is an object starting with a pointer to a vtable of that layout
//! (`cxx_abi.cpp`), whose entries call the llama.h functions of the handle and, for state
//! reading and writing through a client's `llama_io_*_i` and the memory's buffers, the functions
//! below (handed to C++ as pointers, not exported). A client's reader and writer are reached
//! through C++ callbacks that keep its exceptions on that side.

use super::entry::entry;
use super::handle::memory;
use super::state::swa_only;
use super::types::*;
use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::kv::{Sink, Source};
use std::ffi::c_void;

/// The functions the vtable's entries call for what llama.h has no function for
/// (`engine_memory_callbacks` in `cxx_abi.cpp`).
#[repr(C)]
struct MemoryCallbacks {
    state_write: StateWriteFn,
    state_read: StateReadFn,
    buffers: BuffersFn,
}

type StateWriteFn = unsafe extern "C" fn(
    llama_memory_t,
    llama_seq_id,
    llama_state_seq_flags,
    *mut c_void,
    WriteFn,
    WriteTensorFn,
) -> bool;
type StateReadFn =
    unsafe extern "C" fn(llama_memory_t, llama_seq_id, llama_state_seq_flags, *mut c_void, ReadFn) -> bool;
type BuffersFn = unsafe extern "C" fn(llama_memory_t, *mut usize, *mut usize, usize) -> usize;

static CALLBACKS: MemoryCallbacks = MemoryCallbacks {
    state_write,
    state_read,
    buffers,
};

extern "C" {
    /// The vtable pointer a memory handle starts with, whose entries call `callbacks`.
    fn engine_memory_vtable(callbacks: *const MemoryCallbacks) -> *const c_void;
}

/// What a memory handle's first word holds.
pub(crate) fn vtable() -> u64 {
    // SAFETY: returns the address of a static vtable; the callbacks are static too.
    unsafe { engine_memory_vtable(&CALLBACKS) as u64 }
}

type WriteFn = unsafe extern "C" fn(io: *mut c_void, src: *const c_void, size: usize) -> bool;
type WriteTensorFn =
    unsafe extern "C" fn(io: *mut c_void, tensor: *mut ggml_sys::ggml_tensor, offset: usize, size: usize) -> bool;
type ReadFn = unsafe extern "C" fn(io: *mut c_void, dst: *mut c_void, size: usize) -> bool;

/// A client's `llama_io_write_i`: bytes by value, tensor data by reference. The first failure
/// (the writer threw) stops further writes and is reported at the end.
struct IoSink {
    io: *mut c_void,
    write: WriteFn,
    write_tensor: WriteTensorFn,
    failed: bool,
}

impl Sink for IoSink {
    fn put(&mut self, bytes: &[u8]) {
        // SAFETY: `io` is the writer the C++ side passed for this call; the bytes are live.
        self.failed = self.failed || !unsafe { (self.write)(self.io, bytes.as_ptr().cast(), bytes.len()) };
    }

    fn tensor(&mut self, t: TensorRef, offset: usize, n: usize) -> Result<()> {
        // SAFETY: as above; the range lies inside the tensor (the memory's own rows).
        self.failed = self.failed || !unsafe { (self.write_tensor)(self.io, t.as_ptr(), offset, n) };
        Ok(())
    }
}

/// A client's `llama_io_read_i`.
struct IoSource {
    io: *mut c_void,
    read: ReadFn,
    buf: Vec<u8>,
    consumed: usize,
}

impl Source for IoSource {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        self.buf.resize(n, 0);
        // SAFETY: `io` is the reader the C++ side passed for this call; `buf` holds `n` bytes.
        if !unsafe { (self.read)(self.io, self.buf.as_mut_ptr().cast(), n) } {
            return Err(Error::invalid(format!(
                "the state reader failed at byte {}",
                self.consumed
            )));
        }
        self.consumed += n;
        Ok(&self.buf)
    }

    fn consumed(&self) -> usize {
        self.consumed
    }
}

fn seq_of(seq_id: llama_seq_id) -> Option<usize> {
    usize::try_from(seq_id).ok()
}

/// `llama_memory_i::state_write` of a memory handle.
unsafe extern "C" fn state_write(
    mem: llama_memory_t,
    seq_id: llama_seq_id,
    flags: llama_state_seq_flags,
    io: *mut c_void,
    write: WriteFn,
    write_tensor: WriteTensorFn,
) -> bool {
    entry!(as "llama_memory_i::state_write", false, {
        let c = memory(mem)?;
        let mut sink = IoSink {
            io,
            write,
            write_tensor,
            failed: false,
        };
        c.memory_state_write(seq_of(seq_id), swa_only(flags), &mut sink)?;
        if sink.failed {
            return Err(Error::invalid("the state writer failed"));
        }
        Ok(true)
    })
}

/// `llama_memory_i::state_read` of a memory handle.
unsafe extern "C" fn state_read(
    mem: llama_memory_t,
    seq_id: llama_seq_id,
    flags: llama_state_seq_flags,
    io: *mut c_void,
    read: ReadFn,
) -> bool {
    entry!(as "llama_memory_i::state_read", false, {
        let mut c = memory(mem)?;
        let mut src = IoSource {
            io,
            read,
            buf: Vec::new(),
            consumed: 0,
        };
        c.memory_state_read(seq_of(seq_id), swa_only(flags), &mut src)?;
        Ok(true)
    })
}

/// `llama_memory_i::memory_breakdown` of a memory handle: up to `cap` (buffer type, bytes) pairs
/// into `bufts` and `sizes`; returns how many.
unsafe extern "C" fn buffers(mem: llama_memory_t, bufts: *mut usize, sizes: *mut usize, cap: usize) -> usize {
    entry!(as "llama_memory_i::memory_breakdown", 0, {
        let c = memory(mem)?;
        let buffers = c.memory_buffers();
        let n = buffers.len().min(cap);
        for (i, (buft, bytes)) in buffers.into_iter().take(n).enumerate() {
            // SAFETY: the C++ caller passes arrays of `cap` entries; i < n <= cap.
            unsafe {
                *bufts.add(i) = buft.addr();
                *sizes.add(i) = bytes;
            }
        }
        Ok(n)
    })
}
