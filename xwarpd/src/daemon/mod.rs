//! xwarpd internals: configuration ([`config`]), lifecycle ([`run`]), the services it hosts
//! (the block store of [`crate::store`], echo listeners), its counters on a Unix control socket
//! ([`control`], read by `xwarpd stats`) and a Prometheus endpoint ([`metrics`]).
//!
//! Lifecycle: open the device on the configured transport (kernel, or xdp on an interface
//! queue through [`dataplane::Device::open_xdp`]), start the store and the listeners, the metrics
//! endpoint and the control socket, print one `xwarpd ready ...` line on stdout and tell the
//! service manager `READY=1` (`Type=notify`), then wait for SIGINT/SIGTERM (SIGHUP reloads, see
//! [`reload`]); on either, stop accepting, close connections (queued work flushed), sync the
//! store, remove the control socket, drop the device (xdp: engine stopped, XDP program
//! detached, UMEM freed), and return. A panic in any thread ([`supervisor`]) stops it the same
//! way, and the binary then exits non-zero.

mod admission_config;
pub mod config;
pub mod control;
pub mod echo;
mod effective;
pub mod metrics;
pub mod reload;
pub mod signals;
mod status;
mod store_config;
pub mod supervisor;
#[cfg(debug_assertions)]
pub(crate) mod test_hooks;
mod worker;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use config::{ConfigError, DaemonConfig, MetricsAddr, Overrides, StoreConfig};
pub use reload::Hooks;

use crate::oncrpc::{TcpServerOptions, TcpStoreServer};
use crate::store::{ServerOptions, StoreServer, StoreStats};
use dataplane::{ConnectionConfig, Device, MappedFile, Transport};

/// Why the daemon could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The device could not be opened.
    #[error(transparent)]
    Device(#[from] dataplane::DeviceError),
    /// Something failed while starting a service.
    #[error("{what}: {reason}")]
    Start {
        /// What was being started.
        what: String,
        /// Why it failed.
        reason: String,
    },
}

fn start_err(what: impl Into<String>, e: impl std::fmt::Display) -> DaemonError {
    DaemonError::Start {
        what: what.into(),
        reason: e.to_string(),
    }
}

fn transport_name(t: &Transport) -> &'static str {
    match t {
        Transport::Kernel => "kernel",
        Transport::Xdp => "xdp",
    }
}

/// Opens the configured transport. For xdp: in the calling process's network namespace,
/// attaching to the interface (a stale xwarp program left by a crash is replaced).
fn open_device(cfg: &DaemonConfig) -> Result<Device, DaemonError> {
    let Some(x) = &cfg.xdp else {
        return Ok(Device::open(cfg.transport.clone())?);
    };
    warn_unreserved(x);
    if x.fault.enabled() {
        tracing::warn!(faults = %x.fault, "the engines inject faults (XWARP_TEST_FAULTS)");
    }
    let what = format!("AF_XDP device on {} queue {}", x.interface, x.queue);
    preflight(x).map_err(|e| start_err(&what, e))?;
    // The address the engine serves: the store's listen address, else the first listener's
    // (0.0.0.0 or :: pick the interface's first address of that family), else the default.
    let mut x = x.clone();
    let store_listen = cfg.store.as_ref().and_then(|s| s.listen);
    x.address = x.address.or_else(|| {
        store_listen
            .or_else(|| cfg.listeners.first().copied())
            .map(|a| a.ip())
    });
    let device = Device::open_xdp(x.clone()).map_err(|e| {
        let zero_copy_refused = matches!(&e, dataplane::DeviceError::Xdp { error, .. }
            if error.errno() == Some(libc::EOPNOTSUPP));
        if zero_copy_refused && x.bind == dataplane::BindMode::ZeroCopy {
            start_err(
                &what,
                format!("{e} (the driver offers no zero-copy AF_XDP on this interface: use bind \"auto\" or \"copy\")"),
            )
        } else {
            start_err(&what, e)
        }
    })?;
    tracing::info!(
        interface = %x.interface,
        queue = x.queue,
        bind = ?x.bind,
        attach = ?x.attach,
        mode = ?x.mode,
        local_ports = %format!("{}-{}", x.local_ports.start(), x.local_ports.end()),
        "xdp device open"
    );
    Ok(device)
}

/// Checks what can be checked before anything is attached: the interface exists in this
/// network namespace and has the queue.
fn preflight(x: &dataplane::XdpConfig) -> Result<(), String> {
    use afxdp::{program::ifindex, queues::rx_queue_count, XdpError};
    match ifindex(&x.interface) {
        Ok(_) => {}
        Err(XdpError::NoSuchInterface) => {
            return Err(format!(
                "no interface {} in this network namespace (run xwarpd in the interface's namespace, e.g. `ip netns exec NS xwarpd ...`)",
                x.interface
            ))
        }
        Err(e) => return Err(e.to_string()),
    }
    if let Ok(n) = rx_queue_count(&x.interface) {
        if x.queue >= n {
            return Err(format!(
                "{} has {n} receive queue(s), 0 to {}: choose one with --queue / xdp.queue, or add channels with `ethtool -L {} combined N`",
                x.interface,
                n.saturating_sub(1),
                x.interface
            ));
        }
    }
    Ok(())
}

