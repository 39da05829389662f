//! AF_XDP through xsk-rs: one UMEM and one socket per engine queue, and frames as owned tokens.
//!
//! A [`Frame`] is a non-`Copy` token for one UMEM frame. Whoever holds it may read and write the
//! frame; handing it to a ring gives it up until the kernel returns it:
//! free pool -> fill ring -> rx ring -> [`XskQueue::recv`] -> engine -> [`XskQueue::send`] ->
//! tx ring -> completion ring -> [`XskQueue::reclaim`] -> free pool (or
//! [`XskQueue::release`] straight back to the pool). Ring operations take batches and return
//! counts; the fill ring is topped up on every receive; `need_wakeup` is honoured.

use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use xsk_rs::config::{
    BindFlags, FrameSize, Interface, LibxdpFlags, QueueSize, SocketConfig, UmemConfig,
};
use xsk_rs::socket::Socket;
use xsk_rs::umem::frame::FrameDesc;
use xsk_rs::umem::Umem;
use xsk_rs::{CompQueue, FillQueue, RxQueue, TxQueue};

use super::XdpError;

/// How the socket binds to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindMode {
    /// Zero-copy when the driver offers it, copy mode otherwise (the kernel decides).
    #[default]
    Auto,
    /// Copy mode (`XDP_COPY`).
    Copy,
    /// Zero-copy or fail (`XDP_ZEROCOPY`).
    ZeroCopy,
}

/// The kernel's headroom in front of every received packet (`XDP_PACKET_HEADROOM`).
pub const UMEM_HEADROOM: u32 = 256;

/// Fragments (frames) one packet may span on a multi-buffer socket: the copy-mode transmit
/// path takes at most `MAX_SKB_FRAGS` (17) descriptors per packet; 16 leaves a margin.
pub const MAX_FRAGMENTS: usize = 16;

/// `XDP_PKT_CONTD` (include/uapi/linux/if_xdp.h): more fragments of this packet follow.
const XDP_PKT_CONTD: u32 = 1;

/// UMEM frame size for an interface of `mtu`: 2048 when a whole frame fits with the kernel's
/// headroom, else 4096 (the largest frame AF_XDP takes; larger packets span several frames,
/// see [`multi_buffer_for_mtu`]).
pub fn frame_size_for_mtu(mtu: u32) -> u32 {
    if mtu + 14 + UMEM_HEADROOM <= 2048 {
        2048
    } else {
        4096
    }
}

/// Whether an interface of `mtu` needs multi-buffer sockets (`XDP_USE_SG`): its Ethernet
/// frames do not fit one UMEM frame of [`frame_size_for_mtu`] behind the headroom.
pub fn multi_buffer_for_mtu(mtu: u32) -> bool {
    mtu + 14 + UMEM_HEADROOM > frame_size_for_mtu(mtu)
}

/// Sizes and modes of one [`XskQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskConfig {
    /// UMEM frames in all (fill reserve plus frames for transmission).
    pub frame_count: u32,
    /// Bytes per frame: a power of two, at least 2048.
    pub frame_size: u32,
    /// Entries of each of the four rings: a power of two.
    pub ring_size: u32,
    /// Copy or zero-copy.
    pub bind_mode: BindMode,
    /// Bind with `XDP_USE_NEED_WAKEUP` (the kernel is kicked only when it asks).
    pub need_wakeup: bool,
    /// Back the UMEM with 2 MiB huge pages (fewer TLB misses on a large UMEM). Reserve them
    /// first (`deploy/host-setup --hugepages N`); without free huge pages the queue fails to
    /// open. Off by default.
    pub huge_pages: bool,
    /// Busy polling for NIC drivers that run their receive work from the application's system
    /// calls (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`); `None` (default)
    /// leaves the socket as it is. It changes nothing on veth.
    pub busy_poll: Option<BusyPoll>,
    /// Bind with `XDP_USE_SG`: a packet longer than a frame arrives and leaves as a chain of
    /// frames ([`Frame::continues`], [`XskQueue::scatter`]). Needs Linux 6.6 (copy mode) and
    /// an `xdp.frags` program, which [`super::XdpProgram`] is. Off by default.
    pub multi_buffer: bool,
}

