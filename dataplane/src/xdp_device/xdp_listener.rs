//! Passive side on the AF_XDP engine: listeners steered by the XDP program, and MPA Requests
//! waiting for the application's accept or reject.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use endpoint::ListenerId;

use super::lanes::wait_on_lanes;
use super::route::{QpLink, Request};
use super::xdp_qp::{settings, XdpQp};
use super::XdpLane;
use crate::counters::DeviceCounters;
use crate::queue_pair::{next_qp_num, Established};
use crate::{AcceptError, ConnectError, ConnectionConfig, QpInit, QueuePair};
use afxdp::PortKind;

/// An engine listener: listening on every lane of its device.
#[derive(Debug)]
pub(crate) struct XdpListener {
    /// Each lane and its listener there.
    lanes: Vec<(Arc<XdpLane>, ListenerId)>,
    pub(crate) local: SocketAddr,
    config: ConnectionConfig,
    /// The lane accept looks at first (each accept starts one further: no lane starves).
    first: std::sync::atomic::AtomicUsize,
}

/// A connection whose MPA Request arrived on an engine listener.
#[derive(Debug)]
pub(crate) struct XdpIncoming {
    pub(crate) dev: Arc<XdpLane>,
    pub(crate) req: Request,
    pub(crate) config: ConnectionConfig,
}

fn addr_error(msg: &'static str) -> ConnectError {
    ConnectError::Io(std::io::Error::new(
        std::io::ErrorKind::AddrNotAvailable,
        msg,
    ))
}

impl XdpListener {
    /// Listens on `addr` (the interface's address or unspecified; a fixed port) on every lane
    /// and steers the port to them.
    pub(crate) fn on_lanes(
        lanes: &[Arc<XdpLane>],
        addr: SocketAddr,
        config: ConnectionConfig,
    ) -> Result<Self, ConnectError> {
        let ip = lanes[0].shared.ip;
        let a = addr.ip();
        if !(a == ip || (a.is_unspecified() && a.is_ipv4() == ip.is_ipv4())) {
            return Err(addr_error(
                "the xdp transport listens on the address it serves (or unspecified, same family)",
            ));
        }
        if addr.port() == 0 {
            return Err(addr_error("the xdp transport needs a fixed listening port"));
        }
        let mut listener = XdpListener {
            lanes: Vec::with_capacity(lanes.len()),
            local: SocketAddr::new(ip, addr.port()),
            config,
            first: Default::default(),
        };
        // On failure, dropping `listener` undoes the lanes done so far.
        for dev in lanes {
            let id = dev.listen_lane(addr.port(), &listener.config)?;
            listener.lanes.push((dev.clone(), id));
        }
        Ok(listener)
    }
}

impl XdpLane {
    /// Listens on `port` on this lane and steers the port to it.
    fn listen_lane(
        &self,
        port: u16,
        config: &ConnectionConfig,
    ) -> Result<ListenerId, ConnectError> {
        let mut st = self.shared.lock();
        let id = st
            .engine
            .endpoint_mut()
            .listen_manual(port, settings(config, &[]))
            .map_err(|_| {
                ConnectError::Io(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    "port already listened on",
                ))
            })?;
        if let Err(e) = st.program.steer_port(port, PortKind::Listen) {
            st.engine.endpoint_mut().unlisten(id);
            return Err(ConnectError::Io(std::io::Error::other(e)));
        }
        st.unsteer_later.retain(|&p| p != port);
        st.listeners.insert(id, Default::default());
        Ok(id)
    }
}

impl XdpListener {
    /// The next MPA Request from any lane, or `Timeout`; inline lanes are driven meanwhile.
    pub(crate) fn accept_timeout(&self, timeout: Duration) -> Result<XdpIncoming, AcceptError> {
        let deadline = Instant::now() + timeout;
        wait_on_lanes(&self.lanes, &self.first, deadline, |dev, st, id| {
            match st.listeners.get_mut(&id) {
                None => Some(Err(AcceptError::Closed)),
                Some(q) => q.pop_front().map(|req| {
                    Ok(XdpIncoming {
                        dev: dev.clone(),
                        req,
                        config: self.config.clone(),
                    })
                }),
            }
        })
        .unwrap_or(Err(AcceptError::Timeout))
    }
}

impl Drop for XdpListener {
    fn drop(&mut self) {
        for (dev, id) in &self.lanes {
            let mut st = dev.shared.lock();
            st.engine.endpoint_mut().unlisten(*id);
            // Requests nobody will accept any more: reset them.
            if let Some(q) = st.listeners.remove(id) {
                for r in q {
                    let _ = st.engine.endpoint_mut().abort(r.conn);
                }
            }
            // The port stays steered while connections accepted on it live (their segments
            // must reach the engine, not the kernel); it is released once they are gone.
            st.unsteer_later.push(self.local.port());
            st.unsteer_unused();
        }
    }
}

impl XdpIncoming {
    /// Accepts: the queue pair joins `init.pd`, `before_reply` may post receives, then the
    /// Reply goes out.
    pub(crate) fn accept_with(
        self,
        init: QpInit,
        private_data: &[u8],
        before_reply: impl FnOnce(&QueuePair) -> Result<(), crate::PostError>,
    ) -> Result<QueuePair, ConnectError> {
        if private_data.len() > usize::from(self.config.mpa.max_private_data) {
            return Err(ConnectError::Usage(
                mpa::startup::UsageError::PrivateDataTooLong,
            ));
        }
        let conn = self.req.conn;
        init.send_cq.add_lane(self.dev.shared.lane);
        init.recv_cq.add_lane(self.dev.shared.lane);
        let link = Arc::new(QpLink::new(next_qp_num(), &init));
        {
            let mut st = self.dev.shared.lock();
            st.engine
                .endpoint_mut()
                .adopt_pd(conn, init.pd.handle())
                .map_err(|_| ConnectError::Startup(mpa::StartupError::ConnectionClosed))?;
            st.routes.insert(conn, link.clone());
        }
        let closed = || ConnectError::Startup(mpa::StartupError::ConnectionClosed);
        let mut qp = QueuePair::xdp(
            XdpQp {
                dev: self.dev.clone(),
                conn,
                link,
                pd: init.pd,
                early: None,
            },
            Established {
                peer_private_data: self.req.info.private_data.clone(),
                // Known once the Reply is decided, below.
                negotiated: ddp::NegotiatedFraming::default(),
            },
        );
        before_reply(&qp).map_err(ConnectError::Post)?;
        let mut st = self.dev.shared.lock();
        let depths = mpa::ReadDepths::capped(self.config.ird, self.config.ord);
        let ep = st.engine.endpoint_mut();
        ep.accept_request_with(conn, private_data, depths)
            .map_err(|_| closed())?;
        qp.negotiated = ep.negotiated(conn).ok_or_else(closed)?;
        if self.dev.shared.inline {
            st.poll(Instant::now());
        }
        Ok(qp)
    }

    /// Rejects with `private_data`; the engine closes the connection after the Reply.
    pub(crate) fn reject(self, private_data: &[u8]) -> Result<(), ConnectError> {
        let mut st = self.dev.shared.lock();
        st.engine
            .endpoint_mut()
            .reject(self.req.conn, private_data)
            .map_err(|_| ConnectError::Startup(mpa::StartupError::ConnectionClosed))?;
        DeviceCounters::inc(&st.counters.startup_rejected);
        Ok(())
    }
}
