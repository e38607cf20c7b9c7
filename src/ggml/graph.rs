//! A compute graph under construction: its own ggml context (tensor descriptions only; the
//! scheduler places the data) and the ops the engine uses. ggml aborts on inconsistent shapes, so
//! each op checks what ggml would assert and returns an error instead.

use super::{RawType, TensorRef};
use std::ptr::NonNull;

pub type OpResult = Result<TensorRef, String>;

pub struct Graph {
    ctx: NonNull<ggml_sys::ggml_context>,
    gf: NonNull<ggml_sys::ggml_cgraph>,
    max_tensors: usize,
    n_tensors: usize,
}

// SAFETY: a graph is plain memory used by one context on one thread at a time.
unsafe impl Send for Graph {}

/// ggml's rope modes (`GGML_ROPE_TYPE_*`).
pub const ROPE_NORMAL: i32 = 0;
pub const ROPE_NEOX: i32 = 2;

impl Graph {
    /// An empty graph with room for `max_nodes` nodes (and as many tensor descriptions).
    pub fn new(max_nodes: usize) -> Result<Graph, String> {
        super::init();
        // SAFETY: size queries.
        let mem_size = unsafe {
            ggml_sys::ggml_tensor_overhead() * max_nodes + ggml_sys::ggml_graph_overhead_custom(max_nodes, false)
        };
        // SAFETY: a no_alloc context with a ggml-allocated pool; checked for NULL.
        let ctx = unsafe {
            ggml_sys::ggml_init(ggml_sys::ggml_init_params {
                mem_size,
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            })
        };
        let ctx = NonNull::new(ctx).ok_or("ggml_init failed for a graph")?;
        // SAFETY: the pool was sized for the graph object above.
        let gf = unsafe { ggml_sys::ggml_new_graph_custom(ctx.as_ptr(), max_nodes, false) };
        let Some(gf) = NonNull::new(gf) else {
            // SAFETY: freeing the context we just made.
            unsafe { ggml_sys::ggml_free(ctx.as_ptr()) };
            return Err("ggml_new_graph_custom failed".to_string());
        };
        Ok(Graph {
            ctx,
            gf,
            max_tensors: max_nodes,
            n_tensors: 0,
        })
    }

    pub(crate) fn raw(&self) -> *mut ggml_sys::ggml_cgraph {
        self.gf.as_ptr()
    }

    pub fn n_nodes(&self) -> i32 {
        // SAFETY: live graph.
        unsafe { ggml_sys::ggml_graph_n_nodes(self.gf.as_ptr()) }
    }

    /// Count a new tensor description against the pool, which ggml would overflow with an abort.
    fn room(&mut self) -> Result<(), String> {
        if self.n_tensors >= self.max_tensors {
            return Err(format!("graph exceeds {} tensors", self.max_tensors));
        }
        self.n_tensors += 1;
        Ok(())
    }

    fn wrap(p: *mut ggml_sys::ggml_tensor, what: &str) -> OpResult {
        NonNull::new(p)
            .map(TensorRef)
            .ok_or_else(|| format!("ggml returned NULL for {what}"))
    }

    /// A new input tensor (marked as such, so the scheduler gives it its own memory). A dimension
    /// may be 0: a ubatch without outputs selects no rows, as in llama.cpp.
    pub fn input(&mut self, t: RawType, ne: &[i64], name: &str) -> OpResult {
        self.room()?;
        if ne.is_empty() || ne.len() > 4 || ne.iter().any(|&n| n < 0) {
            return Err(format!("bad input shape {ne:?} for {name}"));
        }
        let cname = std::ffi::CString::new(name).map_err(|_| "NUL in a tensor name".to_string())?;
        // SAFETY: valid type (from ggml's own constants), 1..=4 non-negative dims, pool has room.
        let p = unsafe {
            let p = ggml_sys::ggml_new_tensor(self.ctx.as_ptr(), t, ne.len() as i32, ne.as_ptr());
            if !p.is_null() {
                ggml_sys::ggml_set_name(p, cname.as_ptr());
                ggml_sys::ggml_set_input(p);
            }
            p
        };
        Self::wrap(p, name)
    }

    /// Name `t` (what `cb_eval` callbacks and ggml's debugging see). Longer names are cut at
    /// ggml's limit.
    pub fn set_name(&mut self, t: TensorRef, name: &str) {
        let mut bytes: Vec<u8> = name.bytes().filter(|&c| c != 0).take(63).collect();
        bytes.push(0);
        // SAFETY: the tensor belongs to this graph's context; the name is NUL-terminated and fits
        // ggml's 64-byte name field, which ggml_set_name copies into.
        unsafe { ggml_sys::ggml_set_name(t.as_ptr(), bytes.as_ptr().cast()) };
    }