/// Warns when the engine's local port range is not reserved from the kernel's ephemeral
/// ports (`deploy/host-setup` reserves it): the kernel could then pick one of those ports for
/// its own connection, whose replies the XDP program would steer to the engine.
fn warn_unreserved(x: &dataplane::XdpConfig) {
    let (first, last) = (*x.local_ports.start(), *x.local_ports.end());
    let Ok(reserved) = afxdp::ports::reserved_ports() else {
        return;
    };
    let covered = (first..=last).all(|p| reserved.iter().any(|r| r.contains(p)));
    if !covered {
        tracing::warn!(
            "local ports {first}-{last} are not all in net.ipv4.ip_local_reserved_ports: the kernel may use them for its own connections (deploy/host-setup reserves them)"
        );
    }
}

/// What stopped a daemon that had started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT or SIGTERM (the signal number): a clean stop.
    Signal(i32),
    /// A thread panicked (logged by [`supervisor`]); the process should exit with
    /// [`supervisor::EXIT_PANIC`].
    Panic,
}

/// The store's listen address: the configured one, or the address the xdp device serves.
fn store_listen(s: &StoreConfig, device: &Device) -> Result<std::net::SocketAddr, DaemonError> {
    if let Some(a) = s.listen {
        return Ok(a);
    }
    let ip = device.local_ip().ok_or_else(|| {
        start_err(
            "store listener",
            "the device has no address to listen on: set store.listen or --store-listen",
        )
    })?;
    Ok(std::net::SocketAddr::new(ip, config::DEFAULT_STORE_PORT))
}

/// Starts the store's ONC RPC over TCP service when configured: on the store's address, its
/// own port; kernel TCP, or our own TCP on the xdp transport (where the TCP RDMA option can
/// be offered).
fn start_tcp_store(
    sc: &StoreConfig,
    srv: &StoreServer,
    device: &Device,
    xdp: bool,
) -> Result<Option<TcpStoreServer>, DaemonError> {
    let Some(t) = sc.tcp else {
        return Ok(None);
    };
    let addr = std::net::SocketAddr::new(srv.local_addr().ip(), t.port);
    let opts = TcpServerOptions {
        max_io: sc.max_io,
        allow: sc.allow.clone(),
        max_connections: sc.max_connections,
        source_share: sc.source_share(),
        silent_after: crate::store::DEFAULT_SILENT_AFTER,
        idle_timeout: sc.idle_timeout,
    };
    let started = if xdp {
        TcpStoreServer::start_xdp(device, addr, srv.shared(), opts, t.rdma_option)
    } else {
        if t.rdma_option {
            tracing::warn!("store.tcp_rdma_option needs the xdp transport (our own TCP): ignored on kernel TCP");
        }
        TcpStoreServer::start_kernel(addr, srv.shared(), opts)
    };
    started
        .map(Some)
        .map_err(|e| start_err(format!("store ONC RPC over TCP listener {addr}"), e))
}

/// Runs the daemon until SIGINT or SIGTERM, or until a thread panics; SIGHUP is logged and
/// changes nothing (no configuration source: see [`run_with`]).
pub fn run(cfg: &DaemonConfig) -> Result<Stop, DaemonError> {
    run_with(cfg, &Hooks::default())
}