/// Busy-poll settings of an AF_XDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusyPoll {
    /// How long one busy-poll system call may spin in the driver (`SO_BUSY_POLL`, µs).
    pub usecs: u32,
    /// Packets the driver may handle per busy poll (`SO_BUSY_POLL_BUDGET`).
    pub budget: u32,
}

impl Default for BusyPoll {
    fn default() -> Self {
        BusyPoll {
            usecs: 20,
            budget: 64,
        }
    }
}

impl Default for XskConfig {
    fn default() -> Self {
        Self {
            frame_count: 4096,
            frame_size: 2048,
            ring_size: 2048,
            bind_mode: BindMode::Auto,
            need_wakeup: true,
            huge_pages: false,
            busy_poll: None,
            multi_buffer: false,
        }
    }
}

impl XskConfig {
    /// Frames kept in the fill ring: half of the UMEM, at most a ring's worth.
    pub fn fill_target(&self) -> usize {
        (self.frame_count / 2).min(self.ring_size) as usize
    }

    fn validate(&self) -> Result<(), XdpError> {
        if !self.ring_size.is_power_of_two() {
            return Err(XdpError::Invalid("ring size must be a power of two"));
        }
        if !self.frame_size.is_power_of_two() || self.frame_size < 2048 {
            return Err(XdpError::Invalid(
                "frame size must be a power of two >= 2048",
            ));
        }
        if self.frame_count < 2 {
            return Err(XdpError::Invalid("a UMEM needs at least two frames"));
        }
        Ok(())
    }
}

static NEXT_OWNER: AtomicU32 = AtomicU32::new(1);

/// An owned UMEM frame: its holder may touch its bytes, nobody else may (see the module docs).
/// Dropping a token instead of returning it leaks the frame from its queue's pool.
///
/// A token cannot be duplicated, so a frame cannot be in two places at once:
///
/// ```compile_fail
/// fn twice(f: dataplane::xdp::Frame) -> (dataplane::xdp::Frame, dataplane::xdp::Frame) {
///     (f, f)
/// }
/// ```
#[derive(Debug)]
pub struct Frame {
    desc: FrameDesc,
    owner: u32,
}

impl Frame {
    /// Bytes of packet data in the frame.
    pub fn len(&self) -> usize {
        self.desc.lengths().data()
    }

    /// Whether the frame holds no packet data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame's address (offset in the UMEM).
    pub fn addr(&self) -> usize {
        self.desc.addr()
    }

    /// Whether more frames of the same packet follow this one (`XDP_PKT_CONTD`; only on a
    /// multi-buffer socket).
    pub fn continues(&self) -> bool {
        self.desc.options() & XDP_PKT_CONTD != 0
    }
}

/// Ring and pool occupancy, for tests and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XskOccupancy {
    /// Frames in the free pool.
    pub free: usize,
    /// Frames given to the fill ring and not yet received.
    pub in_fill: usize,
    /// Frames given to the tx ring and not yet completed.
    pub in_tx: usize,
}

/// One AF_XDP socket bound to `(interface, queue)` with its own UMEM.
pub struct XskQueue {
    owner: u32,
    umem: Umem,
    fill: FillQueue,
    comp: CompQueue,
    tx: TxQueue,
    rx: RxQueue,
    free: Vec<Frame>,
    scratch: Vec<FrameDesc>,
    in_fill: usize,
    in_tx: usize,
    fill_target: usize,
    capacity: usize,
    multi_buffer: bool,
    zero_copy: bool,
    queue_id: u32,
    tx_budget: u32,
}

impl std::fmt::Debug for XskQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskQueue")
            .field("queue_id", &self.queue_id)
            .field("zero_copy", &self.zero_copy)
            .field("occupancy", &self.occupancy())
            .finish()
    }
}

