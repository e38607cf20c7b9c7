//! What `llama_model_init_from_user` needs from ggml: the metadata of a caller's `gguf_context`
//! as GGUF bytes, and tensors in a CPU buffer over memory the engine owns, handed one by one to
//! the caller's callback to fill.

use super::{Arena, GgmlError, HostBuffer, RawType, TensorRef};

/// Where one tensor handed to the caller lives: its name, type, shape, and byte offset in the
/// memory given to [`hand_out`].
pub struct Slot<'a> {
    pub name: &'a str,
    pub ggml_type: RawType,
    pub ne: [u64; 4],
    pub offset: usize,
}

/// The header, pairs and tensor infos of `ctx` as ggml writes them (`gguf_get_meta_data`).
///
/// # Safety
/// `ctx` must be a live `gguf_context` not changed by another thread meanwhile.
pub unsafe fn gguf_meta_bytes(ctx: *const ggml_sys::gguf_context) -> Vec<u8> {
    // SAFETY: a live context by the contract; ggml writes exactly `gguf_get_meta_size` bytes.
    unsafe {
        let n = ggml_sys::gguf_get_meta_size(ctx);
        let mut bytes = vec![0u8; n];
        ggml_sys::gguf_get_meta_data(ctx, bytes.as_mut_ptr().cast());
        bytes
    }
}

/// Each slot of `slots` as a ggml tensor placed in a CPU buffer over `mem`, handed to `fill` in
/// order (the tensors live until this returns).
pub fn hand_out(mem: &mut [u8], slots: &[Slot], fill: &mut dyn FnMut(TensorRef)) -> Result<(), GgmlError> {
    let mut arena = Arena::new(slots.len())?;
    let buffer = HostBuffer::over_mut(mem)?;
    for s in slots {
        let ne: Vec<i64> = s
            .ne
            .iter()
            .map(|&n| i64::try_from(n).map_err(|_| GgmlError(format!("tensor '{}': dimension {n} too large", s.name))))
            .collect::<Result<_, _>>()?;
        let t = arena.new_tensor(s.ggml_type, &ne, s.name)?;
        buffer.place(t, s.offset)?;
        fill(t);
    }
    Ok(())
}
