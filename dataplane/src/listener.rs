//! Passive side: a listener that accepts TCP connections and runs the MPA responder's first
//! half (reading and validating the Request) on each in its own thread, so a slow or hostile
//! peer never blocks the others.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpa::{ReadDepths, RequestInfo, Responder, StartupEvent};

use crate::counters::DeviceCounters;
use crate::device::{prepare_queue_pair, QpInit};
use crate::kernel::InlineDrivers;
use crate::xdp_device::{XdpIncoming, XdpListener};
use crate::{ConnectError, ConnectionConfig, PostError, QueuePair};

/// Kernel transport: a connection whose MPA Request arrived and was well formed; the application accepts or
/// rejects it.
#[derive(Debug)]
pub(crate) struct KernelIncoming {
    stream: TcpStream,
    responder: Responder,
    request: RequestInfo,
    /// Octets that followed the Request (none from a conforming Initiator).
    leftover: Vec<u8>,
    config: ConnectionConfig,
    counters: Arc<DeviceCounters>,
    /// The device's inline connections, when it runs inline (set by the listener).
    inline: Option<Arc<InlineDrivers>>,
}

impl KernelIncoming {
    /// The peer's address.
    pub(crate) fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    pub(crate) fn accept_with(
        mut self,
        init: QpInit,
        private_data: &[u8],
        before_reply: impl FnOnce(&QueuePair) -> Result<(), PostError>,
    ) -> Result<QueuePair, ConnectError> {
        let depths = ReadDepths::capped(self.config.ird, self.config.ord);
        self.responder.accept(private_data, depths)?;
        let reply = self.responder.poll_transmit().unwrap_or_default();
        let negotiated = loop {
            match self.responder.poll_event() {
                Some(StartupEvent::Established(n)) => break n,
                Some(StartupEvent::Failed(e)) => return Err(ConnectError::Startup(e)),
                Some(_) => {}
                None => return Err(ConnectError::Startup(mpa::StartupError::ConnectionClosed)),
            }
        };
        let mut pending = prepare_queue_pair(
            &self.stream,
            &negotiated,
            &self.leftover,
            init,
            &self.config,
        )?;
        before_reply(&pending.qp).map_err(ConnectError::Post)?;
        self.stream.write_all(&reply)?;
        let inline = self.inline.as_deref();
        pending.start(self.stream, &self.config, &self.counters, inline)
    }

    /// Rejects: sends an MPA Reply with R=1 and `private_data`; MPA ends but TCP stays open
    /// (MPA-80), so the TCP stream is handed back.
    pub(crate) fn reject(mut self, private_data: &[u8]) -> Result<TcpStream, ConnectError> {
        let depths = ReadDepths::capped(self.config.ird, self.config.ord);
        self.responder.reject(private_data, depths)?;
        if let Some(bytes) = self.responder.poll_transmit() {
            self.stream.write_all(&bytes)?;
        }
        DeviceCounters::inc(&self.counters.startup_rejected);
        Ok(self.stream)
    }
}

/// Why `accept` returned without a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    /// No connection within the timeout.
    #[error("no incoming connection within the timeout")]
    Timeout,
    /// The listener was shut down.
    #[error("listener closed")]
    Closed,
}

