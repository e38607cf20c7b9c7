//! The ops of state-space (recurrent) layers: the rolling convolution window and the selective
//! scan, with the concatenation and transposition that feed them. ggml asserts their shapes and
//! its CPU kernels their F32 types, so each is checked here first.

use super::{Graph, OpResult};
use crate::ggml::{GgmlError, TensorRef};

const F32: crate::ggml::RawType = ggml_sys::ggml_type_GGML_TYPE_F32;

impl Graph {
    /// `a` and `b` joined along dimension `dim` (all other dimensions equal, same type).
    pub fn concat(&mut self, a: TensorRef, b: TensorRef, dim: usize) -> OpResult {
        self.room()?;
        let (an, bn) = (a.ne(), b.ne());
        let same_elsewhere = (0..4).all(|d| d == dim || an[d] == bn[d]);
        if dim > 3 || a.ggml_type() != b.ggml_type() || !same_elsewhere {
            return Err(GgmlError(format!("concat {an:?} and {bn:?} along {dim}")));
        }
        // SAFETY: dimension in range, types equal, other dimensions equal (ggml's asserts).
        Self::wrap(
            unsafe { ggml_sys::ggml_concat(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr(), dim as i32) },
            "concat",
        )
    }

    /// `a` with its first two dimensions swapped (a view).
    pub fn transpose(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any tensor may be transposed.
        Self::wrap(
            unsafe { ggml_sys::ggml_transpose(self.ctx.as_ptr(), a.as_ptr()) },
            "transpose",
        )
    }

    /// Zero `a` in place (a view into a state tensor), as a graph node.
    pub fn zero_in_place(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any tensor may be scaled; the result is a view of `a`.
        Self::wrap(
            unsafe { ggml_sys::ggml_scale_inplace(self.ctx.as_ptr(), a.as_ptr(), 0.0) },
            "scale_inplace",
        )
    }

    /// The depthwise causal convolution of `sx` ([d_conv - 1 + n_t, channels, n_seqs]: each
    /// sequence's previous window followed by its new columns) with the kernels `c`
    /// ([d_conv, channels]): [channels, n_t, n_seqs].
    pub fn ssm_conv(&mut self, sx: TensorRef, c: TensorRef) -> OpResult {
        self.room()?;
        let (sn, cn) = (sx.ne(), c.ne());
        let ok = sx.ggml_type() == F32
            && c.ggml_type() == F32
            && sn[3] == 1
            && cn[2] == 1
            && cn[3] == 1
            && sn[1] == cn[1]
            && sn[0] >= cn[0] - 1
            && sx.nb()[0] == 4
            && sx.nb()[1] == sn[0] as usize * 4
            && Self::is_contiguous(c);
        if !ok {
            return Err(GgmlError(format!(
                "ssm_conv: window {sn:?} ({}) with kernels {cn:?} ({}): both must be F32 with matching channels",
                crate::ggml::type_name(sx.ggml_type()),
                crate::ggml::type_name(c.ggml_type())
            )));
        }
        // SAFETY: 3-d input, matrix kernels, channel counts equal, F32 rows each window's
        // channels adjacent (ggml's and its CPU kernel's asserts; sequences may lie anywhere).
        Self::wrap(
            unsafe { ggml_sys::ggml_ssm_conv(self.ctx.as_ptr(), sx.as_ptr(), c.as_ptr()) },
            "ssm_conv",
        )
    }