impl XskQueue {
    /// Creates a UMEM and an AF_XDP socket on `ifname` rx/tx queue `queue_id` (in the calling
    /// thread's network namespace) and fills the fill ring. libxdp's default XDP program is not
    /// loaded: register [`XskQueue::fd`] with [`super::XdpProgram::register_socket`].
    pub fn new(ifname: &str, queue_id: u32, cfg: XskConfig) -> Result<Self, XdpError> {
        cfg.validate()?;
        let ring = QueueSize::new(cfg.ring_size)
            .map_err(|_| XdpError::Invalid("ring size must be a power of two"))?;
        let frame_size =
            FrameSize::new(cfg.frame_size).map_err(|_| XdpError::Invalid("frame size"))?;
        let umem_cfg = UmemConfig::builder()
            .frame_size(frame_size)
            .fill_queue_size(ring)
            .comp_queue_size(ring)
            .build()
            .map_err(|_| XdpError::Invalid("UMEM configuration"))?;
        let capacity = umem_cfg.mtu() as usize;
        let count = NonZeroU32::new(cfg.frame_count).ok_or(XdpError::Invalid("zero frames"))?;
        let (umem, descs) =
            Umem::new(umem_cfg, count, cfg.huge_pages).map_err(|e| XdpError::Os {
                op: if cfg.huge_pages {
                    "create UMEM on huge pages (reserve them: deploy/host-setup --hugepages N)"
                } else {
                    "create UMEM"
                },
                errno: source_errno(&e),
            })?;

        let mut bind = match cfg.bind_mode {
            BindMode::Auto => BindFlags::empty(),
            BindMode::Copy => BindFlags::XDP_COPY,
            BindMode::ZeroCopy => BindFlags::XDP_ZEROCOPY,
        };
        if cfg.need_wakeup {
            bind |= BindFlags::XDP_USE_NEED_WAKEUP;
        }
        if cfg.multi_buffer {
            bind |= BindFlags::XDP_USE_SG;
        }
        let sock_cfg = SocketConfig::builder()
            .rx_queue_size(ring)
            .tx_queue_size(ring)
            .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
            .bind_flags(bind)
            .build();
        let iface: Interface = ifname
            .parse()
            .map_err(|_| XdpError::Invalid("interface name has a NUL"))?;
        // Safety: the UMEM was created just above and is not shared, so this (ifname, queue)
        // pair is not yet bound through it; we also inhibit libxdp's program load.
        let (tx, rx, rings) =
            unsafe { Socket::new(sock_cfg, &umem, &iface, queue_id) }.map_err(|e| {
                XdpError::Os {
                    op: "create AF_XDP socket",
                    errno: source_errno(&e),
                }
            })?;
        let (fill, comp) = rings.ok_or(XdpError::Invalid("UMEM unexpectedly shared"))?;
        let zero_copy = is_zero_copy(tx.fd().as_raw_fd())?;
        if let Some(bp) = cfg.busy_poll {
            set_busy_poll(tx.fd().as_raw_fd(), bp)?;
        }
        // Copy mode: one sendto may move the whole tx ring instead of the kernel's default 32
        // frames (kernels from 6.17 on; older ones keep 32).
        let tx_budget = if zero_copy {
            cfg.ring_size
        } else {
            set_tx_budget(tx.fd().as_raw_fd(), cfg.ring_size)
        };
        tracing::info!(
            "{ifname} queue {queue_id}: AF_XDP socket in {} mode{}{}",
            if zero_copy { "zero-copy" } else { "copy" },
            if cfg.need_wakeup { ", need_wakeup" } else { "" },
            if cfg.multi_buffer {
                ", multi-buffer"
            } else {
                ""
            }
        );

        let owner = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
        let free = descs
            .into_iter()
            .map(|desc| Frame { desc, owner })
            .collect();
        let mut q = Self {
            owner,
            umem,
            fill,
            comp,
            tx,
            rx,
            free,
            scratch: Vec::with_capacity(cfg.ring_size as usize),
            in_fill: 0,
            in_tx: 0,
            fill_target: cfg.fill_target(),
            capacity,
            multi_buffer: cfg.multi_buffer,
            zero_copy,
            queue_id,
            tx_budget,
        };
        q.refill();
        Ok(q)
    }

