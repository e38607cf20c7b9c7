//! Buffers sized by a call (its outputs' logits and embeddings, the rows read back, masks), made
//! so that a size the machine cannot hold is an error the call returns: an allocation that fails
//! in Rust otherwise aborts the process, which no `catch_unwind` stops.

use crate::error::{Error, Result};

/// `n` copies of `value`; `what` names the buffer in the error.
pub fn filled<T: Clone>(n: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut out = Vec::new();
    grow(&mut out, n, value, what)?;
    Ok(out)
}

/// `vec` made at least `n` long, new elements `value`.
pub fn grow<T: Clone>(vec: &mut Vec<T>, n: usize, value: T, what: &str) -> Result<()> {
    if n > vec.len() {
        vec.try_reserve_exact(n - vec.len())
            .map_err(|_| Error::OutOfMemory(format!("{what}: {n} values of {} bytes", std::mem::size_of::<T>())))?;
        vec.resize(n, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_beyond_memory_is_an_error() {
        let e = filled(usize::MAX / 8, 0f32, "logits").unwrap_err();
        assert!(e.to_string().starts_with("out of memory: logits"), "{e}");
        let mut v = vec![1u8; 2];
        grow(&mut v, 4, 0, "rows").unwrap();
        assert_eq!(v, [1, 1, 0, 0]);
        grow(&mut v, 3, 9, "rows").unwrap();
        assert_eq!(v.len(), 4, "never shrinks");
    }
}
