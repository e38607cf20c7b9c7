//! The Walsh-Hadamard rotation llama.cpp 0.3.36 applies around a quantized KV cache: queries and
//! keys (and values, and the attention's output) are multiplied by an orthonormal Hadamard matrix
//! before the cache quantizes them, which spreads outliers across each block. The results depend
//! on it, so the engine rotates exactly where llama.cpp does.

use crate::ggml::{is_quantized, RawType};

/// The rotation sizes for keys and values (0: none), as llama.cpp picks them: keys in a quantized
/// cache whose heads are a multiple of 64 wide by the widest power of two dividing the head,
/// values likewise by 64. `disabled`: `LLAMA_ATTN_ROT_DISABLE`, which llama.cpp reads too.
pub fn sizes(type_k: RawType, type_v: RawType, head_k: u32, head_v: u32, disabled: bool) -> (u32, u32) {
    if disabled {
        return (0, 0);
    }
    let rotated = |t: RawType, head: u32| head > 0 && head.is_multiple_of(64) && is_quantized(t);
    let k = if rotated(type_k, head_k) { key_size(head_k) } else { 0 };
    let v = if rotated(type_v, head_v) { 64 } else { 0 };
    (k, v)
}

/// The rotation size of rotated keys whose heads are `head` wide: the widest power of two
/// dividing them, at least 64 (llama.cpp searches up from 64).
pub fn key_size(head: u32) -> u32 {
    (1u32 << head.trailing_zeros().min(31)).max(64)
}

/// Whether the environment turns the rotation off (`LLAMA_ATTN_ROT_DISABLE` holding a nonzero
/// integer, read as C's `atoi` reads it).
pub fn disabled_by_env() -> bool {
    std::env::var("LLAMA_ATTN_ROT_DISABLE").is_ok_and(|v| atoi(&v) != 0)
}

fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (sign, digits) = match s.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, s.strip_prefix('+').unwrap_or(s)),
    };
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse::<i64>().map_or(0, |n| sign * n)
}

/// The orthonormal Walsh-Hadamard matrix of size `n` (a power of two), row-major: Sylvester's
/// construction from 1/√n, so that its square is the identity.
pub fn matrix(n: usize) -> Vec<f32> {
    let mut m = vec![0f32; n * n];
    if n == 0 {
        return m;
    }
    // llama.cpp divides in double precision by a float square root.
    m[0] = (1.0 / f64::from((n as f32).sqrt())) as f32;
    let mut s = 1;
    while s < n {
        for i in 0..s {
            for j in 0..s {
                let v = m[i * n + j];
                m[(i + s) * n + j] = v;
                m[i * n + j + s] = v;
                m[(i + s) * n + j + s] = -v;
            }
        }
        s *= 2;
    }
    m
}

/// The same as the little-endian bytes of an F32 graph input.
pub fn matrix_bytes(n: usize) -> Vec<u8> {
    matrix(n).iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_is_orthonormal_and_its_own_inverse() {
        // 64 is a real head width; its n³ check is too slow under Miri, which runs the same code at 16.
        for n in [1, 2, 4, if cfg!(miri) { 16 } else { 64 }] {
            let m = matrix(n);
            for i in 0..n {
                for j in 0..n {
                    let dot: f32 = (0..n).map(|k| m[i * n + k] * m[k * n + j]).sum();
                    let want = if i == j { 1.0 } else { 0.0 };
                    assert!((dot - want).abs() < 1e-5, "n {n} ({i}, {j}): {dot}");
                }
            }
        }
        assert_eq!(matrix(4)[..4], [0.5, 0.5, 0.5, 0.5]);
        assert_eq!(matrix(4)[4..8], [0.5, -0.5, 0.5, -0.5]);
    }

    #[test]
    fn sizes_follow_the_cache_types_and_head_widths() {
        let (f16, q8, q4) = (
            ggml_sys::ggml_type_GGML_TYPE_F16,
            ggml_sys::ggml_type_GGML_TYPE_Q8_0,
            ggml_sys::ggml_type_GGML_TYPE_Q4_0,
        );
        assert_eq!(sizes(f16, f16, 128, 128, false), (0, 0));
        assert_eq!(sizes(q8, f16, 128, 128, false), (128, 0));
        assert_eq!(sizes(q8, q4, 64, 64, false), (64, 64));
        assert_eq!(sizes(q8, q8, 192, 192, false), (64, 64));
        assert_eq!(sizes(q8, q8, 256, 96, false), (256, 0));
        assert_eq!(sizes(q8, q8, 96, 32, false), (0, 0));
        assert_eq!(sizes(q8, q8, 128, 128, true), (0, 0));
    }

    #[test]
    fn the_switch_reads_integers_as_atoi_does() {
        assert_eq!(atoi("1"), 1);
        assert_eq!(atoi(" 12abc"), 12);
        assert_eq!(atoi("-3"), -3);
        assert_eq!(atoi("yes"), 0);
        assert_eq!(atoi(""), 0);
    }
}
