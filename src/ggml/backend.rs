//! The CPU backend and the backends of other devices, the scheduler that runs graphs over them,
//! buffer types, and backend buffers that own memory.

use super::{Arena, GgmlError, TensorRef};
use std::ffi::c_void;
use std::ptr::NonNull;

/// A caller-supplied abort check (llama.h's `ggml_abort_callback` and its data), polled by the CPU
/// backend between graph nodes.
#[derive(Clone, Copy)]
pub struct AbortCallback {
    f: unsafe extern "C" fn(*mut c_void) -> bool,
    data: *mut c_void,
}

impl AbortCallback {
    /// # Safety
    /// `f` must be callable with `data` from the thread that computes, for as long as the callback
    /// is installed (llama.h leaves this to the caller of `llama_set_abort_callback`).
    pub unsafe fn new(f: unsafe extern "C" fn(*mut c_void) -> bool, data: *mut c_void) -> AbortCallback {
        AbortCallback { f, data }
    }
}

/// A caller-supplied observer of computed nodes (llama.h's `cb_eval`, ggml's sched eval callback).
#[derive(Clone, Copy)]
pub struct EvalCallback {
    f: unsafe extern "C" fn(*mut ggml_sys::ggml_tensor, bool, *mut c_void) -> bool,
    data: *mut c_void,
}

impl EvalCallback {
    /// # Safety
    /// `f` must be callable with `data` from the computing thread while the context lives.
    pub unsafe fn new(
        f: unsafe extern "C" fn(*mut ggml_sys::ggml_tensor, bool, *mut c_void) -> bool,
        data: *mut c_void,
    ) -> EvalCallback {
        EvalCallback { f, data }
    }
}

// SAFETY: `new`'s maker vouched that the callback may be called from the computing thread, which
// is whichever thread drives the context (one at a time).
unsafe impl Send for EvalCallback {}

pub struct CpuBackend {
    raw: NonNull<ggml_sys::ggml_backend>,
    set_n_threads: unsafe extern "C" fn(ggml_sys::ggml_backend_t, i32),
    set_abort: unsafe extern "C" fn(ggml_sys::ggml_backend_t, ggml_sys::ggml_abort_callback, *mut c_void),
}

// SAFETY: a backend is driven by one context, which is used by one thread at a time (llama.h's rule).
unsafe impl Send for CpuBackend {}

impl CpuBackend {
    pub fn new(n_threads: i32) -> Result<CpuBackend, GgmlError> {
        let dev = super::Device::cpu()?;
        let (threads, abort) = (
            dev.proc_address(c"ggml_backend_set_n_threads"),
            dev.proc_address(c"ggml_backend_set_abort_callback"),
        );
        if threads.is_null() || abort.is_null() {
            return Err(GgmlError("ggml's CPU backend lacks its thread or abort setter".into()));
        }
        // SAFETY: a live device; NULL parameters ask for its defaults; NULL on failure.
        let raw = NonNull::new(unsafe { ggml_sys::ggml_backend_dev_init(dev.raw(), std::ptr::null()) })
            .ok_or_else(|| GgmlError("cannot initialise ggml's CPU backend".into()))?;
        // SAFETY: ggml's CPU backend gives these functions under these names, with these types.
        let b = unsafe {
            CpuBackend {
                raw,
                set_n_threads: std::mem::transmute::<*mut c_void, unsafe extern "C" fn(ggml_sys::ggml_backend_t, i32)>(
                    threads,
                ),
                set_abort: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(ggml_sys::ggml_backend_t, ggml_sys::ggml_abort_callback, *mut c_void),
                >(abort),
            }
        };
        b.set_n_threads(n_threads);
        Ok(b)
    }

    /// At least one thread; ggml asserts on fewer.
    pub fn set_n_threads(&self, n: i32) {
        // SAFETY: the backend is a CPU backend; the count is clamped to >= 1.
        unsafe { (self.set_n_threads)(self.raw.as_ptr(), n.max(1)) }
    }

    /// Install (or with `None` remove) the abort check.
    pub fn set_abort_callback(&self, cb: Option<AbortCallback>) {
        // SAFETY: an AbortCallback's maker vouched that it is callable (see `AbortCallback::new`);
        // a NULL callback disables the check.
        unsafe {
            match cb {
                Some(c) => (self.set_abort)(self.raw.as_ptr(), Some(c.f), c.data),
                None => (self.set_abort)(self.raw.as_ptr(), None, std::ptr::null_mut()),
            }
        }
    }

