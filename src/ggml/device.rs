//! ggml's devices as the process's ggml registry lists them. libengine.so shares ggml with its
//! client (one ggml per process, vendor/README.md), so it reaches the CPU backend's extras the way
//! llama.cpp does, through the registry and `get_proc_address`, and links no backend library.

use super::GgmlError;
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
    pub fn cpu() -> Result<Device, GgmlError> {
        super::init();
        // SAFETY: a registry query; NULL when no CPU backend is registered.
        NonNull::new(unsafe {
            ggml_sys::ggml_backend_dev_by_type(ggml_sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_CPU)
        })
        .map(Device)
        .ok_or_else(|| GgmlError("ggml has no CPU device (is libggml-cpu.so.0 present?)".into()))
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

/// ggml's backend interface version (`GGML_BACKEND_API_VERSION` in ggml's private
/// `ggml-backend-impl.h`), the first field of every backend registry: a device of a ggml built
/// with another version carries another number.
const BACKEND_API_VERSION: i32 = 2;

/// The kinds of device llama.cpp tells apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DeviceKind {
    Cpu,
    Gpu,
    IntegratedGpu,
    Accelerator,
    Other,
}

impl Device {
    /// Every device of the process's ggml, in registry order.
    pub fn all() -> Vec<Device> {
        super::init();
        // SAFETY: indices below the count name registered devices.
        unsafe {
            (0..ggml_sys::ggml_backend_dev_count())
                .filter_map(|i| NonNull::new(ggml_sys::ggml_backend_dev_get(i)).map(Device))
                .collect()
        }
    }

    /// A device pointer from a client (`llama_model_params.devices`): accepted only if it is one of
    /// this process's ggml devices and its registry speaks our backend API version, so a device of
    /// another ggml copy or version is refused instead of being called into.
    pub fn from_client(ptr: *mut c_void) -> Result<Device, GgmlError> {
        let found = Device::all().into_iter().find(|d| d.raw().cast::<c_void>() == ptr);
        let dev = found.ok_or_else(|| {
            GgmlError(format!(
                "device {ptr:p} is not a device of the ggml this library uses ({}): a device of another \
                 ggml copy or version, or no device at all",
                ggml_version()
            ))
        })?;
        // SAFETY: a registered device; its registry's first field is the API version (ggml's
        // `struct ggml_backend_reg`).
        let version = unsafe {
            let reg = ggml_sys::ggml_backend_dev_backend_reg(dev.raw());
            if reg.is_null() {
                return Err(GgmlError(format!("device {} has no backend registry", dev.name())));
            }
            *reg.cast::<i32>()
        };
        if version != BACKEND_API_VERSION {
            return Err(GgmlError(format!(
                "device {} speaks ggml backend API version {version}, this library version {BACKEND_API_VERSION}",
                dev.name()
            )));
        }
        Ok(dev)
    }

    pub fn name(self) -> String {
        // SAFETY: a live device; its name is a static string.
        unsafe { cstr(ggml_sys::ggml_backend_dev_name(self.raw())) }
    }

    pub fn description(self) -> String {
        // SAFETY: as above.
        unsafe { cstr(ggml_sys::ggml_backend_dev_description(self.raw())) }
    }

    pub fn kind(self) -> DeviceKind {
        // SAFETY: a live device.
        match unsafe { ggml_sys::ggml_backend_dev_type(self.raw()) } {
            ggml_sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_CPU => DeviceKind::Cpu,
            ggml_sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_GPU => DeviceKind::Gpu,
            ggml_sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_IGPU => DeviceKind::IntegratedGpu,
            ggml_sys::ggml_backend_dev_type_GGML_BACKEND_DEVICE_TYPE_ACCEL => DeviceKind::Accelerator,
            _ => DeviceKind::Other,
        }
    }

    /// The name of the device's backend registry ("CPU", "RPC", "CUDA", ...).
    pub fn backend_name(self) -> String {
        // SAFETY: a live device; a registry's name is a static string.
        unsafe {
            let reg = ggml_sys::ggml_backend_dev_backend_reg(self.raw());
            if reg.is_null() {
                return String::new();
            }
            cstr(ggml_sys::ggml_backend_reg_name(reg))
        }
    }

    /// A stable identifier of the hardware, where the backend has one (two backends may show
    /// the same GPU).
    pub fn device_id(self) -> Option<String> {
        // SAFETY: a live device fills the properties; the id is NULL or a static string.
        unsafe {
            let mut props: ggml_sys::ggml_backend_dev_props = std::mem::zeroed();
            ggml_sys::ggml_backend_dev_get_props(self.raw(), &mut props);
            (!props.device_id.is_null()).then(|| cstr(props.device_id))
        }
    }

    /// (free, total) bytes of memory, as the device reports them.
    pub fn memory(self) -> (usize, usize) {
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: a live device writes the two sizes.
        unsafe { ggml_sys::ggml_backend_dev_memory(self.raw(), &mut free, &mut total) };
        (free, total)
    }

