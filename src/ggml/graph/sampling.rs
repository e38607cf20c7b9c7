//! The ops backend samplers add to a decode graph: reductions and masks over one row of logits
//! (argmax, top-k, sort, running sums, steps, logarithms), each checked as ggml asserts it.

use super::{Graph, OpResult};
use crate::ggml::{GgmlError, RawType, TensorRef};

const F32: RawType = ggml_sys::ggml_type_GGML_TYPE_F32;
const F16: RawType = ggml_sys::ggml_type_GGML_TYPE_F16;

impl Graph {
    /// A new tensor the graph computes into or that the caller fills (not marked as input).
    pub fn new_tensor(&mut self, t: RawType, ne: &[i64]) -> OpResult {
        self.room()?;
        if ne.is_empty() || ne.len() > 4 || ne.iter().any(|&n| n < 0) {
            return Err(GgmlError(format!("bad tensor shape {ne:?}")));
        }
        // SAFETY: a valid type and 1..=4 non-negative dimensions; the pool has room.
        Self::wrap(
            unsafe { ggml_sys::ggml_new_tensor(self.ctx.as_ptr(), t, ne.len() as i32, ne.as_ptr()) },
            "new_tensor",
        )
    }

    /// `a` with `rows` zero rows appended (a copy).
    pub fn pad_rows(&mut self, a: TensorRef, rows: i32) -> OpResult {
        self.room()?;
        if rows < 0 || a.ggml_type() != F32 {
            return Err(GgmlError(format!("pad {:?} by {rows} rows", a.ne())));
        }
        // SAFETY: an F32 source and a non-negative padding.
        Self::wrap(
            unsafe { ggml_sys::ggml_pad(self.ctx.as_ptr(), a.as_ptr(), 0, rows, 0, 0) },
            "pad",
        )
    }

    /// The index (I32) of the largest value of each row of a matrix.
    pub fn argmax(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        let n = a.ne();
        if n[2] != 1 || n[3] != 1 || n[0] > i64::from(i32::MAX) || a.ggml_type() != F32 {
            return Err(GgmlError(format!("argmax of {n:?}")));
        }
        // SAFETY: an F32 matrix with rows that fit I32 indices.
        Self::wrap(
            unsafe { ggml_sys::ggml_argmax(self.ctx.as_ptr(), a.as_ptr()) },
            "argmax",
        )
    }

    /// The indices (I32) of the `k` largest values of each row (ggml's own top-k op).
    pub fn top_k(&mut self, a: TensorRef, k: i64) -> OpResult {
        self.room()?;
        if k < 1 || a.ne()[0] < k || k > i64::from(i32::MAX) || a.ggml_type() != F32 {
            return Err(GgmlError(format!("top {k} of rows of {:?}", a.ne())));
        }
        // SAFETY: rows hold at least k values.
        Self::wrap(
            unsafe { ggml_sys::ggml_top_k(self.ctx.as_ptr(), a.as_ptr(), k as i32) },
            "top_k",
        )
    }