/// As [`run`], reloading on SIGHUP through `hooks`.
pub fn run_with(cfg: &DaemonConfig, hooks: &Hooks) -> Result<Stop, DaemonError> {
    supervisor::install();
    signals::install().map_err(|e| start_err("installing signal handlers", e))?;
    let device = open_device(cfg)?;
    let mut conn = ConnectionConfig::default();
    conn.mpa.want_markers = cfg.markers;
    conn.mpa.want_crc = cfg.crc;
    conn.segment_per_fpdu = cfg.segment_per_fpdu;
    // Kernel transport listeners (the engine has its own, from the same settings).
    conn.backlog = cfg.backlog;
    conn.backlog_share = cfg.backlog_share;
    let started = Instant::now();

    let store = match &cfg.store {
        Some(s) => {
            let file = MappedFile::open(&s.path, s.size.map(|b| b.0))
                .map_err(|e| start_err(format!("opening store {}", s.path.display()), e))?;
            let opts = ServerOptions {
                credits: s.credits,
                max_io: s.max_io,
                connection: conn.clone(),
                allow: s.allow.clone(),
                max_connections: s.max_connections,
                source_share: s.source_share(),
                silent_after: crate::store::DEFAULT_SILENT_AFTER,
                idle_timeout: s.idle_timeout,
            };
            let listen = store_listen(s, &device)?;
            let srv = StoreServer::start(&device, listen, file, opts)
                .map_err(|e| start_err(format!("store listener {listen}"), e))?;
            Some(srv)
        }
        None => None,
    };
    let tcp_store = match (&cfg.store, &store) {
        (Some(sc), Some(srv)) => start_tcp_store(sc, srv, &device, cfg.xdp.is_some())?,
        _ => None,
    };
    let store_stats: Option<Arc<StoreStats>> = store.as_ref().map(|s| s.stats().clone());
    let tcp_store_stats: Option<Arc<StoreStats>> = tcp_store.as_ref().map(|s| s.stats().clone());
    let echo_stats = Arc::new(echo::EchoStats::default());
    let mut echoes = Vec::new();
    for a in &cfg.listeners {
        let e = echo::EchoServer::start(&device, *a, conn.clone(), echo_stats.clone())
            .map_err(|e| start_err(format!("listener {a}"), e))?;
        tracing::info!(addr = %e.local_addr(), "echo listener up");
        echoes.push(e);
    }
    let transport = transport_name(&cfg.transport);
    let queue = cfg.xdp.as_ref().map_or(0, |x| x.queue);
    let xdp_info = device.xdp_info();
    if let Some(x) = &xdp_info {
        tracing::info!(
            attach = ?x.attach_mode,
            zero_copy = x.zero_copy,
            mtu = x.mtu,
            mss = x.mss,
            "xdp device set up"
        );
    }
    let snapshot = {
        let (device, store_stats, echo_stats) =
            (device.clone(), store_stats.clone(), echo_stats.clone());
        move || metrics::Snapshot {
            transport,
            device: device.counters(),
            store: store_stats
                .as_ref()
                .map(|s| s.snapshot())
                .unwrap_or_default(),
            store_tcp: tcp_store_stats.as_ref().map(|s| s.snapshot()),
            echo_connections: echo_stats.connections.load(Ordering::Relaxed),
            echo_messages: echo_stats.messages.load(Ordering::Relaxed),
            echo_refused: echo_stats.refused.load(Ordering::Relaxed),
            uptime_seconds: started.elapsed().as_secs(),
            engines: (queue..).zip(device.lane_counters()).collect(),
            engine_loads: (queue..).zip(device.lane_loads()).collect(),
            xdp_info: xdp_info.clone(),
            xdp_counters: device.xdp_counters(),
            faults: device.fault_counters(),
        }
    };
    let metrics_srv = match cfg.metrics {
        MetricsAddr::Off => None,
        MetricsAddr::On(a) => Some(
            metrics::MetricsServer::start(a, snapshot.clone())
                .map_err(|e| start_err(format!("metrics endpoint {a}"), e))?,
        ),
    };
    let max_connections = cfg.store.as_ref().map(|s| s.max_connections);
    let control = control::ControlServer::start_with(&cfg.control_socket, move |req| match req {
        "stats" => Some(snapshot().to_prometheus()),
        "status" => Some(snapshot().to_status(max_connections)),
        _ => None,
    })
    .map_err(|e| {
        start_err(
            format!("control socket {}", cfg.control_socket.display()),
            e,
        )
    })?;

    let mut ready = format!("xwarpd ready transport={transport}");
    if let Some(x) = &cfg.xdp {
        ready += &format!(" interface={} queue={}", x.interface, x.queue);
    }
    if let Some(s) = &store {
        ready += &format!(" store={}", s.local_addr());
    }
    if let Some(s) = &tcp_store {
        ready += &format!(" store_tcp={}", s.local_addr());
    }
    for e in &echoes {
        ready += &format!(" listener={}", e.local_addr());
    }
    if let Some(m) = &metrics_srv {
        ready += &format!(" metrics={}", m.local_addr());
    }
    ready += &format!(" control={}", cfg.control_socket.display());
    tracing::info!("{ready}");
    println!("{ready}");
    let _ = sd_notify::notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&ready),
    ]);

    let mut running = cfg.clone();
    let stop = loop {
        if let Some(s) = signals::received() {
            break Stop::Signal(s);
        }
        if signals::take_hangup() {
            reload::reload(&mut running, hooks);
        }
        if supervisor::failure().is_some() {
            break Stop::Panic;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    match stop {
        Stop::Signal(sig) => tracing::info!(signal = sig, "shutting down"),
        // The panic was logged; shut down what still works, within a limit.
        Stop::Panic => supervisor::exit_if_shutdown_hangs(),
    }
    drop(control);
    drop(metrics_srv);
    drop(echoes);
    if let Some(s) = tcp_store {
        s.shutdown();
    }
    if let Some(s) = store {
        s.shutdown();
    }
    // The last handle: on the xdp transport this stops the engine, detaches the XDP program
    // and frees the UMEM.
    drop(device);
    if let Stop::Signal(sig) = stop {
        tracing::info!("stopped cleanly");
        println!("xwarpd stopped signal={sig}");
    }
    Ok(stop)
}
