//! A compute graph under construction: its own ggml context (tensor descriptions only; the
//! scheduler places the data) and the ops the engine uses. ggml aborts on inconsistent shapes, so
//! each op checks what ggml would assert and returns an error instead.

use super::{GgmlError, RawType, TensorRef};
use std::ptr::NonNull;

mod sampling;
mod sparse;
mod ssm;
mod wkv;

pub type OpResult = Result<TensorRef, GgmlError>;

/// How fused attention shapes its scores: the scale of q k^T, ALiBi's maximum bias (0: none; the
/// mask then holds the negated distances the slopes multiply) and the soft cap (0: none).
#[derive(Debug, Clone, Copy)]
pub struct Scores {
    pub scale: f32,
    pub max_bias: f32,
    pub softcap: f32,
}

pub struct Graph {
    ctx: NonNull<ggml_sys::ggml_context>,
    gf: NonNull<ggml_sys::ggml_cgraph>,
    max_tensors: usize,
    n_tensors: usize,
    /// False for a graph lent by its owner (a sampler's part of a decode graph): not freed here.
    owned: bool,
}

// SAFETY: a graph is plain memory used by one context on one thread at a time.
unsafe impl Send for Graph {}

/// ggml's rope modes (`GGML_ROPE_TYPE_*`).
pub const ROPE_NORMAL: i32 = 0;
pub const ROPE_NEOX: i32 = 2;
/// The bit of the multi-dimensional (M-RoPE) modes.
pub const ROPE_MROPE: i32 = 8;
/// Interleaved M-RoPE.
pub const ROPE_IMROPE: i32 = 40;

impl Graph {
    /// An empty graph with room for `max_nodes` nodes (and as many tensor descriptions).
    pub fn new(max_nodes: usize) -> Result<Graph, GgmlError> {
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
        let ctx = NonNull::new(ctx).ok_or_else(|| GgmlError("ggml_init failed for a graph".into()))?;
        // SAFETY: the pool was sized for the graph object above.
        let gf = unsafe { ggml_sys::ggml_new_graph_custom(ctx.as_ptr(), max_nodes, false) };
        let Some(gf) = NonNull::new(gf) else {
            // SAFETY: freeing the context we just made.
            unsafe { ggml_sys::ggml_free(ctx.as_ptr()) };
            return Err(GgmlError("ggml_new_graph_custom failed".into()));
        };
        Ok(Graph {
            ctx,
            gf,
            max_tensors: max_nodes,
            n_tensors: 0,
            owned: true,
        })
    }

    /// The graph `gf` under construction in `ctx`, lent by whoever made them (llama.h hands a
    /// backend sampler the raw pair); new tensors are counted against what is left of the pool.
    ///
    /// # Safety
    /// `ctx` and `gf` must be a live no_alloc context and a graph in it, outliving the result.
    pub unsafe fn borrowed(ctx: NonNull<ggml_sys::ggml_context>, gf: NonNull<ggml_sys::ggml_cgraph>) -> Graph {
        // SAFETY: size queries on a live context (contract).
        let free = unsafe { ggml_sys::ggml_get_mem_size(ctx.as_ptr()) - ggml_sys::ggml_used_mem(ctx.as_ptr()) };
        // SAFETY: a size query.
        let per_tensor = unsafe { ggml_sys::ggml_tensor_overhead() };
        Graph {
            ctx,
            gf,
            max_tensors: free / per_tensor,
            n_tensors: 0,
            owned: false,
        }
    }

    pub(crate) fn raw_ctx(&self) -> *mut ggml_sys::ggml_context {
        self.ctx.as_ptr()
    }

    /// Tensor descriptions in the graph's context (nodes, inputs and views alike).
    pub fn n_tensors(&self) -> usize {
        let mut n = 0;
        // SAFETY: walking the live context's object list.
        let mut t = unsafe { ggml_sys::ggml_get_first_tensor(self.ctx.as_ptr()) };
        while !t.is_null() {
            n += 1;
            // SAFETY: as above.
            t = unsafe { ggml_sys::ggml_get_next_tensor(self.ctx.as_ptr(), t) };
        }
        n
    }

    pub(crate) fn raw(&self) -> *mut ggml_sys::ggml_cgraph {
        self.gf.as_ptr()
    }

    pub fn n_nodes(&self) -> i32 {
        // SAFETY: live graph.
        unsafe { ggml_sys::ggml_graph_n_nodes(self.gf.as_ptr()) }
    }

    /// Its leaves as ggml counts them: the distinct operands of its nodes that no op computes
    /// (weights, inputs, constants).
    pub fn n_leafs(&self) -> usize {
        let mut leafs = std::collections::HashSet::new();
        for i in 0..self.n_nodes() {
            // SAFETY: i is below the node count; a node's sources are NULL or live tensors.
            unsafe {
                let node = ggml_sys::ggml_graph_node(self.gf.as_ptr(), i);
                for &src in &(*node).src {
                    if !src.is_null() && (*src).op == ggml_sys::ggml_op_GGML_OP_NONE {
                        leafs.insert(src);
                    }
                }
            }
        }
        leafs.len()
    }

    /// Count a new tensor description against the pool, which ggml would overflow with an abort.
    fn room(&mut self) -> Result<(), GgmlError> {
        if self.n_tensors >= self.max_tensors {
            return Err(GgmlError(format!("graph exceeds {} tensors", self.max_tensors)));
        }
        self.n_tensors += 1;
        Ok(())
    }

