//! Queue pairs on the AF_XDP engine: active open, work requests, close.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::route::{Pending, QpLink};
use super::XdpLane;
use endpoint::{ConnId, Endpoint, EndpointError, QpSettings};

use crate::engine::PdHandle;
use crate::queue_pair::{next_qp_num, refused, Established, QpError};
use crate::{ConnectError, ConnectionConfig, PostError, ProtectionDomain, QpInit};
use afxdp::{resolve_next_hop, XdpError};

/// The engine side of a [`crate::QueuePair`].
#[derive(Debug)]
pub(crate) struct XdpQp {
    pub(crate) dev: Arc<XdpLane>,
    pub(crate) conn: ConnId,
    pub(crate) link: Arc<QpLink>,
    pub(crate) pd: ProtectionDomain,
    /// A handle lent to `connect_with`'s closure while the lane's state is locked: its posts
    /// are collected here, and handed to the connection once TCP is up.
    pub(crate) early: Option<Arc<Mutex<Vec<ddp::WorkRequest>>>>,
}

pub(crate) fn settings(config: &ConnectionConfig, private_data: &[u8]) -> QpSettings {
    QpSettings {
        startup: config.mpa,
        private_data: private_data.to_vec(),
        ird: config.ird,
        ord: config.ord,
        close_timeout: config.close_timeout,
        // The application's accept deadline and the rest: the endpoint's defaults.
        ..QpSettings::default()
    }
}

fn post_error(e: EndpointError) -> PostError {
    match e {
        EndpointError::Post(p) => refused(p),
        _ => PostError::NotConnected,
    }
}

fn io_error(e: XdpError) -> std::io::Error {
    let kind = match e {
        XdpError::NoRoute => std::io::ErrorKind::NetworkUnreachable,
        XdpError::NeighbourTimeout => std::io::ErrorKind::HostUnreachable,
        _ => std::io::ErrorKind::Other,
    };
    std::io::Error::new(kind, e)
}

impl XdpLane {
    /// The next hop's MAC of `ip`, from the kernel's tables in the device's namespace (the
    /// kernel resolves a missing neighbour), handed to the engine.
    pub(crate) fn learn_next_hop(&self, ip: IpAddr, timeout: Duration) -> std::io::Result<()> {
        let shared = &self.shared;
        let _guard = if shared.netns.is_current()? {
            None
        } else {
            Some(shared.netns.enter()?)
        };
        let hop = resolve_next_hop(ip, timeout).map_err(io_error)?;
        shared
            .lock()
            .engine
            .endpoint_mut()
            .add_neighbour(ip, hop.dst_mac)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e))
    }

    /// Active open: TCP from the steered local port range, then MPA as Initiator. Returns the
    /// queue pair, the peer's private data and what was negotiated. `before_start` runs on
    /// the queue pair while the lane's state is locked, before anything was sent: what it
    /// posts is handed to the connection in the engine round that completes TCP's handshake
    /// (`State::hand_over_early_work`), before the MPA Reply can arrive.
    pub(crate) fn connect(
        self: &Arc<Self>,
        addr: SocketAddr,
        init: QpInit,
        config: &ConnectionConfig,
        private_data: &[u8],
        before_start: &mut dyn FnMut(&crate::QueuePair) -> Result<(), crate::PostError>,
    ) -> Result<(XdpQp, Established), ConnectError> {
        let fail = |e| e;
        if addr.is_ipv4() != self.shared.ip.is_ipv4() {
            return Err(fail(ConnectError::Io(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the xdp transport connects within the family of the address it serves",
            ))));
        }
        self.learn_next_hop(addr.ip(), config.mpa.timeout)
            .map_err(|e| fail(ConnectError::Io(e)))?;
        let num = next_qp_num();
        let link = Arc::new(QpLink::new(num, &init));
        let conn = {
            let mut st = self.shared.lock();
            let conn = st
                .engine
                .endpoint_mut()
                .connect_in(
                    Instant::now(),
                    addr,
                    settings(config, private_data),
                    init.pd.handle(),
                )
                .map_err(|e| {
                    fail(ConnectError::Io(std::io::Error::new(
                        std::io::ErrorKind::AddrNotAvailable,
                        e,
                    )))
                })?;
            st.pending.insert(conn, Pending::Connecting);
            st.routes.insert(conn, link.clone());
            let early = Arc::new(Mutex::new(Vec::new()));
            let mut handle = crate::QueuePair::xdp(
                XdpQp {
                    dev: self.clone(),
                    conn,
                    link: link.clone(),
                    pd: init.pd.clone(),
                    early: Some(early.clone()),
                },
                Established {
                    peer_private_data: Vec::new(),
                    negotiated: ddp::NegotiatedFraming::default(),
                },
            );
            // The handle only lends the connection; dropping it must not close it.
            handle.detached = true;
            if let Err(e) = before_start(&handle) {
                st.pending.remove(&conn);
                st.routes.remove(&conn);
                let _ = st.engine.endpoint_mut().abort(conn);
                return Err(ConnectError::Post(e));
            }
            let work = std::mem::take(&mut *early.lock().unwrap_or_else(|p| p.into_inner()));
            if !work.is_empty() {
                st.early_work.insert(conn, work);
            }
            conn
        };
        // TCP's own SYN retries plus MPA's startup timeout.
        let deadline = Instant::now() + config.mpa.timeout * 2 + Duration::from_secs(3);
        let outcome = self.shared.wait_until(deadline, |st| {
            if let Some(Pending::Done(_)) = st.pending.get(&conn) {
                match st.pending.remove(&conn) {
                    Some(Pending::Done(r)) => Some(r),
                    _ => None,
                }
            } else {
                None
            }
        });
        let qp = XdpQp {
            dev: self.clone(),
            conn,
            link,
            pd: init.pd,
            early: None,
        };
        match outcome {
            Some(Ok(up)) => Ok((qp, up)),
            Some(Err(e)) => {
                qp.forget();
                Err(fail(e))
            }
            None => {
                qp.abort();
                Err(fail(ConnectError::Startup(mpa::StartupError::Timeout)))
            }
        }
    }
}