    /// The socket's fd (for the XSKMAP and for polling).
    pub fn fd(&self) -> RawFd {
        self.tx.fd().as_raw_fd()
    }

    /// The queue id the socket is bound to.
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// Whether the socket runs zero-copy (false: copy mode).
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Frames one kick (`sendto`) can hand to the driver in copy mode: the tx ring's size
    /// where the kernel takes `XDP_MAX_TX_SKB_BUDGET` (6.17 and later), else its default 32.
    pub fn tx_budget(&self) -> u32 {
        self.tx_budget
    }

    /// Largest packet a frame holds.
    pub fn frame_capacity(&self) -> usize {
        self.capacity
    }

    /// Whether the socket is bound with `XDP_USE_SG` (packets may span frames).
    pub fn is_multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// Largest packet [`XskQueue::scatter`] sends: one frame, or [`MAX_FRAGMENTS`] of them on a
    /// multi-buffer socket.
    pub fn max_packet(&self) -> usize {
        if self.multi_buffer {
            self.capacity * MAX_FRAGMENTS
        } else {
            self.capacity
        }
    }

    /// Frames in the free pool (after reclaiming completions when fewer than `want` are).
    pub fn free_frames(&mut self, want: usize) -> usize {
        if self.free.len() < want {
            self.reclaim();
        }
        self.free.len()
    }

    /// Where the frames are now.
    pub fn occupancy(&self) -> XskOccupancy {
        XskOccupancy {
            free: self.free.len(),
            in_fill: self.in_fill,
            in_tx: self.in_tx,
        }
    }

    /// The kernel's drop and error counters for this socket.
    pub fn statistics(&self) -> Result<xsk_rs::socket::XdpStatistics, XdpError> {
        self.tx
            .fd()
            .xdp_statistics()
            .map_err(|e| XdpError::from_io("XDP_STATISTICS", &e))
    }

    /// Moves free frames into the fill ring up to the fill target; returns how many.
    pub fn refill(&mut self) -> usize {
        let want = self
            .fill_target
            .saturating_sub(self.in_fill)
            .min(self.free.len());
        if want == 0 {
            return 0;
        }
        let start = self.free.len() - want;
        self.scratch.clear();
        self.scratch
            .extend(self.free[start..].iter().map(|f| f.desc));
        // Safety: each descriptor comes from a token of this UMEM held in our free pool, so
        // neither user space nor the kernel uses those frames; the tokens given to the ring
        // are dropped below, so nobody can touch them until the rx ring returns them.
        let n = unsafe { self.fill.produce(&self.scratch) };
        // The ring took the first `n` of them: those tokens are given up.
        self.free.drain(start..start + n);
        self.in_fill += n;
        if self.fill.needs_wakeup() {
            let _ = self.fill.wakeup(self.rx.fd_mut(), 0);
        }
        n
    }

    /// Takes up to `max` received frames into `out` (appended) and tops the fill ring up.
    /// Returns how many were received.
    pub fn recv(&mut self, out: &mut Vec<Frame>, max: usize) -> usize {
        if self.scratch.len() < max {
            self.scratch.resize(max, FrameDesc::default());
        }
        // Safety: the descriptors the rx ring returns belong to this UMEM (we only ever fill
        // it with our own frames); each becomes exactly one token below.
        let n = unsafe { self.rx.consume(&mut self.scratch[..max]) };
        self.in_fill -= n;
        let owner = self.owner;
        out.extend(self.scratch[..n].iter().map(|&desc| Frame { desc, owner }));
        self.refill();
        if n == 0 && self.fill.needs_wakeup() {
            let _ = self.fill.wakeup(self.rx.fd_mut(), 0);
        }
        n
    }

    /// Waits up to `timeout_ms` for received frames; true when some are ready.
    pub fn poll_rx(&mut self, timeout_ms: i32) -> Result<bool, XdpError> {
        self.rx
            .poll(timeout_ms)
            .map_err(|e| XdpError::from_io("poll AF_XDP socket", &e))
    }