    fn wrap(p: *mut ggml_sys::ggml_tensor, what: &str) -> OpResult {
        NonNull::new(p)
            .map(TensorRef)
            .ok_or_else(|| GgmlError(format!("ggml returned NULL for {what}")))
    }

    /// A new input tensor (marked as such, so the scheduler gives it its own memory). A dimension
    /// may be 0: a ubatch without outputs selects no rows, as in llama.cpp.
    pub fn input(&mut self, t: RawType, ne: &[i64], name: &str) -> OpResult {
        self.room()?;
        if ne.is_empty() || ne.len() > 4 || ne.iter().any(|&n| n < 0) {
            return Err(GgmlError(format!("bad input shape {ne:?} for {name}")));
        }
        let cname = std::ffi::CString::new(name).map_err(|_| GgmlError("NUL in a tensor name".into()))?;
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
        if rows.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_I32 || an[2] != rn[1] || an[3] != rn[2] || rn[3] != 1 {
            return Err(GgmlError(format!("get_rows: shapes {an:?} / {rn:?}")));
        }
        // SAFETY: shapes checked as ggml asserts them (one I32 index row per source matrix).
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

    /// (a - mean) / sqrt(variance + eps) along rows.
    pub fn norm(&mut self, a: TensorRef, eps: f32) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(
            unsafe { ggml_sys::ggml_norm(self.ctx.as_ptr(), a.as_ptr(), eps) },
            "norm",
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

    /// Element types ggml's CPU backend combines in additions, products and quotients (others
    /// abort there): an F32 right side, or both sides F16 or both BF16.
    fn binary_types(a: TensorRef, b: TensorRef) -> Result<(), GgmlError> {
        use ggml_sys::{
            ggml_type_GGML_TYPE_BF16 as BF16, ggml_type_GGML_TYPE_F16 as F16, ggml_type_GGML_TYPE_F32 as F32,
        };
        let (ta, tb) = (a.ggml_type(), b.ggml_type());
        let ok = matches!(ta, F32 | F16 | BF16) && (tb == F32 || (tb == ta && ta != F32));
        if ok {
            Ok(())
        } else {
            Err(GgmlError(format!(
                "cannot combine a {} tensor with a {} one element-wise",
                super::type_name(ta),
                super::type_name(tb)
            )))
        }
    }

    pub fn mul(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        Self::binary_types(a, b)?;
        if !Self::can_repeat(b, a) {
            return Err(GgmlError(format!(
                "mul: {:?} does not broadcast over {:?}",
                b.ne(),
                a.ne()
            )));
        }
        // SAFETY: broadcast checked.
        Self::wrap(
            unsafe { ggml_sys::ggml_mul(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr()) },
            "mul",
        )
    }

    pub fn add(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        Self::binary_types(a, b)?;
        if !Self::can_repeat(b, a) {
            return Err(GgmlError(format!(
                "add: {:?} does not broadcast over {:?}",
                b.ne(),
                a.ne()
            )));
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
            return Err(GgmlError(format!("mul_mat: {wn:?} x {xn:?}")));
        }
        // SAFETY: ggml_can_mul_mat holds (checked above); the result is F32.
        Self::wrap(
            unsafe { ggml_sys::ggml_mul_mat(self.ctx.as_ptr(), w.as_ptr(), x.as_ptr()) },
            "mul_mat",
        )
    }

    /// Each run of `rot.ne[0]` consecutive values of `x` (F32) times the orthonormal
    /// Walsh-Hadamard matrix `rot` (F32, square, a power of two wide), in `x`'s shape. The hint
    /// lets the CPU backend transform in place of multiplying, as llama.cpp's graphs do.
    pub fn hadamard(&mut self, rot: TensorRef, x: TensorRef) -> OpResult {
        let n = rot.ne()[0];
        let ne = x.ne();
        let total = Self::n_elements(&ne);
        if rot.ne()[1] != n || n <= 0 || (n & (n - 1)) != 0 || total % n != 0 {
            return Err(GgmlError(format!("hadamard {:?} of {ne:?}", rot.ne())));
        }
        let x = if Self::is_contiguous(x) { x } else { self.cont(x)? };
        let rows = self.reshape(x, &[n, total / n])?;
        let y = self.mul_mat(rot, rows)?;
        // SAFETY: `y` is the MUL_MAT node just made; the hint is one of ggml's own values.
        unsafe { ggml_sys::ggml_mul_mat_set_hint(y.as_ptr(), ggml_sys::ggml_op_hint_GGML_HINT_SRC0_IS_HADAMARD) };
        self.reshape(y, &ne)
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
            return Err(GgmlError(format!("reshape {:?} to {ne:?}", a.ne())));
        }
        let ctx = self.ctx.as_ptr();
        // SAFETY: contiguous source with the same element count.
        let p = unsafe {
            match *ne {
                [n0] => ggml_sys::ggml_reshape_1d(ctx, a.as_ptr(), n0),
                [n0, n1] => ggml_sys::ggml_reshape_2d(ctx, a.as_ptr(), n0, n1),
                [n0, n1, n2] => ggml_sys::ggml_reshape_3d(ctx, a.as_ptr(), n0, n1, n2),
                [n0, n1, n2, n3] => ggml_sys::ggml_reshape_4d(ctx, a.as_ptr(), n0, n1, n2, n3),
                _ => return Err(GgmlError(format!("reshape to {} dims", ne.len()))),
            }
        };
        Self::wrap(p, "reshape")
    }

    /// A strided view of `a`: shape `ne`, byte strides `nb` (for dims 1..), starting at `offset`.
    pub fn view(&mut self, a: TensorRef, ne: &[i64], nb: &[usize], offset: usize) -> OpResult {
        self.room()?;
        if ne.is_empty() || ne.len() > 4 || nb.len() + 1 != ne.len() || ne.iter().any(|&n| n < 0) {
            return Err(GgmlError(format!("view {ne:?} / {nb:?}")));
        }
        // The end of the last row the view touches must lie inside `a` (an empty view touches
        // nothing, wherever it starts: a ubatch without outputs selects no rows).
        let mut end = offset;
        if !ne.contains(&0) {
            // SAFETY: a size query for a valid type.
            end += unsafe { ggml_sys::ggml_row_size(a.ggml_type(), ne[0]) };
            for (i, &stride) in nb.iter().enumerate() {
                end += (ne[i + 1] as usize - 1) * stride;
            }
        }
        if !ne.contains(&0) && end > a.nbytes() {
            return Err(GgmlError(format!(
                "view {ne:?} at {offset} leaves a tensor of {} bytes",
                a.nbytes()
            )));
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
                _ => return Err(GgmlError("view arity".into())),
            }
        };
        Self::wrap(p, "view")
    }