/// An MPA listener (responder side).
#[derive(Debug)]
pub(crate) struct KernelListener {
    incoming: Mutex<Receiver<KernelIncoming>>,
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl KernelListener {
    pub(crate) fn bind(
        addr: SocketAddr,
        config: ConnectionConfig,
        counters: Arc<DeviceCounters>,
    ) -> Result<Self, ConnectError> {
        let tcp = TcpListener::bind(addr)?;
        tcp.set_nonblocking(true)?;
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::sync_channel(64);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let acceptor = std::thread::Builder::new()
            .name("xwarp-listen".into())
            .spawn(move || accept_loop(tcp, tx, stop2, config, counters))?;
        Ok(Self {
            incoming: Mutex::new(rx),
            local,
            stop,
            acceptor: Some(acceptor),
        })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub(crate) fn accept_timeout(&self, timeout: Duration) -> Result<KernelIncoming, AcceptError> {
        let rx = self.incoming.lock().unwrap_or_else(|p| p.into_inner());
        match rx.recv_timeout(timeout) {
            Ok(i) => Ok(i),
            Err(RecvTimeoutError::Timeout) => Err(AcceptError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(AcceptError::Closed),
        }
    }
}

impl Drop for KernelListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(
    tcp: TcpListener,
    tx: SyncSender<KernelIncoming>,
    stop: Arc<AtomicBool>,
    config: ConnectionConfig,
    counters: Arc<DeviceCounters>,
) {
    while !stop.load(Ordering::Acquire) {
        match tcp.accept() {
            Ok((stream, _)) => {
                DeviceCounters::inc(&counters.tcp_accepted);
                let tx = tx.clone();
                let config = config.clone();
                let counters = counters.clone();
                let _ = std::thread::Builder::new()
                    .name("xwarp-startup".into())
                    .spawn(move || responder_startup(stream, tx, config, counters));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Sleep in poll(2) until a connection arrives (or 100 ms, to see `stop`).
                let _ = crate::kernel::wait_readable(tcp.as_raw_fd(), 100);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Reads the Request with the startup timeout (MPA-90, MPA-92). Malformed frames close TCP and
/// are counted (MPA-79, MPA-86, MPA-91, MPA-95, MPA-102); valid ones go to `accept`.
fn responder_startup(
    mut stream: TcpStream,
    tx: SyncSender<KernelIncoming>,
    config: ConnectionConfig,
    counters: Arc<DeviceCounters>,
) {
    if stream.set_nonblocking(false).is_err() || stream.set_nodelay(true).is_err() {
        return;
    }
    let mut r = Responder::new(config.mpa, Instant::now());
    let mut buf = [0u8; 4096];
    let mut leftover = Vec::new();
    loop {
        let now = Instant::now();
        if r.poll_timeout().is_some_and(|t| now >= t) {
            r.handle_timeout(now);
        }
        match r.poll_event() {
            Some(StartupEvent::RequestReceived(request)) => {
                let inc = KernelIncoming {
                    stream,
                    responder: r,
                    request,
                    leftover,
                    config,
                    counters,
                    inline: None,
                };
                let _ = tx.send(inc);
                return;
            }
            Some(StartupEvent::Failed(e)) => {
                tracing::info!(error = %e, "MPA startup failed: closing");
                match e {
                    mpa::StartupError::Timeout => DeviceCounters::inc(&counters.startup_timeouts),
                    mpa::StartupError::ConnectionClosed => {}
                    _ => DeviceCounters::inc(&counters.startup_malformed),
                }
                return;
            }
            Some(_) => continue,
            None => {}
        }
        let wait = r
            .poll_timeout()
            .map(|t| t.saturating_duration_since(now))
            .unwrap_or(Duration::from_secs(1))
            .max(Duration::from_millis(1));
        if stream.set_read_timeout(Some(wait)).is_err() {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) => r.handle_close(),
            Ok(n) => {
                let used = r.handle_input(Instant::now(), &buf[..n]);
                leftover.extend_from_slice(&buf[used.min(n)..n]);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => r.handle_close(),
        }
    }
}

/// A connection whose MPA Request arrived and was well formed; the application accepts or
/// rejects it.
#[derive(Debug)]
pub struct Incoming {
    kind: IncomingKind,
    device_id: u64,
}

#[derive(Debug)]
enum IncomingKind {
    Kernel(KernelIncoming),
    Xdp(XdpIncoming),
}

impl Incoming {
    /// What the peer's MPA Request said: its private data, markers and CRC wishes, revision,
    /// and in Rev 2 its IRD/ORD and peer-to-peer offer (RFC 6581).
    pub fn request(&self) -> &RequestInfo {
        match &self.kind {
            IncomingKind::Kernel(k) => &k.request,
            IncomingKind::Xdp(x) => &x.req.info,
        }
    }

    /// The private data of the peer's MPA Request.
    pub fn private_data(&self) -> &[u8] {
        &self.request().private_data
    }

    /// The read depths this connection offers when accepted (RFC 6581 §5: a Rev 2 Reply
    /// negotiates them with the Request's; Rev 1 exchanges none and they apply as they are):
    /// at most `ird` Read Requests served at once, at most `ord` outstanding. By default the
    /// listener's [`ConnectionConfig`].
    pub fn with_read_depths(mut self, ird: u32, ord: u32) -> Self {
        let config = match &mut self.kind {
            IncomingKind::Kernel(k) => &mut k.config,
            IncomingKind::Xdp(x) => &mut x.config,
        };
        config.ird = ird;
        config.ord = ord;
        self
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        match &self.kind {
            IncomingKind::Kernel(k) => k.peer_addr(),
            IncomingKind::Xdp(x) => Ok(x.req.peer),
        }
    }

    /// True if the peer asked for markers in what we send.
    pub fn peer_wants_markers(&self) -> bool {
        self.request().peer_wants_markers
    }

    /// Accepts: sends the MPA Reply (R=0) with `private_data` and starts the queue pair.
    pub fn accept(self, init: QpInit, private_data: &[u8]) -> Result<QueuePair, ConnectError> {
        self.accept_with(init, private_data, |_| Ok(()))
    }

    /// As [`accept`](Self::accept), running `before_reply` on the new queue pair before the
    /// Reply goes out: the place to post receive buffers, so the peer's first Sends (which may
    /// follow the Reply at once) find them.
    pub fn accept_with(
        self,
        init: QpInit,
        private_data: &[u8],
        before_reply: impl FnOnce(&QueuePair) -> Result<(), PostError>,
    ) -> Result<QueuePair, ConnectError> {
        if init.pd.inner.device_id != self.device_id
            || init.send_cq.device_id != self.device_id
            || init.recv_cq.device_id != self.device_id
        {
            return Err(ConnectError::ForeignResource);
        }
        match self.kind {
            IncomingKind::Kernel(k) => k.accept_with(init, private_data, before_reply),
            IncomingKind::Xdp(x) => x.accept_with(init, private_data, before_reply),
        }
    }

    /// Rejects: sends an MPA Reply with R=1 and `private_data`; MPA ends but TCP stays open
    /// (MPA-80): the kernel transport hands the TCP stream back, the AF_XDP engine closes it
    /// gracefully (`None`).
    pub fn reject(self, private_data: &[u8]) -> Result<Option<TcpStream>, ConnectError> {
        match self.kind {
            IncomingKind::Kernel(k) => k.reject(private_data).map(Some),
            IncomingKind::Xdp(x) => x.reject(private_data).map(|()| None),
        }
    }
}

/// An MPA listener (responder side).
#[derive(Debug)]
pub struct Listener {
    kind: ListenerKind,
    device_id: u64,
    /// Kernel transport, inline device: accepted connections run there.
    inline: Option<Arc<InlineDrivers>>,
}

#[derive(Debug)]
enum ListenerKind {
    Kernel(KernelListener),
    Xdp(XdpListener),
}

impl Listener {
    pub(crate) fn bind(
        addr: SocketAddr,
        config: ConnectionConfig,
        counters: Arc<DeviceCounters>,
        device_id: u64,
        inline: Option<Arc<InlineDrivers>>,
    ) -> Result<Self, ConnectError> {
        Ok(Listener {
            kind: ListenerKind::Kernel(KernelListener::bind(addr, config, counters)?),
            device_id,
            inline,
        })
    }

    pub(crate) fn xdp(l: XdpListener, device_id: u64) -> Self {
        Listener {
            kind: ListenerKind::Xdp(l),
            device_id,
            inline: None,
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        match &self.kind {
            ListenerKind::Kernel(k) => k.local_addr(),
            ListenerKind::Xdp(x) => x.local,
        }
    }

    /// Waits for the next connection whose MPA Request was valid. Malformed requests never show
    /// up here: they are closed and counted.
    pub fn accept(&self) -> Result<Incoming, AcceptError> {
        loop {
            match self.accept_timeout(Duration::from_secs(3600)) {
                Err(AcceptError::Timeout) => continue,
                r => return r,
            }
        }
    }

    /// As [`accept`](Self::accept) with a timeout.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Incoming, AcceptError> {
        let kind = match &self.kind {
            ListenerKind::Kernel(k) => {
                let mut k = k.accept_timeout(timeout)?;
                k.inline = self.inline.clone();
                IncomingKind::Kernel(k)
            }
            ListenerKind::Xdp(x) => IncomingKind::Xdp(x.accept_timeout(timeout)?),
        };
        Ok(Incoming {
            kind,
            device_id: self.device_id,
        })
    }
}