    /// Make `t` part of the graph's outputs (computed, kept readable after compute).
    pub fn output(&mut self, t: TensorRef) {
        // SAFETY: the tensor belongs to this graph's context (or a weight arena), both alive.
        unsafe {
            ggml_sys::ggml_set_output(t.as_ptr());
            ggml_sys::ggml_build_forward_expand(self.gf.as_ptr(), t.as_ptr());
        }
    }

    /// Make sure `t` (a side effect such as a KV-cache write) is computed.
    pub fn expand(&mut self, t: TensorRef) {
        // SAFETY: as above.
        unsafe { ggml_sys::ggml_build_forward_expand(self.gf.as_ptr(), t.as_ptr()) }
    }

    pub fn get_rows(&mut self, a: TensorRef, rows: TensorRef) -> OpResult {
        self.room()?;
        let (an, rn) = (a.ne(), rows.ne());
        if rows.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_I32 || rn[1] != 1 || an[2] != 1 || an[3] != 1 {
            return Err(format!("get_rows: shapes {an:?} / {rn:?}"));
        }
        // SAFETY: shapes checked as ggml asserts them (2D source, 1D I32 index).
        Self::wrap(
            unsafe { ggml_sys::ggml_get_rows(self.ctx.as_ptr(), a.as_ptr(), rows.as_ptr()) },
            "get_rows",
        )
    }

