//! The echo service of plain listeners: every Send a peer makes comes back as a Send. A
//! liveness check and a simple peer for tests and the bench.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::worker::Worker;
use std::time::Duration;

use dataplane::{AcceptError, Access, ConnectionConfig, Device, Incoming, QpInit};

/// Largest Send echoed.
pub const ECHO_MAX: usize = 64 << 10;
const SLOTS: usize = 8;
/// Most connections one echo listener serves at once (each has a thread and
/// `ECHO_MAX * 8` = 512 KiB of locked memory); more are rejected.
pub const ECHO_MAX_CONNECTIONS: usize = 16;

/// Counters of the echo service.
#[derive(Debug, Default)]
pub struct EchoStats {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Sends echoed.
    pub messages: AtomicU64,
    /// Connections rejected: the listener already served [`ECHO_MAX_CONNECTIONS`].
    pub refused: AtomicU64,
}

/// One echo listener.
#[derive(Debug)]
pub struct EchoServer {
    local: SocketAddr,
    _worker: Worker,
}

impl EchoServer {
    /// Listens on `addr`.
    pub fn start(
        device: &Device,
        addr: SocketAddr,
        config: ConnectionConfig,
        stats: Arc<EchoStats>,
    ) -> Result<Self, dataplane::ConnectError> {
        let l = device.listen(addr, config)?;
        let local = l.local_addr();
        let dev = device.clone();
        let worker = Worker::spawn("xwarpd-echo", move |s2| {
            // The live connections' threads and stop flags: at most ECHO_MAX_CONNECTIONS.
            let mut conns: Vec<(std::thread::JoinHandle<()>, Arc<AtomicBool>)> = Vec::new();
            while Worker::running(s2) {
                match l.accept_timeout(Duration::from_millis(100)) {
                    Ok(inc) => {
                        conns.retain(|(h, _)| !h.is_finished());
                        if conns.len() >= ECHO_MAX_CONNECTIONS {
                            stats.refused.fetch_add(1, Ordering::Relaxed);
                            let _ = inc.reject(b"");
                            continue;
                        }
                        stats.connections.fetch_add(1, Ordering::Relaxed);
                        let (d, st) = (dev.clone(), stats.clone());
                        let s3 = Arc::new(AtomicBool::new(false));
                        let stop = s3.clone();
                        if let Ok(h) = std::thread::Builder::new()
                            .name("xwarpd-echo-conn".into())
                            .spawn(move || echo(inc, &d, &st, &s3))
                        {
                            conns.push((h, stop));
                        }
                    }
                    Err(AcceptError::Timeout) => {}
                    Err(AcceptError::Closed) => break,
                }
            }
            conns
                .iter()
                .for_each(|(_, s)| s.store(true, Ordering::Release));
            for (h, _) in conns {
                let _ = h.join();
            }
        })
        .map_err(dataplane::ConnectError::Io)?;
        Ok(Self {
            local,
            _worker: worker,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

fn echo(inc: Incoming, dev: &Device, stats: &EchoStats, stop: &AtomicBool) {
    #[cfg(debug_assertions)]
    super::test_hooks::panic_if("echo");
    let pd = dev.alloc_pd();
    let (scq, rcq) = (dev.create_cq(), dev.create_cq());
    let Ok(mr) = pd.register(ECHO_MAX * SLOTS, Access::LOCAL_WRITE) else {
        let _ = inc.reject(b"");
        return;
    };
    let init = QpInit {
        pd,
        send_cq: scq.clone(),
        recv_cq: rcq.clone(),
    };
    let slot = |i: usize| i * ECHO_MAX..(i + 1) * ECHO_MAX;
    let Ok(qp) = inc.accept_with(init, b"", |qp| {
        (0..SLOTS).try_for_each(|i| qp.post_recv(i as u64, &mr, slot(i)))
    }) else {
        return;
    };
    while !stop.load(Ordering::Acquire) {
        let Some(c) = rcq.wait(Duration::from_millis(100)) else {
            if !qp.is_connected() {
                break;
            }
            continue;
        };
        if !c.is_ok() {
            break;
        }
        let i = c.wr_id as usize;
        let r = slot(i);
        if qp
            .post_send(c.wr_id, &mr, r.start..r.start + c.byte_len as usize)
            .is_err()
        {
            break;
        }
        // The slot is free again once the echo went out.
        if !scq.wait(Duration::from_secs(10)).is_some_and(|s| s.is_ok()) {
            return;
        }
        stats.messages.fetch_add(1, Ordering::Relaxed);
        if qp.post_recv(c.wr_id, &mr, r).is_err() {
            break;
        }
    }
}