    /// Takes a free frame for transmission (reclaiming completions when the pool is empty).
    /// Its length starts at zero.
    pub fn alloc(&mut self) -> Option<Frame> {
        if self.free.is_empty() {
            self.reclaim();
        }
        let mut f = self.free.pop()?;
        self.set_len_unchecked(&mut f, 0);
        // A frame last received as part of a chain must not leave marked as one.
        f.desc.set_options(0);
        Some(f)
    }

    /// Copies one packet into as many free frames as it needs and appends them to `out` in
    /// order, every one but the last marked [`Frame::continues`]: ready for
    /// [`XskQueue::send`], which queues a vector whole or not at all, so a chain never leaves
    /// half-queued. All or nothing here too: `None` (nothing taken) when the packet is empty,
    /// longer than [`XskQueue::max_packet`], or more frames than the pool has are needed.
    /// Returns the number of frames used.
    pub fn scatter(&mut self, packet: &[u8], out: &mut Vec<Frame>) -> Option<usize> {
        if packet.is_empty() || packet.len() > self.max_packet() {
            return None;
        }
        let frames = packet.len().div_ceil(self.capacity);
        if self.free_frames(frames) < frames {
            return None;
        }
        for (i, piece) in packet.chunks(self.capacity).enumerate() {
            let mut f = self.alloc()?;
            if i + 1 < frames {
                f.desc.set_options(XDP_PKT_CONTD);
            }
            self.set_len_unchecked(&mut f, piece.len());
            self.data_mut(&mut f).copy_from_slice(piece);
            out.push(f);
        }
        Some(frames)
    }

    /// Takes up to `n` free frames into `out`; returns how many.
    pub fn alloc_batch(&mut self, out: &mut Vec<Frame>, n: usize) -> usize {
        let mut got = 0;
        while got < n {
            match self.alloc() {
                Some(f) => {
                    out.push(f);
                    got += 1;
                }
                None => break,
            }
        }
        got
    }

    /// Gives frames back to the free pool (received frames the engine is done with).
    pub fn release(&mut self, frames: &mut Vec<Frame>) {
        for f in frames.drain(..) {
            self.check_owner(&f);
            self.free.push(f);
        }
    }

    /// Gives one frame back to the free pool.
    pub fn release_one(&mut self, frame: Frame) {
        self.check_owner(&frame);
        self.free.push(frame);
    }

    /// Queues the frames of `frames` on the tx ring and kicks the kernel if it asks: all of
    /// them when the ring has room for all, else none (libxdp reserves all or nothing), so a
    /// chain of [`XskQueue::scatter`] is never split. The queued tokens leave `frames`.
    /// Returns how many were queued.
    pub fn send(&mut self, frames: &mut Vec<Frame>) -> usize {
        if frames.is_empty() {
            return 0;
        }
        self.scratch.clear();
        for f in frames.iter() {
            self.check_owner(f);
            self.scratch.push(f.desc);
        }
        // Safety: every descriptor comes from a token of this UMEM that we hold; the tokens
        // of the frames the ring accepts are dropped below, so user space cannot touch them
        // until the completion ring gives them back.
        let n = unsafe { self.tx.produce(&self.scratch) };
        frames.drain(..n);
        self.in_tx += n;
        if n > 0 && self.tx.needs_wakeup() {
            let _ = self.tx.wakeup();
        }
        n
    }

    /// Kicks the kernel again while transmitted frames have not all completed (copy mode sends
    /// at most a budget per `sendto` and says nothing about the rest). Call it after
    /// [`XskQueue::reclaim`], so that a batch the last `send` finished costs no second `sendto`.
    pub fn kick_tx(&mut self) {
        if self.in_tx > 0 && self.tx.needs_wakeup() {
            let _ = self.tx.wakeup();
        }
    }

    /// Moves completed transmissions back to the free pool; returns how many.
    pub fn reclaim(&mut self) -> usize {
        let n_max = self.in_tx;
        if n_max == 0 {
            return 0;
        }
        self.scratch.clear();
        self.scratch.resize(n_max, FrameDesc::default());
        // Safety: the completion ring returns the addresses of frames of this UMEM that we
        // gave to the tx ring; each becomes exactly one token again.
        let n = unsafe { self.comp.consume(&mut self.scratch) };
        self.in_tx -= n;
        let owner = self.owner;
        self.free
            .extend(self.scratch[..n].iter().map(|&desc| Frame { desc, owner }));
        n
    }

