//! Loading and attaching the XDP steering program (`bpf/xwarp_steer.bpf.c`).
//!
//! Loader choice: libbpf through `libbpf-sys` 1.5.1 (a static libbpf; `links = "bpf"` allows
//! one per build), called directly (`bpf_object__open_mem`, `bpf_xdp_attach`, map updates).
//! libbpf-rs releases depend on other libbpf-sys versions and aya brings its own loader and a
//! large dependency tree; the few calls needed do not justify either. AF_XDP sockets do not go
//! through a BPF library at all (`super::xsk_socket`).
//!
//! Attachment goes through netlink (`bpf_xdp_attach`), so it outlives a crashed process. A new
//! [`XdpProgram::attach`] that finds a program named [`PROG_NAME`] on the interface asks who
//! holds it (`holders`): held by no process, it is stale (left by a crash)
//! and replaced; held by a live process, it belongs to another engine and the attach fails
//! ([`XdpError::ProgramInUse`]) without touching it. Anyone else's program is refused
//! ([`XdpError::ForeignProgram`]). The attach itself only succeeds on an interface without a
//! program (`XDP_FLAGS_UPDATE_IF_NOEXIST`), so two engines starting at once cannot replace
//! each other either.
//!
//! The program steers by destination address and port: the loader fills the owned-address map
//! from the device's IPv4 addresses before attaching; [`XdpProgram::set_owned_addrs`] narrows
//! it to the endpoint's own address.

use std::ffi::CString;
use std::fmt;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::ptr::NonNull;

use libbpf_sys as bpf;

use super::holders::program_holders;
use super::maps::{
    self, PortKind, SteerCounters, ADDRS4_MAP, ADDRS6_MAP, COUNTERS_MAP, PORTS_MAP, PROG_NAME,
    XSKS_MAP,
};
use super::netlink::RtNetlink;
use super::netns::NetNs;
use super::ports::LocalPortRange;
use super::{IfName, XdpError};

#[repr(C, align(8))]
struct Aligned<B: ?Sized>(B);

/// The compiled XDP object, 8-byte aligned for libelf.
static OBJECT: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/xwarp_steer.bpf.o"
)));

/// The embedded ELF object built from `bpf/xwarp_steer.bpf.c`.
pub fn object_bytes() -> &'static [u8] {
    &OBJECT.0
}

/// How the program runs on the interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// On the generic skb path (`XDP_FLAGS_SKB_MODE`): slower, works on any device.
    Generic,
}

impl AttachMode {
    fn flag(self) -> u32 {
        match self {
            Self::Native => bpf::XDP_FLAGS_DRV_MODE,
            Self::Generic => bpf::XDP_FLAGS_SKB_MODE,
        }
    }
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Native => "native",
            Self::Generic => "generic",
        })
    }
}

/// Which modes [`XdpProgram::attach`] may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachPolicy {
    /// Native; generic with a warning when the driver refuses native XDP.
    #[default]
    NativeOrGeneric,
    /// Native or fail.
    NativeOnly,
    /// Generic only.
    GenericOnly,
}

/// A program attached to an interface, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramInfo {
    /// Kernel program id.
    pub id: u32,
    /// Kernel program name (at most 15 bytes).
    pub name: String,
}

/// What is attached to an interface, per mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attached {
    /// Native (driver) mode program.
    pub native: Option<ProgramInfo>,
    /// Generic (skb) mode program.
    pub generic: Option<ProgramInfo>,
    /// Offloaded program.
    pub offload: Option<ProgramInfo>,
}

impl Attached {
    /// Whether no XDP program is attached in any mode.
    pub fn is_empty(&self) -> bool {
        self.native.is_none() && self.generic.is_none() && self.offload.is_none()
    }
}

/// Lists the XDP programs attached to `ifname` in the calling thread's network namespace.
pub fn attached(ifname: &str) -> Result<Attached, XdpError> {
    let ifindex = ifindex(ifname)?;
    let mut opts = bpf::bpf_xdp_query_opts {
        sz: std::mem::size_of::<bpf::bpf_xdp_query_opts>() as _,
        ..Default::default()
    };
    // Safety: `opts` is a valid, correctly sized query struct that outlives the call.
    let ret = unsafe { bpf::bpf_xdp_query(ifindex as i32, 0, &mut opts) };
    if ret < 0 {
        return Err(XdpError::from_neg("bpf_xdp_query", ret));
    }
    let info = |id: u32| (id != 0).then(|| program_info(id)).transpose();
    Ok(Attached {
        native: info(opts.drv_prog_id)?,
        generic: info(opts.skb_prog_id)?,
        offload: info(opts.hw_prog_id)?,
    })
}