    pub fn permute(&mut self, a: TensorRef, axes: [i32; 4]) -> OpResult {
        self.room()?;
        let mut seen = [false; 4];
        for &x in &axes {
            if !(0..4).contains(&x) || std::mem::replace(&mut seen[x as usize], true) {
                return Err(GgmlError(format!("permute axes {axes:?}")));
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
            return Err(GgmlError(format!("copy {:?} into {:?}", a.ne(), b.ne())));
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
    /// With `sections` (a multi-dimensional rope, `mode` M-RoPE or interleaved M-RoPE), four
    /// positions per token: all tokens' first, then their second, ...
    pub fn rope(
        &mut self,
        a: TensorRef,
        pos: TensorRef,
        freq_factors: Option<TensorRef>,
        n_rot: i32,
        mode: i32,
        sections: Option<[i32; 4]>,
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
        let multi = mode > 0 && mode & ROPE_MROPE != 0;
        let per_token = if multi { 4 } else { 1 };
        if pos.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_I32
            || pn[0] != per_token * an[2]
            || n_rot as i64 > an[0]
            || multi != sections.is_some()
        {
            return Err(GgmlError(format!(
                "rope (mode {mode}, n_rot {n_rot}, sections {sections:?}): {an:?} at positions {pn:?}"
            )));
        }
        let ff = freq_factors.map_or(std::ptr::null_mut(), |f| f.as_ptr());
        // SAFETY: positions match the token dimension (four per token for a multi-dimensional
        // rope, which then has its sections); freq factors (if any) come from the model.
        Self::wrap(
            unsafe {
                match sections {
                    Some(mut s) => ggml_sys::ggml_rope_multi(
                        self.ctx.as_ptr(),
                        a.as_ptr(),
                        pos.as_ptr(),
                        ff,
                        n_rot,
                        s.as_mut_ptr(),
                        mode,
                        n_ctx_orig,
                        freq_base,
                        freq_scale,
                        ext_factor,
                        attn_factor,
                        beta_fast,
                        beta_slow,
                    ),
                    None => ggml_sys::ggml_rope_ext(
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
                    ),
                }
            },
            "rope",
        )
    }

    /// Make the rotation `rope` (a node `rope` made, of `n_rot` dimensions) turn dimensions
    /// `offset..offset + n_rot` of each head instead of the first ones (MiniCPM3's trailing
    /// rotated part).
    pub fn rope_offset(&mut self, rope: TensorRef, offset: i32, n_rot: i32) -> OpResult {
        // SAFETY: reading the node's op field of a live tensor of this graph.
        let op = unsafe { (*rope.as_ptr()).op };
        let is_rope = op == ggml_sys::ggml_op_GGML_OP_ROPE || op == ggml_sys::ggml_op_GGML_OP_ROPE_BACK;
        if !is_rope || offset < 0 || i64::from(offset + n_rot) > rope.ne()[0] {
            return Err(GgmlError(format!(
                "rope offset {offset} of {n_rot} dimensions in {:?}",
                rope.ne()
            )));
        }
        // SAFETY: a rope node (not a vision rope: `rope` makes none) and a non-negative offset
        // that keeps the rotated dimensions within the head.
        Self::wrap(
            unsafe { ggml_sys::ggml_rope_set_offset(rope.as_ptr(), offset) },
            "rope_offset",
        )
    }

    /// Make `rope` (a rope node `rope` made) turn its rows back: ggml's `rope_ext_back` is
    /// `rope_ext` with this op.
    pub fn rope_inverse(&mut self, rope: TensorRef) -> OpResult {
        // SAFETY: reading the node's op field of a live tensor of this graph.
        let op = unsafe { (*rope.as_ptr()).op };
        if op != ggml_sys::ggml_op_GGML_OP_ROPE {
            return Err(GgmlError(format!("rope_inverse of a {op} node")));
        }
        // SAFETY: a live rope node of this graph, not yet computed; ggml's `_back` constructors
        // change this one field of the node `rope_ext` made.
        unsafe { (*rope.as_ptr()).op = ggml_sys::ggml_op_GGML_OP_ROPE_BACK };
        Ok(rope)
    }

    /// Write the rows of `src` into `dst` at the row indices `idx` (I64); returns the updated `dst`.
    pub fn set_rows(&mut self, dst: TensorRef, src: TensorRef, idx: TensorRef) -> OpResult {
        self.room()?;
        let (dn, sn, inn) = (dst.ne(), src.ne(), idx.ne());
        let idx_type_ok = matches!(
            idx.ggml_type(),
            ggml_sys::ggml_type_GGML_TYPE_I64 | ggml_sys::ggml_type_GGML_TYPE_I32
        );
        let src_type_ok = matches!(
            src.ggml_type(),
            ggml_sys::ggml_type_GGML_TYPE_F32 | ggml_sys::ggml_type_GGML_TYPE_F16
        );
        let broadcast = dn[2] == sn[2]
            && dn[3] == sn[3]
            && inn[1] > 0
            && inn[2] > 0
            && sn[2] % inn[1] == 0
            && sn[3] % inn[2] == 0
            && inn[3] == 1;
        if dn[0] != sn[0] || inn[0] != sn[1] || !idx_type_ok || !src_type_ok || !broadcast {
            return Err(GgmlError(format!("set_rows: {sn:?} into {dn:?} at {inn:?}")));
        }
        // SAFETY: row width, index count and index type checked.
        Self::wrap(
            unsafe { ggml_sys::ggml_set_rows(self.ctx.as_ptr(), dst.as_ptr(), src.as_ptr(), idx.as_ptr()) },
            "set_rows",
        )
    }

    /// Fused attention: softmax(scale * q k^T + mask) v with F32 accumulation, the scores
    /// shaped as `scores` says; `sinks` (F32, one per head) join each softmax as a score with no
    /// value.
    pub fn flash_attn(
        &mut self,
        q: TensorRef,
        k: TensorRef,
        v: TensorRef,
        mask: TensorRef,
        scores: Scores,
        sinks: Option<TensorRef>,
    ) -> OpResult {
        self.room()?;
        let (qn, kn, vn, mn) = (q.ne(), k.ne(), v.ne(), mask.ne());
        let ok = qn[0] == kn[0]
            && kn[1] == vn[1]
            && qn[2] % kn[2] == 0
            && qn[3] == kn[3]
            && qn[3] == vn[3]
            && mn[0] == kn[1]
            && mn[1] >= qn[1]
            && Self::is_contiguous(mask)
            && sinks.is_none_or(|s| Self::sinks_fit(s, qn[2]));
        if !ok {
            return Err(GgmlError(format!("flash_attn: q {qn:?} k {kn:?} v {vn:?} mask {mn:?}")));
        }
        // SAFETY: shapes checked as ggml asserts them; precision setter applies to this op only.
        let p = unsafe {
            let p = ggml_sys::ggml_flash_attn_ext(
                self.ctx.as_ptr(),
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                mask.as_ptr(),
                scores.scale,
                scores.max_bias,
                scores.softcap,
            );
            if !p.is_null() {
                ggml_sys::ggml_flash_attn_ext_add_sinks(p, sinks.map_or(std::ptr::null_mut(), |s| s.as_ptr()));
                ggml_sys::ggml_flash_attn_ext_set_prec(p, ggml_sys::ggml_prec_GGML_PREC_F32);
            }
            p
        };
        Self::wrap(p, "flash_attn_ext")
    }

    /// softmax(scale * a + mask) along rows (with ALiBi, `max_bias` > 0, the mask times each
    /// head's slope), with `sinks` (F32, one per head, `a`'s dimension 2) joining each softmax as
    /// a score with no value.
    pub fn soft_max(
        &mut self,
        a: TensorRef,
        mask: TensorRef,
        scale: f32,
        max_bias: f32,
        sinks: Option<TensorRef>,
    ) -> OpResult {
        self.room()?;
        let (an, mn) = (a.ne(), mask.ne());
        let ok = mn[0] == an[0]
            && mn[1] >= an[1]
            && Self::is_contiguous(mask)
            && Self::is_contiguous(a)
            && sinks.is_none_or(|s| Self::sinks_fit(s, an[2]));
        if !ok {
            return Err(GgmlError(format!("soft_max: {an:?} with mask {mn:?}")));
        }
        // SAFETY: mask covers the rows, sinks match the heads (checked).
        let p = unsafe {
            let p = ggml_sys::ggml_soft_max_ext(self.ctx.as_ptr(), a.as_ptr(), mask.as_ptr(), scale, max_bias);
            if !p.is_null() {
                ggml_sys::ggml_soft_max_add_sinks(p, sinks.map_or(std::ptr::null_mut(), |s| s.as_ptr()));
            }
            p
        };
        Self::wrap(p, "soft_max_ext")
    }

    /// Attention sinks: one F32 value per head.
    fn sinks_fit(sinks: TensorRef, n_head: i64) -> bool {
        sinks.ggml_type() == ggml_sys::ggml_type_GGML_TYPE_F32 && sinks.ne()[0] == n_head
    }

    /// `a` plus, for each row `(e, t)` of `a` ([n, n_used, n_tokens]), the row `ids[e, t]` of `b`
    /// ([n, n_expert]): the picked experts' biases.
    pub fn add_id(&mut self, a: TensorRef, b: TensorRef, ids: TensorRef) -> OpResult {
        self.room()?;
        let (an, bn, idn) = (a.ne(), b.ne(), ids.ne());
        if an[0] != bn[0] || an[1] != idn[0] || an[2] != idn[1] || ids.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_I32
        {
            return Err(GgmlError(format!("add_id: {an:?} + {bn:?} at {idn:?}")));
        }
        // SAFETY: shapes checked as ggml asserts them.
        Self::wrap(
            unsafe { ggml_sys::ggml_add_id(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr(), ids.as_ptr()) },
            "add_id",
        )
    }

    /// gpt-oss's gated activation: the gate through a clamped, `alpha`-sharpened SiLU times the
    /// clamped up projection plus one (`limit` clamps both).
    pub fn swiglu_oai(&mut self, gate: TensorRef, up: TensorRef, alpha: f32, limit: f32) -> OpResult {
        self.room()?;
        Self::check_glu("swiglu_oai", gate, up)?;
        // SAFETY: equal shapes and types, rows contiguous.
        Self::wrap(
            unsafe { ggml_sys::ggml_swiglu_oai(self.ctx.as_ptr(), gate.as_ptr(), up.as_ptr(), alpha, limit) },
            "swiglu_oai",
        )
    }

    /// `a` (F32) with `p[i]` zeros appended along each dimension `i`.
    pub fn pad(&mut self, a: TensorRef, p: [i64; 4]) -> OpResult {
        self.room()?;
        if a.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_F32 || p.iter().any(|&n| n < 0) {
            return Err(GgmlError(format!("pad {:?} by {p:?}", a.ne())));
        }
        // SAFETY: F32 (the only type ggml's CPU kernel pads), paddings not negative.
        Self::wrap(
            unsafe {
                ggml_sys::ggml_pad(
                    self.ctx.as_ptr(),
                    a.as_ptr(),
                    p[0] as i32,
                    p[1] as i32,
                    p[2] as i32,
                    p[3] as i32,
                )
            },
            "pad",
        )
    }

    /// `a` repeated to shape `ne` (each dimension a multiple of `a`'s).
    pub fn repeat(&mut self, a: TensorRef, ne: [i64; 4]) -> OpResult {
        self.room()?;
        let an = a.ne();
        let empty = an.contains(&0);
        if ne.iter().any(|&n| n < 0) || !(empty || (0..4).all(|i| ne[i] % an[i] == 0)) {
            return Err(GgmlError(format!("repeat {an:?} to {ne:?}")));
        }
        // SAFETY: the target shape is a multiple of the source's (or the source is empty).
        Self::wrap(
            unsafe { ggml_sys::ggml_repeat_4d(self.ctx.as_ptr(), a.as_ptr(), ne[0], ne[1], ne[2], ne[3]) },
            "repeat",
        )
    }

    /// softmax along rows, without mask or scale.
    pub fn soft_max_rows(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        if !Self::is_contiguous(a) {
            return Err(GgmlError(format!("soft_max of a non-contiguous {:?}", a.ne())));
        }
        // SAFETY: contiguous source (ggml's only requirement without a mask).
        Self::wrap(
            unsafe { ggml_sys::ggml_soft_max(self.ctx.as_ptr(), a.as_ptr()) },
            "soft_max",
        )
    }

    /// The indices (I32) of the `k` largest values of each row, largest first: a view of a
    /// descending argsort.
    pub fn argsort_top_k(&mut self, a: TensorRef, k: i64) -> OpResult {
        // The sort and its view.
        self.room()?;
        self.room()?;
        if k < 1 || a.ne()[0] < k {
            return Err(GgmlError(format!("top {k} of rows of {:?}", a.ne())));
        }
        // SAFETY: rows hold at least k values (ggml's assertion).
        Self::wrap(
            unsafe { ggml_sys::ggml_argsort_top_k(self.ctx.as_ptr(), a.as_ptr(), k as i32) },
            "argsort_top_k",
        )
    }

    /// The sum of each row, [1, ne1, ne2, ne3].
    pub fn sum_rows(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(
            unsafe { ggml_sys::ggml_sum_rows(self.ctx.as_ptr(), a.as_ptr()) },
            "sum_rows",
        )
    }

    /// Each row's mean, [1, ...] (ggml divides the row's sum by its length; a product with the
    /// reciprocal would round differently).
    pub fn mean(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(unsafe { ggml_sys::ggml_mean(self.ctx.as_ptr(), a.as_ptr()) }, "mean")
    }

    pub fn clamp(&mut self, a: TensorRef, min: f32, max: f32) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(
            unsafe { ggml_sys::ggml_clamp(self.ctx.as_ptr(), a.as_ptr(), min, max) },
            "clamp",
        )
    }

    /// A copy of `a` whose elements from `offset` on (counting over its whole memory, rows
    /// after rows) are the 1-D `b`'s. Both F32 and contiguous, `b` within `a`.
    pub fn set_1d(&mut self, a: TensorRef, b: TensorRef, offset: usize) -> OpResult {
        self.room()?;
        let f32_contiguous = |t: TensorRef| {
            // SAFETY: reading a live tensor.
            t.ggml_type() == ggml_sys::ggml_type_GGML_TYPE_F32 && unsafe { ggml_sys::ggml_is_contiguous(t.as_ptr()) }
        };
        let (len_a, len_b) = (a.ne().iter().product::<i64>(), b.ne()[0]);
        let one_d = b.ne()[1..].iter().all(|&n| n == 1);
        if !f32_contiguous(a) || !f32_contiguous(b) || !one_d || offset as i64 + len_b > len_a {
            return Err(GgmlError(format!("set_1d of {:?} at {offset} in {:?}", b.ne(), a.ne())));
        }
        let nb = a.nb();
        // SAFETY: F32 contiguous tensors, `b` within `a` from `offset` (checked above).
        Self::wrap(
            unsafe { ggml_sys::ggml_set_1d(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr(), offset * nb[0]) },
            "set_1d",
        )
    }

    /// `a / b`, with `b` broadcast over `a`.
    pub fn div(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        Self::binary_types(a, b)?;
        if !Self::can_repeat(b, a) {
            return Err(GgmlError(format!(
                "div: {:?} does not broadcast over {:?}",
                b.ne(),
                a.ne()
            )));
        }
        // SAFETY: broadcast checked.
        Self::wrap(
            unsafe { ggml_sys::ggml_div(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr()) },
            "div",
        )
    }

    pub fn gelu(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(unsafe { ggml_sys::ggml_gelu(self.ctx.as_ptr(), a.as_ptr()) }, "gelu")
    }

    /// xIELU with its four parameters (ggml derives the softplus terms at graph build).
    pub fn xielu(&mut self, a: TensorRef, alpha_n: f32, alpha_p: f32, beta: f32, eps: f32) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(
            unsafe { ggml_sys::ggml_xielu(self.ctx.as_ptr(), a.as_ptr(), alpha_n, alpha_p, beta, eps) },
            "xielu",
        )
    }

    pub fn silu(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(unsafe { ggml_sys::ggml_silu(self.ctx.as_ptr(), a.as_ptr()) }, "silu")
    }

    pub fn relu(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(unsafe { ggml_sys::ggml_relu(self.ctx.as_ptr(), a.as_ptr()) }, "relu")
    }

    pub fn sigmoid(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        if !Self::rows_contiguous(a) {
            return Err(GgmlError(format!("sigmoid of {:?}", a.ne())));
        }
        // SAFETY: contiguous rows (the CPU kernel's requirement).
        Self::wrap(
            unsafe { ggml_sys::ggml_sigmoid(self.ctx.as_ptr(), a.as_ptr()) },
            "sigmoid",
        )
    }

    pub fn abs(&mut self, a: TensorRef) -> OpResult {
        self.unary(a, "abs", ggml_sys::ggml_abs)
    }

    /// Element-wise sign: -1, 0 or 1.
    pub fn sgn(&mut self, a: TensorRef) -> OpResult {
        self.unary(a, "sgn", ggml_sys::ggml_sgn)
    }

    pub fn sqrt(&mut self, a: TensorRef) -> OpResult {
        self.unary(a, "sqrt", ggml_sys::ggml_sqrt)
    }

    /// Group normalisation of `a` ([width, height, channels, n]): each of `n_groups` groups of
    /// channels normalised to zero mean and unit variance.
    pub fn group_norm(&mut self, a: TensorRef, n_groups: u32, eps: f32) -> OpResult {
        self.room()?;
        let groups = i32::try_from(n_groups).unwrap_or(0);
        if groups <= 0 || a.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_F32 || !Self::is_contiguous(a) {
            return Err(GgmlError(format!("group_norm of {:?} in {n_groups} groups", a.ne())));
        }
        // SAFETY: a contiguous F32 source and a positive group count (ggml's CPU kernel's needs).
        Self::wrap(
            unsafe { ggml_sys::ggml_group_norm(self.ctx.as_ptr(), a.as_ptr(), groups, eps) },
            "group_norm",
        )
    }

    /// The 1-D convolution of `b` ([length, in_channels]) by the kernels `a` ([k, in_channels,
    /// out_channels], `k` odd), stride 1, padded by half a kernel each side so the length stays:
    /// [length, out_channels]. ggml takes the input's columns in F16.
    pub fn conv_1d_same(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        let (an, bn) = (a.ne(), b.ne());
        if an[1] != bn[1] || an[3] != 1 || bn[2] != 1 || bn[3] != 1 || an[0] % 2 != 1 || !Self::is_contiguous(a) {
            return Err(GgmlError(format!("conv_1d of {bn:?} by kernels {an:?}")));
        }
        // SAFETY: the input's channels are the kernels' (im2col's assertion), an odd kernel keeps
        // the padded length positive, a contiguous kernel can be reshaped for the product.
        Self::wrap(
            unsafe { ggml_sys::ggml_conv_1d_ph(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr(), 1, 1) },
            "conv_1d",
        )
    }

    /// The depthwise 1-D convolution of each channel of `b` ([length, channels]) by its own kernel
    /// of `a` ([k, 1, channels], `k` odd), stride 1, padded to keep the length: [length, channels].
    pub fn conv_1d_depthwise_same(&mut self, a: TensorRef, b: TensorRef) -> OpResult {
        self.room()?;
        let (an, bn) = (a.ne(), b.ne());
        let ok = an[1] == 1 && an[2] == bn[1] && an[3] == 1 && bn[2] == 1 && bn[3] == 1 && an[0] % 2 == 1;
        if !ok || !Self::is_contiguous(b) {
            return Err(GgmlError(format!("depthwise conv_1d of {bn:?} by kernels {an:?}")));
        }
        // SAFETY: one kernel row per channel (im2col's assertion after the reshape), an odd kernel
        // keeps the length positive, a contiguous input can be reshaped.
        Self::wrap(
            unsafe { ggml_sys::ggml_conv_1d_dw_ph(self.ctx.as_ptr(), a.as_ptr(), b.as_ptr(), 1, 1) },
            "conv_1d_dw",
        )
    }

    /// Element-wise rounding to the nearest integer (halves away from zero).
    pub fn round(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(unsafe { ggml_sys::ggml_round(self.ctx.as_ptr(), a.as_ptr()) }, "round")
    }

    /// Element-wise square.
    pub fn sqr(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        // SAFETY: any shape is accepted.
        Self::wrap(unsafe { ggml_sys::ggml_sqr(self.ctx.as_ptr(), a.as_ptr()) }, "sqr")
    }

    /// Per token, the chosen experts' matrices times that token's input: `experts` [k, n, n_expert]
    /// by `x` [k, 1 or n_used, n_tokens] at `ids` (I32 [n_used, n_tokens]) = [n, n_used, n_tokens].
    pub fn mul_mat_id(&mut self, experts: TensorRef, x: TensorRef, ids: TensorRef) -> OpResult {
        self.room()?;
        let (en, xn, idn) = (experts.ne(), x.ne(), ids.ne());
        let ok = ids.ggml_type() == ggml_sys::ggml_type_GGML_TYPE_I32
            && en[3] == 1
            && xn[3] == 1
            && idn[2] == 1
            && idn[3] == 1
            && idn[1] == xn[2]
            && en[0] == xn[0]
            && xn[1] > 0
            && idn[0] % xn[1] == 0;
        // SAFETY: a live tensor's strides.
        let transposed = unsafe { ggml_sys::ggml_is_transposed(experts.as_ptr()) };
        if !ok || transposed {
            return Err(GgmlError(format!("mul_mat_id: {en:?} x {xn:?} at {idn:?}")));
        }
        // SAFETY: shapes checked as ggml asserts them.
        Self::wrap(
            unsafe { ggml_sys::ggml_mul_mat_id(self.ctx.as_ptr(), experts.as_ptr(), x.as_ptr(), ids.as_ptr()) },
            "mul_mat_id",
        )
    }

    /// Rows contiguous (ggml's requirement of the gated activations).
    fn rows_contiguous(t: TensorRef) -> bool {
        // SAFETY: reading a live tensor.
        unsafe { ggml_sys::ggml_is_contiguous_1(t.as_ptr()) }
    }

    /// Gated activations need equal shapes and types with contiguous rows.
    fn check_glu(what: &str, gate: TensorRef, up: TensorRef) -> Result<(), GgmlError> {
        let ok = gate.ne() == up.ne()
            && gate.ggml_type() == up.ggml_type()
            && Self::rows_contiguous(gate)
            && Self::rows_contiguous(up);
        if ok {
            Ok(())
        } else {
            Err(GgmlError(format!("{what}: {:?} vs {:?}", gate.ne(), up.ne())))
        }
    }

    /// silu(first half of each row) * second half: a gate and up projection fused in one
    /// matrix.
    pub fn swiglu_fused(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        if a.ne()[0] % 2 != 0 || !Self::rows_contiguous(a) {
            return Err(GgmlError(format!("swiglu of rows {:?}", a.ne())));
        }
        // SAFETY: rows contiguous and of even length.
        Self::wrap(
            unsafe { ggml_sys::ggml_swiglu(self.ctx.as_ptr(), a.as_ptr()) },
            "swiglu",
        )
    }

    /// silu(gate) * up.
    pub fn swiglu(&mut self, gate: TensorRef, up: TensorRef) -> OpResult {
        self.room()?;
        Self::check_glu("swiglu", gate, up)?;
        // SAFETY: equal shapes and types, rows contiguous.
        Self::wrap(
            unsafe { ggml_sys::ggml_swiglu_split(self.ctx.as_ptr(), gate.as_ptr(), up.as_ptr()) },
            "swiglu",
        )
    }

    /// silu(gate) * up with gate and up clamped to `limit` as ggml's `swiglu_clamp` does.
    pub fn swiglu_clamp(&mut self, gate: TensorRef, up: TensorRef, limit: f32) -> OpResult {
        self.room()?;
        Self::check_glu("swiglu_clamp", gate, up)?;
        // SAFETY: equal shapes and types, rows contiguous.
        Self::wrap(
            unsafe { ggml_sys::ggml_swiglu_clamp(self.ctx.as_ptr(), gate.as_ptr(), up.as_ptr(), limit) },
            "swiglu_clamp",
        )
    }

    /// relu(gate) * up.
    pub fn reglu(&mut self, gate: TensorRef, up: TensorRef) -> OpResult {
        self.room()?;
        Self::check_glu("reglu", gate, up)?;
        // SAFETY: equal shapes and types, rows contiguous.
        Self::wrap(
            unsafe { ggml_sys::ggml_reglu_split(self.ctx.as_ptr(), gate.as_ptr(), up.as_ptr()) },
            "reglu",
        )
    }

    /// gelu of each row's first half times its second half (GeGLU over a fused gate and up).
    pub fn geglu_fused(&mut self, a: TensorRef) -> OpResult {
        self.room()?;
        if a.ne()[0] % 2 != 0 || !Self::rows_contiguous(a) {
            return Err(GgmlError(format!("geglu of rows {:?}", a.ne())));
        }
        // SAFETY: rows contiguous and of even length.
        Self::wrap(unsafe { ggml_sys::ggml_geglu(self.ctx.as_ptr(), a.as_ptr()) }, "geglu")
    }

    /// gelu(gate) * up.
    pub fn geglu(&mut self, gate: TensorRef, up: TensorRef) -> OpResult {
        self.room()?;
        Self::check_glu("geglu", gate, up)?;
        // SAFETY: equal shapes and types, rows contiguous.
        Self::wrap(
            unsafe { ggml_sys::ggml_geglu_split(self.ctx.as_ptr(), gate.as_ptr(), up.as_ptr()) },
            "geglu",
        )
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: the context (which owns the graph object) is ours and freed once.
            unsafe { ggml_sys::ggml_free(self.ctx.as_ptr()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml::{tensor_get_f32, tensor_set, CpuBackend, Scheduler};

    const F32: RawType = ggml_sys::ggml_type_GGML_TYPE_F32;
    const I32: RawType = ggml_sys::ggml_type_GGML_TYPE_I32;

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// Routing as a mixture of experts uses it: per token, the two largest router scores pick two
    /// of three experts, whose matrices multiply that token's input.
    #[test]
    fn top_k_routing_picks_each_tokens_experts() {
        let mut g = Graph::new(32).expect("graph");
        // Three experts, each a 2x2 matrix: expert e is (e + 1) times the identity.
        let experts = g.input(F32, &[2, 2, 3], "experts").expect("experts");
        let x = g.input(F32, &[2, 1, 2], "x").expect("x");
        let scores = g.input(F32, &[3, 2], "scores").expect("scores");
        let picked = g.argsort_top_k(scores, 2).expect("top-k");
        let y = g.mul_mat_id(experts, x, picked).expect("mul_mat_id");
        let s3 = g.reshape(scores, &[1, 3, 2]).expect("reshape");
        let w = g.get_rows(s3, picked).expect("per-token rows");
        let w2 = g.reshape(w, &[2, 2]).expect("reshape");
        let wsum = g.sum_rows(w2).expect("sum_rows");
        for t in [y, w, wsum] {
            g.output(t);
        }
        let backend = CpuBackend::new(1).expect("backend");
        let sched = Scheduler::new(&backend, &[], 32, true).expect("scheduler");
        sched.alloc(&g).expect("alloc");
        let mut eye = Vec::new();
        for e in 1..=3 {
            eye.extend_from_slice(&[e as f32, 0.0, 0.0, e as f32]);
        }
        tensor_set(experts, &bytes(&eye)).expect("set");
        tensor_set(x, &bytes(&[1.0, 2.0, 10.0, 20.0])).expect("set");
        // Token 0 prefers experts 2 then 0; token 1 prefers 1 then 2.
        tensor_set(scores, &bytes(&[0.5, 0.1, 0.9, 0.0, 0.8, 0.3])).expect("set");
        assert!(matches!(sched.compute(&g), crate::ggml::ComputeStatus::Success));
        let mut out = vec![0.0; 8];
        tensor_get_f32(y, &mut out).expect("get");
        assert_eq!(out, [3.0, 6.0, 1.0, 2.0, 20.0, 40.0, 30.0, 60.0]);
        let mut weights = vec![0.0; 4];
        tensor_get_f32(w, &mut weights).expect("get");
        assert_eq!(weights, [0.9, 0.5, 0.8, 0.3]);
        let mut sums = vec![0.0; 2];
        tensor_get_f32(wsum, &mut sums).expect("get");
        assert_eq!(sums, [0.9 + 0.5, 0.8 + 0.3]);
    }

    /// Shapes ggml would abort on come back as errors.
    #[test]
    fn expert_ops_refuse_what_ggml_would_abort_on() {
        let mut g = Graph::new(32).expect("graph");
        let scores = g.input(F32, &[3, 2], "scores").expect("scores");
        assert!(g.argsort_top_k(scores, 4).is_err(), "more picks than experts");
        assert!(g.argsort_top_k(scores, 0).is_err(), "no picks");
        let experts = g.input(F32, &[2, 2, 3], "experts").expect("experts");
        let ids = g.input(I32, &[2, 2], "ids").expect("ids");
        let x = g.input(F32, &[4, 1, 2], "x").expect("x");
        assert!(g.mul_mat_id(experts, x, ids).is_err(), "row lengths differ");
        let x = g.input(F32, &[2, 1, 3], "x3").expect("x");
        assert!(g.mul_mat_id(experts, x, ids).is_err(), "ids for another token count");
        let fids = g.input(F32, &[2, 2], "fids").expect("ids");
        let x = g.input(F32, &[2, 1, 2], "x2").expect("x");
        assert!(g.mul_mat_id(experts, x, fids).is_err(), "float ids");
        assert!(g.repeat(scores, [4, 2, 1, 1]).is_err(), "4 is not a multiple of 3");
        let rows = g.input(I32, &[2, 5], "rows").expect("rows");
        assert!(g.get_rows(experts, rows).is_err(), "5 index rows for 3 matrices");
        // An empty view is fine wherever it starts (a ubatch without outputs).
        let empty = g.input(F32, &[4, 0], "empty").expect("empty");
        g.view(empty, &[4, 0], &[16], 64).expect("empty view");
        assert!(g.view(scores, &[3, 2], &[12], 4).is_err(), "view past the end");
    }
}