    pub fn rms_norm(&mut self, a: TensorRef, eps: f32) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(
            unsafe { ggml_sys::ggml_rms_norm(self.ctx.as_ptr(), a.as_ptr(), eps) },
            "rms_norm",
        )
    }

    /// ggml's broadcast rule: an empty `b` repeats only into an empty `a`.
    fn can_repeat(b: TensorRef, a: TensorRef) -> bool {
        let (an, bn) = (a.ne(), b.ne());
        if bn.contains(&0) {
            return an.contains(&0);
        }
        (0..4).all(|i| an[i] % bn[i] == 0)
    }

    pub fn mul(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        if !Self::can_repeat(b, a) {
            return Err(format!("mul: {:?} does not broadcast over {:?}", b.ne(), a.ne()));
        }
        // SAFETY: broadcast checked.
        Self::wrap(
            unsafe { ggml_sys::ggml_mul(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr()) },
            "mul",
        )
    }

    pub fn add(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        if !Self::can_repeat(b, a) {
            return Err(format!("add: {:?} does not broadcast over {:?}", b.ne(), a.ne()));
        }
        // SAFETY: broadcast checked.
        Self::wrap(
            unsafe { ggml_sys::ggml_add(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr()) },
            "add",
        )
    }

    pub fn scale(&mut self, a: TensorRef, s: f32) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(
            unsafe { ggml_sys::ggml_scale(self.ctx.as_ptr(), a.as_ptr(), s) },
            "scale",
        )
    }

    pub fn tanh(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(unsafe { ggml_sys::ggml_tanh(self.ctx.as_ptr(), a.as_ptr()) }, "tanh")
    }

    /// `w` (weights, [k, n]) times `x` ([k, m]) = [n, m].
    pub fn mul_mat(&mut self, w: TensorRef, x: TensorRef) -> OpResult {
        self.room()?;
        let (wn, xn) = (w.ne(), x.ne());
        if wn[0] != xn[0] || xn[2] % wn[2] != 0 || xn[3] % wn[3] != 0 {
            return Err(format!("mul_mat: {wn:?} x {xn:?}"));
        }
        // SAFETY: ggml_can_mul_mat holds (checked above); the result is F32.
        Self::wrap(
            unsafe { ggml_sys::ggml_mul_mat(self.ctx.as_ptr(), w.as_ptr(), x.as_ptr()) },
            "mul_mat",
        )
    }

    fn is_contiguous(t: TensorRef) -> bool {
        // SAFETY: reading a live tensor.
        unsafe { ggml_sys::ggml_is_contiguous(t.as_ptr()) }
    }

    fn n_elements(ne: &[i64]) -> i64 {
        ne.iter().product()
    }

    pub fn reshape(&mut self, a: TensorRef, ne: &[i64]) -> OpResult {
        self.room()?;
        if !Self::is_contiguous(a) || Self::n_elements(ne) != Self::n_elements(&a.ne()) || ne.is_empty() {
            return Err(format!("reshape {:?} to {ne:?}", a.ne()));
        }
        let ctx = self.ctx.as_ptr();
        // SAFETY: contiguous source with the same element count.
        let p = unsafe {
            match *ne {
                [n0] => ggml_sys::ggml_reshape_1d(ctx, a.as_ptr(), n0),
                [n0, n1] => ggml_sys::ggml_reshape_2d(ctx, a.as_ptr(), n0, n1),
                [n0, n1, n2] => ggml_sys::ggml_reshape_3d(ctx, a.as_ptr(), n0, n1, n2),
                [n0, n1, n2, n3] => ggml_sys::ggml_reshape_4d(ctx, a.as_ptr(), n0, n1, n2, n3),
                _ => return Err(format!("reshape to {} dims", ne.len())),
            }
        };
        Self::wrap(p, "reshape")
    }

    /// A strided view of `a`: shape `ne`, byte strides `nb` (for dims 1..), starting at `offset`.
    pub fn view(&mut self, a: TensorRef, ne: &[i64], nb: &[usize], offset: usize) -> OpResult {
        self.room()?;
        if ne.is_empty() || ne.len() > 4 || nb.len() + 1 != ne.len() || ne.iter().any(|&n| n <= 0) {
            return Err(format!("view {ne:?} / {nb:?}"));
        }
        // The end of the last row the view touches must lie inside `a`.
        // SAFETY: a size query for a valid type.
        let mut end = offset + unsafe { ggml_sys::ggml_row_size(a.ggml_type(), ne[0]) };
        for (i, &stride) in nb.iter().enumerate() {
            end += (ne[i + 1] as usize - 1) * stride;
        }
        if end > a.nbytes() {
            return Err(format!(
                "view {ne:?} at {offset} leaves a tensor of {} bytes",
                a.nbytes()
            ));
        }
        let ctx = self.ctx.as_ptr();
        // SAFETY: the view lies inside the source tensor (checked above).
        let p = unsafe {
            match (ne, nb) {
                ([n0], []) => ggml_sys::ggml_view_1d(ctx, a.as_ptr(), *n0, offset),
                ([n0, n1], [b1]) => ggml_sys::ggml_view_2d(ctx, a.as_ptr(), *n0, *n1, *b1, offset),
                ([n0, n1, n2], [b1, b2]) => ggml_sys::ggml_view_3d(ctx, a.as_ptr(), *n0, *n1, *n2, *b1, *b2, offset),
                ([n0, n1, n2, n3], [b1, b2, b3]) => {
                    ggml_sys::ggml_view_4d(ctx, a.as_ptr(), *n0, *n1, *n2, *n3, *b1, *b2, *b3, offset)
                }
                _ => return Err("view arity".to_string()),
            }
        };
        Self::wrap(p, "view")
    }

    pub fn permute(&mut self, a: TensorRef, axes: [i32; 4]) -> OpResult {
        self.room()?;
        let mut seen = [false; 4];
        for &x in &axes {
            if !(0..4).contains(&x) || std::mem::replace(&mut seen[x as usize], true) {
                return Err(format!("permute axes {axes:?}"));
            }
        }
        // SAFETY: a permutation of 0..4.
        Self::wrap(
            unsafe { ggml_sys::ggml_permute(self.ctx.as_ptr(), a.as_ptr(), axes[0], axes[1], axes[2], axes[3]) },
            "permute",
        )
    }

    /// `a` converted to type `t`.
    pub fn cast(&mut self, a: TensorRef, t: RawType) -> OpResult {
        self.room()?;
        // SAFETY: any tensor may be converted to a float type; quantized targets need whole blocks,
        // which the callers' shapes (cache rows) have.
        Self::wrap(unsafe { ggml_sys::ggml_cast(self.ctx.as_ptr(), a.as_ptr(), t) }, "cast")
    }

    /// Copy `a` into `b` (same element count, converting types); returns the updated `b`.
    pub fn copy_into(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        if Self::n_elements(&a.ne()) != Self::n_elements(&b.ne()) {
            return Err(format!("copy {:?} into {:?}", a.ne(), b.ne()));
        }
        // SAFETY: equal element counts (what ggml asserts).
        Self::wrap(
            unsafe { ggml_sys::ggml_cpy(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr()) },
            "cpy",
        )
    }

    pub fn cont(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any tensor may be made contiguous.
        Self::wrap(unsafe { ggml_sys::ggml_cont(self.ctx.as_ptr(), a.as_ptr()) }, "cont")
    }

    /// Rotary position embedding of `a` ([head_dim, n_head, n_tokens]) at positions `pos` (I32).
    #[allow(clippy::too_many_arguments)]
    pub fn rope(
        &mut self,
        a: TensorRef,
        pos: TensorRef,
        freq_factors: Option<TensorRef>,
        n_rot: i32,
        mode: i32,
        n_ctx_orig: i32,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
    ) -> OpResult {
        self.room()?;
        let (an, pn) = (a.ne(), pos.ne());
        if pos.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_I32 || pn[0] != an[2] || n_rot as i64 > an[0] {
            return Err(format!("rope: {an:?} at positions {pn:?}"));
        }
        let ff = freq_factors.map_or(std::ptr::null_mut(), |f| f.as_ptr());
        // SAFETY: positions match the token dimension; freq factors (if any) come from the model.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_rope_ext(
                    self.ctx.as_ptr(),
                    a.as_ptr(),
                    pos.as_ptr(),
                    ff,
                    n_rot,
                    mode,
                    n_ctx_orig,
                    freq_base,
                    freq_scale,
                    ext_factor,
                    attn_factor,
                    beta_fast,
                    beta_slow,
                )
            },
            "rope",
        )
    }

    /// Write the rows of `src` into `dst` at the row indices `idx` (I64); returns the updated `dst`.
    pub fn set_rows(&mut self, dst: TensorRef, src: TensorRef, idx: TensorRef) -> OpResult {
        self.room()?;
        let (dn, sn, inn) = (dst.ne(), src.ne(), idx.ne());
        if dn[0] != sn[0] || inn[0] != sn[1] || idx.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_I64 {
            return Err(format!("set_rows: {sn:?} into {dn:?} at {inn:?}"));
        }
        // SAFETY: row width, index count and index type checked.
        Self::wrap(
            unsafe { ggml_sys::ggml_set_rows(self.ctx.as_ptr(), dst.as_ptr(), src.as_ptr(), idx.as_ptr()) },
            "set_rows",
        )
    }

    /// Fused attention: softmax(scale * q k^T + mask) v with F32 accumulation.
    pub fn flash_attn(&mut self, q: TensorRef, k: TensorRef, v: TensorRef, mask: TensorRef, scale: f32) -> OpResult {
        self.room()?;
        let (qn, kn, vn, mn) = (q.ne(), k.ne(), v.ne(), mask.ne());
        let ok = qn[0] == kn[0]
            && kn[1] == vn[1]
            && qn[2] % kn[2] == 0
            && qn[3] == kn[3]
            && qn[3] == vn[3]
            && mn[0] == kn[1]
            && mn[1] >= qn[1]
            && Self::is_contiguous(mask);
        if !ok {
            return Err(format!("flash_attn: q {qn:?} k {kn:?} v {vn:?} mask {mn:?}"));
        }
        // SAFETY: shapes checked as ggml asserts them; precision setter applies to this op only.
        let p = unsafe {
            let p = ggml_sys::ggml_flash_attn_ext(
                self.ctx.as_ptr(),
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                mask.as_ptr(),
                scale,
                0.0,
                0.0,
            );
            if !p.is_null() {
                ggml_sys::ggml_flash_attn_ext_set_prec(p, ggml_sys::ggml_prec_GGML_PREC_F32);
            }
            p
        };
        Self::wrap(p, "flash_attn_ext")
    }

    /// softmax(scale * a + mask) along rows.
    pub fn soft_max(&mut self, a: TensorRef, mask: TensorRef, scale: f32) -> OpResult {
        self.room()?;
        let (an, mn) = (a.ne(), mask.ne());
        if mn[0] != an[0] || mn[1] < an[1] || !Self::is_contiguous(mask) {
            return Err(format!("soft_max: {an:?} with mask {mn:?}"));
        }
        // SAFETY: mask covers the rows (checked).
        Self::wrap(
            unsafe { ggml_sys::ggml_soft_max_ext(self.ctx.as_ptr(), a.as_ptr(), mask.as_ptr(), scale, 0.0) },
            "soft_max_ext",
        )
    }

    /// silu(gate) * up.
    pub fn swiglu(&mut self, gate: TensorRef, up: TensorRef) -> OpResult {
        self.room()?;
        if gate.ne() != up.ne() {
            return Err(format!("swiglu: {:?} vs {:?}", gate.ne(), up.ne()));
        }
        // SAFETY: equal shapes.
        Self::wrap(
            unsafe { ggml_sys::ggml_swiglu_split(self.ctx.as_ptr(), gate.as_ptr(), up.as_ptr()) },
            "swiglu",
        )
    }

    /// gelu(gate) * up.
    pub fn geglu(&mut self, gate: TensorRef, up: TensorRef) -> OpResult {
        self.room()?;
        if gate.ne() != up.ne() {
            return Err(format!("geglu: {:?} vs {:?}", gate.ne(), up.ne()));
        }
        // SAFETY: equal shapes.
        Self::wrap(
            unsafe { ggml_sys::ggml_geglu_split(self.ctx.as_ptr(), gate.as_ptr(), up.as_ptr()) },
            "geglu",
        )
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: the context (which owns the graph object) is freed once.
        unsafe { ggml_sys::ggml_free(self.ctx.as_ptr()) }
    }
}
