//! T5's relative position buckets: each (query, key) pair of positions falls in one of
//! `n_rel_attn_bkts` buckets (exact for near distances, logarithmic up to 128 positions), whose
//! learned per-head bias is added to the attention scores.

use crate::error::{Error, Result};
use crate::ggml::TensorRef;
use crate::graph::{set_i32, Builder, GraphInput, UbatchView};

/// The distance past which every pair shares the farthest bucket (llama.cpp's constant).
const MAX_DISTANCE: i64 = 128;

/// The bucket of a key at `key` seen from a query at `query`, as llama.cpp computes it:
/// `bidirectional` (the encoder's) halves the buckets between keys before and after the query;
/// otherwise later keys share bucket 0.
fn bucket(key: i32, query: i32, n_buckets: u32, bidirectional: bool) -> i32 {
    let mut n = i64::from(n_buckets);
    if bidirectional {
        n >>= 1;
    }
    let max_exact = n >> 1;
    let mut rel = key.wrapping_sub(query);
    let mut out = 0i32;
    if bidirectional {
        out += i32::from(rel > 0) * n as i32;
        rel = rel.wrapping_abs();
    } else {
        rel = rel.min(0).wrapping_neg();
    }
    // In llama.cpp's mixed precision: the ratio in double, its logarithm in float, the scaled
    // sum in double, floored in float.
    let ratio = (f64::from(rel) / max_exact as f64) as f32;
    let scaled = ratio.ln() * (n - max_exact) as f32;
    let sum = max_exact as f64 + f64::from(scaled) / (MAX_DISTANCE as f64 / max_exact as f64).ln();
    let large = ((sum as f32).floor() as i32).min((n - 1) as i32);
    out + if i64::from(rel) < max_exact { rel } else { large }
}

/// The encoder's buckets, I32 [n_tokens (keys), n_tokens (queries)], between the ubatch's tokens.
struct WithinUbatch(TensorRef);

impl GraphInput for WithinUbatch {
    fn set(&self, ub: &UbatchView) -> Result<()> {
        let n_buckets = ub.hp.n_rel_attn_bkts;
        let data: Vec<i32> = ub
            .places
            .iter()
            .flat_map(|q| ub.places.iter().map(move |k| bucket(k.pos, q.pos, n_buckets, true)))
            .collect();
        set_i32(self.0, &data)
    }
}

/// The encoder's bucket input (`pos_bucket_enc`).
pub(super) fn within_ubatch(b: &mut Builder) -> Result<TensorRef> {
    let n = b.shape.n_tokens as i64;
    let t =
        b.g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[n, n], "pos_bucket_enc")?;
    b.inputs.add(WithinUbatch(t));
    Ok(t)
}

/// The decoder's buckets, I32 [n_kv (keys: the cache's cells), n_tokens (queries)], in one
/// direction (a later key, which the mask hides anyway, in bucket 0).
struct OverCache(TensorRef);

impl GraphInput for OverCache {
    fn set(&self, ub: &UbatchView) -> Result<()> {
        // llama.cpp fills them from one stream only (and asserts on more).
        if ub.kv.n_stream() > 1 {
            return Err(Error::invalid(
                "T5's decoder needs one cache stream (kv_unified, or one sequence), as llama.cpp's does",
            ));
        }
        let (cells, n_buckets) = (ub.kv.stream(0), ub.hp.n_rel_attn_bkts);
        let data: Vec<i32> = ub
            .places
            .iter()
            .flat_map(|q| {
                // An empty cell's position does not matter (masked), llama.cpp takes -1.
                (0..ub.shape.n_kv).map(move |j| bucket(cells.pos(j).unwrap_or(-1), q.pos, n_buckets, false))
            })
            .collect();
        set_i32(self.0, &data)
    }
}

/// The decoder's bucket input (`pos_bucket_dec`).
pub(super) fn over_cache(b: &mut Builder) -> Result<TensorRef> {
    let (n_kv, n) = (b.shape.n_kv as i64, b.shape.n_tokens as i64);
    let t =
        b.g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[n_kv, n], "pos_bucket_dec")?;
    b.inputs.add(OverCache(t));
    Ok(t)
}

/// Layer `il`'s score bias over the pairs of `buckets` ([n_kv, n_tokens]): its `attn_rel_b`
/// (`{part}.blk.{il}.`, or the first layer's where it has none) looked up per pair,
/// [n_kv, n_tokens, n_head].
pub(super) fn bias(b: &mut Builder, buckets: TensorRef, part: &str, il: usize) -> Result<TensorRef> {
    let name = |l: usize| format!("{part}.blk.{l}.attn_rel_b.weight");
    let table = match b.weight_opt(&name(il)) {
        Some(t) => t,
        None => b.weight(&name(0))?,
    };
    let [n_kv, n_tokens, ..] = buckets.ne();
    let flat = b.g.reshape(buckets, &[n_kv * n_tokens])?;
    let flat = b.name(flat, "pos_bucket_1d", None);
    let rows = b.g.get_rows(table, flat)?;
    let rows = b.g.reshape(rows, &[rows.ne()[0], n_kv, n_tokens])?;
    let bias = b.g.permute(rows, [2, 0, 1, 3])?;
    let bias = b.g.cont(bias)?;
    Ok(b.name(bias, "pos_bias", None))
}

#[cfg(test)]
mod tests {
    use super::bucket;

    /// T5's 32 buckets: exact distances below 8 on each side, logarithmic beyond, the far side
    /// past 16; the decoder's later keys all in bucket 0.
    #[test]
    fn buckets_are_llama_cpp_s() {
        assert_eq!(bucket(0, 0, 32, true), 0);
        assert_eq!(bucket(3, 0, 32, true), 19);
        assert_eq!(bucket(0, 3, 32, true), 3);
        assert_eq!(bucket(0, 12, 32, true), 9);
        assert_eq!(bucket(0, 500, 32, true), 15);
        assert_eq!(bucket(500, 0, 32, true), 31);
        assert_eq!(bucket(5, 2, 32, false), 0);
        assert_eq!(bucket(2, 5, 32, false), 3);
        assert_eq!(bucket(0, 20, 32, false), 17);
    }
}
