//! Thin safe wrappers over the raw ggml bindings. Together with `ffi/`, the only place with `unsafe`.
//!
//! ggml aborts the process on many invalid inputs (GGML_ASSERT). Callers validate first; these
//! wrappers document what they rely on.

mod backend;
mod buffer;
mod context;
mod device;
mod extra_buft;
mod graph;
pub mod opt;
mod placed;
pub mod quant;
pub mod user_fill;

pub use backend::{
    tensor_get_f32, tensor_read, tensor_set, tensor_write, AbortCallback, BufferType, BufferTypeId, ComputeStatus,
    CpuBackend, DeviceBackend, EvalCallback, OwnedBuffer, Scheduler,
};
pub use buffer::{map_file, HostBuffer, CPU_BUFFER_ALIGNMENT};
pub use context::{Arena, TensorRef};
pub use device::{add_rpc_server, check_ggml_version, Device, DeviceKind};
pub use extra_buft::{cpu_extra_buffer_types, ExtraBufferType};
pub use graph::{Graph, OpResult, Scores, ROPE_IMROPE, ROPE_MROPE, ROPE_NEOX, ROPE_NORMAL};
pub use placed::{Placed, PlacedBuffers};

use crate::log::{self, Level};
use std::ffi::{c_char, c_void, CStr};
use std::sync::Once;

pub use ggml_sys::ggml_type as RawType;

/// What a ggml wrapper says when it fails (or refuses an input ggml would abort on), in words.
/// Its own type rather than a bare `String`, so that `?` turns it into `Error::Ggml`
/// (`crate::error`) while any other string has to say what kind of error it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GgmlError(String);

impl GgmlError {
    /// For graph code above this layer that refuses an input itself (the backend samplers), so
    /// that its refusals travel with ggml's own.
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        GgmlError(msg.into())
    }
}

/// Whether `t` is a block-quantized type (anything but the float types).
pub fn is_quantized(t: RawType) -> bool {
    !matches!(
        t,
        ggml_sys::ggml_type_GGML_TYPE_F32 | ggml_sys::ggml_type_GGML_TYPE_F16 | ggml_sys::ggml_type_GGML_TYPE_BF16
    )
}

/// Whether ggml's CPU backend has a matrix product for weights of type `t` (floats and quantized
/// blocks; not F64 or the integer types).
pub fn can_multiply(t: RawType) -> bool {
    is_block_quantized(t) || !is_quantized(t)
}

/// Whether `t` is one of ggml's block-quantized types (not the float or integer types).
pub fn is_block_quantized(t: RawType) -> bool {
    // SAFETY: a table lookup ggml bounds itself (false past the known types).
    t < ggml_sys::ggml_type_GGML_TYPE_COUNT && unsafe { ggml_sys::ggml_is_quantized(t) }
}

/// The threads a new CPU backend computes with until told otherwise (`GGML_DEFAULT_N_THREADS`).
pub const DEFAULT_THREADS: i32 = ggml_sys::GGML_DEFAULT_N_THREADS as i32;

/// The most threads ggml's CPU backend computes with (`GGML_MAX_N_THREADS`).
pub const MAX_THREADS: i32 = ggml_sys::GGML_MAX_N_THREADS as i32;
/// ggml's 32-bit integer type (tables of ids).
pub const TYPE_I32: RawType = ggml_sys::ggml_type_GGML_TYPE_I32;

/// `x` as ggml's F16 bits (rounded as ggml rounds).
pub fn f16_bits(x: f32) -> u16 {
    // SAFETY: a pure conversion of a value.
    unsafe { ggml_sys::ggml_fp32_to_fp16(x) }
}

/// One-time process set-up: ggml's log lines go to our log, timers and f16 tables are initialised.
/// Every entry point that touches ggml calls this first; repeated calls are free.
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `forward_log` matches ggml_log_callback and ignores its user data; the ggml calls
        // below take no pointers (ggml_init with a NULL buffer allocates its own and is freed at once).
        unsafe {
            ggml_sys::ggml_log_set(Some(forward_log), std::ptr::null_mut());
            ggml_sys::ggml_time_init();
            let ctx = ggml_sys::ggml_init(ggml_sys::ggml_init_params {
                mem_size: 0,
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            });
            if !ctx.is_null() {
                ggml_sys::ggml_free(ctx);
            }
        }
        load_backends_beside_us();
    });
}

