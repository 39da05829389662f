//! A device's lanes: one engine per receive queue behind one XDP program. Queue pairs live on
//! the lane that owns their flow; the device spreads active opens over the lanes and listens
//! on all of them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{State, XdpLane, XdpListener};
use crate::counters::DeviceCounters;
use crate::cq::Drive;
use crate::engine::{HandOff, HandOffCounters};
use crate::{ConnectError, ConnectionConfig, DeviceError, QpInit, XdpConfig};

/// The lanes of an AF_XDP device (at least one).
#[derive(Debug)]
pub(crate) struct XdpLanes {
    lanes: Vec<Arc<XdpLane>>,
    handoff: Arc<HandOff>,
    /// The lane the next active open goes to.
    next: AtomicUsize,
    /// Inline rounds driven through completion queues.
    rounds: AtomicU32,
}

impl XdpLanes {
    /// Opens the lanes of `cfg` ([`XdpLane::open_lanes`]).
    pub(crate) fn open(
        cfg: &XdpConfig,
        counters: Arc<DeviceCounters>,
    ) -> Result<Self, DeviceError> {
        let (lanes, handoff) = XdpLane::open_lanes(cfg, counters)?;
        for (i, lane) in lanes.iter().enumerate() {
            let others = lanes
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, l)| Arc::downgrade(&l.shared))
                .collect();
            let _ = lane.shared.siblings.set(others);
        }
        Ok(XdpLanes {
            lanes: lanes.into_iter().map(Arc::new).collect(),
            handoff,
            next: AtomicUsize::new(0),
            rounds: AtomicU32::new(0),
        })
    }

    /// The first lane: what every lane shares (address, namespace, settings) is read here.
    pub(crate) fn first(&self) -> &Arc<XdpLane> {
        &self.lanes[0]
    }

    /// All lanes, in queue order.
    pub(crate) fn all(&self) -> &[Arc<XdpLane>] {
        &self.lanes
    }

    /// The lane the next active open goes to (round robin).
    pub(crate) fn next_lane(&self) -> &Arc<XdpLane> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        &self.lanes[i]
    }

    /// Packets handed between lanes so far.
    pub(crate) fn handoff_counters(&self) -> HandOffCounters {
        self.handoff.counters()
    }

    /// Active open on the next lane in turn (it takes a local port whose flow it owns).
    pub(crate) fn connect(
        &self,
        addr: SocketAddr,
        init: QpInit,
        config: &ConnectionConfig,
        private_data: &[u8],
        before_start: &mut dyn FnMut(&crate::QueuePair) -> Result<(), crate::PostError>,
    ) -> Result<(super::XdpQp, crate::queue_pair::Established), ConnectError> {
        let dev = self.next_lane();
        init.send_cq.add_lane(dev.shared.lane);
        init.recv_cq.add_lane(dev.shared.lane);
        dev.connect(addr, init, config, private_data, before_start)
    }

    /// Listens on `addr` on every lane.
    pub(crate) fn listen(
        &self,
        addr: SocketAddr,
        config: ConnectionConfig,
    ) -> Result<XdpListener, ConnectError> {
        XdpListener::on_lanes(&self.lanes, addr, config)
    }
}

/// How often a wait on several lanes looks again: an inline device's lanes are driven each
/// time (an acceptor usually waits beside threads serving the connections it accepted:
/// spinning, it would take the engine, and a pinned core, from them half the time).
const INLINE_PACE: Duration = Duration::from_micros(100);
const THREADED_PACE: Duration = Duration::from_micros(20);

/// Looks at each of `lanes` in turn with `f` (under the lane's state lock, after a round of an
/// inline lane) until `f` returns `Some` or `deadline` passes (`None`). Each call starts one
/// lane further (`first`), so that no lane starves.
pub(crate) fn wait_on_lanes<K: Copy, T>(
    lanes: &[(Arc<XdpLane>, K)],
    first: &AtomicUsize,
    deadline: Instant,
    mut f: impl FnMut(&Arc<XdpLane>, &mut State, K) -> Option<T>,
) -> Option<T> {
    let n = lanes.len();
    let start = first.fetch_add(1, Ordering::Relaxed);
    loop {
        let now = Instant::now();
        for k in 0..n {
            let (dev, key) = &lanes[(start + k) % n];
            let mut st = dev.shared.lock();
            if dev.shared.inline {
                st.poll(Instant::now());
            }
            if let Some(t) = f(dev, &mut st, *key) {
                return Some(t);
            }
        }
        if now >= deadline {
            return None;
        }
        let inline = lanes.first().is_some_and(|(d, _)| d.shared.inline);
        std::thread::sleep(if inline { INLINE_PACE } else { THREADED_PACE });
    }
}

/// An inline queue drives the other lanes too on every this many rounds: packets of its flows
/// that arrived on their queues wait there for a round (the hand-off).
const OTHER_LANES_EVERY: u32 = 8;

impl Drive for XdpLanes {
    /// One round of the inline lanes in `mask` (every lane for 0, and every
    /// [`OTHER_LANES_EVERY`] rounds); with several lanes, a lane another thread is driving
    /// right now is skipped rather than waited for.
    fn drive(&self, mask: u64) {
        match self.lanes.as_slice() {
            [one] => one.shared.drive(),
            lanes => {
                let all = mask == 0
                    || self
                        .rounds
                        .fetch_add(1, Ordering::Relaxed)
                        .is_multiple_of(OTHER_LANES_EVERY);
                for (i, lane) in lanes.iter().enumerate() {
                    if all || mask & (1u64 << i) != 0 {
                        lane.shared.try_drive();
                    }
                }
            }
        }
    }

    fn needs_caller(&self) -> bool {
        self.first().shared.inline
    }
}
