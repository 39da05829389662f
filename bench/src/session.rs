//! One connected test: the device, the registered buffer, the queue pair, and the busy-polling
//! helpers both roles share.
//!
//! Buffer layout (one registered region, tagged offsets from 0):
//!
//! ```text
//! [ data slot 0 | data slot 1 | ... | data slot n-1 | ctrl tx 0..8 | ctrl rx 8..32 ]
//!   each data slot `size` bytes; slot 0 is what the peer writes to and reads from;
//!   ctrl slots are 32 bytes: FIN (1 byte 0xF1), ACK ("XA"), credits ("XC" + u32), the
//!   server's report of its own stream under -b ("XR" + messages u64 + nanoseconds u64 +
//!   peak Gb/s as f64 bits u64)
//! ```

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::ops::Range;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use dataplane::{
    Access, Completion, CompletionQueue, ConnectError, ConnectionConfig, Device, Incoming,
    MemoryRegion, QpError, QpInit, QueuePair, RemoteAddr, Status, XdpConfig,
};

use crate::cli::{TestArgs, TransportArg};
use crate::handshake::{BufferInfo, HandshakeStatus as HsStatus, Reply, Request};

/// Bytes of a control slot.
pub const CTRL_LEN: usize = 32;
const CTRL_TX_SLOTS: usize = 8;
const CTRL_SLOTS: usize = 32;
/// The FIN a client sends when it is done (1 byte).
pub const FIN: u8 = 0xF1;
/// wr_id bit of control receives.
const CTRL_WR: u64 = 1 << 62;
/// A peer that makes no progress this long is declared gone.
const STALL: Duration = Duration::from_secs(10);

/// The stall window: [`STALL`], or `XWARP_BENCH_STALL_SECS` (a test's shorter window, so that
/// a stream longer than the window is quick to show).
fn stall_window() -> Duration {
    std::env::var("XWARP_BENCH_STALL_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(STALL, Duration::from_secs)
}

/// A control message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ctrl {
    /// The client is done.
    Fin,
    /// The server saw the FIN.
    Ack,
    /// The server reposted this many receive buffers.
    Credits(u32),
    /// `-b`: the server's own stream, instead of the ACK.
    Report(StreamReport),
}

/// What the server's stream of a bidirectional test did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamReport {
    /// Messages completed.
    pub messages: u64,
    /// From its first post to its last completion.
    pub nanos: u64,
    /// Its best-window bandwidth.
    pub peak_gbps: f64,
}

/// Bytes of an encoded report.
const REPORT_LEN: usize = 26;

/// The device for the options: the kernel transport, or an AF_XDP device on `--interface`
/// (default: the interface towards `peer` for a client, the only non-loopback interface for a
/// server; `peer` is `None` on a server) and `--queue`, its engine inline or threaded (the
/// kernel transport too: `--engine`). Opened in the calling process's network namespace.
pub fn open_device(args: &TestArgs, peer: Option<IpAddr>) -> Result<Device, String> {
    match args.transport {
        TransportArg::Kernel => Device::open_kernel(args.engine().mode()).map_err(|e| {
            format!(
                "cannot open the kernel transport ({}): {e}",
                args.engine().name()
            )
        }),
        TransportArg::Xdp => {
            let cfg = xdp_config(args, peer)?;
            let what = format!(
                "{} queue {} ({} engine)",
                cfg.interface,
                cfg.queue,
                args.engine().name()
            );
            Device::open_xdp(cfg)
                .map_err(|e| format!("cannot open the xdp transport on {what}: {e}"))
        }
    }
}

/// With `XWARP_BENCH_COUNTERS=1` in the environment, prints the engine's counters (xdp
/// transport) to stderr as one line: retransmissions, drops and the like explain a figure.
pub fn report_engine_counters(device: &Device, role: &str) {
    if std::env::var_os("XWARP_BENCH_COUNTERS").is_none_or(|v| v != "1") {
        return;
    }
    if let Some(c) = device.engine_counters() {
        eprintln!("xwarp-bench: {role} engine counters: {c:?}");
    }
}