/// With a ggml built with `GGML_BACKEND_DL` (the portable build) the backends are modules that
/// nothing registers until someone loads them; llama.cpp's programs call `ggml_backend_load_all()`,
/// which looks beside the program. When no CPU device is registered yet, load them from this
/// library's directory, where the portable build puts them (ggml picks the best CPU variant for
/// this CPU), and say which CPU variant it is.
fn load_backends_beside_us() {
    // Not Device::cpu(): that calls init(), which is running.
    // SAFETY: a registry query; NULL when no CPU backend is registered.
    let cpu =
        || unsafe { ggml_sys::ggml_backend_dev_by_type(ggml_sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_CPU) };
    if !cpu().is_null() {
        return;
    }
    let Some(dir) = file_of(load_backends_beside_us as *const c_void).and_then(|f| {
        let dir = std::path::Path::new(&f).parent()?.to_str()?.to_string();
        std::ffi::CString::new(dir).ok()
    }) else {
        crate::log_error!("ggml has no CPU backend, and the library's own directory is unknown");
        return;
    };
    // SAFETY: a NUL-terminated path; ggml loads the modules it finds there and registers them.
    unsafe { ggml_sys::ggml_backend_load_all_from_path(dir.as_ptr()) };
    let dev = cpu();
    // The registry is a static object of the module that registered it.
    // SAFETY: a registered device (checked non-NULL) answers its registry.
    let variant = (!dev.is_null())
        .then(|| file_of(unsafe { ggml_sys::ggml_backend_dev_backend_reg(dev) }.cast()))
        .flatten();
    match variant {
        Some(file) => crate::log_info!("ggml's CPU backend for this CPU: {file}"),
        None => crate::log_error!("no ggml CPU backend in {} loads on this CPU", dir.to_string_lossy()),
    }
}

/// The file of the shared object that holds `addr`.
fn file_of(addr: *const c_void) -> Option<String> {
    if addr.is_null() {
        return None;
    }
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the address and fills `info`; dli_fname, when set, is a
    // NUL-terminated string owned by the dynamic loader for as long as the object is loaded.
    unsafe {
        if libc::dladdr(addr, info.as_mut_ptr()) == 0 {
            return None;
        }
        let info = info.assume_init();
        (!info.dli_fname.is_null()).then(|| CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned())
    }
}

unsafe extern "C" fn forward_log(level: ggml_sys::ggml_log_level, text: *const c_char, _: *mut c_void) {
    if text.is_null() {
        return;
    }
    // SAFETY: ggml passes a NUL-terminated message that lives for the duration of the call.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    log::emit(Level::from_ggml(level), &text);
}

/// Microseconds since ggml's timer was initialised.
pub fn time_us() -> i64 {
    init();
    // SAFETY: no arguments; the timer was initialised above.
    unsafe { ggml_sys::ggml_time_us() }
}

/// Enable a NUMA strategy (1..=4); 0 disables and does nothing, as in llama.cpp.
pub fn numa_init(strategy: u32) -> Result<(), GgmlError> {
    if strategy >= ggml_sys::ggml_numa_strategy_GGML_NUMA_STRATEGY_COUNT {
        return Err(GgmlError(format!("unknown NUMA strategy {strategy}")));
    }
    if strategy == ggml_sys::ggml_numa_strategy_GGML_NUMA_STRATEGY_DISABLED {
        return Ok(());
    }
    let proc = Device::cpu()?.proc_address(c"ggml_backend_cpu_numa_init");
    if proc.is_null() {
        return Err(GgmlError("the CPU backend has no NUMA support".into()));
    }
    // SAFETY: ggml's CPU backend gives `ggml_numa_init` under this name; the strategy is in range,
    // and ggml only logs if NUMA was already initialised.
    unsafe {
        let f: unsafe extern "C" fn(ggml_sys::ggml_numa_strategy) = std::mem::transmute(proc);
        f(strategy)
    };
    Ok(())
}

