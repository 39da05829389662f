//! AF_XDP: one UMEM and one socket per engine queue (`xsk_socket`, our own rings), and
//! frames as owned tokens.
//!
//! A [`Frame`] is a non-`Copy` token for one UMEM frame. Whoever holds it may read and write the
//! frame; handing it to a ring gives it up until the kernel returns it:
//! free pool -> fill ring -> rx ring -> [`XskQueue::recv`] -> engine -> [`XskQueue::send`] ->
//! tx ring -> completion ring -> [`XskQueue::reclaim`] -> free pool (or
//! [`XskQueue::release`] straight back to the pool). Ring operations take batches and return
//! counts; the fill ring is topped up on every receive; `need_wakeup` is honoured. A queue
//! with a receive strip ([`XskConfig::rx_strip`]) fills from the strip instead of the pool,
//! and its received frames go back to the strip; the pool then serves transmission only.
//!
//! Nothing the kernel's side of the rings says is trusted: the rings refuse indices out of
//! bounds, and a descriptor handed back becomes a token only if its address lies in the UMEM
//! and its frame is one the kernel holds through the matching ring (`handback`); refusals
//! are counted ([`XskQueue::refused`], [`XskStatistics::refused`]). `plain_kernel` tests all of
//! it over plain memory, the test playing the kernel.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

mod checksum_offload;
mod handback;
#[cfg(test)]
mod plain_kernel;
mod rx_run;
mod slab;
mod statistics;
mod transmit;
mod umem_layout;

pub use checksum_offload::TxChecksumOffload;
pub use slab::Slab;
pub use statistics::{XskRefused, XskStatistics};

use super::frame_books::{FrameBooks, Holder};
use super::rx_strip::RxStrip;
use super::tx_metadata::{self, TX_METADATA_LEN};
use super::tx_slabs::TxSlabs;
use super::umem_area::UmemArea;
use super::xsk_features;
use super::xsk_socket::{set_busy_poll, set_tx_budget, SocketSetup, XskSocket};
use super::XdpError;
use tcp_offload::checksum;
use umem_layout::UmemLayout;

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
const XDP_PKT_CONTD: u32 = libc::XDP_PKT_CONTD;

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
    /// UMEM frames of the pool (fill reserve plus frames for transmission). A queue with a
    /// receive strip fills from the strip, and its pool, which then serves transmission only,
    /// holds at most `ring_size` of them (more could never be in flight).
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
    /// Who finishes the TCP checksums of transmitted frames ([`TxChecksumOffload`]).
    pub tx_checksum: TxChecksumOffload,
    /// Multi-buffer sockets: frames per transmit slab ([`XskQueue::alloc_slab`]: a packet
    /// longer than a frame written in place), enough for the largest packet with the headroom;
    /// 0 (default) for none. Ignored with TX metadata ([`TxChecksumOffload`]), whose headroom
    /// in every frame breaks the run.
    pub slab_frames: u32,
    /// Multi-buffer sockets in copy mode: receive into a strip of the UMEM whose fill
    /// addresses advance by the receive frame size, so that a received chain is one run of the
    /// UMEM ([`XskQueue::chain_run`]) and needs no gathering (registers the UMEM in
    /// unaligned-chunk mode). Not used where the socket may run zero-copy (bound `ZeroCopy`, or
    /// `Auto` on a driver that offers it): [`XskQueue::has_rx_strip`] says. Off by default.
    pub rx_strip: bool,
}

/// Transmit slabs of a queue that has them (see [`XskConfig::slab_frames`]).
const TX_SLABS: u32 = 64;

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
            tx_checksum: TxChecksumOffload::Off,
            slab_frames: 0,
            rx_strip: false,
        }
    }
}

impl XskConfig {
    /// Frames kept in the fill ring: half of the UMEM, at most a ring's worth.
    pub fn fill_target(&self) -> usize {
        (self.frame_count / 2).min(self.ring_size) as usize
    }

