//! Passive side: a listener that accepts TCP connections and runs the MPA responder's first
//! half on each one in its own thread, so a slow or hostile peer never blocks the others.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::counters::Counters;
use crate::device::{establish, QpInit};
use crate::kernel::startup::{self, StartupError, StartupFrame};
use crate::{ConnectError, ConnectionConfig, QueuePair};

/// A connection whose MPA Request arrived and was well formed; the application accepts or
/// rejects it.
#[derive(Debug)]
pub struct Incoming {
    stream: TcpStream,
    request: StartupFrame,
    config: ConnectionConfig,
    counters: Arc<Counters>,
    device_id: u64,
}

impl Incoming {
    /// The private data of the peer's MPA Request.
    pub fn private_data(&self) -> &[u8] {
        &self.request.private_data
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.stream.peer_addr()
    }

    /// True if the peer asked for markers in what we send.
    pub fn peer_wants_markers(&self) -> bool {
        self.request.markers
    }

    /// Accepts: sends the MPA Reply (R=0) with `private_data` and starts the queue pair.
    pub fn accept(self, init: QpInit, private_data: &[u8]) -> Result<QueuePair, ConnectError> {
        self.config.mpa.check_private_data(private_data)?;
        if init.pd.inner.device_id != self.device_id
            || init.send_cq.device_id != self.device_id
            || init.recv_cq.device_id != self.device_id
        {
            return Err(ConnectError::ForeignResource);
        }
        let ours = StartupFrame {
            reply: true,
            markers: self.config.mpa.markers,
            crc: self.config.mpa.crc || self.request.crc,
            reject: false,
            revision: self.config.mpa.revision,
            private_data: private_data.to_vec(),
        };
        let mut stream = self.stream;
        startup::write_frame(&mut stream, &ours)?;
        Ok(establish(stream, &ours, &self.request, false, init, &self.config, &self.counters)?)
    }

    /// Rejects: sends an MPA Reply with R=1 and `private_data`; MPA ends but TCP stays open
    /// (MPA-80), so the TCP stream is handed back.
    pub fn reject(self, private_data: &[u8]) -> Result<TcpStream, ConnectError> {
        self.config.mpa.check_private_data(private_data)?;
        let f = StartupFrame {
            reply: true,
            markers: false,
            crc: self.config.mpa.crc,
            reject: true,
            revision: self.config.mpa.revision,
            private_data: private_data.to_vec(),
        };
        let mut stream = self.stream;
        startup::write_frame(&mut stream, &f)?;
        Counters::inc(&self.counters.startup_rejected);
        Ok(stream)
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
pub struct Listener {
    incoming: Mutex<Receiver<Incoming>>,
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Listener {
    pub(crate) fn bind(
        addr: SocketAddr,
        config: ConnectionConfig,
        counters: Arc<Counters>,
        device_id: u64,
    ) -> Result<Self, ConnectError> {
        config.mpa.validate()?;
        let tcp = TcpListener::bind(addr)?;
        tcp.set_nonblocking(true)?;
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::sync_channel(64);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let acceptor = std::thread::Builder::new()
            .name("xwarp-listen".into())
            .spawn(move || accept_loop(tcp, tx, stop2, config, counters, device_id))?;
        Ok(Self { incoming: Mutex::new(rx), local, stop, acceptor: Some(acceptor) })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Waits for the next connection whose MPA Request was valid. Malformed requests never show
    /// up here: they are closed and counted.
    pub fn accept(&self) -> Result<Incoming, AcceptError> {
        self.accept_timeout(Duration::from_secs(u64::from(u32::MAX)))
    }

    /// As [`accept`](Self::accept) with a timeout.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Incoming, AcceptError> {
        let rx = self.incoming.lock().unwrap_or_else(|p| p.into_inner());
        match rx.recv_timeout(timeout) {
            Ok(i) => Ok(i),
            Err(RecvTimeoutError::Timeout) => Err(AcceptError::Timeout),
            Err(RecvTimeoutError::Disconnected) => Err(AcceptError::Closed),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
    }
}

fn accept_loop(
    tcp: TcpListener,
    tx: SyncSender<Incoming>,
    stop: Arc<AtomicBool>,
    config: ConnectionConfig,
    counters: Arc<Counters>,
    device_id: u64,
) {
    while !stop.load(Ordering::Acquire) {
        match tcp.accept() {
            Ok((stream, _)) => {
                Counters::inc(&counters.tcp_accepted);
                let tx = tx.clone();
                let config = config.clone();
                let counters = counters.clone();
                let _ = std::thread::Builder::new().name("xwarp-startup".into()).spawn(move || {
                    responder_startup(stream, tx, config, counters, device_id)
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn responder_startup(
    mut stream: TcpStream,
    tx: SyncSender<Incoming>,
    config: ConnectionConfig,
    counters: Arc<Counters>,
    device_id: u64,
) {
    if stream.set_nonblocking(false).is_err() || stream.set_nodelay(true).is_err() {
        return;
    }
    let deadline = Instant::now() + config.mpa.startup_timeout;
    match startup::read_frame(&mut stream, false, &config.mpa, deadline) {
        Ok(request) => {
            let _ = tx.send(Incoming { stream, request, config, counters, device_id });
        }
        Err(StartupError::Malformed(why)) => {
            // MPA-79, MPA-86, MPA-91, MPA-95, MPA-102: close TCP, report locally.
            tracing::info!(why, "malformed MPA Request: closing");
            Counters::inc(&counters.startup_malformed);
        }
        Err(StartupError::Timeout) => {
            Counters::inc(&counters.startup_timeouts);
        }
        Err(StartupError::Io(_)) => {}
    }
}