    /// The device's default buffer type.
    pub fn buffer_type(self) -> Result<super::BufferType, GgmlError> {
        // SAFETY: a live device; NULL when it has none.
        let raw = unsafe { ggml_sys::ggml_backend_dev_buffer_type(self.raw()) };
        super::BufferType::from_raw(raw).ok_or_else(|| GgmlError(format!("device {} has no buffer type", self.name())))
    }
}

impl super::BufferType {
    /// A buffer type from a client (`tensor_buft_overrides`): accepted only if it is the memory of
    /// one of this process's ggml devices (a device's own or host buffer type) or one of the CPU's
    /// extra buffer types, so one of another ggml copy is refused instead of being called into.
    pub fn from_client(ptr: *mut c_void) -> Result<super::BufferType, GgmlError> {
        let mut known: Vec<ggml_sys::ggml_backend_buffer_type_t> = Vec::new();
        for d in Device::all() {
            // SAFETY: a registered device; both calls answer a buffer type or NULL.
            unsafe {
                known.push(ggml_sys::ggml_backend_dev_buffer_type(d.raw()));
                known.push(ggml_sys::ggml_backend_dev_host_buffer_type(d.raw()));
            }
        }
        known.extend(super::cpu_extra_buffer_types().iter().map(|b| b.buffer_type().raw()));
        known
            .into_iter()
            .filter(|b| !b.is_null())
            .find(|&b| b.cast::<c_void>() == ptr)
            .and_then(super::BufferType::from_raw)
            .ok_or_else(|| GgmlError(format!("buffer type {ptr:p} is not one of the ggml this library uses: of another ggml copy or version, or none")))
    }

    /// The device whose memory this is (None for a buffer type of no device).
    pub fn device(self) -> Option<Device> {
        // SAFETY: a live buffer type; NULL when it has no device.
        NonNull::new(unsafe { ggml_sys::ggml_backend_buft_get_device(self.raw()) }).map(Device)
    }
}

/// ggml's version ("0.25.3") as the loaded library reports it.
pub fn ggml_version() -> String {
    // SAFETY: a static string.
    unsafe { cstr(ggml_sys::ggml_version()) }
}

/// The version of the ggml source this library was built against.
pub const BUILT_GGML_VERSION: &str = env!("ENGINE_GGML_VERSION");

/// Whether the process's ggml is the one this library was built for: the same version, so the
/// same structures. Another version (a llama.cpp install's of another release) is refused.
pub fn check_ggml_version() -> Result<(), GgmlError> {
    let loaded = ggml_version();
    if loaded != BUILT_GGML_VERSION {
        return Err(GgmlError(format!(
            "the process's ggml is version {loaded}, this library was built for ggml {BUILT_GGML_VERSION}; \
             use the ggml libraries built with it (beside libengine.so)"
        )));
    }
    Ok(())
}

/// Register the ggml RPC server at `endpoint` ("host:port") as devices of the process's ggml,
/// as llama.cpp's `--rpc` does, unless it is registered already; returns its devices.
/// ggml's RPC client aborts the process when it cannot connect, so the host is first probed here
/// and an unreachable one is an error.
pub fn add_rpc_server(endpoint: &str) -> Result<Vec<Device>, GgmlError> {
    probe(endpoint)?;
    super::init();
    let name =
        std::ffi::CString::new(endpoint).map_err(|_| GgmlError(format!("RPC server '{endpoint}': NUL in the name")))?;
    // SAFETY: the registry is ggml's; the proc address, when present, is ggml's
    // `ggml_backend_rpc_add_server`, which returns the endpoint's registry (one per endpoint) or
    // NULL when the server reports no devices. A registry is registered once.
    unsafe {
        let rpc = ggml_sys::ggml_backend_reg_by_name(c"RPC".as_ptr());
        if rpc.is_null() {
            return Err(GgmlError("ggml has no RPC backend".into()));
        }
        let proc = ggml_sys::ggml_backend_reg_get_proc_address(rpc, c"ggml_backend_rpc_add_server".as_ptr());
        if proc.is_null() {
            return Err(GgmlError("ggml's RPC backend cannot add servers".into()));
        }
        let add: unsafe extern "C" fn(*const std::ffi::c_char) -> ggml_sys::ggml_backend_reg_t =
            std::mem::transmute(proc);
        let reg = add(name.as_ptr());
        if reg.is_null() {
            return Err(GgmlError(format!("RPC server '{endpoint}' reports no devices")));
        }
        let known = (0..ggml_sys::ggml_backend_reg_count()).any(|i| ggml_sys::ggml_backend_reg_get(i) == reg);
        if !known {
            ggml_sys::ggml_backend_register(reg);
        }
        Ok((0..ggml_sys::ggml_backend_reg_dev_count(reg))
            .filter_map(|i| NonNull::new(ggml_sys::ggml_backend_reg_dev_get(reg, i)).map(Device))
            .collect())
    }
}

