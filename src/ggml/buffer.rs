//! Host memory presented to ggml as a CPU backend buffer, without copying.

use super::{GgmlError, TensorRef};
use std::ptr::NonNull;

/// ggml requires the base of a CPU buffer made from a pointer to be aligned to this.
pub const CPU_BUFFER_ALIGNMENT: usize = 32;

/// A CPU backend buffer over memory that someone else owns (a file mapping, a read buffer).
/// The owner of the memory must outlive this buffer.
pub struct HostBuffer {
    buf: NonNull<ggml_sys::ggml_backend_buffer>,
    base: usize,
    size: usize,
}

// SAFETY: the buffer only describes memory; ggml's CPU buffer has no thread affinity.
unsafe impl Send for HostBuffer {}
// SAFETY: shared access only reads.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// Wrap `mem` (which must stay alive and unmoved while the buffer exists) for weights.
    pub fn over(mem: &[u8]) -> Result<HostBuffer, GgmlError> {
        HostBuffer::over_ptr(mem.as_ptr(), mem.len())
    }

    /// The same over memory that ggml (a caller's code through it) may write: tensors placed in
    /// it are filled by `ggml_backend_tensor_set`.
    pub fn over_mut(mem: &mut [u8]) -> Result<HostBuffer, GgmlError> {
        HostBuffer::over_ptr(mem.as_mut_ptr(), mem.len())
    }

    fn over_ptr(ptr: *const u8, len: usize) -> Result<HostBuffer, GgmlError> {
        super::init();
        let base = ptr as usize;
        if !base.is_multiple_of(CPU_BUFFER_ALIGNMENT) {
            return Err(GgmlError(format!(
                "buffer address {base:#x} is not {CPU_BUFFER_ALIGNMENT}-byte aligned"
            )));
        }
        // SAFETY: the pointer is aligned as ggml asserts; ggml never frees it (from_ptr buffers do
        // not own their memory) and only writes where a tensor placed in it is written to: for
        // `over`, weights the engine never writes (training writes only read-into-memory models,
        // whose bytes nothing else reads meanwhile); for `over_mut`, memory lent mutably.
        let buf = unsafe {
            let b = ggml_sys::ggml_backend_cpu_buffer_from_ptr(ptr as *mut _, len);
            if !b.is_null() {
                ggml_sys::ggml_backend_buffer_set_usage(
                    b,
                    ggml_sys::ggml_backend_buffer_usage_GGML_BACKEND_BUFFER_USAGE_WEIGHTS,
                );
            }
            b
        };
        let buf = NonNull::new(buf).ok_or_else(|| GgmlError("ggml_backend_cpu_buffer_from_ptr failed".into()))?;
        Ok(HostBuffer { buf, base, size: len })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn buffer_type(&self) -> super::BufferTypeId {
        // SAFETY: live buffer.
        unsafe { super::BufferTypeId::of(self.buf.as_ptr()) }
    }

    /// Point `t` at `offset` bytes into the buffer. Checks the bounds ggml asserts on.
    pub fn place(&self, t: TensorRef, offset: usize) -> Result<(), GgmlError> {
        if offset.checked_add(t.nbytes()).is_none_or(|end| end > self.size) {
            return Err(GgmlError(format!(
                "tensor data [{offset}, +{}) outside the buffer of {} bytes",
                t.nbytes(),
                self.size
            )));
        }
        // SAFETY: the tensor is fresh (no buffer, no data, not a view: arena tensors), and the range
        // [base + offset, base + offset + nbytes) lies inside the buffer (checked above).
        let status = unsafe {
            if !(*t.as_ptr()).buffer.is_null() || !(*t.as_ptr()).data.is_null() {
                return Err(GgmlError("tensor already has data".into()));
            }
            ggml_sys::ggml_backend_tensor_alloc(self.buf.as_ptr(), t.as_ptr(), (self.base + offset) as *mut _)
        };
        if status != ggml_sys::ggml_status_GGML_STATUS_SUCCESS {
            return Err(GgmlError(format!(
                "ggml_backend_tensor_alloc failed with status {status}"
            )));
        }
        Ok(())
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: freed once; from_ptr buffers leave the underlying memory alone.
        unsafe { ggml_sys::ggml_backend_buffer_free(self.buf.as_ptr()) }
    }
}

/// Map `size` bytes of `file` from `start`, read-only, as host memory for a [`HostBuffer`].
/// `start` need not be page aligned.
pub fn map_file(file: &std::fs::File, start: u64, size: usize) -> std::io::Result<memmap2::Mmap> {
    // SAFETY: the mapping is read-only; like llama.cpp we assume nobody truncates or rewrites the
    // model file while it is loaded (that would be a SIGBUS or changed weights, not memory unsafety
    // in Rust terms of aliasing, since we never create `&mut` to it).
    unsafe { memmap2::MmapOptions::new().offset(start).len(size).map(file) }
}