/// The AF_XDP settings of the options.
pub fn xdp_config(args: &TestArgs, peer: Option<IpAddr>) -> Result<XdpConfig, String> {
    let interface = match &args.interface {
        Some(i) => i.clone(),
        None => default_interface(peer)?,
    };
    let mut cfg = XdpConfig::new(interface);
    // The address served: a client's of its peer's family, a server's `--bind` (0.0.0.0 or ::
    // stand for the interface's first address of that family).
    cfg.address = match peer {
        Some(IpAddr::V4(_)) => Some(std::net::Ipv4Addr::UNSPECIFIED.into()),
        Some(IpAddr::V6(_)) => Some(std::net::Ipv6Addr::UNSPECIFIED.into()),
        None => args.bind.parse().ok(),
    };
    cfg.queue = args.queue();
    cfg.queues = args.qps;
    cfg.mode = args.engine().mode();
    cfg.tx_checksum = args.tx_checksum.offload();
    Ok(cfg)
}

/// The interface to attach to when none is named: the route's towards `peer`, or else the only
/// non-loopback interface of this namespace.
fn default_interface(peer: Option<IpAddr>) -> Result<String, String> {
    if let Some(dst) = peer {
        let oif = afxdp::netlink::RtNetlink::new()
            .and_then(|mut nl| nl.route_get(dst))
            .map_err(|e| format!("no route to {dst} ({e}); name the interface with --interface"))?
            .oif;
        let name = interface_name(oif)
            .ok_or_else(|| format!("no interface with index {oif}; use --interface"))?;
        if name == "lo" {
            return Err(format!(
                "the route to {dst} goes through lo; the xdp transport needs a real interface"
            ));
        }
        return Ok(name);
    }
    let names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map_err(|e| format!("cannot list interfaces ({e}); use --interface"))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n != "lo")
        .collect();
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err("no network interface besides lo; use --interface".into()),
        many => Err(format!(
            "several interfaces ({}): name one with --interface",
            many.join(", ")
        )),
    }
}

/// The name of interface `index` (from sysfs).
fn interface_name(index: u32) -> Option<String> {
    std::fs::read_dir("/sys/class/net").ok()?.find_map(|e| {
        let e = e.ok()?;
        let idx = std::fs::read_to_string(e.path().join("ifindex")).ok()?;
        (idx.trim().parse::<u32>().ok()? == index).then(|| e.file_name().into_string().ok())?
    })
}

/// The connection settings from the options.
pub fn connection_config(args: &TestArgs) -> ConnectionConfig {
    let mut c = ConnectionConfig::default()
        .with_mpa(match args.revision {
            0 => mpa::StartupConfig::strict_draft(),
            1 => mpa::StartupConfig::rfc5044(),
            _ => mpa::StartupConfig::default(),
        })
        .with_ird(args.ird)
        .with_ord(args.ord);
    let rtr = args
        .p2p
        .iter()
        .map(|t| t.rtr())
        .fold(mpa::RtrTypes::NONE, mpa::RtrTypes::with);
    if !rtr.is_empty() {
        c.mpa.p2p_offer = rtr;
        c.mpa.p2p_accept = rtr;
    }
    c.mpa.want_markers = args.markers;
    c.mpa.want_crc = !args.no_crc;
    c.mpa.timeout = Duration::from_secs(args.timeout);
    c
}

/// Resolves `host` (name or address) with `port`, preferring IPv4.
pub fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve '{host}': {e}"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("cannot resolve '{host}': no address"))
}

/// A connected test endpoint.
pub struct Session {
    // Field order is drop order: the queue pair closes before its memory is deregistered.
    /// The queue pair.
    pub qp: QueuePair,
    /// The registered buffer.
    pub mr: MemoryRegion,
    /// Send, Write and Read completions.
    pub send_cq: CompletionQueue,
    /// Receive completions.
    pub recv_cq: CompletionQueue,
    /// The peer's buffer.
    pub remote: BufferInfo,
    /// Message size.
    pub size: usize,
    /// `-b`: the client asked the server to stream too.
    pub bidirectional: bool,
    /// `-b`: the server's report of its stream, once the client has it.
    pub peer_report: Option<StreamReport>,
    data_slots: usize,
    ctrl_tx_next: usize,
    stall: Duration,
    _device: Device,
}

/// What a test needs registered.
struct Resources {
    device: Device,
    init: QpInit,
    mr: MemoryRegion,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
}

impl Resources {
    fn into_session(
        self,
        qp: QueuePair,
        remote: BufferInfo,
        req: &Request,
        data_slots: usize,
    ) -> Session {
        Session {
            bidirectional: req.bidirectional,
            peer_report: None,
            qp,
            mr: self.mr,
            send_cq: self.send_cq,
            recv_cq: self.recv_cq,
            remote,
            size: req.size as usize,
            data_slots,
            ctrl_tx_next: 0,
            stall: stall_window(),
            _device: self.device,
        }
    }
}

