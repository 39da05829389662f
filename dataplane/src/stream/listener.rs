//! Stream listeners on the xdp transport: the port steered by the XDP program like an iWARP
//! listener's, accepted connections queued by the router until `accept` takes them.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use endpoint::ListenerId;

use super::socket::TcpStream;
use super::{io_err, StreamConfig};
use crate::xdp::PortKind;
use crate::xdp_device::XdpDevice;
use crate::Device;

/// A TCP listener on the device's AF_XDP engine. Dropping it stops listening: queued
/// connections are reset, the port is unsteered once its connections are gone.
#[derive(Debug)]
pub struct TcpListener {
    dev: Arc<XdpDevice>,
    id: ListenerId,
    local: SocketAddr,
}

/// How often an inline device's accept drives the engine while it waits (see the iWARP
/// listener's `ACCEPT_PACE`).
const ACCEPT_PACE: Duration = Duration::from_micros(100);

/// The device's engine, or `Unsupported` on the kernel transport.
pub(super) fn xdp_of(dev: &Device) -> io::Result<&Arc<XdpDevice>> {
    let lanes = dev.xdp_lanes().ok_or_else(|| {
        io_err(
            io::ErrorKind::Unsupported,
            "stream sockets run on the xdp transport; use std::net with the kernel transport",
        )
    })?;
    lanes.single().ok_or_else(|| {
        io_err(
            io::ErrorKind::Unsupported,
            "stream sockets need a one-queue device (XdpConfig::queues = 1)",
        )
    })
}

impl Device {
    /// Listens for plain TCP streams on `addr` (the interface's IPv4 address or unspecified,
    /// a fixed port); the XDP program steers the port to the engine.
    pub fn tcp_listen(&self, addr: SocketAddr, cfg: StreamConfig) -> io::Result<TcpListener> {
        let dev = xdp_of(self)?;
        let ip = dev.shared.ip;
        let a = addr.ip();
        if !(a == ip || (a.is_unspecified() && a.is_ipv4() == ip.is_ipv4())) {
            return Err(io_err(
                io::ErrorKind::AddrNotAvailable,
                "the xdp transport listens on the address it serves (XdpConfig::address)",
            ));
        }
        if addr.port() == 0 {
            return Err(io_err(
                io::ErrorKind::AddrNotAvailable,
                "the xdp transport needs a fixed listening port",
            ));
        }
        let mut st = dev.shared.lock();
        let id = st
            .engine
            .endpoint_mut()
            .stream_listen(addr.port(), cfg.options())
            .map_err(|_| io_err(io::ErrorKind::AddrInUse, "port already listened on"))?;
        st.program
            .steer_port(st.lane, addr.port(), PortKind::Listen)
            .map_err(io::Error::other)?;
        st.unsteer_later.retain(|&p| p != addr.port());
        st.streams.accepts.insert(id, Default::default());
        Ok(TcpListener {
            dev: dev.clone(),
            id,
            local: SocketAddr::new(ip, addr.port()),
        })
    }
}

impl TcpListener {
    /// The next connection and its peer; blocks.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        loop {
            match self.accept_timeout(Duration::from_secs(3600)) {
                Err(e) if e.kind() == io::ErrorKind::TimedOut => continue,
                r => return r,
            }
        }
    }

    /// The next connection and its peer, or `TimedOut` after `timeout`.
    pub fn accept_timeout(&self, timeout: Duration) -> io::Result<(TcpStream, SocketAddr)> {
        let deadline = Instant::now() + timeout;
        let id = self.id;
        let (conn, peer) = self
            .dev
            .shared
            .wait_paced(deadline, Some(ACCEPT_PACE), |st| {
                let q = st.streams.accepts.get_mut(&id)?;
                let (conn, peer) = q.pop_front()?;
                st.streams.conns.insert(conn, None);
                Some((conn, peer))
            })
            .ok_or_else(|| io_err(io::ErrorKind::TimedOut, "no connection to accept"))?;
        Ok((
            TcpStream::new(self.dev.clone(), conn, self.local, peer),
            peer,
        ))
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        let mut st = self.dev.shared.lock();
        st.engine.endpoint_mut().unlisten(self.id);
        if let Some(q) = st.streams.accepts.remove(&self.id) {
            for (conn, _) in q {
                let _ = st.engine.endpoint_mut().abort(conn);
            }
        }
        // As for iWARP listeners: steered while its accepted connections live.
        st.unsteer_later.push(self.local.port());
        st.unsteer_unused();
    }
}
