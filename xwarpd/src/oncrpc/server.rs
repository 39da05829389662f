//! The ONC RPC over TCP service: a listener (kernel TCP, or our own TCP on the xdp transport)
//! whose connections are admitted like the RPC-over-RDMA service's (allow-list, connection
//! cap, counted and logged refusals) and served each on its own thread ([`super::conn`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::time::Duration;

use crate::store::threads::{Acceptor, ConnThreads};
use dataplane::{Device, FileRegion, MappedFile};
use ipnet::IpNet;

use super::stream::{KernelListener, RpcListener};
use crate::store::admission::{AllowError, AllowList, Gate};
use crate::store::{
    default_source_share, StoreStats, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_IO, DEFAULT_SILENT_AFTER,
};
use dataplane::SourceShare;

/// The default port of the ONC RPC over TCP service (beside the RPC-over-RDMA one, 20049).
pub const DEFAULT_TCP_STORE_PORT: u16 = 20050;

/// Record overhead besides READ or WRITE data: RPC headers (AUTH_SYS credentials at most
/// 400 octets, a verifier) and the procedure's other fields, with room to spare.
pub const RECORD_OVERHEAD: u32 = 1024;

/// A store served by one or more services: its file and boot verifier.
#[derive(Debug, Clone)]
pub struct SharedStore {
    /// The mapped, registered file.
    pub file: Arc<FileRegion>,
    /// Changes whenever the server restarts (WRITE, COMMIT, GETATTR report it).
    pub verifier: u64,
}

impl SharedStore {
    /// Maps `file` and registers it on `device` (for a service of its own; a daemon that also
    /// serves RPC-over-RDMA shares [`crate::store::StoreServer::shared`]).
    pub fn open(device: &Device, file: MappedFile) -> Result<Self, StartError> {
        Ok(Self {
            file: Arc::new(file.register(&device.alloc_pd())?),
            verifier: dataplane::os_random_u64().map_err(StartError::Random)?,
        })
    }
}

/// How the store is served over TCP.
#[derive(Debug, Clone)]
pub struct TcpServerOptions {
    /// Largest READ or WRITE per call.
    pub max_io: u32,
    /// The client networks admitted; others are closed at once and counted.
    pub allow: AllowList,
    /// Most connections served at once; more are closed at once and counted, unless a silent
    /// connection gives way (counted).
    pub max_connections: u32,
    /// Each source's share of `max_connections` (default a quarter): more from one source are
    /// closed at once and counted.
    pub source_share: SourceShare,
    /// A connection with no call (and no octet) for this long is silent: when the service is
    /// full, the silent one idle longest gives way to a new client (default
    /// [`DEFAULT_SILENT_AFTER`]; `Duration::MAX`: never).
    pub silent_after: Duration,
    /// A connection with no call for this long is closed and counted.
    pub idle_timeout: Duration,
}

