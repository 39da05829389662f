//! The passive side of the verbs API: a [`Listener`] hands out [`Incoming`] connections whose
//! MPA Request was valid, for the application to accept or reject; the transports do the work
//! (`kernel::KernelListener`, `xdp_device::XdpListener`).

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use mpa::RequestInfo;

use crate::counters::DeviceCounters;
use crate::device::QpInit;
use crate::kernel::{InlineDrivers, KernelIncoming, KernelListener};
use crate::xdp_device::{XdpIncoming, XdpListener};
use crate::{ConnectError, ConnectionConfig, PostError, QueuePair};

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