fn resources(device: Device, size: usize, data_slots: usize) -> Result<Resources, String> {
    let pd = device.alloc_pd();
    let send_cq = device.create_cq();
    let recv_cq = device.create_cq();
    let len = size * data_slots + CTRL_LEN * CTRL_SLOTS;
    let mr = pd
        .register(len, Access::ALL)
        .map_err(|e| format!("cannot register {len} bytes: {e}"))?;
    Ok(Resources {
        init: QpInit {
            pd,
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
        },
        device,
        mr,
        send_cq,
        recv_cq,
    })
}

fn info(mr: &MemoryRegion) -> BufferInfo {
    BufferInfo {
        stag: mr.stag(),
        addr: mr.addr() as u64,
        len: mr.len() as u64,
    }
}

impl Session {
    /// Client: connects to `addr` asking for `req` (its buffer filled in here).
    pub fn connect(
        device: Device,
        addr: SocketAddr,
        mut req: Request,
        config: &ConnectionConfig,
        data_slots: usize,
        ctrl_recvs: bool,
    ) -> Result<Self, String> {
        let size = req.size as usize;
        let r = resources(device, size, data_slots)?;
        req.buffer = info(&r.mr);
        let qp = match r
            .device
            .connect(addr, r.init.clone(), config, &req.encode())
        {
            Ok(qp) => qp,
            Err(ConnectError::Rejected { private_data }) => {
                return Err(match Reply::decode(&private_data).map(|r| r.status) {
                    Some(HsStatus::WrongTest(t)) => format!(
                        "the server at {addr} runs {}, not {}",
                        t.name(),
                        req.test.name()
                    ),
                    Some(HsStatus::BadSize) => {
                        format!("the server at {addr} refused size {}", req.size)
                    }
                    _ => format!("the server at {addr} refused the test"),
                })
            }
            Err(e) => return Err(format!("cannot reach {addr}: {e}")),
        };
        let reply = Reply::decode(qp.peer_private_data())
            .filter(|r| r.status == HsStatus::Ok)
            .ok_or_else(|| format!("{addr} is not an xwarp-bench server (bad handshake)"))?;
        let mut s = r.into_session(qp, reply.buffer, &req, data_slots);
        if ctrl_recvs {
            s.post_ctrl_recvs()?;
        }
        Ok(s)
    }

    /// Server: accepts `incoming` for `req`, posting before the Reply goes out either
    /// `data_recvs` receive buffers (data slots 0..data_recvs) or, when that is 0, the control
    /// receives (receives are consumed in posting order, so the two never mix).
    pub fn accept(
        device: Device,
        incoming: Incoming,
        req: &Request,
        data_slots: usize,
        data_recvs: usize,
    ) -> Result<Self, String> {
        let size = req.size as usize;
        let r = resources(device, size, data_slots)?;
        let reply = Reply {
            status: HsStatus::Ok,
            buffer: info(&r.mr),
        };
        let mr = &r.mr;
        let qp = incoming
            .accept_with(r.init.clone(), &reply.encode(), |qp| {
                for i in 0..data_recvs {
                    qp.post_recv(i as u64, mr, slot(size, i))?;
                }
                if data_recvs == 0 {
                    for i in CTRL_TX_SLOTS..CTRL_SLOTS {
                        qp.post_recv(CTRL_WR | i as u64, mr, ctrl_slot(size * data_slots, i))?;
                    }
                }
                Ok(())
            })
            .map_err(|e| format!("accepting the client failed: {e}"))?;
        Ok(r.into_session(qp, req.buffer, req, data_slots))
    }

    fn post_ctrl_recvs(&mut self) -> Result<(), String> {
        for i in CTRL_TX_SLOTS..CTRL_SLOTS {
            self.post_ctrl_recv(i)?;
        }
        Ok(())
    }

    fn ctrl_base(&self) -> usize {
        self.size * self.data_slots
    }

    fn post_ctrl_recv(&self, i: usize) -> Result<(), String> {
        self.qp
            .post_recv(CTRL_WR | i as u64, &self.mr, ctrl_slot(self.ctrl_base(), i))
            .map_err(|e| format!("post_recv: {e}"))
    }

    /// Number of data slots.
    pub fn data_slots(&self) -> usize {
        self.data_slots
    }

    /// Data slot `i`.
    pub fn slot(&self, i: usize) -> Range<usize> {
        slot(self.size, i)
    }

