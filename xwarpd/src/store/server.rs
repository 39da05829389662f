//! The store's server: a listener that admits clients (allow-list, connection cap) and gives
//! each admitted connection a thread, its own protection domain and its own registration of
//! the file, then serves it ([`super::connection`]).
//!
//! Isolation: a connection's queue pair and buffers live in a protection domain of their own,
//! so nothing a peer sends reaches another connection's buffers (its STags do not even exist in
//! that domain). The file is still served zero-copy: its one shared, locked mapping is
//! registered in each connection's domain for local access only
//! ([`FileRegion::register_in`]), at the cost of one STag per connection and no extra memory.
//! The file's own registration ([`MappedFile::register`]) sits in a domain no queue pair joins.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::time::Duration;

use super::threads::{Acceptor, ConnThreads};
use ipnet::IpNet;
use rpcrdma::negotiation::PrivateData;

use super::admission::{AllowList, Gate, Slot};
use super::connection::Conn;
use super::fair_share::DEFAULT_SILENT_AFTER;
use super::stats::StoreStats;
use super::INLINE_SIZE;
use dataplane::{
    AcceptError, Access, ConnectionConfig, Device, FileRegion, Incoming, Listener, MappedFile,
    QpInit, SourceShare,
};

/// Block size reported by GETATTR.
pub const BLOCK_SIZE: u32 = 4096;
/// Default cap on connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 64;
/// Default idle timeout: a connection with no call for this long is closed.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// How a store is served.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Credits (receive buffers) per connection.
    pub credits: u32,
    /// Largest READ or WRITE per call.
    pub max_io: u32,
    /// MPA and queue settings of accepted connections.
    pub connection: ConnectionConfig,
    /// The client networks admitted; others are rejected (MPA Reject) and counted.
    pub allow: AllowList,
    /// Most connections served at once (each has a thread and a few locked buffers); more
    /// are rejected and counted, unless a silent connection gives way (counted).
    pub max_connections: u32,
    /// Each source's share of `max_connections` (default a quarter, one address or IPv6 /64
    /// a source): more from one source are rejected and counted.
    pub source_share: SourceShare,
    /// A connection with no call for this long is silent: when the server is full, the silent
    /// one idle longest gives way to a new client (default [`DEFAULT_SILENT_AFTER`];
    /// `Duration::MAX`: never).
    pub silent_after: Duration,
    /// A connection with no call for this long is closed and counted.
    pub idle_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            credits: 16,
            max_io: super::DEFAULT_MAX_IO,
            connection: ConnectionConfig::default(),
            allow: AllowList::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            source_share: default_source_share(DEFAULT_MAX_CONNECTIONS),
            silent_after: DEFAULT_SILENT_AFTER,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// The default share of a connection cap per source: a quarter of it (at least one).
pub fn default_source_share(max_connections: u32) -> SourceShare {
    SourceShare {
        per_source: (max_connections as usize / 4).max(1),
        ..SourceShare::default()
    }
}

