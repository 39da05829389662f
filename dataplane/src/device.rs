//! The device: the entry point of the verbs API, bound to one transport.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::counters::{CounterSnapshot, Counters};
use crate::kernel::startup::{self, Negotiated, StartupError, StartupFrame};
use crate::kernel::DriverOptions;
use crate::qp::QpShared;
use crate::{
    CompletionQueue, ConnectError, ConnectionConfig, DeviceError, Listener, ProtectionDomain,
    QueuePair, Transport,
};

static NEXT_DEVICE: AtomicU64 = AtomicU64::new(1);

/// What a new queue pair is made of.
#[derive(Debug, Clone)]
pub struct QpInit {
    /// Its protection domain: the only regions its work requests and its peer can reach.
    pub pd: ProtectionDomain,
    /// Where Send, Write and Read completions go.
    pub send_cq: CompletionQueue,
    /// Where receive completions go.
    pub recv_cq: CompletionQueue,
}

/// An opened device.
#[derive(Debug, Clone)]
pub struct Device {
    id: u64,
    transport: Transport,
    counters: Arc<Counters>,
}

impl Device {
    /// Opens a device on `transport`.
    pub fn open(transport: Transport) -> Result<Self, DeviceError> {
        match transport {
            Transport::Kernel => {}
            Transport::Xdp => {
                return Err(DeviceError::TransportUnavailable(
                    "the AF_XDP transport is not built yet; use Transport::Kernel",
                ))
            }
        }
        Ok(Self { id: NEXT_DEVICE.fetch_add(1, Ordering::Relaxed), transport, counters: Arc::default() })
    }

    /// The transport this device runs.
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// A new protection domain.
    pub fn alloc_pd(&self) -> ProtectionDomain {
        ProtectionDomain::new(self.id)
    }

    /// A new completion queue.
    pub fn create_cq(&self) -> CompletionQueue {
        CompletionQueue::new(self.id)
    }

    /// Counters of every listener and connection of this device.
    pub fn counters(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    /// Listens on `addr` as MPA responder with `config`.
    pub fn listen(&self, addr: SocketAddr, config: ConnectionConfig) -> Result<Listener, ConnectError> {
        Listener::bind(addr, config, self.counters.clone(), self.id)
    }

    /// Connects to `addr` as MPA initiator, sending `private_data` in the Request. Returns the
    /// queue pair once the peer's Reply accepted; its private data is in
    /// [`QueuePair::peer_private_data`].
    pub fn connect(
        &self,
        addr: SocketAddr,
        init: QpInit,
        config: &ConnectionConfig,
        private_data: &[u8],
    ) -> Result<QueuePair, ConnectError> {
        config.mpa.validate()?;
        config.mpa.check_private_data(private_data)?;
        if init.pd.inner.device_id != self.id
            || init.send_cq.device_id != self.id
            || init.recv_cq.device_id != self.id
        {
            return Err(ConnectError::ForeignResource);
        }
        let mut stream = TcpStream::connect_timeout(&addr, config.mpa.startup_timeout)?;
        stream.set_nodelay(true)?;
        let ours = StartupFrame {
            reply: false,
            markers: config.mpa.markers,
            crc: config.mpa.crc,
            reject: false,
            revision: config.mpa.revision,
            private_data: private_data.to_vec(),
        };
        startup::write_frame(&mut stream, &ours)?;
        let deadline = Instant::now() + config.mpa.startup_timeout;
        let reply = match startup::read_frame(&mut stream, true, &config.mpa, deadline) {
            Ok(r) => r,
            Err(StartupError::Malformed(why)) => {
                Counters::inc(&self.counters.startup_malformed);
                return Err(ConnectError::Malformed(why));
            }
            Err(StartupError::Timeout) => {
                Counters::inc(&self.counters.startup_timeouts);
                return Err(ConnectError::Timeout);
            }
            Err(StartupError::Io(e)) => return Err(ConnectError::Io(e)),
        };
        if reply.reject {
            Counters::inc(&self.counters.startup_rejected);
            return Err(ConnectError::Rejected { private_data: reply.private_data });
        }
        establish(stream, &ours, &reply, true, init, config, &self.counters)
    }
}

/// Both startup frames are exchanged: build the engine and start the connection driver.
pub(crate) fn establish(
    stream: TcpStream,
    ours: &StartupFrame,
    peer: &StartupFrame,
    initiator: bool,
    init: QpInit,
    config: &ConnectionConfig,
    counters: &Arc<Counters>,
) -> Result<QueuePair, ConnectError> {
    let neg = Negotiated::from_frames(ours, peer, initiator);
    let shared = Arc::new(QpShared::new(init.send_cq.clone(), init.recv_cq.clone())?);
    let engine = crate::stack::new_engine(neg, config, &init.pd, counters.clone());
    let opts = DriverOptions { segment_per_chunk: config.segment_per_fpdu };
    let (s2, c2) = (shared.clone(), counters.clone());
    let driver = std::thread::Builder::new()
        .name(format!("xwarp-qp{}", shared.num))
        .spawn(move || crate::kernel::run(stream, engine, s2, c2, opts))?;
    Counters::inc(&counters.mpa_established);
    Ok(QueuePair { shared, pd: init.pd, driver: Some(driver), peer_private_data: peer.private_data.clone() })
}
