//! ggml's row conversions: floats out of any stored type, quantized blocks out of floats, and the
//! check of a row's stored values. The quantizer (`model::quantize`) drives these; ggml's own
//! routines make the bits, so they are the ones llama.cpp's quantizer writes.

use super::{GgmlError, RawType};
use std::ffi::c_void;

/// Checks shared by the wrappers: `t` is a type ggml knows, and `n` elements fill whole blocks.
fn geometry(t: RawType, n: usize) -> Result<(usize, usize), GgmlError> {
    if t >= ggml_sys::ggml_type_GGML_TYPE_COUNT {
        return Err(GgmlError(format!("unknown ggml type {t}")));
    }
    // SAFETY: `t` is below GGML_TYPE_COUNT, so the table lookups are in bounds.
    let (blck, size) = unsafe { (ggml_sys::ggml_blck_size(t), ggml_sys::ggml_type_size(t)) };
    let blck = usize::try_from(blck).ok().filter(|&b| b > 0 && size > 0);
    let Some(blck) = blck else {
        return Err(GgmlError(format!(
            "ggml type {} is no longer supported",
            super::type_name(t)
        )));
    };
    if !n.is_multiple_of(blck) {
        return Err(GgmlError(format!(
            "{n} elements are not whole blocks of {} ({blck} per block)",
            super::type_name(t)
        )));
    }
    Ok((blck, size))
}

/// Bytes `n` elements of type `t` take, or why they cannot be stored in it.
pub fn bytes_of(t: RawType, n: usize) -> Result<usize, GgmlError> {
    let (blck, size) = geometry(t, n)?;
    (n / blck)
        .checked_mul(size)
        .ok_or_else(|| GgmlError("tensor too large".into()))
}

/// Whether ggml accepts `data` as rows of type `t` (no NaN or infinite values, scales included).
pub fn validate_rows(t: RawType, data: &[u8]) -> bool {
    if t >= ggml_sys::ggml_type_GGML_TYPE_COUNT {
        return false;
    }
    // SAFETY: `data` is valid for its length; ggml reads exactly `nbytes` and checks the length
    // is whole blocks of `t` before reading any (returning false otherwise).
    unsafe { ggml_sys::ggml_validate_row_data(t, data.as_ptr().cast::<c_void>(), data.len()) }
}