/// The kernel's view of program `id`.
fn program_info(id: u32) -> Result<ProgramInfo, XdpError> {
    let fd = ProgFd::by_id(id)?;
    fd.info()
}

/// An owned program fd obtained by id.
struct ProgFd(RawFd);

impl ProgFd {
    fn by_id(id: u32) -> Result<Self, XdpError> {
        // Safety: plain syscall wrapper; the returned fd is owned by the new `ProgFd`.
        let fd = unsafe { bpf::bpf_prog_get_fd_by_id(id) };
        if fd < 0 {
            return Err(XdpError::from_neg("bpf_prog_get_fd_by_id", fd));
        }
        Ok(Self(fd))
    }

    fn info(&self) -> Result<ProgramInfo, XdpError> {
        prog_fd_info(self.0)
    }
}

impl Drop for ProgFd {
    fn drop(&mut self) {
        // Safety: we own this fd and close it once.
        unsafe { libc::close(self.0) };
    }
}

fn prog_fd_info(fd: RawFd) -> Result<ProgramInfo, XdpError> {
    // Safety: bpf_prog_info is plain old data; all-zero is a valid value.
    let mut info: bpf::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<bpf::bpf_prog_info>() as u32;
    // Safety: `info` is writable for `len` bytes; the kernel writes at most `len`.
    let ret = unsafe { bpf::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if ret < 0 {
        return Err(XdpError::from_neg("bpf_prog_get_info_by_fd", ret));
    }
    let name: Vec<u8> = info
        .name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(ProgramInfo {
        id: info.id,
        name: String::from_utf8_lossy(&name).into_owned(),
    })
}

/// The interface index of `ifname` in the calling thread's network namespace.
pub fn ifindex(ifname: &str) -> Result<u32, XdpError> {
    let c = CString::new(ifname).map_err(|_| XdpError::Invalid("interface name has a NUL"))?;
    // Safety: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(XdpError::NoSuchInterface)
    } else {
        Ok(idx)
    }
}

/// An opened and loaded BPF object, closed on drop.
struct Object(NonNull<bpf::bpf_object>);

impl Object {
    fn open_and_load() -> Result<Self, XdpError> {
        let name = CString::new("xwarp_steer").expect("static name");
        let opts = bpf::bpf_object_open_opts {
            sz: std::mem::size_of::<bpf::bpf_object_open_opts>() as _,
            object_name: name.as_ptr(),
            // Safety: the rest of the options struct is plain data; zero means "default".
            ..unsafe { std::mem::zeroed() }
        };
        let bytes = object_bytes();
        // Safety: `bytes` is a valid ELF image (built by build.rs) that libbpf copies out of
        // before returning; `opts` and `name` outlive the call.
        let raw =
            unsafe { bpf::bpf_object__open_mem(bytes.as_ptr().cast(), bytes.len() as _, &opts) };
        let obj = Self(NonNull::new(raw).ok_or_else(|| XdpError::last_os("bpf_object__open_mem"))?);
        // Safety: `obj` is a freshly opened object.
        let ret = unsafe { bpf::bpf_object__load(obj.0.as_ptr()) };
        if ret < 0 {
            return Err(XdpError::from_neg("bpf_object__load", ret));
        }
        Ok(obj)
    }

    fn map_fd(&self, name: &'static str) -> Result<RawFd, XdpError> {
        let c = CString::new(name).expect("static name");
        // Safety: the object is open; `c` outlives the call; the map pointer lives as long as
        // the object.
        let fd = unsafe {
            let map = bpf::bpf_object__find_map_by_name(self.0.as_ptr(), c.as_ptr());
            if map.is_null() {
                return Err(XdpError::ObjectMismatch(name));
            }
            bpf::bpf_map__fd(map)
        };
        if fd < 0 {
            return Err(XdpError::ObjectMismatch(name));
        }
        Ok(fd)
    }

    fn prog_fd(&self) -> Result<RawFd, XdpError> {
        let c = CString::new(PROG_NAME).expect("static name");
        // Safety: as in `map_fd`.
        let fd = unsafe {
            let prog = bpf::bpf_object__find_program_by_name(self.0.as_ptr(), c.as_ptr());
            if prog.is_null() {
                return Err(XdpError::ObjectMismatch("xwarp_steer program"));
            }
            bpf::bpf_program__fd(prog)
        };
        if fd < 0 {
            return Err(XdpError::ObjectMismatch("loaded xwarp_steer program"));
        }
        Ok(fd)
    }
}