    /// The data slot a receive completion landed in; `None` for a control slot (which
    /// [`Session::take_ctrl`] reposts itself).
    pub fn data_slot_of(&self, c: &Completion) -> Option<usize> {
        (c.wr_id & CTRL_WR == 0).then_some(c.wr_id as usize)
    }

    /// The peer's data slot 0.
    pub fn remote_slot0(&self) -> RemoteAddr {
        RemoteAddr {
            stag: self.remote.stag,
            to: 0,
        }
    }

    /// Sends a control message from the next control transmit slot.
    pub fn send_ctrl(&mut self, m: Ctrl) -> Result<(), String> {
        let i = self.ctrl_tx_next;
        self.ctrl_tx_next = (i + 1) % CTRL_TX_SLOTS;
        let r = ctrl_slot(self.ctrl_base(), i);
        let mut b = [0u8; CTRL_LEN];
        let len = match m {
            Ctrl::Fin => {
                b[0] = FIN;
                1
            }
            Ctrl::Ack => {
                b[..2].copy_from_slice(b"XA");
                2
            }
            Ctrl::Credits(n) => {
                b[..2].copy_from_slice(b"XC");
                b[2..6].copy_from_slice(&n.to_be_bytes());
                6
            }
            Ctrl::Report(r) => {
                b[..2].copy_from_slice(b"XR");
                b[2..10].copy_from_slice(&r.messages.to_be_bytes());
                b[10..18].copy_from_slice(&r.nanos.to_be_bytes());
                b[18..26].copy_from_slice(&r.peak_gbps.to_bits().to_be_bytes());
                REPORT_LEN
            }
        };
        self.mr.write(r.start, &b[..len]);
        self.qp
            .post_send(u64::MAX, &self.mr, r.start..r.start + len)
            .map_err(|e| format!("post_send: {e}"))
    }