    /// Frames of the pool: `frame_count`, or with a receive strip (`with_strip`) at most a tx
    /// ring's worth, since only transmission draws from it then.
    fn pool_frames(&self, with_strip: bool) -> u32 {
        if with_strip {
            self.frame_count.min(self.ring_size)
        } else {
            self.frame_count
        }
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
/// fn twice(f: afxdp::Frame) -> (afxdp::Frame, afxdp::Frame) {
///     (f, f)
/// }
/// ```
#[derive(Debug)]
pub struct Frame {
    /// UMEM offset of the packet data (the frame's start plus its headroom).
    addr: u64,
    len: u32,
    options: u32,
    owner: u32,
}

impl Frame {
    /// Bytes of packet data in the frame.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the frame holds no packet data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame's address (offset in the UMEM).
    pub fn addr(&self) -> usize {
        self.addr as usize
    }

    /// Whether more frames of the same packet follow this one (`XDP_PKT_CONTD`; only on a
    /// multi-buffer socket).
    pub fn continues(&self) -> bool {
        self.options & XDP_PKT_CONTD != 0
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
    // Field order is drop order: the socket (and its rings) closes before its UMEM is unmapped.
    socket: XskSocket,
    umem: UmemArea,
    free: Vec<Frame>,
    /// Who holds each frame and strip position: what the kernel may hand back.
    books: FrameBooks,
    /// The end of the frame-aligned part of the UMEM (pool and slabs; the strip follows).
    aligned_end: u64,
    /// What the kernel handed back that was refused.
    refused: XskRefused,
    slabs: Option<TxSlabs>,
    /// The receive strip, when the fill ring draws from one (multi-buffer, `rx_strip`).
    strip: Option<RxStrip>,
    addrs: Vec<u64>,
    descs: Vec<libc::xdp_desc>,
    in_fill: usize,
    in_tx: usize,
    fill_target: usize,
    frame_size: u64,
    capacity: usize,
    multi_buffer: bool,
    zero_copy: bool,
    need_wakeup: bool,
    tx_checksum: TxChecksumOffload,
    queue_id: u32,
    tx_budget: u32,
}

/// What [`XskQueue::new`] learnt opening the socket.
struct Opened {
    queue_id: u32,
    zero_copy: bool,
    tx_checksum: TxChecksumOffload,
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
    /// thread's network namespace) and fills the fill ring. No XDP program is loaded: register
    /// [`XskQueue::fd`] with [`super::XdpProgram::register_socket`].
    pub fn new(ifname: &str, queue_id: u32, cfg: XskConfig) -> Result<Self, XdpError> {
        cfg.validate()?;
        // The driver's AF_XDP features, asked at most once (for `Auto` settings only).
        let known = std::cell::OnceCell::new();
        let features = || {
            *known.get_or_init(|| match xsk_features::interface_features(ifname) {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::debug!("{ifname}: AF_XDP features unknown ({e})");
                    None
                }
            })
        };
        let tx_checksum = cfg.tx_checksum.resolve_with(features);
        let layout = UmemLayout::new(&cfg, tx_checksum, rx_run::strip_for(&cfg, features));
        let umem = UmemArea::new(layout.len() as usize, cfg.huge_pages)?;
        let mut bind_flags = match cfg.bind_mode {
            BindMode::Auto => 0,
            BindMode::Copy => libc::XDP_COPY,
            BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
        };
        if cfg.need_wakeup {
            bind_flags |= libc::XDP_USE_NEED_WAKEUP;
        }
        if cfg.multi_buffer {
            bind_flags |= libc::XDP_USE_SG;
        }
        let setup = SocketSetup {
            frame_size: cfg.frame_size,
            ring_size: cfg.ring_size,
            bind_flags,
            tx_metadata_len: if tx_checksum == TxChecksumOffload::Off {
                0
            } else {
                TX_METADATA_LEN
            },
            tx_sw_checksum: tx_checksum == TxChecksumOffload::Kernel,
            unaligned_chunks: layout.strip.is_some(),
        };
        let socket = XskSocket::open(ifname, queue_id, &umem, setup)?;
        let zero_copy = socket.is_zero_copy()?;
        if let Some(bp) = cfg.busy_poll {
            set_busy_poll(socket.fd(), bp)?;
        }
        // Copy mode: one sendto may move the whole tx ring instead of the kernel's default 32
        // frames (kernels from 6.17 on; older ones keep 32).
        let tx_budget = if zero_copy {
            cfg.ring_size
        } else {
            set_tx_budget(socket.fd(), cfg.ring_size)
        };
        tracing::info!(
            "{ifname} queue {queue_id}: AF_XDP socket in {} mode{}{}{}",
            if zero_copy { "zero-copy" } else { "copy" },
            if cfg.need_wakeup { ", need_wakeup" } else { "" },
            if cfg.multi_buffer {
                ", multi-buffer"
            } else {
                ""
            },
            match tx_checksum {
                TxChecksumOffload::Device => ", TCP checksums by the device",
                TxChecksumOffload::Kernel => ", TCP checksums by the kernel",
                _ => "",
            }
        );

        let opened = Opened {
            queue_id,
            zero_copy,
            tx_checksum,
            tx_budget,
        };
        Ok(Self::assemble(socket, umem, layout, &cfg, opened))
    }

    /// The queue over an open `socket` and its `umem`, cut as `layout` says; fills the fill
    /// ring.
    fn assemble(
        socket: XskSocket,
        umem: UmemArea,
        layout: UmemLayout,
        cfg: &XskConfig,
        opened: Opened,
    ) -> Self {
        let owner = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
        let frame_size = u64::from(cfg.frame_size);
        let free = (0..u64::from(layout.pool_frames))
            .map(|i| Frame {
                addr: i * frame_size + u64::from(UMEM_HEADROOM),
                len: 0,
                options: 0,
                owner,
            })
            .collect();
        let ring = cfg.ring_size as usize;
        let mut q = Self {
            owner,
            socket,
            umem,
            free,
            books: layout.books(frame_size),
            aligned_end: layout.aligned_end,
            refused: XskRefused::default(),
            slabs: layout.slabs,
            strip: layout.strip,
            addrs: Vec::with_capacity(ring),
            descs: Vec::with_capacity(ring),
            in_fill: 0,
            in_tx: 0,
            fill_target: cfg.fill_target(),
            frame_size,
            capacity: (cfg.frame_size - UMEM_HEADROOM) as usize,
            multi_buffer: cfg.multi_buffer,
            zero_copy: opened.zero_copy,
            need_wakeup: cfg.need_wakeup,
            tx_checksum: opened.tx_checksum,
            queue_id: opened.queue_id,
            tx_budget: opened.tx_budget,
        };
        q.refill();
        q
    }

    /// The socket's fd (for the XSKMAP and for polling).
    pub fn fd(&self) -> RawFd {
        self.socket.fd()
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

    /// Whether TCP checksums of sent frames are left to the device or kernel (see
    /// [`TxChecksumOffload`]): the frames' checksum fields must then hold the pseudo header's
    /// sum only.
    pub fn offloads_tcp_checksum(&self) -> bool {
        self.tx_checksum != TxChecksumOffload::Off
    }

    /// Who computes TCP checksums of sent frames (`Auto` decided at open: never `Auto`).
    pub fn tx_checksum(&self) -> TxChecksumOffload {
        self.tx_checksum
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

    /// The start of the frame `addr` lies in.
    fn frame_start(&self, addr: u64) -> u64 {
        addr - addr % self.frame_size
    }

    /// Moves free frames into the fill ring up to the fill target; returns how many.
    pub fn refill(&mut self) -> usize {
        if self.strip.is_some() {
            return self.refill_from_strip();
        }
        let want = self
            .fill_target
            .saturating_sub(self.in_fill)
            .min(self.free.len());
        if want == 0 {
            return 0;
        }
        let start = self.free.len() - want;
        self.addrs.clear();
        let size = self.frame_size;
        self.addrs
            .extend(self.free[start..].iter().map(|f| f.addr - f.addr % size));
        // The ring takes frames of this UMEM from our free pool, which neither user space nor
        // the kernel uses; the tokens it took are dropped below, so nobody can touch those
        // frames until the rx ring returns them.
        let n = self.socket.fill.produce(&self.addrs);
        self.lend_addrs(n, Holder::FillRing);
        self.free.drain(start..start + n);
        self.in_fill += n;
        if self.need_wakeup && self.socket.fill.needs_wakeup() {
            self.socket.kick_fill();
        }
        n
    }

    /// Takes up to `max` received frames into `out` (appended) and tops the fill ring up.
    /// Returns how many were received.
    pub fn recv(&mut self, out: &mut Vec<Frame>, max: usize) -> usize {
        if self.descs.len() < max {
            self.descs.resize(max, EMPTY_DESC);
        }
        let n = self.socket.rx.consume(&mut self.descs[..max]);
        let owner = self.owner;
        // Unaligned-chunk mode (the strip) returns the chunk's address with the data's offset
        // in the upper 16 bits; decoded, both modes give the data's address.
        let unaligned = self.strip.is_some();
        let before = out.len();
        for i in 0..n {
            let d = self.descs[i];
            let addr = if unaligned {
                (d.addr & libc::XSK_UNALIGNED_BUF_ADDR_MASK)
                    .wrapping_add(d.addr >> libc::XSK_UNALIGNED_BUF_OFFSET_SHIFT)
            } else {
                d.addr
            };
            // Only a frame of this UMEM that the fill ring lent the kernel becomes a token
            // (exactly one: the books now say it is ours).
            if self.take_back(addr, Holder::FillRing) {
                out.push(Frame {
                    addr,
                    len: d.len,
                    options: d.options,
                    owner,
                });
            }
        }
        let n = out.len() - before;
        self.in_fill -= n;
        self.refill();
        if n == 0 && self.need_wakeup && self.socket.fill.needs_wakeup() {
            self.socket.kick_fill();
        }
        n
    }

    /// Waits up to `timeout_ms` for received frames; true when some are ready.
    pub fn poll_rx(&mut self, timeout_ms: i32) -> Result<bool, XdpError> {
        self.socket.poll_rx(timeout_ms)
    }

    /// Takes a free frame for transmission (reclaiming completions when the pool is empty).
    /// Its length starts at zero.
    pub fn alloc(&mut self) -> Option<Frame> {
        if self.free.is_empty() {
            self.reclaim();
        }
        let mut f = self.free.pop()?;
        f.addr = self.frame_start(f.addr) + u64::from(UMEM_HEADROOM);
        f.len = 0;
        // A frame last received as part of a chain must not leave marked as one.
        f.options = 0;
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
        // The kernel's software checksum (`XDP_UMEM_TX_SW_CSUM`) covers only a packet's first
        // buffer: a chain's TCP checksum is finished here instead (its field holds the pseudo
        // header's sum, see `TxChecksumOffload`).
        let finish = (self.tx_checksum == TxChecksumOffload::Kernel && frames > 1)
            .then(|| tx_metadata::tcp_header_offset(packet))
            .flatten()
            .map(|l4| (l4, checksum::offloaded_field(&packet[l4..])));
        for (i, piece) in packet.chunks(self.capacity).enumerate() {
            let mut f = self.alloc()?;
            if i + 1 < frames {
                f.options = XDP_PKT_CONTD;
            }
            f.len = piece.len() as u32;
            let data = self.data_mut(&mut f);
            crate::bulk_copy::copy_from_slice(data, piece);
            if let (0, Some((l4, sum))) = (i, finish) {
                // The first frame holds the whole TCP header (`tcp_header_offset` checked the
                // field lies in `packet`, and a frame is longer than any header).
                if let Some(field) = data.get_mut(l4 + 16..l4 + 18) {
                    field.copy_from_slice(&sum.to_be_bytes());
                }
            }
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
            self.release_one(f);
        }
    }

    /// Gives one frame back to the free pool (or, a slab's, to its slab).
    pub fn release_one(&mut self, frame: Frame) {
        self.check_owner(&frame);
        if let Some(strip) = self.strip.as_mut().filter(|s| s.contains(frame.addr)) {
            strip.back(frame.addr);
            return;
        }
        match self.slabs.as_mut() {
            Some(s) if s.contains(frame.addr) => s.frame_back(frame.addr),
            _ => self.free.push(frame),
        }
    }

    /// Moves completed transmissions back to the free pool; returns how many.
    pub fn reclaim(&mut self) -> usize {
        let n_max = self.in_tx;
        if n_max == 0 {
            return 0;
        }
        self.addrs.clear();
        self.addrs.resize(n_max, 0);
        let got = self.socket.comp.consume(&mut self.addrs);
        let owner = self.owner;
        let mut n = 0;
        for i in 0..got {
            let addr = self.addrs[i];
            // Only a frame of this UMEM that the tx ring lent the kernel comes back (once).
            if !self.take_back(addr, Holder::TxRing) {
                continue;
            }
            n += 1;
            match self.slabs.as_mut() {
                Some(slabs) if slabs.contains(addr) => slabs.frame_back(addr),
                _ => self.free.push(Frame {
                    addr,
                    len: 0,
                    options: 0,
                    owner,
                }),
            }
        }
        self.in_tx -= n;
        n
    }

    /// Where `frame`'s packet data lies: its offset and length, cut to the frame's end (the
    /// kernel never reports more; the cut keeps a wrong report inside the frame).
    fn span(&self, frame: &Frame) -> (u64, usize) {
        let end = match self.strip.as_ref().and_then(|s| s.chunk_end(frame.addr)) {
            Some(end) => end,
            None => self.frame_start(frame.addr) + self.frame_size,
        };
        let len = u64::from(frame.len).min(end - frame.addr);
        (frame.addr, len as usize)
    }

    /// The packet bytes of `frame`.
    pub fn data(&self, frame: &Frame) -> &[u8] {
        self.check_owner(frame);
        let (addr, len) = self.span(frame);
        // Safety: `frame` is a token of this UMEM (checked above) and its span lies inside
        // its frame; while we hold the token, no ring holds that frame (the kernel does not
        // write it) and no other token refers to it.
        unsafe { self.umem.bytes(addr, len) }
    }

    /// The packet bytes of `frame`, writable.
    pub fn data_mut<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        self.check_owner(frame);
        let (addr, len) = self.span(frame);
        // Safety: as in `data`; `&mut frame` makes this the only view of the frame.
        unsafe { self.umem.bytes_mut(addr, len) }
    }

    /// The whole frame, writable, with its length set to the capacity: write a packet, then
    /// [`XskQueue::set_len`] to its real length.
    pub fn data_mut_full<'a>(&'a self, frame: &'a mut Frame) -> &'a mut [u8] {
        self.check_owner(frame);
        frame.len = self.capacity as u32;
        self.data_mut(frame)
    }

    /// Sets the packet length of `frame` (to fill it through [`XskQueue::data_mut`]).
    pub fn set_len(&self, frame: &mut Frame, len: usize) -> Result<(), XdpError> {
        self.check_owner(frame);
        if len > self.capacity {
            return Err(XdpError::Invalid("packet longer than a frame"));
        }
        frame.len = len as u32;
        Ok(())
    }

    /// Copies `bytes` into `frame` and sets its length.
    pub fn write(&self, frame: &mut Frame, bytes: &[u8]) -> Result<(), XdpError> {
        self.set_len(frame, bytes.len())?;
        crate::bulk_copy::copy_from_slice(self.data_mut(frame), bytes);
        Ok(())
    }

    fn check_owner(&self, frame: &Frame) {
        assert_eq!(
            frame.owner, self.owner,
            "a Frame was used with an XskQueue other than the one it came from"
        );
    }
}

const EMPTY_DESC: libc::xdp_desc = libc::xdp_desc {
    addr: 0,
    len: 0,
    options: 0,
};