    pub(crate) fn raw(&self) -> ggml_sys::ggml_backend_t {
        self.raw.as_ptr()
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        // SAFETY: freed once, after the scheduler that used it (the context drops it last).
        unsafe { ggml_sys::ggml_backend_free(self.raw.as_ptr()) }
    }
}

/// The backend of an offload device (an RPC server, a GPU), made from the device.
pub struct DeviceBackend {
    raw: NonNull<ggml_sys::ggml_backend>,
    dev: super::Device,
}

// SAFETY: as CpuBackend's.
unsafe impl Send for DeviceBackend {}

impl DeviceBackend {
    pub fn new(dev: super::Device) -> Result<DeviceBackend, GgmlError> {
        dev.check_alive()?;
        // SAFETY: a live device; NULL parameters ask for its defaults; NULL on failure.
        let raw = unsafe { ggml_sys::ggml_backend_dev_init(dev.raw(), std::ptr::null()) };
        NonNull::new(raw)
            .map(|raw| DeviceBackend { raw, dev })
            .ok_or_else(|| GgmlError(format!("cannot initialise the backend of device {}", dev.name())))
    }

    /// An error if the device's RPC server is gone (see [`super::Device::check_connection`]).
    pub fn check_connection(&self) -> Result<(), GgmlError> {
        self.dev.check_connection()
    }
}

impl Drop for DeviceBackend {
    fn drop(&mut self) {
        // SAFETY: freed once, after the scheduler that used it (the context drops it after).
        unsafe { ggml_sys::ggml_backend_free(self.raw.as_ptr()) }
    }
}

/// A ggml buffer type by identity: llama.cpp's memory breakdown is keyed by these addresses, and
/// clients read them back through ggml's buffer-type interface (`ggml_backend_buft_name`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BufferTypeId(usize);

impl BufferTypeId {
    pub fn addr(self) -> usize {
        self.0
    }

    /// The buffer type of a live buffer.
    ///
    /// # Safety
    /// `buf` must be a live ggml buffer.
    pub(super) unsafe fn of(buf: *mut ggml_sys::ggml_backend_buffer) -> BufferTypeId {
        // SAFETY: forwarded contract.
        BufferTypeId(unsafe { ggml_sys::ggml_backend_buffer_get_type(buf) } as usize)
    }
}

/// A ggml buffer type: where a device keeps tensors (the CPU's host memory, an RPC server's, a
/// GPU's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferType(NonNull<ggml_sys::ggml_backend_buffer_type>);

// SAFETY: buffer types are descriptors owned by ggml for the life of the process.
unsafe impl Send for BufferType {}
// SAFETY: as above; queries do not mutate them.
unsafe impl Sync for BufferType {}

impl BufferType {
    pub(crate) fn from_raw(raw: ggml_sys::ggml_backend_buffer_type_t) -> Option<BufferType> {
        NonNull::new(raw).map(BufferType)
    }

    /// The CPU's host memory.
    pub fn cpu() -> BufferType {
        // SAFETY: a static object of ggml-base.
        BufferType(NonNull::new(unsafe { ggml_sys::ggml_backend_cpu_buffer_type() }).expect("ggml's CPU buffer type"))
    }

    pub fn name(self) -> String {
        // SAFETY: a live buffer type; its name is a static string.
        unsafe { std::ffi::CStr::from_ptr(ggml_sys::ggml_backend_buft_name(self.raw())) }
            .to_string_lossy()
            .into_owned()
    }

    pub(crate) fn raw(self) -> ggml_sys::ggml_backend_buffer_type_t {
        self.0.as_ptr()
    }
}

/// Memory a backend buffer type allocated for all tensors of an arena (the KV cache).
pub struct OwnedBuffer {
    raw: NonNull<ggml_sys::ggml_backend_buffer>,
}

// SAFETY: the buffer is plain memory owned by this value.
unsafe impl Send for OwnedBuffer {}
// SAFETY: shared access only reads its size.
unsafe impl Sync for OwnedBuffer {}