/// Why a store could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The allow-list cannot be resolved for the listen address.
    #[error("store.allow: {0}")]
    Allow(#[from] super::admission::AllowError),
    /// Listening failed.
    #[error(transparent)]
    Listen(#[from] dataplane::ConnectError),
    /// The file could not be mapped and registered.
    #[error("registering the store file: {0}")]
    Register(#[from] dataplane::RegisterError),
    /// The acceptor thread could not start.
    #[error("starting the acceptor: {0}")]
    Thread(std::io::Error),
    /// The OS random source gave no boot verifier.
    #[error("drawing the store's boot verifier from the OS random source: {0}")]
    Random(std::io::Error),
}

/// A running store service. Dropping it (or [`StoreServer::shutdown`]) stops accepting, closes
/// every connection and joins their threads.
#[derive(Debug)]
pub struct StoreServer {
    local: SocketAddr,
    acceptor: Acceptor,
    stats: Arc<StoreStats>,
    file: Arc<FileRegion>,
    verifier: u64,
    allowed: Vec<IpNet>,
}

impl StoreServer {
    /// Serves `file` on `addr` through `device` to the clients `opts.allow` admits. The whole
    /// file is mapped and mlock'ed (a memory-lock limit too small for it fails here).
    pub fn start(
        device: &Device,
        addr: SocketAddr,
        file: MappedFile,
        opts: ServerOptions,
    ) -> Result<Self, StartError> {
        let allowed = opts.allow.resolve(addr.ip())?;
        let listener = device.listen(addr, opts.connection.clone())?;
        let local = listener.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(StoreStats::default());
        let file = Arc::new(file.register(&device.alloc_pd())?);
        let verifier = dataplane::os_random_u64().map_err(StartError::Random)?;
        let ctx = Ctx {
            local,
            device: device.clone(),
            file: file.clone(),
            opts,
            stats: stats.clone(),
            stop: stop.clone(),
            verifier,
        };
        let nets = allowed.clone();
        let acceptor = Acceptor::spawn("xwarp-store", stop.clone(), move || {
            accept_loop(listener, ctx, nets)
        })
        .map_err(StartError::Thread)?;
        let allow: Vec<String> = allowed.iter().map(|n| n.to_string()).collect();
        tracing::info!(%local, size = file.len(), allow = %allow.join(","), "store serving");
        Ok(Self {
            local,
            acceptor,
            stats,
            file,
            verifier,
            allowed,
        })
    }

    /// The store this service serves (its file and boot verifier), to serve it over another
    /// transport too ([`crate::oncrpc::TcpStoreServer`]).
    pub fn shared(&self) -> crate::oncrpc::SharedStore {
        crate::oncrpc::SharedStore {
            file: self.file.clone(),
            verifier: self.verifier,
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The client networks admitted.
    pub fn allowed(&self) -> &[IpNet] {
        &self.allowed
    }

    /// Live counters of the service and its connections.
    pub fn stats(&self) -> &Arc<StoreStats> {
        &self.stats
    }

    /// Stops: no new connections, open ones are closed, the file is synced.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.acceptor.stop();
        if let Err(e) = self.file.sync(0, 0) {
            tracing::warn!(error = %e, "final sync of the store failed");
        }
    }
}

impl Drop for StoreServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// What every connection of a server shares.
pub(crate) struct Ctx {
    /// The server's bound address.
    pub(crate) local: SocketAddr,
    pub(crate) device: Device,
    pub(crate) file: Arc<FileRegion>,
    pub(crate) opts: ServerOptions,
    pub(crate) stats: Arc<StoreStats>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) verifier: u64,
}

fn accept_loop(listener: Listener, ctx: Ctx, allowed: Vec<IpNet>) {
    let ctx = Arc::new(ctx);
    let o = &ctx.opts;
    let mut gate = Gate::new(allowed, o.max_connections, o.source_share, o.silent_after);
    // At most `max_connections` threads: one per slot.
    let conns = ConnThreads::default();
    while !ctx.stop.load(Ordering::Acquire) {
        let inc = match listener.accept_timeout(Duration::from_millis(100)) {
            Ok(inc) => inc,
            Err(AcceptError::Timeout) => continue,
            Err(AcceptError::Closed) => break,
        };
        let Ok(slot) = gate.admit(inc.peer_addr().ok(), &ctx.stats, "rpc-rdma") else {
            let _ = inc.reject(b"");
            continue;
        };
        let c = ctx.clone();
        conns.spawn("xwarp-store-conn", move || serve_incoming(inc, &c, slot));
    }
    conns.join();
}

/// Sets up an admitted connection: its own protection domain, the file registered in it, its
/// receive and send buffers; accepts with its receives posted, then serves it while it holds
/// `slot`.
fn serve_incoming(inc: Incoming, ctx: &Ctx, slot: Slot) {
    #[cfg(debug_assertions)]
    crate::daemon::test_hooks::panic_if("store");
    let peer = inc
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let client = PrivateData::decode(inc.private_data());
    let mine = PrivateData {
        remote_invalidation: false,
        send_size: INLINE_SIZE,
        recv_size: INLINE_SIZE,
    };
    // Replies may be as long as our send size and the client's receive buffers allow.
    let (_, max_inline_reply) = PrivateData::inline_limits(
        &client.unwrap_or(PrivateData {
            remote_invalidation: false,
            send_size: rpcrdma::planner::DEFAULT_INLINE,
            recv_size: rpcrdma::planner::DEFAULT_INLINE,
        }),
        Some(&mine),
    );
    let pd = ctx.device.alloc_pd();
    let scq = ctx.device.create_cq();
    let rcq = ctx.device.create_cq();
    let credits = ctx.opts.credits.max(1);
    let regions = (|| {
        Ok::<_, dataplane::RegisterError>((
            pd.register(INLINE_SIZE as usize * credits as usize, Access::LOCAL_WRITE)?,
            pd.register(INLINE_SIZE as usize, Access::LOCAL_WRITE)?,
            ctx.file.register_in(&pd)?,
            pd.register(super::MAX_LONG_MESSAGE as usize, Access::LOCAL_WRITE)?,
        ))
    })();
    let (recv_mr, send_mr, file_mr, long_mr) = match regions {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot register connection buffers: rejecting");
            let _ = inc.reject(b"");
            return;
        }
    };
    let init = QpInit {
        pd: pd.clone(),
        send_cq: scq.clone(),
        recv_cq: rcq.clone(),
    };
    let posted = inc.accept_with(init, &mine.encode(), |qp| {
        for i in 0..credits as usize {
            let s = i * INLINE_SIZE as usize;
            qp.post_recv(i as u64, &recv_mr, s..s + INLINE_SIZE as usize)?;
        }
        Ok(())
    });
    let qp = match posted {
        Ok(qp) => qp,
        Err(e) => {
            tracing::info!(%peer, error = %e, "store connection failed during accept");
            return;
        }
    };
    #[cfg(test)]
    tests_support::record(ctx.local, &recv_mr, &send_mr, &file_mr);
    let stats = ctx.stats.add_conn(peer.clone());
    tracing::info!(%peer, server = %ctx.local, qp = qp.num(), "store connection up");
    let mut conn = Conn::new(
        qp,
        (scq, rcq),
        pd,
        [recv_mr, send_mr, file_mr, long_mr],
        credits,
        max_inline_reply,
        stats,
    );
    let why = conn.run(ctx, &slot);
    tracing::info!(%peer, reason = why, "store connection closed");
}

/// What tests of the crate see of a server's connections: the STags of their buffers.
#[cfg(test)]
pub(crate) mod tests_support {
    use std::net::SocketAddr;
    use std::sync::Mutex;

    use dataplane::MemoryRegion;

    /// STags of a connection's receive buffers, send buffer and file registration.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct ConnStags {
        pub recv: u32,
        pub send: u32,
        pub file: u32,
    }

    static CONNS: Mutex<Vec<(SocketAddr, ConnStags)>> = Mutex::new(Vec::new());

    pub(super) fn record(
        server: SocketAddr,
        recv: &MemoryRegion,
        send: &MemoryRegion,
        file: &MemoryRegion,
    ) {
        let s = ConnStags {
            recv: recv.stag(),
            send: send.stag(),
            file: file.stag(),
        };
        CONNS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((server, s));
    }

    /// The STags of the connections the server at `server` accepted, in order.
    pub(crate) fn stags_of(server: SocketAddr) -> Vec<ConnStags> {
        let g = CONNS.lock().unwrap_or_else(|p| p.into_inner());
        g.iter()
            .filter(|(a, _)| *a == server)
            .map(|(_, s)| *s)
            .collect()
    }
}
