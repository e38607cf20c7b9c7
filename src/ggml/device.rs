//! ggml's devices as the process's ggml registry lists them. libengine.so shares ggml with its
//! client (one ggml per process, vendor/README.md), so it reaches the CPU backend's extras the way
//! llama.cpp does, through the registry and `get_proc_address`, and links no backend library.

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

/// A ggml device (`ggml_backend_dev_t`), a static object of the registry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Device(NonNull<ggml_sys::ggml_backend_device>);

// SAFETY: devices are process-wide descriptors owned by ggml's registry; their queries are
// thread-safe in ggml.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

impl Device {
    /// The CPU device (ggml always registers one).
    pub fn cpu() -> Result<Device, String> {
        super::init();
        // SAFETY: a registry query; NULL when no CPU backend is registered.
        NonNull::new(unsafe {
            ggml_sys::ggml_backend_dev_by_type(ggml_sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_CPU)
        })
        .map(Device)
        .ok_or_else(|| "ggml has no CPU device (is libggml-cpu.so.0 present?)".to_string())
    }

    pub(crate) fn raw(self) -> ggml_sys::ggml_backend_dev_t {
        self.0.as_ptr()
    }

    /// A function of the device's backend by ggml's name for it, or NULL.
    pub(super) fn proc_address(self, name: &CStr) -> *mut c_void {
        // SAFETY: a live device; its registry answers a NUL-terminated name with a pointer or NULL.
        unsafe {
            let reg = ggml_sys::ggml_backend_dev_backend_reg(self.raw());
            if reg.is_null() {
                return std::ptr::null_mut();
            }
            ggml_sys::ggml_backend_reg_get_proc_address(reg, name.as_ptr())
        }
    }
}