impl Drop for Object {
    fn drop(&mut self) {
        // Safety: we own the object and close it exactly once; its fds close with it.
        unsafe { bpf::bpf_object__close(self.0.as_ptr()) };
    }
}

/// `bpf_xdp_attach`; `old_fd` (with `XDP_FLAGS_REPLACE`) makes it act only on that program.
fn xdp_attach(ifindex: u32, prog_fd: RawFd, flags: u32, old_fd: Option<RawFd>) -> i32 {
    let opts = bpf::bpf_xdp_attach_opts {
        sz: std::mem::size_of::<bpf::bpf_xdp_attach_opts>() as _,
        old_prog_fd: old_fd.unwrap_or(0),
        ..Default::default()
    };
    let flags = if old_fd.is_some() {
        flags | bpf::XDP_FLAGS_REPLACE
    } else {
        flags
    };
    // Safety: `opts` is a valid, correctly sized options struct that outlives the call.
    unsafe { bpf::bpf_xdp_attach(ifindex as i32, prog_fd, flags, &opts) }
}

/// The steering program, loaded and attached to one interface. Detached on drop.
///
/// Thread-safe: after setup only map syscalls on owned fds are made.
pub struct XdpProgram {
    /// Owns the program and map fds; closed (by its Drop) after `drop` detached the program.
    _obj: Object,
    /// The loaded program (-1 once detached).
    pub(super) prog_fd: RawFd,
    ports_fd: RawFd,
    /// The owned-address maps (`owned_addrs.rs`).
    pub(super) addrs4_fd: RawFd,
    pub(super) addrs6_fd: RawFd,
    xsks_fd: RawFd,
    counters_fd: RawFd,
    ifindex: u32,
    ifname: String,
    mode: AttachMode,
    prog_id: u32,
    netns: NetNs,
    ncpus: usize,
}

// Safety: the object pointer is only used in `drop` (with `&mut self`); everything else goes
// through file descriptors whose syscalls are thread-safe.
unsafe impl Send for XdpProgram {}
// Safety: see `Send`; `&self` methods only issue bpf() map syscalls on owned fds.
unsafe impl Sync for XdpProgram {}

impl fmt::Debug for XdpProgram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XdpProgram")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("mode", &self.mode)
            .field("prog_id", &self.prog_id)
            .finish()
    }
}

impl XdpProgram {
    /// Loads the embedded program and attaches it to `ifname` (in the calling thread's network
    /// namespace), owning the interface's IPv4 addresses. A stale copy of ours left by a crashed
    /// process is replaced; a live one (another engine's) is refused with
    /// [`XdpError::ProgramInUse`] and left alone.
    pub fn attach(ifname: &str, policy: AttachPolicy) -> Result<Self, XdpError> {
        let ifindex = ifindex(ifname)?;
        let netns = NetNs::current().map_err(|e| XdpError::from_io("open netns", &e))?;
        let obj = Object::open_and_load()?;
        // Safety: plain libbpf query without arguments.
        let ncpus = unsafe { bpf::libbpf_num_possible_cpus() };
        if ncpus <= 0 {
            return Err(XdpError::from_neg("libbpf_num_possible_cpus", ncpus));
        }
        let prog_fd = obj.prog_fd()?;
        let mut prog = Self {
            prog_fd,
            ports_fd: obj.map_fd(PORTS_MAP)?,
            addrs4_fd: obj.map_fd(ADDRS4_MAP)?,
            addrs6_fd: obj.map_fd(ADDRS6_MAP)?,
            xsks_fd: obj.map_fd(XSKS_MAP)?,
            counters_fd: obj.map_fd(COUNTERS_MAP)?,
            _obj: obj,
            ifindex,
            ifname: ifname.to_owned(),
            mode: AttachMode::Native,
            prog_id: prog_fd_info(prog_fd)?.id,
            netns,
            ncpus: ncpus as usize,
        };
        let addrs: Vec<IpAddr> = RtNetlink::new()?
            .ipv4_addresses(ifindex)?
            .into_iter()
            .map(IpAddr::V4)
            .collect();
        prog.set_owned_addrs(&addrs)?;

        // Not attached yet: until `mode` is known, dropping `prog` must not detach anything.
        prog.prog_fd = -1;
        remove_stale(ifname, ifindex)?;
        let attached = match policy {
            AttachPolicy::NativeOnly => attach_in(ifindex, prog_fd, AttachMode::Native),
            AttachPolicy::GenericOnly => attach_in(ifindex, prog_fd, AttachMode::Generic),
            AttachPolicy::NativeOrGeneric => attach_in(ifindex, prog_fd, AttachMode::Native)
                .or_else(|e| {
                    tracing::warn!(
                        "{ifname}: native XDP refused ({e}); falling back to generic mode, \
                         which is slower"
                    );
                    attach_in(ifindex, prog_fd, AttachMode::Generic)
                }),
        };
        prog.mode = attached.map_err(|e| match e.errno() {
            // Someone attached between our check and our attach: say who, if it is one of us.
            Some(libc::EBUSY | libc::EEXIST) => remove_stale(ifname, ifindex).err().unwrap_or(e),
            _ => e,
        })?;
        prog.prog_fd = prog_fd;
        tracing::info!(
            "{ifname}: {PROG_NAME} (id {}) attached in {} mode",
            prog.prog_id,
            prog.mode
        );
        Ok(prog)
    }

