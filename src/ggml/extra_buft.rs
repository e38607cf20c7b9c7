//! The CPU backend's extra buffer types: weight storage in layouts its matrix kernels read faster
//! (ggml's "CPU_REPACK" interleaves quantized rows; AMX or KleidiAI where compiled in). A tensor
//! stored in one is usable only by the ops the buffer type supports, and its bytes are rewritten
//! on upload, so it cannot be a view of the file.

use super::{Arena, TensorRef};

#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ExtraBufferType(super::BufferType);

/// The extra buffer types of the CPU device the engine uses, in ggml's order of preference: those
/// ggml offers, less the declined ones (`decline_reason`).
pub fn cpu_extra_buffer_types() -> Vec<ExtraBufferType> {
    let allow_amx = std::env::var_os(ALLOW_AMX_ENV).is_some_and(|v| v == "1");
    offered_extra_buffer_types()
        .into_iter()
        .filter(|b| {
            let name = b.name();
            let Some(why) = decline_reason(&name, allow_amx) else {
                return true;
            };
            static LOGGED: std::sync::Once = std::sync::Once::new();
            LOGGED.call_once(|| crate::log_warn!("not using ggml's CPU buffer type {name}: {why}"));
            false
        })
        .collect()
}

/// Set to 1, lets the engine use ggml's AMX buffer type where the program's ggml offers it.
pub const ALLOW_AMX_ENV: &str = "ENGINE_ALLOW_AMX";

/// Why the engine does not use an extra buffer type ggml offers, or None if it does.
/// ggml 0.25.3's AMX kernels (the `AMX` buffer type, which a ggml built with `-march=native` on a
/// Xeon with AMX offers) crash: they load a tile configuration the compiler may drop and ask for
/// the tile-data permission on one thread only. Weights it would hold go where a ggml without AMX
/// puts them.
fn decline_reason(name: &str, allow_amx: bool) -> Option<String> {
    (name == "AMX" && !allow_amx).then(|| {
        format!(
            "ggml 0.25.3's AMX matrix kernels crash (SIGSEGV/SIGILL) on the CPUs that have AMX; \
             its weights are repacked as without AMX ({ALLOW_AMX_ENV}=1 uses it anyway)"
        )
    })
}

/// Every extra buffer type the CPU device offers.
fn offered_extra_buffer_types() -> Vec<ExtraBufferType> {
    let mut out = Vec::new();
    let Ok(dev) = super::Device::cpu() else { return out };
    let proc = dev.proc_address(c"ggml_backend_dev_get_extra_bufts");
    if proc.is_null() {
        return out;
    }
    // SAFETY: the proc address has the type ggml documents for that name and returns a
    // NULL-terminated static array.
    unsafe {
        let get: ggml_sys::ggml_backend_dev_get_extra_bufts_t = std::mem::transmute(proc);
        let Some(get) = get else { return out };
        let mut p = get(dev.raw());
        while !p.is_null() {
            match super::BufferType::from_raw(*p) {
                Some(b) => out.push(ExtraBufferType(b)),
                None => break,
            }
            p = p.add(1);
        }
    }
    out
}

impl ExtraBufferType {
    pub fn name(self) -> String {
        self.0.name()
    }

    /// Whether `weight`, stored in this buffer type, can be the left operand of a matrix product
    /// with f32 activations (a 2-D weight), or of the per-token expert products (a 3-D stack of
    /// experts' matrices). Asks the device with a stand-in tensor; `weight` is untouched.
    pub fn supports_matmul(self, weight: TensorRef) -> bool {
        let ne = weight.ne();
        let experts = ne[2] > 1;
        if ne[3] != 1 {
            return false;
        }
        let Ok(mut arena) = Arena::new(4) else { return false };
        let (Ok(w), Ok(x), Ok(ids)) = (
            arena.new_tensor(weight.ggml_type(), &ne[..3], "w"),
            arena.new_tensor(ggml_sys::ggml_type_GGML_TYPE_F32, &[ne[0], 1, 1], "x"),
            arena.new_tensor(ggml_sys::ggml_type_GGML_TYPE_I32, &[1, 1], "ids"),
        ) else {
            return false;
        };
        // SAFETY: w, x and ids are live tensors of the arena with the shapes ggml_mul_mat and
        // ggml_mul_mat_id require (equal row lengths; one expert id per token) and the arena has
        // room for the product. The zero-sized buffer only carries the buffer type the device
        // inspects; nothing is read from or written to it, and it is detached and freed before the
        // arena goes.
        unsafe {
            let op = if experts {
                ggml_sys::ggml_mul_mat_id(arena.as_ptr(), w.as_ptr(), x.as_ptr(), ids.as_ptr())
            } else {
                ggml_sys::ggml_mul_mat(arena.as_ptr(), w.as_ptr(), x.as_ptr())
            };
            let dummy = ggml_sys::ggml_backend_buft_alloc_buffer(self.0.raw(), 0);
            if op.is_null() || dummy.is_null() {
                return false;
            }
            (*w.as_ptr()).buffer = dummy;
            let dev = ggml_sys::ggml_backend_buft_get_device(self.0.raw());
            let ok = !dev.is_null() && ggml_sys::ggml_backend_dev_supports_op(dev, op);
            (*w.as_ptr()).buffer = std::ptr::null_mut();
            ggml_sys::ggml_backend_buffer_free(dummy);
            ok
        }
    }