/// "CPU : SSE3 = 1 | AVX = 1 | ... | " for every registered backend that reports features.
pub fn system_info() -> String {
    init();
    let mut s = String::new();
    // SAFETY: registry indices are below the count; names and feature lists are static strings
    // owned by ggml; the feature list ends with a NULL name.
    unsafe {
        for i in 0..ggml_sys::ggml_backend_reg_count() {
            let reg = ggml_sys::ggml_backend_reg_get(i);
            let proc = ggml_sys::ggml_backend_reg_get_proc_address(reg, c"ggml_backend_get_features".as_ptr());
            if proc.is_null() {
                continue;
            }
            let get: ggml_sys::ggml_backend_get_features_t = std::mem::transmute(proc);
            let Some(get) = get else { continue };
            s.push_str(&CStr::from_ptr(ggml_sys::ggml_backend_reg_name(reg)).to_string_lossy());
            s.push_str(" : ");
            let mut f = get(reg);
            while !f.is_null() && !(*f).name.is_null() {
                s.push_str(&CStr::from_ptr((*f).name).to_string_lossy());
                s.push_str(" = ");
                s.push_str(&CStr::from_ptr((*f).value).to_string_lossy());
                s.push_str(" | ");
                f = f.add(1);
            }
        }
    }
    s
}

pub fn has_rpc() -> bool {
    init();
    // SAFETY: the name is a static NUL-terminated string.
    unsafe { !ggml_sys::ggml_backend_reg_by_name(c"RPC".as_ptr()).is_null() }
}

/// Bytes of `n` elements of type `t` laid out in a row (whole blocks for quantized types).
pub fn row_size(t: RawType, n: i64) -> usize {
    if t >= ggml_sys::ggml_type_GGML_TYPE_COUNT {
        return 0;
    }
    // SAFETY: a size computation for a valid type.
    unsafe { ggml_sys::ggml_row_size(t, n) }
}

/// Elements per block of a tensor type (1 for the float types).
pub fn block_size(t: RawType) -> i64 {
    if t >= ggml_sys::ggml_type_GGML_TYPE_COUNT {
        return 1;
    }
    // SAFETY: a property of a valid type.
    unsafe { ggml_sys::ggml_blck_size(t) }
}

/// ggml's name of a tensor type ("f32", "q4_K", ...), for messages.
pub fn type_name(t: RawType) -> String {
    if t >= ggml_sys::ggml_type_GGML_TYPE_COUNT {
        return format!("type {t}");
    }
    // SAFETY: in-range types have a static name (removed ids give an empty or placeholder name).
    unsafe { CStr::from_ptr(ggml_sys::ggml_type_name(t)) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::Arc;

    #[test]
    fn ggml_log_lines_reach_the_engine_log() {
        init();
        let _sink = log::TEST_SINK_LOCK.lock();
        let seen: Arc<Mutex<String>> = Arc::default();
        let s = seen.clone();
        log::set_sink(Some(Arc::new(move |_, t| s.lock().push_str(t))));
        // SAFETY: a small self-contained context; ggml_graph_print only reads the graph and logs.
        unsafe {
            let ctx = ggml_sys::ggml_init(ggml_sys::ggml_init_params {
                mem_size: 1 << 20,
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            });
            let t = ggml_sys::ggml_new_tensor_1d(ctx, ggml_sys::ggml_type_GGML_TYPE_F32, 4);
            let g = ggml_sys::ggml_new_graph(ctx);
            ggml_sys::ggml_build_forward_expand(g, ggml_sys::ggml_scale(ctx, t, 2.0));
            ggml_sys::ggml_graph_print(g);
            ggml_sys::ggml_free(ctx);
        }
        log::set_sink(None);
        assert!(seen.lock().contains("=== GRAPH ==="), "ggml's log line did not arrive");
    }

    #[test]
    fn system_info_lists_the_cpu_backend() {
        assert!(system_info().starts_with("CPU : "), "{}", system_info());
    }
}
