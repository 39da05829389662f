//! The kernel transport's passive side: a listener that accepts TCP connections and runs the
//! MPA responder's first half (reading and validating the Request) on each in its own thread,
//! so a slow or hostile peer never blocks the others. Only connections with a place in the
//! listener's backlog ([`super::backlog`], fair among sources) get a thread: at most the
//! backlog's capacity of them read Requests or wait for the application at once.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpa::{ReadDepths, RequestInfo, Responder, StartupEvent};

use super::backlog::{KernelBacklog, PendingPlace};
use super::InlineDrivers;
use crate::counters::DeviceCounters;
use crate::device::{prepare_queue_pair, QpInit};
use crate::{AcceptError, ConnectError, ConnectionConfig, PostError, QueuePair};

/// Kernel transport: a connection whose MPA Request arrived and was well formed; the application accepts or
/// rejects it.
#[derive(Debug)]
pub(crate) struct KernelIncoming {
    stream: TcpStream,
    responder: Responder,
    /// What the Request said.
    pub(crate) request: RequestInfo,
    /// Octets that followed the Request (none from a conforming Initiator).
    leftover: Vec<u8>,
    /// The listener's settings, read depths changeable before the accept.
    pub(crate) config: ConnectionConfig,
    counters: Arc<DeviceCounters>,
    /// The device's inline connections, when it runs inline (set by the listener).
    pub(crate) inline: Option<Arc<InlineDrivers>>,
    /// Its place in the listener's backlog, left when the application accepts or rejects it
    /// (or drops it).
    _place: PendingPlace,
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
        deepen_accept_queue(&tcp)?;
        tcp.set_nonblocking(true)?;
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::sync_channel(64);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let acceptor = crate::library_thread::spawn("xwarp-listen", move || {
            accept_loop(tcp, tx, stop2, config, counters)
        })?;
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

/// The kernel's queue of connections waiting for `accept`, as deep as the system allows
/// (`net.core.somaxconn`, 4096 by default) instead of the standard library's 128: a burst of
/// handshakes waits there for the acceptor's decision (a place in the backlog, or a reset)
/// rather than having SYNs dropped, which would cost every client caught in it a retry after a
/// second or more.
fn deepen_accept_queue(tcp: &TcpListener) -> io::Result<()> {
    // Safety: listen(2) on a socket `tcp` owns and keeps open for the call; calling it again on
    // a listening socket only changes its queue length (Linux caps it at somaxconn).
    if unsafe { libc::listen(tcp.as_raw_fd(), libc::c_int::MAX) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn accept_loop(
    tcp: TcpListener,
    tx: SyncSender<KernelIncoming>,
    stop: Arc<AtomicBool>,
    config: ConnectionConfig,
    counters: Arc<DeviceCounters>,
) {
    let backlog = KernelBacklog::new(&config);
    while !stop.load(Ordering::Acquire) {
        match tcp.accept() {
            Ok((stream, peer)) => {
                DeviceCounters::inc(&counters.tcp_accepted);
                // Refused: reset as `stream` drops.
                let Some(place) = backlog.admit(&stream, peer.ip(), &counters) else {
                    continue;
                };
                let tx = tx.clone();
                let config = config.clone();
                let counters = counters.clone();
                let _ = crate::library_thread::spawn("xwarp-startup", move || {
                    responder_startup(stream, place, tx, config, counters)
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Sleep in poll(2) until a connection arrives (or 100 ms, to see `stop`).
                let _ = super::wait_readable(tcp.as_raw_fd(), 100);
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Reads the Request with the startup timeout (MPA-90, MPA-92). Malformed frames close TCP and
/// are counted (MPA-79, MPA-86, MPA-91, MPA-95, MPA-102); valid ones go to `accept`, still
/// holding their `place` in the backlog.
fn responder_startup(
    mut stream: TcpStream,
    place: PendingPlace,
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
                    _place: place,
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
