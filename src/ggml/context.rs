//! A ggml context used as an arena of tensor descriptions (no_alloc: data lives in backend buffers).

use super::{GgmlError, RawType};
use std::ffi::CString;
use std::ptr::NonNull;

/// A tensor created in an [`Arena`]. Valid as long as the arena; ggml tensors are plain C structs,
/// so the handle may cross threads (a weight changes after loading only where a context trains
/// it: its data by ggml's optimizer, its flags by `opt::set_param`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorRef(pub(crate) NonNull<ggml_sys::ggml_tensor>);

// SAFETY: see the type's documentation: the pointee is only mutated while the owner holds `&mut`.
unsafe impl Send for TensorRef {}
// SAFETY: as above.
unsafe impl Sync for TensorRef {}

impl TensorRef {
    pub fn as_ptr(self) -> *mut ggml_sys::ggml_tensor {
        self.0.as_ptr()
    }

    /// Bytes of the tensor's data (ggml_nbytes).
    pub fn nbytes(self) -> usize {
        // SAFETY: the tensor is alive (owned by its arena).
        unsafe { ggml_sys::ggml_nbytes(self.as_ptr()) }
    }

    pub fn ne(self) -> [i64; 4] {
        // SAFETY: reading plain fields of a live tensor.
        unsafe { (*self.as_ptr()).ne }
    }

    /// The tensor's name (a weight's GGUF name).
    pub fn name(self) -> String {
        // SAFETY: a live tensor's name is a NUL-terminated string inside its fixed-size field.
        unsafe { std::ffi::CStr::from_ptr((*self.as_ptr()).name.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// Byte strides per dimension.
    pub fn nb(self) -> [usize; 4] {
        // SAFETY: reading plain fields of a live tensor.
        unsafe { (*self.as_ptr()).nb }
    }

    /// The name of the buffer type holding the tensor's data ("CPU", "CPU_REPACK", ...), if any.
    pub fn buffer_type_name(self) -> Option<String> {
        // SAFETY: reading a live tensor; a non-NULL buffer is alive while the tensor is used, and
        // buffer type names are static strings.
        unsafe {
            let buf = (*self.as_ptr()).buffer;
            if buf.is_null() {
                return None;
            }
            let name = ggml_sys::ggml_backend_buft_name(ggml_sys::ggml_backend_buffer_get_type(buf));
            Some(std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned())
        }
    }

    /// The buffer type holding the tensor's data, if it has memory.
    pub fn buffer_type(self) -> Option<super::BufferType> {
        // SAFETY: reading a live tensor; a non-NULL buffer is alive while the tensor is used.
        let buf = unsafe { (*self.as_ptr()).buffer };
        if buf.is_null() {
            return None;
        }
        // SAFETY: a live buffer (above).
        super::BufferType::from_raw(unsafe { ggml_sys::ggml_backend_buffer_get_type(buf) })
    }

    pub fn ggml_type(self) -> RawType {
        // SAFETY: reading a plain field of a live tensor.
        unsafe { (*self.as_ptr()).type_ }
    }
}

pub struct Arena {
    ctx: NonNull<ggml_sys::ggml_context>,
    capacity: usize,
    used: usize,
}

// SAFETY: a ggml context is plain memory; all mutation goes through `&mut self`.
unsafe impl Send for Arena {}
// SAFETY: shared access only reads.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena with room for `n_tensors` tensor descriptions.
    pub fn new(n_tensors: usize) -> Result<Arena, GgmlError> {
        super::init();
        // SAFETY: a pure size query.
        let overhead = unsafe { ggml_sys::ggml_tensor_overhead() };
        let mem_size = n_tensors
            .checked_add(1)
            .and_then(|n| n.checked_mul(overhead))
            .ok_or_else(|| GgmlError(format!("too many tensors: {n_tensors}")))?;
        // SAFETY: no_alloc context with a ggml-allocated pool of `mem_size` bytes.
        let ctx = unsafe {
            ggml_sys::ggml_init(ggml_sys::ggml_init_params {
                mem_size,
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            })
        };
        let ctx = NonNull::new(ctx).ok_or_else(|| GgmlError("ggml_init failed (out of memory?)".into()))?;
        Ok(Arena {
            ctx,
            capacity: n_tensors,
            used: 0,
        })
    }

    /// A new tensor of type `t` and shape `ne` (1 to 4 dimensions), named `name`.
    /// Checks what ggml would otherwise abort on: capacity, type, dimensions, block size, name length.
    pub fn new_tensor(&mut self, t: RawType, ne: &[i64], name: &str) -> Result<TensorRef, GgmlError> {
        if self.used >= self.capacity {
            return Err(GgmlError(format!("tensor arena full ({} tensors)", self.capacity)));
        }
        if t >= ggml_sys::ggml_type_GGML_TYPE_COUNT {
            return Err(GgmlError(format!("unknown ggml type {t}")));
        }
        // SAFETY: `t` is below GGML_TYPE_COUNT.
        let (blck, tsize) = unsafe { (ggml_sys::ggml_blck_size(t), ggml_sys::ggml_type_size(t)) };
        if blck <= 0 || tsize == 0 {
            return Err(GgmlError(format!("ggml type {t} is not supported by this ggml")));
        }
        if ne.is_empty() || ne.len() > 4 || ne.iter().any(|&n| n < 0) {
            return Err(GgmlError(format!("bad tensor shape {ne:?}")));
        }
        if ne[0] % blck != 0 {
            return Err(GgmlError(format!(
                "row length {} is not a multiple of the block size {blck}",
                ne[0]
            )));
        }
        let cname = CString::new(name).map_err(|_| GgmlError(format!("tensor name {name:?} contains NUL")))?;
        if cname.as_bytes().len() >= ggml_sys::GGML_MAX_NAME as usize {
            return Err(GgmlError(format!("tensor name {name:?} is too long")));
        }
        // SAFETY: all preconditions ggml asserts were checked above and the pool has room for one
        // more tensor description (sized in `new`).
        let p = unsafe {
            let p = ggml_sys::ggml_new_tensor(self.ctx.as_ptr(), t, ne.len() as i32, ne.as_ptr());
            if !p.is_null() {
                ggml_sys::ggml_set_name(p, cname.as_ptr());
            }
            p
        };
        self.used += 1;
        NonNull::new(p)
            .map(TensorRef)
            .ok_or_else(|| GgmlError("ggml_new_tensor failed".into()))
    }

    pub fn as_ptr(&self) -> *mut ggml_sys::ggml_context {
        self.ctx.as_ptr()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: the context came from ggml_init and is freed once.
        unsafe { ggml_sys::ggml_free(self.ctx.as_ptr()) }
    }
}
