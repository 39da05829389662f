//! An AF_XDP socket with its UMEM registration and four mapped rings, set up the way
//! Documentation/networking/af_xdp.rst lays out: register the UMEM, size the rings, map them,
//! bind to `(interface, queue)`. Socket options and kicks live here too.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::ring::Ring;
use super::umem_area::UmemArea;
use super::xsk::BusyPoll;
use super::XdpError;

/// How [`XskSocket::open`] registers the UMEM and binds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SocketSetup {
    pub frame_size: u32,
    pub ring_size: u32,
    /// `XDP_COPY`, `XDP_ZEROCOPY`, `XDP_USE_NEED_WAKEUP`, `XDP_USE_SG`.
    pub bind_flags: u16,
    /// Bytes of `struct xsk_tx_metadata` in front of every transmitted packet (0: none).
    pub tx_metadata_len: u32,
    /// `XDP_UMEM_TX_SW_CSUM`: the kernel computes requested checksums itself (copy mode).
    pub tx_sw_checksum: bool,
    /// `XDP_UMEM_UNALIGNED_CHUNK_FLAG`: fill and transmit addresses may be any offset (the
    /// receive strip's), and received descriptors carry the data's offset in their upper bits.
    pub unaligned_chunks: bool,
}

/// The socket and its rings. Dropping it unmaps the rings and closes the socket (the UMEM's
/// memory is the caller's and must outlive this).
pub(crate) struct XskSocket {
    pub fill: Ring<u64>,
    pub comp: Ring<u64>,
    pub rx: Ring<libc::xdp_desc>,
    pub tx: Ring<libc::xdp_desc>,
    fd: OwnedFd,
}

