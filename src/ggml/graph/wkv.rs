//! The ops of linear attention with a per-head matrix state carried token to token (ggml's WKV
//! kernels and its gated linear attention), and the element-wise pieces around them. Their CPU
//! kernels read every input as contiguous F32 and split the tokens evenly over the sequences of
//! the state, so each is checked here first.

use super::{Graph, OpResult};
use crate::ggml::{GgmlError, TensorRef};

const F32: crate::ggml::RawType = ggml_sys::ggml_type_GGML_TYPE_F32;

impl Graph {
    /// Whether `inputs` ([S, H, n_tokens] each, the first giving the shape) and `state` (S·S·H
    /// floats per sequence, [.., n_seqs]) fit the kernels: contiguous F32, the tokens a whole
    /// number per sequence.
    fn wkv_fits(inputs: &[TensorRef], state: TensorRef) -> bool {
        let [s, h, n_t, _] = inputs[0].ne();
        let n_seqs = state.ne()[1];
        inputs
            .iter()
            .chain([&state])
            .all(|&t| t.ggml_type() == F32 && Self::is_contiguous(t))
            && inputs.iter().all(|&t| t.ne() == [s, h, n_t, 1])
            && n_seqs > 0
            && n_t % n_seqs == 0
            && state.ne().iter().product::<i64>() == s * s * h * n_seqs
    }

    /// The WKV-6 recurrence per head: over each sequence's tokens, the output `r·(u ⊙ kᵀv + S)`
    /// and the state `S ← diag(w)·S + kᵀv`, from keys `k`, values `v`, receptances `r` and
    /// decays `w` ([S, H, n_tokens]), the bonus `u` ([S, H]) and the states ([S·S·H, n_seqs]).
    /// The result holds the outputs ([S·H] per token), then the last states.
    pub fn wkv6(
        &mut self,
        k: TensorRef,
        v: TensorRef,
        r: TensorRef,
        u: TensorRef,
        w: TensorRef,
        state: TensorRef,
    ) -> OpResult {
        self.room()?;
        let [s, h, ..] = k.ne();
        let ok = Self::wkv_fits(&[k, v, r, w], state)
            && u.ggml_type() == F32
            && Self::is_contiguous(u)
            && u.ne().iter().product::<i64>() == s * h;
        if !ok {
            return Err(GgmlError(format!(
                "wkv6: k {:?}, v {:?}, r {:?}, u {:?}, w {:?}, state {:?} do not fit (all contiguous F32)",
                k.ne(),
                v.ne(),
                r.ne(),
                u.ne(),
                w.ne(),
                state.ne()
            )));
        }
        // SAFETY: shapes, layouts and types as ggml and its CPU kernel assert and read them.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_rwkv_wkv6(
                    self.ctx.as_ptr(),
                    k.as_ptr(),
                    v.as_ptr(),
                    r.as_ptr(),
                    u.as_ptr(),
                    w.as_ptr(),
                    state.as_ptr(),
                )
            },
            "rwkv_wkv6",
        )
    }

    /// Gated linear attention per head: the state `S ← diag(g)·S + kᵀv` and the output
    /// `scale · q·S` after each token, from keys `k`, values `v`, queries `q` and gates `g`
    /// ([S, H, n_tokens]) and the states ([S·S·H, n_seqs]). The result holds the outputs, then
    /// the last states.
    pub fn gated_linear_attn(
        &mut self,
        k: TensorRef,
        v: TensorRef,
        q: TensorRef,
        g: TensorRef,
        state: TensorRef,
        scale: f32,
    ) -> OpResult {
        self.room()?;
        if !Self::wkv_fits(&[k, v, q, g], state) {
            return Err(GgmlError(format!(
                "gated_linear_attn: k {:?}, v {:?}, q {:?}, g {:?}, state {:?} do not fit (all contiguous F32)",
                k.ne(),
                v.ne(),
                q.ne(),
                g.ne(),
                state.ne()
            )));
        }
        // SAFETY: shapes, layouts and types as ggml and its CPU kernel assert and read them.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_gated_linear_attn(
                    self.ctx.as_ptr(),
                    k.as_ptr(),
                    v.as_ptr(),
                    q.as_ptr(),
                    g.as_ptr(),
                    state.as_ptr(),
                    scale,
                )
            },
            "gated_linear_attn",
        )
    }

    /// The WKV-7 recurrence per head: over each sequence's tokens, the state
    /// `S ← S·diag(w) + (S·a)bᵀ + vkᵀ` and the output `S·r`, from receptances `r`, decays `w`,
    /// keys `k`, values `v` and the in-context learning vectors `a`, `b` ([S, H, n_tokens]) and
    /// the states ([S·S·H, n_seqs]). The result holds the outputs, then the last states.
    #[allow(clippy::too_many_arguments)]
    pub fn wkv7(
        &mut self,
        r: TensorRef,
        w: TensorRef,
        k: TensorRef,
        v: TensorRef,
        a: TensorRef,
        b: TensorRef,
        state: TensorRef,
    ) -> OpResult {
        self.room()?;
        if !Self::wkv_fits(&[k, r, w, v, a, b], state) {
            return Err(GgmlError(format!(
                "wkv7: r {:?}, w {:?}, k {:?}, v {:?}, a {:?}, b {:?}, state {:?} do not fit (all contiguous F32)",
                r.ne(),
                w.ne(),
                k.ne(),
                v.ne(),
                a.ne(),
                b.ne(),
                state.ne()
            )));
        }
        // SAFETY: shapes, layouts and types as ggml and its CPU kernel assert and read them.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_rwkv_wkv7(
                    self.ctx.as_ptr(),
                    r.as_ptr(),
                    w.as_ptr(),
                    k.as_ptr(),
                    v.as_ptr(),
                    a.as_ptr(),
                    b.as_ptr(),
                    state.as_ptr(),
                )
            },
            "rwkv_wkv7",
        )
    }

    /// Each row of `a` divided by its Euclidean length, at least `eps`.
    pub fn l2_norm(&mut self, a: TensorRef, eps: f32) -> OpResult {
        self.room()?;
        if a.ggml_type() != F32 || eps.is_nan() || eps < 0.0 {
            return Err(GgmlError(format!("l2_norm of {:?} with epsilon {eps}", a.ne())));
        }
        // SAFETY: F32 (the CPU kernel's type; it reads by strides), a non-negative epsilon.
        Self::wrap(
            unsafe { ggml_sys::ggml_l2_norm(self.ctx.as_ptr(), a.as_ptr(), eps) },
            "l2_norm",
        )
    }

    /// -a, element-wise.
    pub fn neg(&mut self, a: TensorRef) -> OpResult {
        self.unary(a, "neg", ggml_sys::ggml_neg)
    }
}