/// `dst` = the values of `src`, elements of type `t` (F32, F16, BF16 or a quantized type with a
/// dequantization), as llama.cpp's quantizer converts them.
pub fn to_f32(t: RawType, src: &[u8], dst: &mut [f32]) -> Result<(), GgmlError> {
    let n = dst.len();
    if bytes_of(t, n)? != src.len() {
        return Err(GgmlError(format!(
            "{} bytes are not {n} {} values",
            src.len(),
            super::type_name(t)
        )));
    }
    let count = i64::try_from(n).map_err(|_| GgmlError("tensor too large".into()))?;
    match t {
        ggml_sys::ggml_type_GGML_TYPE_F32 => {
            for (d, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *d = f32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        // SAFETY (both): `src` holds exactly `n` values of the type, `dst` has room for `n` floats.
        ggml_sys::ggml_type_GGML_TYPE_F16 => unsafe {
            ggml_sys::ggml_fp16_to_fp32_row(src.as_ptr().cast(), dst.as_mut_ptr(), count)
        },
        ggml_sys::ggml_type_GGML_TYPE_BF16 => unsafe {
            ggml_sys::ggml_bf16_to_fp32_row(src.as_ptr().cast(), dst.as_mut_ptr(), count)
        },
        _ => {
            // SAFETY: `t` is below GGML_TYPE_COUNT (checked by `bytes_of`); the traits are static.
            let traits = unsafe { &*ggml_sys::ggml_get_type_traits(t) };
            let to_float = traits
                .to_float
                .filter(|_| traits.is_quantized)
                .ok_or_else(|| GgmlError(format!("cannot dequantize/convert tensor type {}", super::type_name(t))))?;
            // SAFETY: `src` holds `n / blck` whole blocks of `t`; `dst` has room for `n` floats.
            unsafe { to_float(src.as_ptr().cast(), dst.as_mut_ptr(), count) }
        }
    }
    Ok(())
}

/// Whether ggml refuses to quantize to `t` without an importance matrix.
pub fn requires_imatrix(t: RawType) -> bool {
    // SAFETY: a pure comparison of the value.
    t < ggml_sys::ggml_type_GGML_TYPE_COUNT && unsafe { ggml_sys::ggml_quantize_requires_imatrix(t) }
}

/// Quantizes the rows of `src` (`n_per_row` floats each) to type `t` into `dst`, weighting the
/// columns by `imatrix` (one weight per column) when given; returns the bytes written.
pub fn quantize_rows(
    t: RawType,
    src: &[f32],
    n_per_row: usize,
    imatrix: Option<&[f32]>,
    dst: &mut [u8],
) -> Result<usize, GgmlError> {
    if n_per_row == 0 || !src.len().is_multiple_of(n_per_row) {
        return Err(GgmlError(format!("{} values are not rows of {n_per_row}", src.len())));
    }
    let row = bytes_of(t, n_per_row)?;
    let nrows = src.len() / n_per_row;
    if dst.len() != row * nrows {
        return Err(GgmlError(format!(
            "{} bytes are not {nrows} rows of {}",
            dst.len(),
            super::type_name(t)
        )));
    }
    if imatrix.is_some_and(|w| w.len() != n_per_row) {
        return Err(GgmlError(format!(
            "an importance matrix for rows of {n_per_row} has {} values",
            imatrix.map_or(0, <[f32]>::len)
        )));
    }
    if imatrix.is_none() && requires_imatrix(t) {
        return Err(GgmlError(format!(
            "quantizing to {} requires an importance matrix",
            super::type_name(t)
        )));
    }
    if !has_quantizer(t) {
        return Err(GgmlError(format!("ggml cannot quantize to {}", super::type_name(t))));
    }
    let (nrows_i, n_i) = (
        i64::try_from(nrows).map_err(|_| GgmlError("tensor too large".into()))?,
        i64::try_from(n_per_row).map_err(|_| GgmlError("tensor too large".into()))?,
    );
    let weights = imatrix.map_or(std::ptr::null(), <[f32]>::as_ptr);
    // SAFETY: `src` holds `nrows * n_per_row` floats, `dst` exactly `nrows` rows of `t`, the
    // importance matrix (if any) `n_per_row` floats; the type has a quantizer (checked above) and
    // an importance matrix where ggml requires one.
    let written =
        unsafe { ggml_sys::ggml_quantize_chunk(t, src.as_ptr(), dst.as_mut_ptr().cast(), 0, nrows_i, n_i, weights) };
    Ok(written)
}

/// The types `ggml_quantize_chunk` writes (its other types would abort).
fn has_quantizer(t: RawType) -> bool {
    use ggml_sys::*;
    [
        ggml_type_GGML_TYPE_F32,
        ggml_type_GGML_TYPE_F16,
        ggml_type_GGML_TYPE_BF16,
        ggml_type_GGML_TYPE_Q1_0,
        ggml_type_GGML_TYPE_Q2_0,
        ggml_type_GGML_TYPE_Q4_0,
        ggml_type_GGML_TYPE_Q4_1,
        ggml_type_GGML_TYPE_Q5_0,
        ggml_type_GGML_TYPE_Q5_1,
        ggml_type_GGML_TYPE_Q8_0,
        ggml_type_GGML_TYPE_MXFP4,
        ggml_type_GGML_TYPE_NVFP4,
        ggml_type_GGML_TYPE_Q2_K,
        ggml_type_GGML_TYPE_Q3_K,
        ggml_type_GGML_TYPE_Q4_K,
        ggml_type_GGML_TYPE_Q5_K,
        ggml_type_GGML_TYPE_Q6_K,
        ggml_type_GGML_TYPE_TQ1_0,
        ggml_type_GGML_TYPE_TQ2_0,
        ggml_type_GGML_TYPE_IQ2_XXS,
        ggml_type_GGML_TYPE_IQ2_XS,
        ggml_type_GGML_TYPE_IQ3_XXS,
        ggml_type_GGML_TYPE_IQ3_S,
        ggml_type_GGML_TYPE_IQ2_S,
        ggml_type_GGML_TYPE_IQ1_S,
        ggml_type_GGML_TYPE_IQ1_M,
        ggml_type_GGML_TYPE_IQ4_NL,
        ggml_type_GGML_TYPE_IQ4_XS,
    ]
    .contains(&t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_and_f16_convert_to_their_values() {
        let values = [0.5f32, -2.0, 3.25, 0.0];
        let f32_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut out = [9.0f32; 4];
        to_f32(ggml_sys::ggml_type_GGML_TYPE_F32, &f32_bytes, &mut out).unwrap();
        assert_eq!(out, values);
        let f16_bytes: Vec<u8> = values
            .iter()
            .flat_map(|&v| crate::ggml::f16_bits(v).to_ne_bytes())
            .collect();
        to_f32(ggml_sys::ggml_type_GGML_TYPE_F16, &f16_bytes, &mut out).unwrap();
        assert_eq!(out, values);
        // A length that is not whole values of the type is refused.
        assert!(to_f32(ggml_sys::ggml_type_GGML_TYPE_F32, &f32_bytes[..15], &mut out).is_err());
    }
}