/// Whether a server listens at `endpoint` (a TCP connection is made and closed at once).
fn probe(endpoint: &str) -> Result<(), GgmlError> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = endpoint
        .to_socket_addrs()
        .map_err(|e| GgmlError(format!("RPC server '{endpoint}': not a host:port ({e})")))?
        .collect();
    let reachable = addrs
        .iter()
        .any(|a| std::net::TcpStream::connect_timeout(a, std::time::Duration::from_secs(5)).is_ok());
    if !reachable {
        return Err(GgmlError(format!("RPC server '{endpoint}' is unreachable")));
    }
    Ok(())
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn cstr(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: forwarded contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// RPC devices whose server is known to have closed its connection (device addresses). ggml's RPC
/// client aborts the process on the next message to such a server, so nothing more is sent there:
/// decodes fail, and its buffers are left unfreed (freeing sends a message).
static DEAD_SERVERS: parking_lot::Mutex<Vec<usize>> = parking_lot::Mutex::new(Vec::new());

impl Device {
    /// The server ("host:port") of an RPC device, None for any other device.
    fn rpc_endpoint(self) -> Option<String> {
        (self.backend_name() == "RPC").then(|| self.description())
    }

    /// Whether this device's RPC server is known to be gone.
    fn known_dead(self) -> bool {
        DEAD_SERVERS.lock().contains(&(self.raw() as usize))
    }

    /// An error if this is an RPC device whose server has closed the connection ggml's client holds
    /// to it (it died or was stopped), or, without such a connection, does not accept one: checked
    /// before anything is sent there, since ggml's client aborts the process when a message finds
    /// the connection broken or cannot connect. A server that dies while a graph computes still
    /// takes the process down inside ggml.
    pub fn check_alive(self) -> Result<(), GgmlError> {
        self.check(true)
    }

    /// As [`Device::check_alive`] but only through the connection ggml holds, never a new one:
    /// cheap enough for every decode.
    pub fn check_connection(self) -> Result<(), GgmlError> {
        self.check(false)
    }

    fn check(self, may_probe: bool) -> Result<(), GgmlError> {
        let Some(endpoint) = self.rpc_endpoint() else {
            return Ok(());
        };
        let closed = self.known_dead()
            || match connection_closed(&endpoint) {
                Some(closed) => closed,
                None if may_probe => return probe(&endpoint),
                None => false,
            };
        if closed {
            let mut dead = DEAD_SERVERS.lock();
            if !dead.contains(&(self.raw() as usize)) {
                dead.push(self.raw() as usize);
            }
            return Err(GgmlError(format!(
                "RPC server {endpoint} ({}) has closed its connection; nothing more can be computed there",
                self.name()
            )));
        }
        Ok(())
    }
}

/// Whether the device owning buffer type `buft` is an RPC server known to be gone.
pub(super) fn on_dead_server(buft: ggml_sys::ggml_backend_buffer_type_t) -> bool {
    if buft.is_null() || DEAD_SERVERS.lock().is_empty() {
        return false;
    }
    // SAFETY: a live buffer type; NULL when it has no device.
    NonNull::new(unsafe { ggml_sys::ggml_backend_buft_get_device(buft) }).is_some_and(|d| Device(d).known_dead())
}

/// Whether the sockets of this process connected to `endpoint` (ggml's RPC connection) have been
/// closed by their peer; None when there is no such socket. The sockets are found through
/// /proc/self/fd and their peer addresses, and polled without reading: a closed connection reports
/// hang-up.
fn connection_closed(endpoint: &str) -> Option<bool> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = endpoint.to_socket_addrs().ok()?.collect();
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    let mut found = None;
    for entry in entries.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
        if !is_socket || !peer_is(fd, &addrs) {
            continue;
        }
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one pollfd for an open descriptor; a zero timeout only asks for its state.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return Some(true);
        }
        found = Some(false);
    }
    found
}

/// Whether socket `fd`'s peer is one of `addrs`.
fn peer_is(fd: i32, addrs: &[std::net::SocketAddr]) -> bool {
    // SAFETY: storage large enough for any address; getpeername writes at most `len` bytes.
    let (storage, len) = unsafe {
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        if libc::getpeername(fd, (&mut storage as *mut libc::sockaddr_storage).cast(), &mut len) != 0 {
            return false;
        }
        (storage, len)
    };
    let peer = match i32::from(storage.ss_family) {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: an AF_INET address of sockaddr_in's size.
            let a = unsafe { *(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            std::net::SocketAddr::from((u32::from_be(a.sin_addr.s_addr).to_be_bytes(), u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: an AF_INET6 address of sockaddr_in6's size.
            let a = unsafe { *(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            std::net::SocketAddr::from((a.sin6_addr.s6_addr, u16::from_be(a.sin6_port)))
        }
        _ => return false,
    };
    addrs.contains(&peer)
}