impl OwnedBuffer {
    /// Allocate memory of a buffer type (a device's, or a CPU extra one) for every weight tensor in
    /// `arena`; data then goes in through [`tensor_set`], which converts it to the buffer type's
    /// layout.
    pub fn for_weights_in(arena: &Arena, buft: BufferType) -> Result<OwnedBuffer, GgmlError> {
        let b = Self::for_arena(arena, buft)?;
        // SAFETY: live buffer; the usage tells the scheduler these are weights.
        unsafe {
            ggml_sys::ggml_backend_buffer_set_usage(
                b.raw.as_ptr(),
                ggml_sys::ggml_backend_buffer_usage_GGML_BACKEND_BUFFER_USAGE_WEIGHTS,
            )
        };
        Ok(b)
    }

    /// Allocate memory of `buft` for every tensor in `arena` and point them at it.
    pub fn for_arena(arena: &Arena, buft: BufferType) -> Result<OwnedBuffer, GgmlError> {
        // SAFETY: the arena's tensors are fresh (no data) and the buffer type is live; ggml returns
        // NULL when allocation fails.
        let raw = unsafe { ggml_sys::ggml_backend_alloc_ctx_tensors_from_buft(arena.as_ptr(), buft.raw()) };
        NonNull::new(raw)
            .map(|raw| OwnedBuffer { raw })
            .ok_or_else(|| GgmlError("cannot allocate the buffer (out of memory?)".into()))
    }

    pub fn size(&self) -> usize {
        // SAFETY: live buffer.
        unsafe { ggml_sys::ggml_backend_buffer_get_size(self.raw.as_ptr()) }
    }

    pub fn buffer_type(&self) -> BufferTypeId {
        // SAFETY: live buffer.
        unsafe { BufferTypeId::of(self.raw.as_ptr()) }
    }

    pub fn clear(&self, value: u8) {
        // SAFETY: live buffer.
        unsafe { ggml_sys::ggml_backend_buffer_clear(self.raw.as_ptr(), value) }
    }
}

impl Drop for OwnedBuffer {
    fn drop(&mut self) {
        // SAFETY: a live buffer.
        let buft = unsafe { ggml_sys::ggml_backend_buffer_get_type(self.raw.as_ptr()) };
        if super::device::on_dead_server(buft) {
            return; // freeing would message a server that is gone, and ggml's client would abort
        }
        // SAFETY: freed once.
        unsafe { ggml_sys::ggml_backend_buffer_free(self.raw.as_ptr()) }
    }
}

/// Copy `data` into a host tensor. The tensor must be allocated and hold exactly `data.len()` bytes
/// (checked).
pub fn tensor_set(t: TensorRef, data: &[u8]) -> Result<(), GgmlError> {
    if t.nbytes() != data.len() {
        return Err(GgmlError(format!(
            "input of {} bytes for a tensor of {} bytes",
            data.len(),
            t.nbytes()
        )));
    }
    if data.is_empty() {
        return Ok(()); // an empty tensor (no outputs in a ubatch) may have no memory at all
    }
    // SAFETY: the tensor is allocated (checked by the caller's protocol: after sched alloc) and the
    // size matches; ggml asserts on the range, which the check above satisfies.
    unsafe {
        if (*t.as_ptr()).data.is_null() || (*t.as_ptr()).buffer.is_null() {
            return Err(GgmlError("tensor has no memory".into()));
        }
        ggml_sys::ggml_backend_tensor_set(t.as_ptr(), data.as_ptr().cast(), 0, data.len());
    }
    Ok(())
}

/// Copy `data` into bytes `[offset, offset + data.len())` of an allocated tensor (checked).
pub fn tensor_write(t: TensorRef, offset: usize, data: &[u8]) -> Result<(), GgmlError> {
    check_range(t, offset, data.len())?;
    // SAFETY: the tensor is allocated and the range lies inside it (checked).
    unsafe { ggml_sys::ggml_backend_tensor_set(t.as_ptr(), data.as_ptr().cast(), offset, data.len()) };
    Ok(())
}

/// Copy bytes `[offset, offset + out.len())` of an allocated tensor into `out` (checked).
pub fn tensor_read(t: TensorRef, offset: usize, out: &mut [u8]) -> Result<(), GgmlError> {
    check_range(t, offset, out.len())?;
    // SAFETY: as above.
    unsafe { ggml_sys::ggml_backend_tensor_get(t.as_ptr(), out.as_mut_ptr().cast(), offset, out.len()) };
    Ok(())
}

