//! ggml's optimizer (`ggml-opt.h`, in libggml-base) as llama.cpp's training drives it: a graph per
//! ubatch, its backward graph and optimizer step built by ggml, gradients accumulated over
//! `opt_period` ubatches. `ggml-opt.h` is not among the bindings; the functions used are declared
//! here from the pinned header. ggml asserts (aborts) on much of what it is handed, so what it
//! would assert is checked first, here.

use super::{GgmlError, Graph, Scheduler, TensorRef};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_int, c_void, CStr};
use std::ptr::NonNull;

/// `struct ggml_opt_optimizer_params`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OptimizerParams {
    pub adamw: AdamW,
    pub sgd: Sgd,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AdamW {
    pub alpha: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub wd: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sgd {
    pub alpha: f32,
    pub wd: f32,
}

/// `ggml_opt_get_optimizer_params`: the caller's source of learning rate and decay.
pub type GetOptimizerParams = Option<unsafe extern "C" fn(userdata: *mut c_void) -> OptimizerParams>;

/// `ggml_opt_epoch_callback`.
pub type EpochCallback = Option<
    unsafe extern "C" fn(
        train: bool,
        opt_ctx: *mut c_void,
        dataset: *mut c_void,
        result: *mut c_void,
        ibatch: i64,
        ibatch_max: i64,
        t_start_us: i64,
    ),
>;

/// `enum ggml_opt_optimizer_type`.
pub const OPTIMIZER_ADAMW: i32 = 0;
pub const OPTIMIZER_SGD: i32 = 1;

/// `GGML_OPT_LOSS_TYPE_CROSS_ENTROPY`.
const LOSS_CROSS_ENTROPY: c_int = 2;

/// `struct ggml_opt_params`.
#[repr(C)]
struct RawParams {
    backend_sched: ggml_sys::ggml_backend_sched_t,
    ctx_compute: *mut ggml_sys::ggml_context,
    inputs: *mut ggml_sys::ggml_tensor,
    outputs: *mut ggml_sys::ggml_tensor,
    loss_type: c_int,
    build_type: c_int,
    opt_period: i32,
    get_opt_pars: GetOptimizerParams,
    get_opt_pars_ud: *mut c_void,
    optimizer: c_int,
}

extern "C" {
    fn ggml_opt_default_params(sched: ggml_sys::ggml_backend_sched_t, loss_type: c_int) -> RawParams;
    fn ggml_opt_init(params: RawParams) -> *mut c_void;
    fn ggml_opt_free(opt_ctx: *mut c_void);
    fn ggml_opt_prepare_alloc(
        opt_ctx: *mut c_void,
        ctx_compute: *mut ggml_sys::ggml_context,
        gf: *mut ggml_sys::ggml_cgraph,
        inputs: *mut ggml_sys::ggml_tensor,
        outputs: *mut ggml_sys::ggml_tensor,
    );
    fn ggml_opt_alloc(opt_ctx: *mut c_void, backward: bool);
    fn ggml_opt_eval(opt_ctx: *mut c_void, result: *mut c_void);
    fn ggml_opt_labels(opt_ctx: *mut c_void) -> *mut ggml_sys::ggml_tensor;
    fn ggml_opt_dataset_ndata(dataset: *mut c_void) -> i64;
    fn ggml_opt_dataset_data(dataset: *mut c_void) -> *mut ggml_sys::ggml_tensor;
    fn ggml_opt_dataset_labels(dataset: *mut c_void) -> *mut ggml_sys::ggml_tensor;
    fn ggml_opt_dataset_get_batch_host(
        dataset: *mut c_void,
        data_batch: *mut c_void,
        nb_data_batch: usize,
        labels_batch: *mut c_void,
        ibatch: i64,
    );
}

/// What ggml's optimizer step asserts of its parameters.
pub fn check_optimizer_params(optimizer: i32, p: &OptimizerParams) -> Result<(), GgmlError> {
    let unit = |x: f32| (0.0..=1.0).contains(&x);
    let ok = match optimizer {
        OPTIMIZER_ADAMW => {
            let a = p.adamw;
            a.alpha > 0.0 && unit(a.beta1) && unit(a.beta2) && a.eps >= 0.0 && unit(a.wd)
        }
        OPTIMIZER_SGD => p.sgd.alpha > 0.0 && unit(p.sgd.wd),
        other => return Err(GgmlError(format!("unknown optimizer type {other}"))),
    };
    match ok {
        true => Ok(()),
        false => Err(GgmlError(format!(
            "the optimizer parameters are out of range ({p:?}): the learning rate must be positive, \
             the momenta and the weight decay within [0, 1], eps not negative"
        ))),
    }
}

/// The step's parameters as ggml reads them back: the caller's, fetched and checked once per
/// optimizer step before ggml asks.
unsafe extern "C" fn checked_params(userdata: *mut c_void) -> OptimizerParams {
    // SAFETY: `userdata` is the `Box<OptimizerParams>` of the live `Optimizer` ggml calls for.
    unsafe { *(userdata as *const OptimizerParams) }
}

/// A caller's dataset (`ggml_opt_dataset_t`), made with this process's ggml.
#[derive(Clone, Copy)]
pub struct Dataset(NonNull<c_void>);

/// A caller's result accumulator (`ggml_opt_result_t`, may be NULL: nothing recorded).
#[derive(Clone, Copy)]
pub struct OptResult(*mut c_void);

// SAFETY: the caller's handles are only used during the call that passed them, on its thread;
// the context that holds them meanwhile is used by one thread at a time.
unsafe impl Send for Dataset {}
// SAFETY: as above.
unsafe impl Send for OptResult {}

impl Dataset {
    /// # Safety
    /// `raw` must be a live dataset of this process's ggml, for as long as the value is used.
    pub unsafe fn from_raw(raw: NonNull<c_void>) -> Dataset {
        Dataset(raw)
    }

    pub fn ndata(self) -> i64 {
        // SAFETY: a live dataset (constructor's contract).
        unsafe { ggml_opt_dataset_ndata(self.0.as_ptr()) }
    }

    /// Its data and labels tensors ([ne, ndata] each; the labels may be missing).
    pub fn tensors(self) -> (Option<TensorRef>, Option<TensorRef>) {
        // SAFETY: a live dataset; the tensors live as long as it does.
        unsafe {
            (
                NonNull::new(ggml_opt_dataset_data(self.0.as_ptr())).map(TensorRef),
                NonNull::new(ggml_opt_dataset_labels(self.0.as_ptr())).map(TensorRef),
            )
        }
    }

    /// Datapoint `i` (in the dataset's current order) into `data` and `labels`. The caller has
    /// checked that both tensors are I32 of `data.len()` elements per datapoint and `i < ndata`.
    pub fn datapoint(self, i: i64, data: &mut [i32], labels: &mut [i32]) {
        // SAFETY: a live dataset; both buffers hold one datapoint (checked by the caller), which
        // is what ggml copies for a batch of one datapoint's bytes.
        unsafe {
            ggml_opt_dataset_get_batch_host(
                self.0.as_ptr(),
                data.as_mut_ptr().cast(),
                std::mem::size_of_val(data),
                labels.as_mut_ptr().cast(),
                i,
            )
        }
    }

    fn raw(self) -> *mut c_void {
        self.0.as_ptr()
    }
}

impl OptResult {
    /// # Safety
    /// `raw` must be NULL or a live result of this process's ggml, for as long as it is used.
    pub unsafe fn from_raw(raw: *mut c_void) -> OptResult {
        OptResult(raw)
    }
}

/// The optimizer of one context (`ggml_opt_context_t`) over its scheduler.
pub struct Optimizer {
    raw: NonNull<c_void>,
    optimizer: i32,
    opt_period: i32,
    /// Ubatches evaluated since the last optimizer step (ggml's `opt_i`).
    opt_i: i32,
    user: (GetOptimizerParams, *mut c_void),
    /// What ggml reads through `checked_params` (boxed: ggml keeps its address).
    params: Box<OptimizerParams>,
    /// A step failed between ggml's allocation and evaluation: ggml cannot take another.
    broken: bool,
}

// SAFETY: used by one context, on one thread at a time.
unsafe impl Send for Optimizer {}

impl Optimizer {
    /// An optimizer over `sched` (which must outlive it and stay the same scheduler) making a step
    /// every `opt_period` ubatches with `optimizer`, its parameters from `get` called with `ud`.
    pub fn new(
        sched: &Scheduler,
        opt_period: i32,
        (get, ud): (GetOptimizerParams, *mut c_void),
        optimizer: i32,
    ) -> Result<Optimizer, GgmlError> {
        if get.is_none() {
            return Err(GgmlError(
                "get_opt_pars is NULL: the optimizer needs its parameters".into(),
            ));
        }
        if optimizer != OPTIMIZER_ADAMW && optimizer != OPTIMIZER_SGD {
            return Err(GgmlError(format!(
                "unknown optimizer type {optimizer} (0: AdamW, 1: SGD)"
            )));
        }
        if opt_period < 1 {
            return Err(GgmlError(format!("optimizer period {opt_period}: must be at least 1")));
        }
        let mut params = Box::<OptimizerParams>::default();
        // SAFETY: a plain constructor of a parameter struct; then ggml_opt_init with a live
        // scheduler and our own parameter callback, whose user data is the boxed params above.
        let raw = unsafe {
            let mut p = ggml_opt_default_params(sched.raw(), LOSS_CROSS_ENTROPY);
            p.opt_period = opt_period;
            p.get_opt_pars = Some(checked_params);
            p.get_opt_pars_ud = (&mut *params as *mut OptimizerParams).cast();
            p.optimizer = optimizer;
            ggml_opt_init(p)
        };
        let raw = NonNull::new(raw).ok_or_else(|| GgmlError("ggml_opt_init failed".into()))?;
        Ok(Optimizer {
            raw,
            optimizer,
            opt_period,
            opt_i: 0,
            user: (get, ud),
            params,
            broken: false,
        })
    }

    /// One ubatch: evaluate `graph` (forward, its `inputs` and `outputs` the token ids and the
    /// logits) with a cross-entropy loss against the labels, and with `train` its gradients, and
    /// an optimizer step when the period is complete. `set_inputs` fills the graph's inputs and
    /// returns the labels' bytes ([n_vocab, n_tokens] F32) once memory is allocated; the result
    /// is added to `result`.
    pub fn step(
        &mut self,
        graph: &Graph,
        (inputs, outputs): (TensorRef, TensorRef),
        train: bool,
        set_inputs: impl FnOnce() -> Result<Vec<u8>, String>,
        result: OptResult,
    ) -> Result<(), GgmlError> {
        if self.broken {
            return Err(GgmlError(
                "an earlier training step failed midway; make a new context to train again".into(),
            ));
        }
        check_backward(graph, outputs)?;
        if train && (self.opt_i + 1) % self.opt_period == 0 {
            let (get, ud) = self.user;
            let get = get.ok_or_else(|| GgmlError("get_opt_pars is NULL".into()))?;
            // SAFETY: the caller's callback with the caller's user data, as ggml would call it.
            let p = unsafe { get(ud) };
            check_optimizer_params(self.optimizer, &p)?;
            *self.params = p;
        }
        // SAFETY: a size query of a live graph.
        let size = unsafe { ggml_sys::ggml_graph_size(graph.raw()) } as usize;
        // Room for the loss, the backward graph and the optimizer step (llama.cpp's sizing).
        // SAFETY: size queries.
        let mem_size = unsafe {
            4 * size * ggml_sys::ggml_tensor_overhead() + 2 * ggml_sys::ggml_graph_overhead_custom(size, true)
        };
        // SAFETY: a no_alloc context with a ggml-allocated pool; checked for NULL, freed below.
        let ctx = unsafe {
            ggml_sys::ggml_init(ggml_sys::ggml_init_params {
                mem_size,
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            })
        };
        let ctx = NonNull::new(ctx).ok_or_else(|| GgmlError("ggml_init failed for the optimizer's graphs".into()))?;
        // SAFETY: live optimizer, context and graph; the graph's input and output are its own
        // tensors and what ggml would assert was checked above. From the allocation on, ggml
        // expects an evaluation: a failure in between leaves the optimizer unusable (`broken`).
        let out = unsafe {
            ggml_opt_prepare_alloc(
                self.raw.as_ptr(),
                ctx.as_ptr(),
                graph.raw(),
                inputs.as_ptr(),
                outputs.as_ptr(),
            );
            ggml_opt_alloc(self.raw.as_ptr(), train);
            let labels = ggml_opt_labels(self.raw.as_ptr());
            let filled = set_inputs()
                .map_err(GgmlError)
                .and_then(|bytes| match NonNull::new(labels) {
                    Some(l) => super::tensor_set(TensorRef(l), &bytes),
                    None => Err(GgmlError("the optimizer has no labels".into())),
                });
            match filled {
                Ok(()) => {
                    ggml_opt_eval(self.raw.as_ptr(), result.0);
                    self.opt_i = (self.opt_i + 1) % self.opt_period;
                    Ok(())
                }
                Err(e) => {
                    self.broken = true;
                    Err(e)
                }
            }
        };
        // SAFETY: the context made above; ggml keeps no use of it after the evaluation.
        unsafe { ggml_sys::ggml_free(ctx.as_ptr()) };
        out
    }

    /// Report progress to the caller's `callback` as llama.cpp does after each ubatch.
    #[allow(clippy::too_many_arguments)]
    pub fn report(
        &self,
        callback: EpochCallback,
        train: bool,
        dataset: Dataset,
        result: OptResult,
        ibatch: i64,
        ibatch_max: i64,
        t_start_us: i64,
    ) {
        if let Some(cb) = callback {
            // SAFETY: the caller's callback with the caller's own dataset and result and this
            // live optimizer, as ggml-opt.h declares it.
            unsafe {
                cb(
                    train,
                    self.raw.as_ptr(),
                    dataset.raw(),
                    result.0,
                    ibatch,
                    ibatch_max,
                    t_start_us,
                )
            }
        }
    }
}

impl Drop for Optimizer {
    fn drop(&mut self) {
        // SAFETY: made by ggml_opt_init, freed once.
        unsafe { ggml_opt_free(self.raw.as_ptr()) }
    }
}

/// Make `t` a trainable parameter (its gradients computed, the optimizer updating it).
pub fn set_param(t: TensorRef) {
    // SAFETY: a live leaf tensor (a weight): ggml sets a flag on it.
    unsafe { ggml_sys::ggml_set_param(t.as_ptr()) }
}

/// What ggml's backward pass asserts of `graph` whose output `out` the loss is computed from: a
/// trainable parameter in it; every op that gradients flow through has a backward pass, and the
/// CPU the ops that pass needs; no node that needs gradients writes in place; gradients only of
/// float tensors.
fn check_backward(graph: &Graph, out: TensorRef) -> Result<(), GgmlError> {
    let n = graph.n_nodes();
    // SAFETY: nodes 0..n of a live graph, their sources and fields (plain C structs).
    let nodes: Vec<*mut ggml_sys::ggml_tensor> = (0..n)
        .map(|i| unsafe { ggml_sys::ggml_graph_node(graph.raw(), i) })
        .collect();
    let op_name = |op: ggml_sys::ggml_op| {
        // SAFETY: ggml's static op names.
        unsafe { CStr::from_ptr(ggml_sys::ggml_op_name(op)) }
            .to_string_lossy()
            .into_owned()
    };
    let mut needs: HashSet<*mut ggml_sys::ggml_tensor> = HashSet::new();
    let mut any_param = false;
    for &node in &nodes {
        // SAFETY: as above.
        let t = unsafe { &*node };
        let param = t.flags & ggml_sys::ggml_tensor_flag_GGML_TENSOR_FLAG_PARAM as i32 != 0;
        any_param |= param;
        if t.type_ == ggml_sys::ggml_type_GGML_TYPE_I32 {
            continue;
        }
        let ignored = |j: usize| match t.op {
            ggml_sys::ggml_op_GGML_OP_CPY | ggml_sys::ggml_op_GGML_OP_GET_ROWS | ggml_sys::ggml_op_GGML_OP_ROPE => {
                j == 1
            }
            _ => false,
        };
        let from_src = (0..t.src.len()).find(|&j| !t.src[j].is_null() && !ignored(j) && needs.contains(&t.src[j]));
        if let Some(j) = from_src {
            // SAFETY: a live source tensor.
            let ty = unsafe { (*t.src[j]).type_ };
            if ty != ggml_sys::ggml_type_GGML_TYPE_F32 && ty != ggml_sys::ggml_type_GGML_TYPE_F16 {
                return Err(GgmlError(format!(
                    "gradients would flow through a {} tensor",
                    super::type_name(ty)
                )));
            }
        }
        if !param && from_src.is_none() {
            continue;
        }
        let view_ok = matches!(
            t.op,
            ggml_sys::ggml_op_GGML_OP_CPY
                | ggml_sys::ggml_op_GGML_OP_SET_ROWS
                | ggml_sys::ggml_op_GGML_OP_VIEW
                | ggml_sys::ggml_op_GGML_OP_RESHAPE
                | ggml_sys::ggml_op_GGML_OP_PERMUTE
                | ggml_sys::ggml_op_GGML_OP_TRANSPOSE
        );
        if !t.view_src.is_null() && !view_ok {
            return Err(GgmlError(format!(
                "ggml has no backward pass for the in-place {}",
                op_name(t.op)
            )));
        }
        needs.insert(node);
    }
    if !any_param {
        return Err(GgmlError(
            "no trainable parameter in the graph (only F32 weights the filter accepts are trained)".into(),
        ));
    }
    // Gradients reach the nodes the output depends on, from the output back; each node's
    // gradient is made from those of its consumers.
    let mut reached: HashSet<*mut ggml_sys::ggml_tensor> = HashSet::from([out.as_ptr()]);
    let mut consumers: HashMap<*mut ggml_sys::ggml_tensor, Vec<*mut ggml_sys::ggml_tensor>> = HashMap::new();
    for &node in nodes.iter().rev() {
        if !reached.contains(&node) || !needs.contains(&node) {
            continue;
        }
        // SAFETY: as above.
        let t = unsafe { &*node };
        backward_exists(t)
            .map_err(|what| GgmlError(format!("ggml has no backward pass for {what} ({})", t.name_str())))?;
        // The CPU's softmax gradient has no ALiBi bias.
        if t.op == ggml_sys::ggml_op_GGML_OP_SOFT_MAX && op_param_f32(t, 1) != 0.0 {
            return Err(GgmlError(format!(
                "ggml's CPU backend has no backward pass for ALiBi attention ({})",
                t.name_str()
            )));
        }
        for &s in t.src.iter().filter(|s| !s.is_null()) {
            if needs.contains(&s) {
                reached.insert(s);
                consumers.entry(s).or_default().push(node);
            }
        }
    }
    // A view's gradient is accumulated into its source's with ggml's ACC, which needs the view's
    // gradient contiguous in its rows: not so behind a transposition (the values of a fused
    // projection attended to directly).
    for (&node, _) in consumers.iter() {
        // SAFETY: as above.
        let t = unsafe { &*node };
        if t.op == ggml_sys::ggml_op_GGML_OP_VIEW && needs.contains(&t.src[0]) && strided_grad(node, &consumers) {
            return Err(GgmlError(format!(
                "ggml's backward pass cannot accumulate the transposed gradient of {} into its source",
                t.name_str()
            )));
        }
    }
    Ok(())
}

/// Float `i` of a tensor's op parameters.
fn op_param_f32(t: &ggml_sys::ggml_tensor, i: usize) -> f32 {
    f32::from_bits(t.op_params[i] as u32)
}

/// Whether ggml builds `node`'s gradient with its rows strided: it has one consumer (several are
/// summed into a new tensor), which moves dimension 0 (a transposition, a permutation that moves
/// it) or passes such a gradient on (a permutation that keeps it).
fn strided_grad(
    node: *mut ggml_sys::ggml_tensor,
    consumers: &HashMap<*mut ggml_sys::ggml_tensor, Vec<*mut ggml_sys::ggml_tensor>>,
) -> bool {
    let [c] = consumers.get(&node).map_or(&[][..], Vec::as_slice) else {
        return false;
    };
    // SAFETY: a live node of the graph.
    let t = unsafe { &**c };
    match t.op {
        ggml_sys::ggml_op_GGML_OP_TRANSPOSE => true,
        ggml_sys::ggml_op_GGML_OP_PERMUTE => t.op_params[0] != 0 || strided_grad(*c, consumers),
        _ => false,
    }
}

/// Whether ggml's backward pass handles `t`'s op as it is used here; else what it lacks.
fn backward_exists(t: &ggml_sys::ggml_tensor) -> Result<(), String> {
    let tp: *const ggml_sys::ggml_tensor = t;
    let supported = match t.op {
        ggml_sys::ggml_op_GGML_OP_DUP
        | ggml_sys::ggml_op_GGML_OP_ADD
        | ggml_sys::ggml_op_GGML_OP_ADD1
        | ggml_sys::ggml_op_GGML_OP_ACC
        | ggml_sys::ggml_op_GGML_OP_SUB
        | ggml_sys::ggml_op_GGML_OP_MUL
        | ggml_sys::ggml_op_GGML_OP_DIV
        | ggml_sys::ggml_op_GGML_OP_SQR
        | ggml_sys::ggml_op_GGML_OP_SQRT
        | ggml_sys::ggml_op_GGML_OP_LOG
        | ggml_sys::ggml_op_GGML_OP_SIN
        | ggml_sys::ggml_op_GGML_OP_COS
        | ggml_sys::ggml_op_GGML_OP_SUM
        | ggml_sys::ggml_op_GGML_OP_SUM_ROWS
        | ggml_sys::ggml_op_GGML_OP_MEAN
        | ggml_sys::ggml_op_GGML_OP_REPEAT
        | ggml_sys::ggml_op_GGML_OP_REPEAT_BACK
        | ggml_sys::ggml_op_GGML_OP_RMS_NORM
        | ggml_sys::ggml_op_GGML_OP_SCALE
        | ggml_sys::ggml_op_GGML_OP_SET
        | ggml_sys::ggml_op_GGML_OP_CPY
        | ggml_sys::ggml_op_GGML_OP_CONT
        | ggml_sys::ggml_op_GGML_OP_RESHAPE
        | ggml_sys::ggml_op_GGML_OP_VIEW
        | ggml_sys::ggml_op_GGML_OP_PERMUTE
        | ggml_sys::ggml_op_GGML_OP_TRANSPOSE
        | ggml_sys::ggml_op_GGML_OP_GET_ROWS
        | ggml_sys::ggml_op_GGML_OP_DIAG_MASK_INF
        | ggml_sys::ggml_op_GGML_OP_DIAG_MASK_ZERO
        | ggml_sys::ggml_op_GGML_OP_SOFT_MAX
        | ggml_sys::ggml_op_GGML_OP_ROPE
        | ggml_sys::ggml_op_GGML_OP_NONE => true,
        // Its gradient for the activations is an outer product with the weights, which the CPU
        // computes for float and quantized weights but not BF16 or integer ones.
        ggml_sys::ggml_op_GGML_OP_MUL_MAT => {
            // SAFETY: a matrix product's first source is a live tensor.
            let w = unsafe { (*t.src[0]).type_ };
            w == ggml_sys::ggml_type_GGML_TYPE_F32
                || w == ggml_sys::ggml_type_GGML_TYPE_F16
                || super::is_block_quantized(w)
        }
        // SAFETY: reading the op parameters of a live tensor of that op.
        ggml_sys::ggml_op_GGML_OP_UNARY => matches!(
            unsafe { ggml_sys::ggml_get_unary_op(tp) },
            ggml_sys::ggml_unary_op_GGML_UNARY_OP_ABS
                | ggml_sys::ggml_unary_op_GGML_UNARY_OP_SGN
                | ggml_sys::ggml_unary_op_GGML_UNARY_OP_NEG
                | ggml_sys::ggml_unary_op_GGML_UNARY_OP_STEP
                | ggml_sys::ggml_unary_op_GGML_UNARY_OP_RELU
                | ggml_sys::ggml_unary_op_GGML_UNARY_OP_SILU
                | ggml_sys::ggml_unary_op_GGML_UNARY_OP_EXP
                | ggml_sys::ggml_unary_op_GGML_UNARY_OP_EXPM1
                | ggml_sys::ggml_unary_op_GGML_UNARY_OP_SOFTPLUS
        ),
        // Only SwiGLU with gate and up apart.
        // SAFETY: as above.
        ggml_sys::ggml_op_GGML_OP_GLU => {
            (unsafe { ggml_sys::ggml_get_glu_op(tp) }) == ggml_sys::ggml_glu_op_GGML_GLU_OP_SWIGLU
                && !t.src[1].is_null()
        }
        _ => false,
    };
    match supported {
        true => Ok(()),
        false => {
            // SAFETY: ggml's static op names.
            let name = unsafe { CStr::from_ptr(ggml_sys::ggml_op_desc(tp)) };
            Err(name.to_string_lossy().into_owned())
        }
    }
}

trait TensorName {
    fn name_str(&self) -> String;
}

impl TensorName for ggml_sys::ggml_tensor {
    fn name_str(&self) -> String {
        // SAFETY: a tensor's name is a NUL-terminated string in its fixed-size field.
        unsafe { CStr::from_ptr(self.name.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adamw(alpha: f32, beta1: f32, wd: f32) -> OptimizerParams {
        OptimizerParams {
            adamw: AdamW {
                alpha,
                beta1,
                beta2: 0.999,
                eps: 1e-8,
                wd,
            },
            sgd: Sgd { alpha: 1e-3, wd: 0.0 },
        }
    }

    const F32: super::super::RawType = ggml_sys::ggml_type_GGML_TYPE_F32;

    /// A graph of `x` [4, 2] through a weight `w` [4, 4], then `tail`; with `param`, `w` is trained.
    fn check(param: bool, tail: impl FnOnce(&mut Graph, TensorRef) -> TensorRef) -> Result<(), String> {
        let mut arena = super::super::Arena::new(1).expect("arena");
        let w = arena.new_tensor(F32, &[4, 4], "w").expect("w");
        if param {
            set_param(w);
        }
        let mut g = Graph::new(64).expect("graph");
        let x = g.input(F32, &[4, 2], "x").expect("x");
        let y = g.mul_mat(w, x).expect("mul_mat");
        let out = tail(&mut g, y);
        g.output(out);
        check_backward(&g, out).map_err(|e| e.to_string())
    }

    #[test]
    fn backward_passes_ggml_lacks_are_found_before_ggml_aborts() {
        assert_eq!(check(true, |g, y| g.silu(y).expect("silu")), Ok(()));
        let no_param = check(false, |_, y| y).unwrap_err();
        assert!(no_param.contains("no trainable parameter"), "{no_param}");
        let norm = check(true, |g, y| g.norm(y, 1e-5).expect("norm")).unwrap_err();
        assert!(norm.contains("no backward pass for NORM"), "{norm}");
        // SwiGLU only with gate and up apart.
        assert_eq!(check(true, |g, y| g.swiglu(y, y).expect("swiglu")), Ok(()));
        let fused = check(true, |g, y| g.swiglu_fused(y).expect("swiglu")).unwrap_err();
        assert!(fused.contains("SWIGLU"), "{fused}");
        // A view whose gradient comes back transposed (values read from a fused projection).
        let transposed = check(true, |g, y| {
            let v = g.view(y, &[2, 2], &[16], 8).expect("view");
            let t = g.permute(v, [1, 0, 2, 3]).expect("transpose");
            g.cont(t).expect("cont")
        })
        .unwrap_err();
        assert!(transposed.contains("transposed gradient"), "{transposed}");
        // Kept in its rows, it is accumulated as usual.
        let kept = check(true, |g, y| {
            let v = g.view(y, &[2, 2], &[16], 8).expect("view");
            g.cont(v).expect("cont")
        });
        assert_eq!(kept, Ok(()));
    }

    #[test]
    fn optimizer_params_are_held_to_what_ggml_asserts() {
        assert!(check_optimizer_params(OPTIMIZER_ADAMW, &adamw(1e-3, 0.9, 0.0)).is_ok());
        assert!(check_optimizer_params(OPTIMIZER_ADAMW, &adamw(0.0, 0.9, 0.0)).is_err());
        assert!(check_optimizer_params(OPTIMIZER_ADAMW, &adamw(1e-3, 1.5, 0.0)).is_err());
        assert!(check_optimizer_params(OPTIMIZER_ADAMW, &adamw(1e-3, 0.9, -0.1)).is_err());
        assert!(check_optimizer_params(OPTIMIZER_ADAMW, &adamw(f32::NAN, 0.9, 0.0)).is_err());
        // SGD reads only its own pair.
        assert!(check_optimizer_params(OPTIMIZER_SGD, &adamw(0.0, 7.0, 0.0)).is_ok());
        let mut p = adamw(1e-3, 0.9, 0.0);
        p.sgd.wd = 2.0;
        assert!(check_optimizer_params(OPTIMIZER_SGD, &p).is_err());
        assert!(check_optimizer_params(2, &p).is_err());
    }
}