    pub fn buffer_type(self) -> super::BufferType {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amx_is_declined_unless_asked_for() {
        let why = decline_reason("AMX", false).expect("AMX declined by default");
        assert!(why.contains("crash") && why.contains(ALLOW_AMX_ENV), "{why}");
        assert_eq!(decline_reason("AMX", true), None);
        for name in ["CPU_REPACK", "KleidiAI", "CPU", "amx"] {
            assert_eq!(decline_reason(name, false), None, "{name}");
        }
    }

    /// What the engine uses is what ggml offers less AMX: this build has no AMX (build.rs), and on
    /// every machine the repacking type stays.
    #[test]
    fn the_used_extra_buffer_types_are_the_offered_ones_without_amx() {
        let used: Vec<String> = cpu_extra_buffer_types().into_iter().map(|b| b.name()).collect();
        let offered: Vec<String> = offered_extra_buffer_types().into_iter().map(|b| b.name()).collect();
        let expected: Vec<String> = offered.iter().filter(|n| *n != "AMX").cloned().collect();
        assert_eq!(used, expected);
        assert!(
            !offered.iter().any(|n| n == "AMX"),
            "this build compiled AMX in: {offered:?}"
        );
    }
    use crate::ggml::{tensor_set, CpuBackend, Graph, OwnedBuffer, Scheduler};

    /// Where the machine has a repacking buffer type for Q4_0 (x86 with AVX2, ARM with dot
    /// products), a weight stored there feeds matrix products, and a graph that reads it any other
    /// way is refused with an error before ggml could abort on it.
    #[test]
    fn repacked_weights_feed_only_matrix_products() {
        let mut arena = Arena::new(1).expect("arena");
        let w = arena
            .new_tensor(ggml_sys::ggml_type_GGML_TYPE_Q4_0, &[64, 8], "w")
            .expect("tensor");
        let buft = cpu_extra_buffer_types().into_iter().find(|b| b.supports_matmul(w));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            assert!(
                buft.is_some(),
                "no extra buffer type takes a Q4_0 matrix on an AVX2 machine"
            );
        }
        let Some(buft) = buft else { return };
        let _buffer = OwnedBuffer::for_weights_in(&arena, buft.buffer_type()).expect("buffer");
        assert_eq!(w.buffer_type_name().as_deref(), Some(buft.name().as_str()));
        tensor_set(w, &vec![0u8; w.nbytes()]).expect("upload converts the layout");

        let backend = CpuBackend::new(1).expect("backend");
        let sched = Scheduler::new(&backend, &[], 16, true).expect("scheduler");
        let mut product = Graph::new(16).expect("graph");
        let x = product
            .input(ggml_sys::ggml_type_GGML_TYPE_F32, &[64, 3], "x")
            .expect("x");
        let y = product.mul_mat(w, x).expect("mul_mat");
        product.output(y);
        sched.reserve(&product).expect("a product over a repacked weight runs");

        let mut lookup = Graph::new(16).expect("graph");
        let rows = lookup
            .input(ggml_sys::ggml_type_GGML_TYPE_I32, &[2], "rows")
            .expect("rows");
        let r = lookup.get_rows(w, rows).expect("get_rows");
        lookup.output(r);
        let err = sched
            .reserve(&lookup)
            .expect_err("a row lookup cannot read repacked data")
            .to_string();
        assert!(err.contains("cannot run graph node"), "{err}");
    }
}