fn check_range(t: TensorRef, offset: usize, len: usize) -> Result<(), GgmlError> {
    if len == 0 && offset <= t.nbytes() {
        return Ok(()); // nothing to copy; an empty tensor may have no memory at all
    }
    // SAFETY: reading plain fields of a live tensor.
    let allocated = unsafe { !(*t.as_ptr()).data.is_null() && !(*t.as_ptr()).buffer.is_null() };
    if !allocated {
        return Err(GgmlError("tensor has no memory".into()));
    }
    if offset.checked_add(len).is_none_or(|end| end > t.nbytes()) {
        return Err(GgmlError(format!(
            "bytes [{offset}, +{len}) outside a tensor of {} bytes",
            t.nbytes()
        )));
    }
    Ok(())
}

/// Copy the first `out.len()` values of an F32 tensor.
pub fn tensor_get_f32(t: TensorRef, out: &mut [f32]) -> Result<(), GgmlError> {
    let bytes = std::mem::size_of_val(out);
    if t.ggml_type() != ggml_sys::ggml_type_GGML_TYPE_F32 || bytes > t.nbytes() {
        return Err(GgmlError(format!(
            "read of {} f32 values from a tensor of {} bytes",
            out.len(),
            t.nbytes()
        )));
    }
    if out.is_empty() {
        return Ok(());
    }
    // SAFETY: the range lies inside the tensor and the tensor is allocated (both checked); any bit
    // pattern is a valid f32.
    unsafe {
        if (*t.as_ptr()).data.is_null() || (*t.as_ptr()).buffer.is_null() {
            return Err(GgmlError("tensor has no memory".into()));
        }
        ggml_sys::ggml_backend_tensor_get(t.as_ptr(), out.as_mut_ptr().cast(), 0, bytes);
    }
    Ok(())
}

/// Result of running a graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeStatus {
    Success,
    Aborted,
    Failed(i32),
}

/// The one scheduler of a context: plans graphs over the backends and owns the compute buffers.
pub struct Scheduler {
    raw: NonNull<ggml_sys::ggml_backend_sched>,
    /// The backends it schedules on, devices first and the CPU last; their owner keeps them alive
    /// longer than the scheduler.
    backends: Vec<ggml_sys::ggml_backend_t>,
    /// The graph size it was made for: room for this many nodes and leaves together.
    max_nodes: usize,
}

// SAFETY: used by one context, one thread at a time.
unsafe impl Send for Scheduler {}

impl Scheduler {
    /// A scheduler over the device backends and then `cpu` (the order is ggml's priority: a node
    /// runs on the first backend that holds its weights and supports it), able to hold graphs of up
    /// to `max_nodes` nodes; with `op_offload`, a device may also run an op whose weights are on
    /// the CPU when its backend asks for it (llama.h's `op_offload`).
    pub fn new(
        cpu: &CpuBackend,
        devices: &[DeviceBackend],
        max_nodes: usize,
        op_offload: bool,
    ) -> Result<Scheduler, GgmlError> {
        let mut backends: Vec<_> = devices.iter().map(|d| d.raw.as_ptr()).chain([cpu.raw()]).collect();
        let n = i32::try_from(backends.len()).map_err(|_| GgmlError("too many backends".into()))?;
        // SAFETY: valid backends, the CPU last as ggml requires; NULL buffer types mean each
        // backend's default; no parallel copies; ggml keeps its own copy of the array.
        let raw = unsafe {
            ggml_sys::ggml_backend_sched_new(
                backends.as_mut_ptr(),
                std::ptr::null_mut(),
                n,
                max_nodes,
                false,
                op_offload,
            )
        };
        NonNull::new(raw)
            .map(|raw| Scheduler {
                raw,
                backends,
                max_nodes,
            })
            .ok_or_else(|| GgmlError("ggml_backend_sched_new failed".into()))
    }