    /// The indices (I32) that sort each row in descending order.
    pub fn argsort_desc(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        if a.ne()[0] > i64::from(i32::MAX) || a.ggml_type() != F32 {
            return Err(GgmlError(format!("argsort of {:?}", a.ne())));
        }
        // SAFETY: rows that fit I32 indices.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_argsort(
                    self.ctx.as_ptr(),
                    a.as_ptr(),
                    ggml_sys::ggml_sort_order_GGML_SORT_ORDER_DESC,
                )
            },
            "argsort",
        )
    }

    /// Running sums along each row.
    pub fn cumsum(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        if a.ggml_type() != F32 {
            return Err(GgmlError(format!(
                "cumsum of a {} tensor",
                crate::ggml::type_name(a.ggml_type())
            )));
        }
        // SAFETY: an F32 tensor.
        Self::wrap(
            unsafe { ggml_sys::ggml_cumsum(self.ctx.as_ptr(), a.as_ptr()) },
            "cumsum",
        )
    }

    /// The sum of all elements, [1].
    pub fn sum(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(unsafe { ggml_sys::ggml_sum(self.ctx.as_ptr(), a.as_ptr()) }, "sum")
    }

    /// 1 where `a > 0`, else 0.
    pub fn step(&mut self, a: TensorRef) -> OpResult {
        self.unary(a, "step", ggml_sys::ggml_step)
    }

    pub fn log(&mut self, a: TensorRef) -> OpResult {
        self.unary(a, "log", ggml_sys::ggml_log)
    }

    pub fn exp(&mut self, a: TensorRef) -> OpResult {
        self.unary(a, "exp", ggml_sys::ggml_exp)
    }

    pub(super) fn unary(
        &mut self,
        a: TensorRef,
        what: &str,
        op: unsafe extern "C" fn(*mut ggml_sys::ggml_context, *mut ggml_sys::ggml_tensor) -> *mut ggml_sys::ggml_tensor,
    ) -> OpResult {
        self.room()?;
        if !matches!(a.ggml_type(), F32 | F16) || !Self::rows_contiguous(a) {
            return Err(GgmlError(format!("{what} of {:?}", a.ne())));
        }
        // SAFETY: a float tensor with contiguous rows (the CPU kernels' requirement).
        Self::wrap(unsafe { op(self.ctx.as_ptr(), a.as_ptr()) }, what)
    }

    /// `a * s + b`.
    pub fn scale_bias(&mut self, a: TensorRef, s: f32, b: f32) -> OpResult {
        self.room()?;
        if !Self::is_contiguous(a) {
            return Err(GgmlError(format!("scale of a non-contiguous {:?}", a.ne())));
        }
        // SAFETY: a contiguous tensor (ggml asserts padded rows).
        Self::wrap(
            unsafe { ggml_sys::ggml_scale_bias(self.ctx.as_ptr(), a.as_ptr(), s, b) },
            "scale_bias",
        )
    }

    /// `a - b`, with `b` broadcast over `a`.
    pub fn sub(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        Self::binary_types(a, b)?;
        if !Self::can_repeat(b, a) {
            return Err(GgmlError(format!(
                "sub: {:?} does not broadcast over {:?}",
                b.ne(),
                a.ne()
            )));
        }
        // SAFETY: broadcast checked.
        Self::wrap(
            unsafe { ggml_sys::ggml_sub(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr()) },
            "sub",
        )
    }

    /// A tensor shaped as `a`, every element `v`.
    pub fn fill(&mut self, a: TensorRef, v: f32) -> OpResult {
        self.room()?;
        if !matches!(a.ggml_type(), F32 | F16) || !Self::is_contiguous(a) {
            return Err(GgmlError(format!("fill of {:?}", a.ne())));
        }
        // SAFETY: a contiguous float tensor.
        Self::wrap(unsafe { ggml_sys::ggml_fill(self.ctx.as_ptr(), a.as_ptr(), v) }, "fill")
    }
}

#[cfg(test)]
mod tests {
    use crate::ggml::{tensor_get_f32, tensor_read, tensor_set, CpuBackend, Graph, Scheduler};

    const F32: crate::ggml::RawType = ggml_sys::ggml_type_GGML_TYPE_F32;

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn row_reductions_pick_what_the_cpu_would() {
        let backend = CpuBackend::new(1).unwrap();
        let mut g = Graph::new(64).unwrap();
        let x = g.input(F32, &[5], "x").unwrap();
        let m = g.reshape(x, &[5, 1]).unwrap();
        let best = g.argmax(m).unwrap();
        let top = g.top_k(x, 2).unwrap();
        let sorted = g.argsort_desc(x).unwrap();
        let sm = g.soft_max_rows(x).unwrap();
        let cdf = g.cumsum(sm).unwrap();
        let total = g.sum(sm).unwrap();
        let pos = g.step(x).unwrap();
        for t in [best, top, sorted, cdf, total, pos] {
            g.output(t);
        }
        let sched = Scheduler::new(&backend, &[], 64, true).unwrap();
        sched.alloc(&g).unwrap();
        tensor_set(x, &f32_bytes(&[0.5, -1.0, 3.0, 2.0, 0.0])).unwrap();
        sched.compute(&g);
        let ints = |t, n: usize| {
            let mut b = vec![0u8; 4 * n];
            tensor_read(t, 0, &mut b).unwrap();
            b.chunks(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                .collect::<Vec<_>>()
        };
        assert_eq!(ints(best, 1), [2]);
        let mut t = ints(top, 2);
        t.sort_unstable();
        assert_eq!(t, [2, 3]);
        assert_eq!(ints(sorted, 5), [2, 3, 0, 4, 1]);
        let mut c = [0f32; 5];
        tensor_get_f32(cdf, &mut c).unwrap();
        assert!((c[4] - 1.0).abs() < 1e-5 && c.windows(2).all(|w| w[0] <= w[1]));
        let mut s = [0f32; 1];
        tensor_get_f32(total, &mut s).unwrap();
        assert!((s[0] - 1.0).abs() < 1e-5);
        let mut p = [0f32; 5];
        tensor_get_f32(pos, &mut p).unwrap();
        assert_eq!(p, [1.0, 0.0, 1.0, 1.0, 0.0]);
    }

    #[test]
    fn sampling_ops_refuse_what_ggml_would_abort_on() {
        let mut g = Graph::new(16).unwrap();
        let x = g.input(F32, &[4], "x").unwrap();
        assert!(g.top_k(x, 5).is_err());
        assert!(g.top_k(x, 0).is_err());
        let i = g.input(ggml_sys::ggml_type_GGML_TYPE_I32, &[4], "i").unwrap();
        assert!(g.cumsum(i).is_err());
        assert!(g.log(i).is_err());
        let cube = g.reshape(x, &[2, 1, 2]).unwrap();
        assert!(g.argmax(cube).is_err());
    }
}
