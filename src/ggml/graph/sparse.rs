//! Operations of sparse attention: DeepSeek's lightning indexer's scores, what turns the picked
//! cells into an attention mask, and the block maxima and index ramps of MiniMax-M3's.

use super::{Graph, OpResult};
use crate::ggml::{GgmlError, RawType, TensorRef};

const F32: RawType = ggml_sys::ggml_type_GGML_TYPE_F32;
const F16: RawType = ggml_sys::ggml_type_GGML_TYPE_F16;

impl Graph {
    /// The lightning indexer's score of every cached key for every token: per stream, queries `q`
    /// ([head, n_head, n_tokens, n_stream], F32) against keys `k` ([head, 1, n_kv, n_stream]),
    /// each head's positive part weighted by `weights` ([n_head, n_tokens, 1, n_stream], F32, the
    /// scale already in), summed, plus `mask` ([n_kv, n_tokens, 1, n_stream or 1], F16). Returns
    /// [n_kv, n_tokens, 1, n_stream], F32.
    pub fn lightning_indexer(&mut self, q: TensorRef, k: TensorRef, weights: TensorRef, mask: TensorRef) -> OpResult {
        self.room()?;
        let (qn, kn, wn, mn) = (q.ne(), k.ne(), weights.ne(), mask.ne());
        let ok = q.ggml_type() == F32
            && weights.ggml_type() == F32
            && mask.ggml_type() == F16
            && qn[0] == kn[0]
            && kn[1] == 1
            && mn[0] == kn[2]
            && qn[1] == wn[0]
            && mn[1] == qn[2]
            && qn[2] == wn[1]
            && wn[2] == 1
            && mn[2] == 1
            && qn[3] == kn[3]
            && kn[3] == wn[3]
            && mn[3] > 0
            && wn[3] % mn[3] == 0
            // The CPU kernel reads elements (blocks, of quantized keys) at unit stride.
            && [q, k, weights, mask].iter().all(|t| {
                let ty = t.ggml_type();
                t.nb()[0] == crate::ggml::row_size(ty, crate::ggml::block_size(ty))
            });
        if !ok {
            return Err(GgmlError(format!(
                "lightning indexer: q {qn:?}, k {kn:?}, weights {wn:?}, mask {mn:?} do not fit"
            )));
        }
        // SAFETY: types and shapes as ggml asserts them.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_lightning_indexer(
                    self.ctx.as_ptr(),
                    q.as_ptr(),
                    k.as_ptr(),
                    weights.as_ptr(),
                    mask.as_ptr(),
                )
            },
            "lightning_indexer",
        )
    }

    /// The maximum of each run of `k` elements along rows of `a` (F32; row length a multiple of
    /// `k`): ggml's 2D max pool with a 1-high window.
    pub fn max_pool_rows(&mut self, a: TensorRef, k: i64) -> OpResult {
        self.room()?;
        let n = a.ne();
        if a.ggml_type() != F32 || k < 1 || k > i64::from(i32::MAX) || n[0] % k != 0 {
            return Err(GgmlError(format!("max pool of {k} over rows of {n:?}")));
        }
        let k = k as i32;
        // SAFETY: an F32 tensor whose rows hold whole windows.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_pool_2d(
                    self.ctx.as_ptr(),
                    a.as_ptr(),
                    ggml_sys::ggml_op_pool_GGML_OP_POOL_MAX,
                    k,
                    1,
                    k,
                    1,
                    0.0,
                    0.0,
                )
            },
            "pool_2d",
        )
    }

    /// start, start + 1, ..., start + n - 1 as F32.
    pub fn arange(&mut self, start: i64, n: i64) -> OpResult {
        self.room()?;
        if !(1..=1 << 24).contains(&n) || !(0..=1 << 24).contains(&start) {
            return Err(GgmlError(format!("arange of {n} from {start}")));
        }
        // SAFETY: a non-empty range (stop > start) of exactly representable values.
        Self::wrap(
            unsafe { ggml_sys::ggml_arange(self.ctx.as_ptr(), start as f32, (start + n) as f32, 1.0) },
            "arange",
        )
    }

    /// A new F32 or F16 tensor of shape `ne`, every element `v`.
    pub fn filled(&mut self, t: RawType, ne: &[i64], v: f32) -> OpResult {
        self.room()?;
        if !matches!(t, F32 | F16) || ne.is_empty() || ne.len() > 4 || ne.iter().any(|&n| n < 1) {
            return Err(GgmlError(format!("filled {ne:?}")));
        }
        // SAFETY: a float type and 1..=4 positive dims; the pool has room.
        let blank = Self::wrap(
            unsafe { ggml_sys::ggml_new_tensor(self.ctx.as_ptr(), t, ne.len() as i32, ne.as_ptr()) },
            "new_tensor",
        )?;
        self.fill(blank, v)
    }
}