impl XskSocket {
    /// Opens a socket on `ifname` queue `queue_id` over `umem` (see the module docs).
    pub(crate) fn open(
        ifname: &str,
        queue_id: u32,
        umem: &UmemArea,
        setup: SocketSetup,
    ) -> Result<Self, XdpError> {
        let name = std::ffi::CString::new(ifname)
            .map_err(|_| XdpError::Invalid("interface name has a NUL"))?;
        // Safety: `name` is a NUL-terminated string that outlives the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(XdpError::last_os("if_nametoindex"));
        }
        // Safety: plain socket creation; the fd is owned right away.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(XdpError::last_os("create AF_XDP socket"));
        }
        // Safety: `raw` is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = fd.as_raw_fd();

        let mut flags = 0;
        if setup.tx_metadata_len > 0 {
            flags |= libc::XDP_UMEM_TX_METADATA_LEN;
        }
        if setup.tx_sw_checksum {
            flags |= libc::XDP_UMEM_TX_SW_CSUM;
        }
        if setup.unaligned_chunks {
            flags |= libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG;
        }
        let reg = libc::xdp_umem_reg {
            addr: umem.addr(),
            len: umem.len() as u64,
            chunk_size: setup.frame_size,
            headroom: 0,
            flags,
            tx_metadata_len: setup.tx_metadata_len,
        };
        set_option(s, libc::XDP_UMEM_REG, &reg, "register UMEM (XDP_UMEM_REG)")?;
        for (opt, op) in [
            (libc::XDP_UMEM_FILL_RING, "size fill ring"),
            (libc::XDP_UMEM_COMPLETION_RING, "size completion ring"),
            (libc::XDP_RX_RING, "size rx ring"),
            (libc::XDP_TX_RING, "size tx ring"),
        ] {
            set_option(s, opt, &setup.ring_size, op)?;
        }
        let off: libc::xdp_mmap_offsets =
            get_option(s, libc::XDP_MMAP_OFFSETS, "getsockopt(XDP_MMAP_OFFSETS)")?;
        let size = setup.ring_size;
        let fill = Ring::map(s, &off.fr, size, libc::XDP_UMEM_PGOFF_FILL_RING, true)?;
        let comp = Ring::map(
            s,
            &off.cr,
            size,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            false,
        )?;
        let rx = Ring::map(s, &off.rx, size, libc::XDP_PGOFF_RX_RING as u64, false)?;
        let tx = Ring::map(s, &off.tx, size, libc::XDP_PGOFF_TX_RING as u64, true)?;

        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: setup.bind_flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue_id,
            sxdp_shared_umem_fd: 0,
        };
        bind_retrying_busy(s, &addr)?;
        Ok(XskSocket {
            fill,
            comp,
            rx,
            tx,
            fd,
        })
    }

    /// The socket's fd.
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Asks the kernel to transmit what the tx ring holds (`sendto`, non-blocking). Busy and
    /// would-block answers are normal: the frames stay queued for the next kick.
    pub(crate) fn kick_tx(&self) {
        crate::sendto_times::timed(|| {
            // Safety: no buffer is passed; the kernel only looks at the socket.
            unsafe {
                libc::sendto(
                    self.fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
        });
    }

    /// Tells the kernel the fill ring has frames again (`recvfrom`, non-blocking).
    pub(crate) fn kick_fill(&self) {
        // Safety: no buffer is passed; the kernel only looks at the socket.
        unsafe {
            libc::recvfrom(
                self.fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Waits up to `timeout_ms` for the rx ring to hold frames; true when it does.
    pub(crate) fn poll_rx(&self, timeout_ms: i32) -> Result<bool, XdpError> {
        let mut p = libc::pollfd {
            fd: self.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Safety: one valid pollfd, writable, outliving the call.
        let ret = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        match ret {
            r if r > 0 => Ok(p.revents & libc::POLLIN != 0),
            0 => Ok(false),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    Ok(false)
                } else {
                    Err(XdpError::from_io("poll AF_XDP socket", &e))
                }
            }
        }
    }

    /// The kernel's drop and error counters (`XDP_STATISTICS`).
    pub(crate) fn statistics(&self) -> Result<libc::xdp_statistics, XdpError> {
        get_option(
            self.fd(),
            libc::XDP_STATISTICS,
            "getsockopt(XDP_STATISTICS)",
        )
    }

    /// Whether the socket runs zero-copy (`XDP_OPTIONS`).
    pub(crate) fn is_zero_copy(&self) -> Result<bool, XdpError> {
        let opts: libc::xdp_options =
            get_option(self.fd(), libc::XDP_OPTIONS, "getsockopt(XDP_OPTIONS)")?;
        Ok(opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
    }
}

#[cfg(test)]
impl XskSocket {
    /// A socket whose four rings of `size` entries are plain memory with every index at
    /// `start`, for tests that play the kernel; its fd is an unbound Unix datagram socket, so
    /// kicks go nowhere. Returns the rings' memories too: fill, completion, rx, tx.
    pub(crate) fn plain(
        size: u32,
        start: u32,
    ) -> (Self, [std::sync::Arc<super::ring::plain::PlainRing>; 4]) {
        use super::ring::plain::PlainRing;
        let (fill, f) = PlainRing::new(size, start, true);
        let (comp, c) = PlainRing::new(size, start, false);
        let (rx, r) = PlainRing::new(size, start, false);
        let (tx, t) = PlainRing::new(size, start, true);
        let fd = std::os::unix::net::UnixDatagram::unbound()
            .expect("a Unix datagram socket")
            .into();
        (
            XskSocket {
                fill,
                comp,
                rx,
                tx,
                fd,
            },
            [f, c, r, t],
        )
    }
}

/// A C struct the kernel fills from `getsockopt`.
///
/// # Safety
/// All-zero and any bytes the kernel writes must be valid values (plain integers only).
unsafe trait PlainOption: Sized {}
// Safety: u64 fields only.
unsafe impl PlainOption for libc::xdp_statistics {}
// Safety: one u32.
unsafe impl PlainOption for libc::xdp_options {}
// Safety: u64 fields only (four ring offsets of four u64 each).
unsafe impl PlainOption for libc::xdp_mmap_offsets {}

/// Reads the `SOL_XDP` option `name`.
fn get_option<T: PlainOption>(
    fd: RawFd,
    name: libc::c_int,
    op: &'static str,
) -> Result<T, XdpError> {
    // Safety: all-zero is a valid `T` (PlainOption).
    let mut v: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // Safety: `v` is writable for `len` bytes and both outlive the call; whatever the kernel
    // writes is a valid `T` (PlainOption).
    let ret =
        unsafe { libc::getsockopt(fd, libc::SOL_XDP, name, (&mut v as *mut T).cast(), &mut len) };
    if ret != 0 {
        return Err(XdpError::last_os(op));
    }
    Ok(v)
}

/// How long [`bind_retrying_busy`] waits for a queue that a closed socket still holds.
/// Two seconds: on a loaded host the deferred release can take longer than half a second after
/// the previous process on the queue exited.
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Binds `fd` to `addr`, retrying for up to [`BIND_BUSY_WAIT`] while the queue is busy: a
/// socket closed on that queue just before releases it from deferred kernel work
/// (`xp_release_deferred`), so a prompt rebind (an engine restarted, a test's second socket)
/// can see `EBUSY` for a moment. A queue another live socket holds stays busy and fails after
/// the wait.
fn bind_retrying_busy(fd: RawFd, addr: &libc::sockaddr_xdp) -> Result<(), XdpError> {
    let deadline = std::time::Instant::now() + BIND_BUSY_WAIT;
    loop {
        // Safety: `addr` is a valid sockaddr_xdp of the length passed, read by the kernel only.
        let ret = unsafe {
            libc::bind(
                fd,
                (addr as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if ret == 0 {
            return Ok(());
        }
        let e = XdpError::last_os("bind AF_XDP socket");
        let busy = matches!(e, XdpError::Os { errno, .. } if errno == libc::EBUSY);
        if !busy || std::time::Instant::now() >= deadline {
            return Err(e);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Sets the `SOL_XDP` option `name` to `value`.
fn set_option<T>(
    fd: RawFd,
    name: libc::c_int,
    value: &T,
    op: &'static str,
) -> Result<(), XdpError> {
    // Safety: `value` is readable for its size and outlives the call; the kernel only reads it.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(XdpError::last_os(op))
    }
}

/// Sets one integer socket option; false when the kernel refuses it.
pub(crate) fn set_int_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: u32) -> bool {
    let v = value as libc::c_int;
    // Safety: `v` is readable for the size passed and outlives the call; the kernel only
    // reads it.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    ret == 0
}

/// `SO_PREFER_BUSY_POLL` and `SO_BUSY_POLL_BUDGET` (asm-generic/socket.h, Linux 5.11).
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// Turns busy polling on for the socket (the three options, in the order the kernel's AF_XDP
/// documentation gives).
pub(crate) fn set_busy_poll(fd: RawFd, bp: BusyPoll) -> Result<(), XdpError> {
    let sol = libc::SOL_SOCKET;
    for (name, value, op) in [
        (SO_PREFER_BUSY_POLL, 1, "setsockopt(SO_PREFER_BUSY_POLL)"),
        (libc::SO_BUSY_POLL, bp.usecs, "setsockopt(SO_BUSY_POLL)"),
        (
            SO_BUSY_POLL_BUDGET,
            bp.budget,
            "setsockopt(SO_BUSY_POLL_BUDGET)",
        ),
    ] {
        if !set_int_option(fd, sol, name, value) {
            return Err(XdpError::last_os(op));
        }
    }
    Ok(())
}

/// `XDP_MAX_TX_SKB_BUDGET` (include/uapi/linux/if_xdp.h, Linux 6.17).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
/// The copy-mode budget per `sendto` of kernels without that option.
const DEFAULT_TX_BUDGET: u32 = 32;

/// Asks for `budget` frames per `sendto` in copy mode; returns the budget in force.
pub(crate) fn set_tx_budget(fd: RawFd, budget: u32) -> u32 {
    if set_int_option(fd, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, budget) {
        budget
    } else {
        tracing::debug!(
            "XDP_MAX_TX_SKB_BUDGET not taken ({}): {DEFAULT_TX_BUDGET} frames per sendto",
            std::io::Error::last_os_error()
        );
        DEFAULT_TX_BUDGET
    }
}