    /// Every node of `graph` must be one some backend can run with its operands where they are
    /// (a weight in a repacked buffer feeds nothing but matrix products); ggml would abort otherwise.
    /// Nor may it have more nodes and leaves than the scheduler has room for (ggml asserts).
    pub fn check_supported(&self, graph: &super::Graph) -> Result<(), GgmlError> {
        let size = graph.n_nodes().max(0) as usize + graph.n_leafs();
        if size > self.max_nodes {
            return Err(GgmlError(format!(
                "the graph has {size} nodes and leaves, more than the {} its scheduler was made for",
                self.max_nodes
            )));
        }
        for i in 0..graph.n_nodes() {
            // SAFETY: i is below the node count; the backends are alive (see the field).
            let (node, ok) = unsafe {
                let node = ggml_sys::ggml_graph_node(graph.raw(), i);
                (
                    node,
                    self.backends
                        .iter()
                        .any(|&b| ggml_sys::ggml_backend_supports_op(b, node)),
                )
            };
            if !ok {
                // SAFETY: a live node; its name is a NUL-terminated array and ggml_op_desc a static string.
                let (name, op) = unsafe {
                    (
                        std::ffi::CStr::from_ptr((*node).name.as_ptr()).to_string_lossy(),
                        std::ffi::CStr::from_ptr(ggml_sys::ggml_op_desc(node)).to_string_lossy(),
                    )
                };
                return Err(GgmlError(format!("the backend cannot run graph node '{name}' ({op})")));
            }
        }
        Ok(())
    }

    /// Size the compute buffers for `graph` (call with the worst case first).
    pub fn reserve(&self, graph: &super::Graph) -> Result<(), GgmlError> {
        self.check_supported(graph)?;
        // SAFETY: the graph belongs to a live graph arena.
        if unsafe { ggml_sys::ggml_backend_sched_reserve(self.raw.as_ptr(), graph.raw()) } {
            Ok(())
        } else {
            Err(GgmlError("cannot reserve compute buffers (out of memory?)".into()))
        }
    }

    pub(crate) fn raw(&self) -> ggml_sys::ggml_backend_sched_t {
        self.raw.as_ptr()
    }

    /// Plan and place `graph`'s tensors in the compute buffers (after a reset).
    pub fn alloc(&self, graph: &super::Graph) -> Result<(), GgmlError> {
        self.check_supported(graph)?;
        // SAFETY: as above; reset first so the scheduler forgets the previous graph.
        let ok = unsafe {
            ggml_sys::ggml_backend_sched_reset(self.raw.as_ptr());
            ggml_sys::ggml_backend_sched_alloc_graph(self.raw.as_ptr(), graph.raw())
        };
        if ok {
            Ok(())
        } else {
            Err(GgmlError("cannot allocate the compute graph".into()))
        }
    }

    /// Run `graph`, which must be the graph last passed to [`Scheduler::alloc`].
    pub fn compute(&self, graph: &super::Graph) -> ComputeStatus {
        // SAFETY: the graph is allocated in this scheduler.
        let status = unsafe { ggml_sys::ggml_backend_sched_graph_compute(self.raw.as_ptr(), graph.raw()) };
        match status {
            ggml_sys::ggml_status_GGML_STATUS_SUCCESS => ComputeStatus::Success,
            ggml_sys::ggml_status_GGML_STATUS_ABORTED => ComputeStatus::Aborted,
            other => ComputeStatus::Failed(other),
        }
    }

    /// Bytes of compute buffer held over all backends.
    pub fn buffer_bytes(&self) -> usize {
        self.buffers().iter().map(|b| b.1).sum()
    }

    /// The compute buffers' type and size per backend, the CPU's last.
    pub fn buffers(&self) -> Vec<(BufferTypeId, usize)> {
        self.backends
            .iter()
            // SAFETY: the backends are the scheduler's; buffer types are static objects.
            .map(|&b| unsafe {
                (
                    BufferTypeId(ggml_sys::ggml_backend_sched_get_buffer_type(self.raw.as_ptr(), b) as usize),
                    ggml_sys::ggml_backend_sched_get_buffer_size(self.raw.as_ptr(), b),
                )
            })
            .collect()
    }

    /// Have `cb` observe (and possibly stop) each node as it is computed (llama.h's `cb_eval`).
    pub fn set_eval_callback(&self, cb: EvalCallback) {
        // SAFETY: an EvalCallback's maker vouched that it is callable (see `EvalCallback::new`).
        unsafe { ggml_sys::ggml_backend_sched_set_eval_callback(self.raw.as_ptr(), Some(cb.f), cb.data) }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        // SAFETY: the backends are alive (see the field); their buffer types are static objects.
        let on_dead_server = self
            .backends
            .iter()
            .any(|&b| unsafe { super::device::on_dead_server(ggml_sys::ggml_backend_get_default_buffer_type(b)) });
        if on_dead_server {
            return; // its compute buffers there cannot be freed without aborting (as OwnedBuffer's)
        }
        // SAFETY: freed once, before the backends it references.
        unsafe { ggml_sys::ggml_backend_sched_free(self.raw.as_ptr()) }
    }
}