    /// The mode the program runs in.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// The kernel's id of the program.
    pub fn prog_id(&self) -> u32 {
        self.prog_id
    }

    /// The interface index the program is attached to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface name the program is attached to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Steers TCP segments to destination `port` into the AF_XDP sockets.
    pub fn steer_port(&self, port: u16, kind: PortKind) -> Result<(), XdpError> {
        let value = kind.value();
        // Safety: key and value point at live values of the map's key (2) and value (1) sizes.
        let ret = unsafe {
            bpf::bpf_map_update_elem(
                self.ports_fd,
                (&port as *const u16).cast(),
                (&value as *const u8).cast(),
                bpf::BPF_ANY as u64,
            )
        };
        if ret < 0 {
            return Err(XdpError::from_neg("steer port (map update)", ret));
        }
        Ok(())
    }

    /// Steers every port of `range` as [`PortKind::ActiveOpen`].
    pub fn steer_range(&self, range: LocalPortRange) -> Result<(), XdpError> {
        if range.len() > maps::PORTS_MAX as usize {
            return Err(XdpError::Invalid("port range larger than the port map"));
        }
        range
            .iter()
            .try_for_each(|p| self.steer_port(p, PortKind::ActiveOpen))
    }

    /// Stops steering `port`; returns whether it was steered.
    pub fn unsteer_port(&self, port: u16) -> Result<bool, XdpError> {
        // Safety: the key points at a live u16, the map's key size.
        let ret = unsafe { bpf::bpf_map_delete_elem(self.ports_fd, (&port as *const u16).cast()) };
        match ret {
            0 => Ok(true),
            r if r == -libc::ENOENT => Ok(false),
            r => Err(XdpError::from_neg("unsteer port (map delete)", r)),
        }
    }

    /// How `port` is steered, if it is.
    pub fn port_kind(&self, port: u16) -> Result<Option<PortKind>, XdpError> {
        let mut value = 0u8;
        // Safety: key and value point at live values of the map's key and value sizes.
        let ret = unsafe {
            bpf::bpf_map_lookup_elem(
                self.ports_fd,
                (&port as *const u16).cast(),
                (&mut value as *mut u8).cast(),
            )
        };
        match ret {
            0 => Ok(PortKind::from_value(value)),
            r if r == -libc::ENOENT => Ok(None),
            r => Err(XdpError::from_neg("port lookup", r)),
        }
    }

    /// Directs packets steered on rx queue `queue_id` to the AF_XDP socket `xsk_fd`.
    pub fn register_socket(&self, queue_id: u32, xsk_fd: RawFd) -> Result<(), XdpError> {
        if queue_id >= maps::XSKS_MAX {
            return Err(XdpError::Invalid("queue id beyond the XSKMAP"));
        }
        let value = xsk_fd as u32;
        // Safety: key and value point at live u32s, the XSKMAP's key and value sizes.
        let ret = unsafe {
            bpf::bpf_map_update_elem(
                self.xsks_fd,
                (&queue_id as *const u32).cast(),
                (&value as *const u32).cast(),
                bpf::BPF_ANY as u64,
            )
        };
        if ret < 0 {
            return Err(XdpError::from_neg(
                "register AF_XDP socket (XSKMAP update)",
                ret,
            ));
        }
        Ok(())
    }