impl XdpQp {
    /// Runs `f` on the engine under the lock.
    fn with_engine<R>(&self, f: impl FnOnce(&mut Endpoint<PdHandle>, ConnId) -> R) -> R {
        let mut st = self.dev.shared.lock();
        f(st.engine.endpoint_mut(), self.conn)
    }

    fn check_open(&self) -> Result<(), PostError> {
        let s = self.link.status();
        if s.close_requested || s.finished {
            return Err(PostError::NotConnected);
        }
        Ok(())
    }

    /// Posts `wrs` on the engine's connection, in order, under one lock and with one
    /// transmit (the doorbell). Returns how many were posted and the refusal that stopped it.
    pub(crate) fn post_chain(&self, wrs: &[ddp::WorkRequest]) -> Result<(), (usize, PostError)> {
        let begun = crate::stage_times::post_begins();
        if let Some(early) = &self.early {
            // Lent to connect_with's closure: the lane's state is locked by the caller.
            early
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(wrs);
            return Ok(());
        }
        self.check_open().map_err(|e| (0, e))?;
        let mut st = self.dev.shared.lock();
        // Inline (or assisted with the engine thread standing down), on an idle connection:
        // send at once (a ping-pong's answer); with work in flight the next round frames it
        // together with what follows (MPA-62 packing). Receives put nothing on the wire:
        // posting only those transmits nothing (and reads no clock).
        let sends = wrs
            .iter()
            .any(|wr| !matches!(wr.kind, ddp::WorkRequestKind::Recv { .. }));
        let at_once = sends
            && self.dev.shared.posts_transmit()
            && st.engine.endpoint().is_idle_to_send(self.conn);
        for (i, wr) in wrs.iter().enumerate() {
            st.engine
                .endpoint_mut()
                .post(self.conn, *wr)
                .map_err(|e| (i, post_error(e)))?;
        }
        crate::stage_times::record(crate::stage_times::Stage::Post, begun);
        if at_once {
            st.engine.transmit_now(Instant::now(), self.conn);
        }
        Ok(())
    }

    pub(crate) fn error(&self) -> Option<QpError> {
        self.link.status().error
    }

    pub(crate) fn is_connected(&self) -> bool {
        let s = self.link.status();
        !s.finished && !s.close_requested && !s.peer_closed && s.error.is_none()
    }

    /// Closes the queue pair without waiting ([`Endpoint::close`]): its receives and Reads
    /// complete flushed on its CQs now, nothing the peer sends later lands, posted Sends and
    /// Writes still go out; the engine then closes TCP (FIN) and aborts it (RST) if it has not
    /// finished within the connection's close timeout. In inline mode the FIN of an idle
    /// connection leaves at once.
    pub(crate) fn close(&self) {
        if self.link.status().finished {
            return;
        }
        self.link.update(|s| s.close_requested = true);
        let mut st = self.dev.shared.lock();
        let now = Instant::now();
        if st.engine.endpoint_mut().close(now, self.conn).is_err() {
            return;
        }
        st.route();
        if self.dev.shared.calls_drive() {
            st.engine.transmit_now(now, self.conn);
        }
    }

    /// Abortive close (RST); does not wait.
    pub(crate) fn abort(&self) {
        self.link.update(|s| s.close_requested = true);
        let _ = self.with_engine(|e, c| e.abort(c));
    }

    /// A failed startup: the engine already closes the connection; stop routing to it.
    fn forget(&self) {
        self.link.update(|s| {
            s.close_requested = true;
            s.finished = true;
        });
        self.dev.shared.lock().routes.remove(&self.conn);
    }
}
