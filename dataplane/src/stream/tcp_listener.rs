//! Stream listeners on the xdp transport: the port steered by the XDP program like an iWARP
//! listener's, accepted connections queued by the router until `accept` takes them.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use endpoint::ListenerId;

use super::socket::TcpStream;
use super::{io_err, StreamConfig};
use crate::xdp_device::{wait_on_lanes, XdpLane, XdpLanes};
use crate::Device;
use afxdp::PortKind;

/// A TCP listener on the device's AF_XDP engines (every lane of a multi-queue device).
/// Dropping it stops listening: queued connections are reset, the port is unsteered once its
/// connections are gone.
#[derive(Debug)]
pub struct TcpListener {
    /// Each lane and its listener there.
    lanes: Vec<(Arc<XdpLane>, ListenerId)>,
    local: SocketAddr,
    /// The lane accept looks at first (each accept starts one further: no lane starves).
    first: AtomicUsize,
}

/// The device's engines, or `Unsupported` on the kernel transport.
pub(super) fn xdp_of(dev: &Device) -> io::Result<&Arc<XdpLanes>> {
    dev.xdp_lanes().ok_or_else(|| {
        io_err(
            io::ErrorKind::Unsupported,
            "stream sockets run on the xdp transport; use std::net with the kernel transport",
        )
    })
}

impl Device {
    /// Listens for plain TCP streams on `addr` (the interface's IPv4 address or unspecified,
    /// a fixed port) on every lane; the XDP program steers the port to the engines.
    pub fn tcp_listen(&self, addr: SocketAddr, cfg: StreamConfig) -> io::Result<TcpListener> {
        let lanes = xdp_of(self)?;
        let ip = lanes.first().shared.ip;
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
        let mut listener = TcpListener {
            lanes: Vec::with_capacity(lanes.all().len()),
            local: SocketAddr::new(ip, addr.port()),
            first: AtomicUsize::new(0),
        };
        // On failure, dropping `listener` undoes the lanes done so far.
        for dev in lanes.all() {
            let id = listen_lane(dev, addr.port(), &cfg)?;
            listener.lanes.push((dev.clone(), id));
        }
        Ok(listener)
    }
}

/// Listens for streams on `port` on one lane and steers the port to it.
fn listen_lane(dev: &XdpLane, port: u16, cfg: &StreamConfig) -> io::Result<ListenerId> {
    let mut st = dev.shared.lock();
    let id = st
        .engine
        .endpoint_mut()
        .stream_listen(port, cfg.options())
        .map_err(|_| io_err(io::ErrorKind::AddrInUse, "port already listened on"))?;
    if let Err(e) = st.program.steer_port(port, PortKind::Listen) {
        st.engine.endpoint_mut().unlisten(id);
        return Err(io::Error::other(e));
    }
    st.unsteer_later.retain(|&p| p != port);
    st.streams.accepts.insert(id, Default::default());
    Ok(id)
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

    /// The next connection and its peer (from any lane), or `TimedOut` after `timeout`.
    pub fn accept_timeout(&self, timeout: Duration) -> io::Result<(TcpStream, SocketAddr)> {
        let deadline = Instant::now() + timeout;
        let (dev, conn, peer) = wait_on_lanes(&self.lanes, &self.first, deadline, |dev, st, id| {
            let (conn, peer) = st.streams.accepts.get_mut(&id)?.pop_front()?;
            st.streams.conns.insert(conn, None);
            Some((dev.clone(), conn, peer))
        })
        .ok_or_else(|| io_err(io::ErrorKind::TimedOut, "no connection to accept"))?;
        Ok((TcpStream::new(dev, conn, self.local, peer), peer))
    }

    /// The address listened on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        for (dev, id) in &self.lanes {
            let mut st = dev.shared.lock();
            st.engine.endpoint_mut().unlisten(*id);
            if let Some(q) = st.streams.accepts.remove(id) {
                for (conn, _) in q {
                    let _ = st.engine.endpoint_mut().abort(conn);
                }
            }
            // As for iWARP listeners: steered while its accepted connections live.
            st.unsteer_later.push(self.local.port());
            st.unsteer_unused();
        }
    }
}