impl Default for TcpServerOptions {
    fn default() -> Self {
        Self {
            max_io: DEFAULT_MAX_IO,
            allow: AllowList::default(),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            source_share: default_source_share(DEFAULT_MAX_CONNECTIONS),
            silent_after: DEFAULT_SILENT_AFTER,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }
}

impl TcpServerOptions {
    /// The largest record a client may send: a WRITE of `max_io` plus headers. Longer records
    /// close the connection before their octets are read.
    pub fn max_record(&self) -> u32 {
        self.max_io.saturating_add(RECORD_OVERHEAD)
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The allow-list cannot be resolved for the listen address.
    #[error("store.allow: {0}")]
    Allow(#[from] AllowError),
    /// Listening failed.
    #[error("listening: {0}")]
    Listen(std::io::Error),
    /// The file could not be registered.
    #[error("registering the store file: {0}")]
    Register(#[from] dataplane::RegisterError),
    /// The acceptor thread could not start.
    #[error("starting the acceptor: {0}")]
    Thread(std::io::Error),
    /// The OS random source gave no boot verifier.
    #[error("drawing the store's boot verifier from the OS random source: {0}")]
    Random(std::io::Error),
}

/// What every connection of the service shares.
pub(crate) struct TcpCtx {
    pub(crate) store: SharedStore,
    pub(crate) opts: TcpServerOptions,
    pub(crate) stats: Arc<StoreStats>,
    pub(crate) stop: Arc<AtomicBool>,
}

/// A running ONC RPC over TCP service. Dropping it (or [`TcpStoreServer::shutdown`]) stops
/// accepting, closes every connection and joins their threads.
#[derive(Debug)]
pub struct TcpStoreServer {
    local: SocketAddr,
    acceptor: Acceptor,
    stats: Arc<StoreStats>,
    allowed: Vec<IpNet>,
}

impl TcpStoreServer {
    /// Serves `store` on kernel TCP at `addr`.
    pub fn start_kernel(
        addr: SocketAddr,
        store: SharedStore,
        opts: TcpServerOptions,
    ) -> Result<Self, StartError> {
        let allowed = opts.allow.resolve(addr.ip())?;
        let listener = KernelListener::bind(addr).map_err(StartError::Listen)?;
        Self::start(Box::new(listener), allowed, store, opts)
    }

    /// Serves `store` on our own TCP at `addr` through `device` (xdp transport), offering the
    /// TCP RDMA option when `tcp_rdma`.
    pub fn start_xdp(
        device: &Device,
        addr: SocketAddr,
        store: SharedStore,
        opts: TcpServerOptions,
        tcp_rdma: bool,
    ) -> Result<Self, StartError> {
        let allowed = opts.allow.resolve(addr.ip())?;
        let listener =
            super::xdp::XdpListener::bind(device, addr, tcp_rdma).map_err(StartError::Listen)?;
        Self::start(Box::new(listener), allowed, store, opts)
    }

    /// Serves `store` on the connections of `listener`, admitting the networks `allowed`
    /// (resolved from `opts.allow` for the listen address).
    pub fn start(
        listener: Box<dyn RpcListener>,
        allowed: Vec<IpNet>,
        store: SharedStore,
        opts: TcpServerOptions,
    ) -> Result<Self, StartError> {
        let local = listener.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(StoreStats::default());
        let ctx = Arc::new(TcpCtx {
            store,
            opts,
            stats: stats.clone(),
            stop: stop.clone(),
        });
        let o = &ctx.opts;
        let gate = Gate::new(
            allowed.clone(),
            o.max_connections,
            o.source_share,
            o.silent_after,
        );
        let acceptor = Acceptor::spawn("xwarp-store-tcp", stop.clone(), move || {
            accept_loop(listener, ctx, gate)
        })
        .map_err(StartError::Thread)?;
        let allow: Vec<String> = allowed.iter().map(|n| n.to_string()).collect();
        tracing::info!(%local, allow = %allow.join(","), "store serving ONC RPC over TCP");
        Ok(Self {
            local,
            acceptor,
            stats,
            allowed,
        })
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

    /// Stops: no new connections; open ones are closed.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.acceptor.stop();
    }
}

impl Drop for TcpStoreServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

fn accept_loop(listener: Box<dyn RpcListener>, ctx: Arc<TcpCtx>, mut gate: Gate) {
    // At most `max_connections` threads: one per slot.
    let conns = ConnThreads::default();
    while !ctx.stop.load(Ordering::Acquire) {
        let stream = match listener.accept_timeout(Duration::from_millis(100)) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "ONC RPC over TCP: accept failed");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        // Refused: dropped, which closes it.
        let Ok(slot) = gate.admit(stream.peer_addr().ok(), &ctx.stats, "onc-rpc-tcp") else {
            continue;
        };
        let c = ctx.clone();
        conns.spawn("xwarp-store-tcp-conn", move || {
            super::conn::serve(stream, &c, slot)
        });
    }
    conns.join();
}