    /// Removes the socket of rx queue `queue_id` (steered packets then go to the kernel).
    pub fn unregister_socket(&self, queue_id: u32) -> Result<(), XdpError> {
        // Safety: the key points at a live u32, the XSKMAP's key size.
        let ret =
            unsafe { bpf::bpf_map_delete_elem(self.xsks_fd, (&queue_id as *const u32).cast()) };
        if ret < 0 && ret != -libc::ENOENT {
            return Err(XdpError::from_neg("unregister AF_XDP socket", ret));
        }
        Ok(())
    }

    /// The program's counters, summed over all CPUs.
    pub fn counters(&self) -> Result<SteerCounters, XdpError> {
        let mut per_cpu = vec![SteerCounters::default(); self.ncpus];
        let key = 0u32;
        // Safety: a per-CPU lookup writes one 8-byte-aligned value per possible CPU: `per_cpu`
        // holds `ncpus` values of the map's value size (32, already a multiple of 8).
        let ret = unsafe {
            bpf::bpf_map_lookup_elem(
                self.counters_fd,
                (&key as *const u32).cast(),
                per_cpu.as_mut_ptr().cast(),
            )
        };
        if ret < 0 {
            return Err(XdpError::from_neg("read counters", ret));
        }
        let mut sum = SteerCounters::default();
        per_cpu.iter().for_each(|c| sum.accumulate(c));
        Ok(sum)
    }

    /// Detaches now, reporting failure (dropping does the same and only logs).
    pub fn detach(mut self) -> Result<(), XdpError> {
        let r = self.detach_inner();
        self.prog_fd = -1;
        r
    }

    fn detach_inner(&mut self) -> Result<(), XdpError> {
        if self.prog_fd < 0 {
            return Ok(());
        }
        // The ifindex means something only in the namespace we attached in.
        let _guard = match self.netns.is_current() {
            Ok(true) => None,
            _ => Some(
                self.netns
                    .enter()
                    .map_err(|e| XdpError::from_io("enter netns", &e))?,
            ),
        };
        // Only if it is still our program (XDP_FLAGS_REPLACE with our fd).
        let ret = xdp_attach(self.ifindex, -1, self.mode.flag(), Some(self.prog_fd));
        if ret < 0 {
            return Err(XdpError::from_neg("detach XDP program", ret));
        }
        tracing::info!(
            "{}: {PROG_NAME} (id {}) detached",
            self.ifname,
            self.prog_id
        );
        Ok(())
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        if let Err(e) = self.detach_inner() {
            tracing::warn!("{}: {e}", self.ifname);
        }
    }
}

/// Attaches in `mode` if the interface has no program (`XDP_FLAGS_UPDATE_IF_NOEXIST`: never
/// replaces one that appeared since [`remove_stale`] looked).
fn attach_in(ifindex: u32, prog_fd: RawFd, mode: AttachMode) -> Result<AttachMode, XdpError> {
    let flags = mode.flag() | bpf::XDP_FLAGS_UPDATE_IF_NOEXIST;
    let ret = xdp_attach(ifindex, prog_fd, flags, None);
    if ret < 0 {
        return Err(XdpError::from_neg(
            match mode {
                AttachMode::Native => "attach XDP (native)",
                AttachMode::Generic => "attach XDP (generic)",
            },
            ret,
        ));
    }
    Ok(mode)
}

/// Detaches programs named [`PROG_NAME`] that no process holds any more (left by a crashed
/// process); refuses live ones of ours ([`XdpError::ProgramInUse`]) and foreign programs.
fn remove_stale(ifname: &str, ifindex: u32) -> Result<(), XdpError> {
    let now = attached(ifname)?;
    if let Some(p) = &now.offload {
        return Err(XdpError::ForeignProgram { id: p.id });
    }
    for (info, mode) in [
        (&now.native, AttachMode::Native),
        (&now.generic, AttachMode::Generic),
    ] {
        let Some(info) = info else { continue };
        if info.name != PROG_NAME {
            return Err(XdpError::ForeignProgram { id: info.id });
        }
        // Asked before we open an fd of it ourselves.
        if let Some(&pid) = program_holders(info.id).first() {
            return Err(XdpError::ProgramInUse {
                ifname: IfName::new(ifname),
                id: info.id,
                pid,
            });
        }
        let old = ProgFd::by_id(info.id)?;
        let ret = xdp_attach(ifindex, -1, mode.flag(), Some(old.0));
        if ret < 0 {
            return Err(XdpError::from_neg("detach stale XDP program", ret));
        }
        tracing::warn!(
            "{ifname}: replaced a stale {PROG_NAME} (id {}, {mode} mode) left by an earlier process",
            info.id
        );
    }
    Ok(())
}