    /// The packet bytes of `frame`.
    pub fn data(&self, frame: &Frame) -> &[u8] {
        self.check_owner(frame);
        // Safety: `frame` is a token of this UMEM (checked above), so no ring and no other
        // token refers to its memory while we hold `&frame`.
        unsafe { self.umem.data(&frame.desc) }.contents()
    }

    /// The packet bytes of `frame`, writable.
    pub fn data_mut<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        self.check_owner(frame);
        // Safety: as in `data`; `&mut frame` makes this the only view of the frame.
        let data = unsafe { self.umem.data_mut(&mut frame.desc) };
        into_contents_mut(data)
    }

    /// The whole frame, writable, with its length set to the capacity: write a packet, then
    /// [`XskQueue::set_len`] to its real length.
    pub fn data_mut_full<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        self.check_owner(frame);
        self.set_len_unchecked(frame, self.capacity);
        self.data_mut(frame)
    }

    /// Sets the packet length of `frame` (to fill it through [`XskQueue::data_mut`]).
    pub fn set_len(&self, frame: &mut Frame, len: usize) -> Result<(), XdpError> {
        self.check_owner(frame);
        if len > self.capacity {
            return Err(XdpError::Invalid("packet longer than a frame"));
        }
        self.set_len_unchecked(frame, len);
        Ok(())
    }

    /// Copies `bytes` into `frame` and sets its length.
    pub fn write(&self, frame: &mut Frame, bytes: &[u8]) -> Result<(), XdpError> {
        self.set_len(frame, bytes.len())?;
        self.data_mut(frame).copy_from_slice(bytes);
        Ok(())
    }

    fn set_len_unchecked(&self, frame: &mut Frame, len: usize) {
        // Safety: `frame` is a token of this UMEM held exclusively (see `data_mut`).
        let mut data = unsafe { self.umem.data_mut(&mut frame.desc) };
        data.cursor().set_pos(len);
    }

    fn check_owner(&self, frame: &Frame) {
        assert_eq!(
            frame.owner, self.owner,
            "a Frame was used with an XskQueue other than the one it came from"
        );
    }
}

fn into_contents_mut(data: xsk_rs::umem::frame::DataMut<'_>) -> &mut [u8] {
    let mut data = data;
    let len = data.contents().len();
    let ptr = data.contents_mut().as_mut_ptr();
    // Safety: `ptr..ptr+len` is the frame's packet data, borrowed mutably for the lifetime of
    // `data`'s borrow of the UMEM and the frame token; DataMut is only a view with no drop
    // effects, so returning its contents for the same lifetime is sound.
    unsafe { std::slice::from_raw_parts_mut(ptr, len) }
}

/// `SO_PREFER_BUSY_POLL` and `SO_BUSY_POLL_BUDGET` (asm-generic/socket.h, Linux 5.11).
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// Sets one integer socket option.
fn set_int_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: u32) -> bool {
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

/// Turns busy polling on for the socket (the three options, in the order the kernel's AF_XDP
/// documentation gives).
fn set_busy_poll(fd: RawFd, bp: BusyPoll) -> Result<(), XdpError> {
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
fn set_tx_budget(fd: RawFd, budget: u32) -> u32 {
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

fn is_zero_copy(fd: RawFd) -> Result<bool, XdpError> {
    let mut opts = libc::xdp_options { flags: 0 };
    let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
    // Safety: `opts` is writable for `len` bytes and both outlive the call.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_OPTIONS,
            (&mut opts as *mut libc::xdp_options).cast(),
            &mut len,
        )
    };
    if ret != 0 {
        return Err(XdpError::last_os("getsockopt(XDP_OPTIONS)"));
    }
    Ok(opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
}

/// The errno behind an xsk-rs error, if it carries one.
fn source_errno(e: &(dyn std::error::Error + 'static)) -> i32 {
    e.source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::raw_os_error)
        .unwrap_or(libc::EIO)
}