    /// Reads the control message of a receive completion `c` and reposts its buffer. Data
    /// receives (`None`) are left to the caller, except a 1-byte FIN in a data slot.
    pub fn take_ctrl(&self, c: &Completion) -> Result<Option<Ctrl>, String> {
        let (range, ctrl) = if c.wr_id & CTRL_WR != 0 {
            let i = (c.wr_id & !CTRL_WR) as usize;
            (ctrl_slot(self.ctrl_base(), i), Some(i))
        } else {
            (self.slot(c.wr_id as usize), None)
        };
        let mut b = [0u8; REPORT_LEN];
        let n = (c.byte_len as usize).min(REPORT_LEN).min(range.len());
        self.mr.read(range.start, &mut b[..n]);
        let u64_at = |at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[at..at + 8]);
            u64::from_be_bytes(a)
        };
        let m = match (n, b[0], &b[..2.min(n)]) {
            (1, FIN, _) if c.byte_len == 1 => Some(Ctrl::Fin),
            (_, _, b"XA") if ctrl.is_some() => Some(Ctrl::Ack),
            (6, _, b"XC") if ctrl.is_some() => {
                Some(Ctrl::Credits(u32::from_be_bytes([b[2], b[3], b[4], b[5]])))
            }
            (REPORT_LEN, _, b"XR") if ctrl.is_some() => Some(Ctrl::Report(StreamReport {
                messages: u64_at(2),
                nanos: u64_at(10),
                peak_gbps: f64::from_bits(u64_at(18)),
            })),
            _ => None,
        };
        if let Some(i) = ctrl {
            self.post_ctrl_recv(i)?;
            if m.is_none() {
                return Err("unexpected control message".into());
            }
        }
        Ok(m)
    }

    /// Busy-polls `f` until it yields, failing when the connection ends or stalls: nothing
    /// yielded and no byte arrived on the device for the stall window (a write_bw server waits
    /// for the FIN all through the client's stream, which it sees only as bytes arriving).
    pub fn spin<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> Result<T, Ended> {
        let mut spins = 0u32;
        // The stall clock starts at the first check (1024 spins in), not on every call: a
        // server takes each message's completion through here, and a clock read per message
        // was 2 % of its core in send_bw. The bytes received are read when it starts and when
        // the window is over.
        let mut since: Option<Instant> = None;
        let mut rx_bytes = 0u64;
        // An inline engine runs in this loop: nothing else needs this CPU, so give it up only
        // now and then. Otherwise a transport thread (kernel driver, engine thread) may.
        let yield_mask = if self._device.is_inline() { 1023 } else { 15 };
        loop {
            fence(Ordering::Acquire);
            if let Some(v) = f() {
                return Ok(v);
            }
            spins = spins.wrapping_add(1);
            if spins & yield_mask == 0 {
                std::thread::yield_now();
            }
            if spins & 1023 == 0 {
                if !self.qp.is_connected() {
                    return Err(Ended::Closed(
                        self.qp
                            .error()
                            .filter(|e| *e != QpError::PeerClosed)
                            .map(|e| e.to_string()),
                    ));
                }
                let start = *since.get_or_insert_with(|| {
                    rx_bytes = self._device.counters().rx_bytes;
                    Instant::now()
                });
                if start.elapsed() > self.stall {
                    let now_rx = self._device.counters().rx_bytes;
                    if now_rx == rx_bytes {
                        return Err(Ended::Stalled(what.to_string(), self.stall));
                    }
                    // Still streaming: a new window.
                    rx_bytes = now_rx;
                    since = Some(Instant::now());
                }
            }
            if spins == u32::MAX {
                since = Some(Instant::now());
            }
        }
    }

    /// Busy-polls until the byte at `offset` of the local buffer is `value` (an RDMA Write
    /// landed), draining send completions meanwhile: polling a completion queue is what drives
    /// an inline engine.
    pub fn spin_on_byte(&self, what: &str, offset: usize, value: u8) -> Result<(), Ended> {
        // The byte first: draining (which runs an inline engine once more whenever the queue
        // is empty) comes after the data is seen, not between its arrival and the check.
        self.spin(what, || {
            if self.byte_at(offset) == value {
                return Some(Ok(()));
            }
            self.drain_send().err().map(Err)
        })?
    }

    /// The next completion of `cq` (busy-polled); a failed one is an error.
    pub fn next_completion(&self, cq: &CompletionQueue, what: &str) -> Result<Completion, Ended> {
        let c = self.spin(what, || cq.poll_one())?;
        check(&c)?;
        Ok(c)
    }

    /// The next completions of `cq`, up to `max` (busy-polled until there is one), into
    /// `out` (cleared first): perftest's batched `ibv_poll_cq`. A failed one is an error.
    pub fn next_completions(
        &self,
        cq: &CompletionQueue,
        out: &mut Vec<Completion>,
        max: usize,
        what: &str,
    ) -> Result<(), Ended> {
        out.clear();
        self.spin(what, || (cq.poll(out, max) > 0).then_some(()))?;
        out.iter().try_for_each(check)
    }

    /// Drains the send queue's completions without waiting; returns how many.
    pub fn drain_send(&self) -> Result<usize, Ended> {
        let mut n = 0;
        while let Some(c) = self.send_cq.poll_one() {
            check(&c)?;
            n += 1;
        }
        Ok(n)
    }

    /// The byte at `offset` of the local buffer.
    pub fn byte_at(&self, offset: usize) -> u8 {
        let mut b = [0u8; 1];
        self.mr.read(offset, &mut b);
        b[0]
    }

    /// Waits until the peer closes (the server's end of a test the client drives).
    pub fn wait_closed(&self) -> Result<(), String> {
        loop {
            if !self.qp.is_connected() {
                return Ok(());
            }
            let _ = self.drain_send();
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn check(c: &Completion) -> Result<(), Ended> {
    if c.status == Status::Success {
        Ok(())
    } else if c.status == Status::Flushed {
        // the queue pair closed with this request outstanding
        Err(Ended::Closed(None))
    } else {
        Err(Ended::Failed(format!(
            "{:?} work request {} finished {:?}",
            c.opcode, c.wr_id, c.status
        )))
    }
}

/// Data slot `i` for messages of `size`.
pub fn slot(size: usize, i: usize) -> Range<usize> {
    i * size..(i + 1) * size
}

fn ctrl_slot(base: usize, i: usize) -> Range<usize> {
    let s = base + i * CTRL_LEN;
    s..s + CTRL_LEN
}

/// Why a polling loop stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The connection closed (with the queue pair's error, if any).
    Closed(Option<String>),
    /// Nothing happened (no byte arrived) for the stall window (10 s) while waiting for this.
    Stalled(String, Duration),
    /// A work request failed.
    Failed(String),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed(None) => write!(f, "the peer closed the connection"),
            Self::Closed(Some(e)) => write!(f, "the connection failed: {e}"),
            Self::Stalled(w, d) => write!(f, "no progress for {} s waiting for {w}", d.as_secs()),
            Self::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl From<Ended> for String {
    fn from(e: Ended) -> Self {
        e.to_string()
    }
}
