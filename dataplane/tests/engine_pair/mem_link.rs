//! An in-memory Ethernet link between two engines over `netsim::Link` (seeded delay,
//! jitter, loss, reordering, duplication): a [`PacketIo`] for tests of the engine's own I/O
//! (the fault injector). Time is the engines' `Instant`s, counted from `base`: tests drive it
//! with virtual time.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use dataplane::engine::PacketIo;
use endpoint::{FrameSink, TxOutcome};
use netsim::{Link, LinkConfig, LinkConfigError, LinkStats, SimTime};

/// Frame buffer size of a port.
pub const MEM_FRAME_LEN: usize = 2048;

/// One end of an in-memory link.
pub struct MemPort {
    base: Instant,
    tx: Arc<Mutex<Link>>,
    rx: Arc<Mutex<Link>>,
    buf: Vec<u8>,
}

/// Two ports joined back to back: frames sent on `.0` arrive at `.1` through `a_to_b`, and the
/// other way through `b_to_a`. Link MTUs count whole frames.
pub fn mem_link(
    base: Instant,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    seed: u64,
) -> Result<(MemPort, MemPort), LinkConfigError> {
    let ab = Arc::new(Mutex::new(Link::new(a_to_b, seed)?));
    let ba = Arc::new(Mutex::new(Link::new(b_to_a, seed ^ 0x5bd1_e995)?));
    let port = |tx: &Arc<Mutex<Link>>, rx: &Arc<Mutex<Link>>| MemPort {
        base,
        tx: tx.clone(),
        rx: rx.clone(),
        buf: vec![0; MEM_FRAME_LEN],
    };
    Ok((port(&ab, &ba), port(&ba, &ab)))
}

fn lock(l: &Mutex<Link>) -> std::sync::MutexGuard<'_, Link> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

impl MemPort {
    /// Puts a raw frame on this port's outgoing link (tests: crafted or garbage frames).
    pub fn inject(&mut self, now: Instant, frame: Vec<u8>) {
        lock(&self.tx).send(SimTime::from_instant(self.base, now), frame);
    }
    /// Statistics of the outgoing direction.
    pub fn tx_stats(&self) -> LinkStats {
        *lock(&self.tx).stats()
    }
    /// Frames in flight towards this port.
    pub fn rx_in_flight(&self) -> usize {
        lock(&self.rx).in_flight()
    }
}

impl PacketIo for MemPort {
    fn rx_batch(&mut self, now: Instant, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let t = SimTime::from_instant(self.base, now);
        let mut n = 0;
        while n < max {
            let Some(frame) = lock(&self.rx).pop_arrived(t) else {
                break;
            };
            f(&frame);
            n += 1;
        }
        n
    }

    fn flush(&mut self, _now: Instant) {}

    fn next_rx(&self) -> Option<Instant> {
        lock(&self.rx)
            .next_arrival()
            .map(|t| t.to_instant(self.base))
    }
}

impl FrameSink for MemPort {
    fn tx_frame(
        &mut self,
        now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        match fill(&mut self.buf) {
            Some(n) => {
                let frame = self.buf[..n.min(self.buf.len())].to_vec();
                lock(&self.tx).send(SimTime::from_instant(self.base, now), frame);
                TxOutcome::Queued
            }
            None => TxOutcome::Empty,
        }
    }
}