    /// The selective scan over states `s` ([d_state, head_dim, n_head, slots]) picked by `ids`
    /// (I32 [n_seqs]) for inputs `x` ([head_dim, n_head, n_seq_tokens, n_seqs]), step sizes
    /// `dt` ([n_head, n_seq_tokens, n_seqs]), decays `a` ([1 or d_state, n_head]) and the
    /// projections `b`, `c` ([d_state, n_group, n_seq_tokens, n_seqs]). The result holds the
    /// outputs, then the `k` last states of each sequence.
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_scan(
        &mut self,
        s: TensorRef,
        x: TensorRef,
        dt: TensorRef,
        a: TensorRef,
        b: TensorRef,
        c: TensorRef,
        ids: TensorRef,
        k: i64,
    ) -> OpResult {
        self.room()?;
        let (sn, xn, dn, an, bn, idn) = (s.ne(), x.ne(), dt.ne(), a.ne(), b.ne(), ids.ne());
        let f32_all = [s, x, dt, a, b, c].iter().all(|t| t.ggml_type() == F32);
        let elem = |t: TensorRef| t.nb()[0] == 4 && t.nb()[1] == t.ne()[0] as usize * 4;
        let ok = f32_all
            && ids.ggml_type() == ggml_sys::ggml_type_GGML_TYPE_I32
            && (1..=i64::from(i32::MAX)).contains(&k)
            && Self::is_contiguous(s)
            && Self::is_contiguous(dt)
            && Self::is_contiguous(a)
            && elem(x)
            && elem(b)
            && elem(c)
            && b.ne() == c.ne()
            && dn == [xn[1], xn[2], xn[3], 1]
            && sn[1] == xn[0]
            && sn[2] == xn[1]
            && bn[0] == sn[0]
            && bn[1] > 0
            && xn[1] % bn[1] == 0
            && bn[2] == xn[2]
            && bn[3] == xn[3]
            && idn == [xn[3], 1, 1, 1]
            && an[1] == xn[1]
            && an[2] == 1
            && an[3] == 1
            && (an[0] == 1 || (an[0] == sn[0] && k == 1));
        if !ok {
            return Err(GgmlError(format!(
                "ssm_scan: states {sn:?}, x {xn:?}, dt {dn:?}, A {an:?}, B {bn:?}, ids {idn:?} do not fit (all F32)"
            )));
        }
        // SAFETY: every shape, stride and type ggml and its CPU kernel assert was checked above.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_ssm_scan(
                    self.ctx.as_ptr(),
                    s.as_ptr(),
                    x.as_ptr(),
                    dt.as_ptr(),
                    a.as_ptr(),
                    b.as_ptr(),
                    c.as_ptr(),
                    ids.as_ptr(),
                    k,
                )
            },
            "ssm_scan",
        )
    }

    /// log(1 + exp(a)), element-wise.
    pub fn softplus(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        if a.ggml_type() != F32 || !Self::rows_contiguous(a) {
            return Err(GgmlError(format!("softplus of {:?}", a.ne())));
        }
        // SAFETY: F32 rows, contiguous (the CPU kernel's requirement).
        Self::wrap(
            unsafe { ggml_sys::ggml_softplus(self.ctx.as_ptr(), a.as_ptr()) },
            "softplus",
        )
    }

    /// Per token, the weighted sum of `x`'s rows ([n, rows, n_tokens]) by `weights` ([rows,
    /// n_tokens]): [n, n_tokens] (ggml's `dsv4_hc_pre`).
    pub fn weighted_rows(&mut self, x: TensorRef, weights: TensorRef) -> OpResult {
        self.room()?;
        let (xn, wn) = (x.ne(), weights.ne());
        let ok =
            x.ggml_type() == F32 && weights.ggml_type() == F32 && xn[1] > 0 && xn[3] == 1 && wn == [xn[1], xn[2], 1, 1];
        if !ok {
            return Err(GgmlError(format!(
                "weighted_rows: x {xn:?}, weights {wn:?} do not fit (both F32)"
            )));
        }
        // SAFETY: types and shapes as ggml and its CPU kernel assert; the kernel reads by strides.
        Self::wrap(
            unsafe { ggml_sys::ggml_dsv4_hc_pre(self.ctx.as_ptr(), x.as_ptr(), weights.as_ptr()) },
            "dsv4_hc_pre",
        )
    }

    /// Per token, `scale` times the sum over `x`'s rows ([n, rows, n_tokens]) of each times the
    /// sigmoid of its gate (`gate`, as `x`): [n, n_tokens] (ggml's `dsv4_hc_pre_gated`).
    pub fn gated_row_mean(&mut self, x: TensorRef, gate: TensorRef, scale: f32) -> OpResult {
        self.room()?;
        let (xn, gn) = (x.ne(), gate.ne());
        let ok = x.ggml_type() == F32 && gate.ggml_type() == F32 && xn[1] > 0 && xn[3] == 1 && gn == xn;
        if !ok {
            return Err(GgmlError(format!(
                "gated_row_mean: x {xn:?}, gate {gn:?} do not fit (both F32)"
            )));
        }
        // SAFETY: types and shapes as ggml and its CPU kernel assert; the kernel reads by strides.
        Self::wrap(
            unsafe { ggml_sys::ggml_dsv4_hc_pre_gated(self.ctx.as_ptr(), x.as_ptr(), gate.as_ptr(), scale) },
            "dsv4_hc_pre_gated",
        )
    }

    /// Each of `residual`'s rows ([n, rows, n_tokens]) plus `x` ([n, n_tokens]) times the row's
    /// weight in `post` ([rows, n_tokens]); with `comb` ([rows, rows, n_tokens]: destination,
    /// source), each destination row is instead the rows of `residual` mixed by it, plus `x` times
    /// its post weight (ggml's `dsv4_hc_post`, whose missing mixing matrix is the identity).
    pub fn add_weighted_rows(
        &mut self,
        x: TensorRef,
        residual: TensorRef,
        post: TensorRef,
        comb: Option<TensorRef>,
    ) -> OpResult {
        self.room()?;
        let (xn, rn, pn) = (x.ne(), residual.ne(), post.ne());
        let comb_ok = comb.is_none_or(|c| c.ggml_type() == F32 && c.ne() == [rn[1], rn[1], rn[2], 1]);
        let ok = [x, residual, post].iter().all(|t| t.ggml_type() == F32)
            && comb_ok
            && rn[1] > 0
            && xn == [rn[0], rn[2], 1, 1]
            && rn[3] == 1
            && pn == [rn[1], rn[2], 1, 1];
        if !ok {
            return Err(GgmlError(format!(
                "add_weighted_rows: x {xn:?}, residual {rn:?}, post {pn:?}, comb {:?} do not fit (all F32)",
                comb.map(|c| c.ne())
            )));
        }
        let comb = comb.map_or(std::ptr::null_mut(), |c| c.as_ptr());
        // SAFETY: types and shapes as ggml and its CPU kernel assert; a null mixing matrix is
        // ggml's documented identity.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_dsv4_hc_post(self.ctx.as_ptr(), x.as_ptr(), residual.as_ptr(), post.as_ptr(), comb)
            },
            "dsv4_hc_post",
        )
    }

    /// The hyper-connections' mixing matrices from their logits, the last `hc * hc` of each
    /// token's `mixes` ([(2 + hc) * hc, n_tokens]) times `scale`'s third value plus the same part
    /// of `base` ([(2 + hc) * hc]): a softmax over each destination column, then `n_iter` Sinkhorn
    /// normalisations with `eps`. Returns [hc, hc, n_tokens] (ggml's `dsv4_hc_comb`).
    pub fn hc_mixing(
        &mut self,
        mixes: TensorRef,
        scale: TensorRef,
        base: TensorRef,
        eps: f32,
        n_iter: u32,
    ) -> OpResult {
        self.room()?;
        let (mn, sn, bn) = (mixes.ne(), scale.ne(), base.ne());
        // (2 + hc) * hc = n: hc is the positive root.
        let hc = (((1.0 + mn[0] as f64).sqrt() - 1.0).round()) as i64;
        let ok = [mixes, scale, base].iter().all(|t| t.ggml_type() == F32)
            && hc > 0
            && (2 + hc) * hc == mn[0]
            && sn[0] >= 3
            && bn[0] == mn[0]
            && n_iter > 0
            && n_iter <= i32::MAX as u32;
        if !ok {
            return Err(GgmlError(format!(
                "hc_mixing: mixes {mn:?}, scale {sn:?}, base {bn:?}, {n_iter} iterations do not fit (all F32)"
            )));
        }
        // SAFETY: types and shapes as ggml and its CPU kernel assert.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_dsv4_hc_comb(
                    self.ctx.as_ptr(),
                    mixes.as_ptr(),
                    scale.as_ptr(),
                    base.as_ptr(),
                    eps,
                    n_iter as i32,
                )
            },
            "dsv4_hc_comb",
        )
    }

    /// The gated delta rule over queries and keys `q`, `k` ([S, H_k, n_tokens, n_seqs]), values
    /// `v` ([S, H_v, n_tokens, n_seqs], H_v a multiple of H_k), a decay `g` ([1 or S, H_v,
    /// n_tokens, n_seqs]), write strengths `beta` ([1, H_v, n_tokens, n_seqs]) and each
    /// sequence's state `state` ([S, S, H_v, n_seqs]). The result holds the outputs, then the `k`
    /// last states (the latest first).
    #[allow(clippy::too_many_arguments)]
    pub fn gated_delta_net(
        &mut self,
        q: TensorRef,
        k: TensorRef,
        v: TensorRef,
        g: TensorRef,
        beta: TensorRef,
        state: TensorRef,
        snapshots: i64,
    ) -> OpResult {
        self.room()?;
        let (qn, kn, vn, gn, bn, sn) = (q.ne(), k.ne(), v.ne(), g.ne(), beta.ne(), state.ne());
        let f32_all = [q, k, v, g, beta, state].iter().all(|t| t.ggml_type() == F32);
        // Each row's elements adjacent (ggml_is_contiguous_rows); rows may lie anywhere.
        let rows = [q, k, v].iter().all(|t| t.nb()[0] == 4);
        let whole = [g, beta, state].iter().all(|&t| Self::is_contiguous(t));
        let [s_v, h, n_t, n_s] = vn;
        let ok = f32_all
            && rows
            && whole
            && (1..=i64::from(i32::MAX)).contains(&snapshots)
            && qn == kn
            && qn[0] == s_v
            && qn[1] > 0
            && h % qn[1] == 0
            && qn[2] == n_t
            && qn[3] == n_s
            && (gn[0] == 1 || gn[0] == s_v)
            && gn[1..] == [h, n_t, n_s]
            && bn == [1, h, n_t, n_s]
            && sn == [s_v, s_v, h, n_s];
        if !ok {
            return Err(GgmlError(format!(
                "gated_delta_net: q {qn:?}, k {kn:?}, v {vn:?}, g {gn:?}, beta {bn:?}, state {sn:?} do not fit (all F32)"
            )));
        }
        // SAFETY: every shape, layout and type ggml and its CPU kernel assert was checked above.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_gated_delta_net(
                    self.ctx.as_ptr(),
                    q.as_ptr(),
                    k.as_ptr(),
                    v.as_ptr(),
                    g.as_ptr(),
                    beta.as_ptr(),
                    state.as_ptr(),
                    snapshots,
                )
            },
            "gated_delta_net",
        )
    }
}
