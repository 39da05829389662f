//! Hand-off between the lanes of a multi-queue device: a packet received on one lane's queue
//! whose flow another lane owns ([`endpoint::Lane::of`]) is copied into the owner's inbox and
//! handled in the owner's next round.
//!
//! Between two xwarp hosts with the same lane count no packet needs it (each end transmits a
//! flow on its owner's queue, and veth delivers it on that queue). A kernel peer on veth picks
//! its transmit queue by its own hash, and a NIC's RSS by its own: their packets may arrive on
//! any lane. The inboxes are bounded; a packet that finds its inbox full is dropped and
//! counted (TCP retransmits it).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::sync::{AtomicU64, AtomicUsize, Mutex};

use endpoint::{flow_of, Lane};

/// Packets an inbox holds before it drops.
pub const INBOX_MAX: usize = 1024;

/// The inboxes of all lanes of a device, and what passed through them.
#[derive(Debug)]
pub struct HandOff {
    inboxes: Vec<Inbox>,
    /// Packets an inbox holds before it drops ([`INBOX_MAX`]).
    capacity: usize,
    handed: AtomicU64,
    dropped: AtomicU64,
}

/// One lane's inbox, with its length readable without the lock (an owner polls it every
/// round, nearly always empty). The length is stored under the lock, after each change of the
/// queue: its last store is always the queue's length, so an owner that reads 0 misses nothing
/// that was handed to it before (the loom model `loom_models::handoff` checks this).
#[derive(Debug, Default)]
struct Inbox {
    queue: Mutex<Queue>,
    len: AtomicUsize,
}

/// The packets waiting for a lane, and buffers its drained packets left for reuse (a steady
/// hand-off allocates nothing per packet).
#[derive(Debug, Default)]
struct Queue {
    packets: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
}

/// What the hand-off did (sums over the device's lanes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandOffCounters {
    /// Packets received on one lane and handled by their owner.
    pub handed: u64,
    /// Packets dropped because their owner's inbox was full.
    pub dropped: u64,
}

impl HandOff {
    /// Inboxes for `lanes` lanes.
    pub fn new(lanes: u16) -> Arc<Self> {
        Self::with_capacity(lanes, INBOX_MAX)
    }

    /// Inboxes for `lanes` lanes that hold `capacity` packets each (the models use small ones).
    pub(crate) fn with_capacity(lanes: u16, capacity: usize) -> Arc<Self> {
        Arc::new(HandOff {
            inboxes: (0..lanes).map(|_| Inbox::default()).collect(),
            capacity,
            handed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        })
    }

    /// What passed through so far.
    pub fn counters(&self) -> HandOffCounters {
        HandOffCounters {
            handed: self.handed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }

    /// `lane`'s inbox as its owner would see it now: the length hint, and the packets queued.
    #[cfg(all(test, loom))]
    pub(crate) fn waiting(&self, lane: u16) -> (usize, usize) {
        let inbox = &self.inboxes[usize::from(lane)];
        let queued = inbox.queue.lock().unwrap().packets.len();
        (inbox.len.load(Ordering::Acquire), queued)
    }

    /// Copies `packet` into `lane`'s inbox, or drops and counts it when the inbox is full.
    pub(crate) fn give(&self, lane: u16, packet: &[u8]) {
        let Some(inbox) = self.inboxes.get(usize::from(lane)) else {
            return;
        };
        let mut q = inbox.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.packets.len() >= self.capacity {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut buf = q.spare.pop().unwrap_or_default();
        buf.clear();
        afxdp::bulk_copy::extend_from_slice(&mut buf, packet);
        q.packets.push_back(buf);
        inbox.len.store(q.packets.len(), Ordering::Release);
        self.handed.fetch_add(1, Ordering::Relaxed);
    }
}

/// One lane's side of the hand-off: decides per packet, and drains its own inbox.
#[derive(Debug)]
pub struct LaneLink {
    lane: Lane,
    handoff: Arc<HandOff>,
    /// Packets taken from the inbox, handled outside its lock.
    taken: Vec<Vec<u8>>,
}

impl LaneLink {
    /// `lane`'s link to the inboxes of its device (`handoff` has one per lane).
    pub fn new(lane: Lane, handoff: Arc<HandOff>) -> Self {
        LaneLink {
            lane,
            handoff,
            taken: Vec::new(),
        }
    }

    /// The lane.
    pub fn lane(&self) -> &Lane {
        &self.lane
    }

    /// Hands `packet` to the lane that owns its flow and returns true, or returns false when
    /// it is this lane's to handle (its own flow, or nothing a flow can be read from).
    pub fn hand_off(&self, packet: &[u8]) -> bool {
        let Some((src, dst)) = flow_of(packet) else {
            return false;
        };
        // The packet runs from its source to us: `dst` is the local end. A flow no lane
        // owns (the NIC's RSS put it on a queue without a lane) stays where it arrived.
        let owner = match self.lane.owner(dst, src) {
            Some(o) if o != self.lane.index() => o,
            _ => return false,
        };
        self.handoff.give(owner, packet);
        true
    }

    /// Hands up to `max` packets of this lane's inbox to `f`, oldest first; returns how many.
    pub fn drain(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let Some(inbox) = self.handoff.inboxes.get(usize::from(self.lane.index())) else {
            return 0;
        };
        if inbox.len.load(Ordering::Acquire) == 0 {
            return 0;
        }
        {
            let mut q = inbox.queue.lock().unwrap_or_else(|p| p.into_inner());
            let n = q.packets.len().min(max);
            self.taken.extend(q.packets.drain(..n));
            let left = q.packets.len();
            // The model's broken variant: the length stored after the lock is released, where
            // a packet handed in between is hidden behind a stale 0.
            #[cfg(loom_broken = "handoff_len_after_unlock")]
            drop(q);
            inbox.len.store(left, Ordering::Release);
        }
        for p in &self.taken {
            f(p);
        }
        let n = self.taken.len();
        // The buffers go back for the next packets handed to this lane (at most an inbox's
        // worth is kept).
        let mut q = inbox.queue.lock().unwrap_or_else(|p| p.into_inner());
        let keep = self.handoff.capacity.saturating_sub(q.spare.len());
        q.spare.extend(self.taken.drain(..).take(keep));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    /// An Ethernet/IPv4/TCP frame from `src` to `dst` (headers only).
    fn frame(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
        let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src, dst) else {
            unreachable!()
        };
        let mut f = vec![0u8; 54];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[23] = 6;
        f[46] = 0x50;
        f[26..30].copy_from_slice(&s.ip().octets());
        f[30..34].copy_from_slice(&d.ip().octets());
        f[34..36].copy_from_slice(&s.port().to_be_bytes());
        f[36..38].copy_from_slice(&d.port().to_be_bytes());
        f
    }

    #[test]
    fn a_packet_reaches_the_lane_that_owns_its_flow() {
        let h = HandOff::new(2);
        let mut lanes = [0, 1].map(|i| LaneLink::new(Lane::new(i, 2).unwrap(), h.clone()));
        let server: SocketAddr = "198.18.0.1:4791".parse().unwrap();
        let mut seen = [0usize; 2];
        for port in 40000..40064 {
            let client = SocketAddr::new("198.18.0.2".parse().unwrap(), port);
            let f = frame(client, server);
            let owner = usize::from(Lane::of(client, server, 2));
            // Arrives on lane 0: kept when lane 0 owns it, else handed to lane 1.
            assert_eq!(lanes[0].hand_off(&f), owner != 0);
            if owner == 0 {
                seen[0] += 1;
            }
        }
        let handed = lanes[1].drain(usize::MAX, &mut |p| {
            let (s, d) = flow_of(p).unwrap();
            assert_eq!(Lane::of(s, d, 2), 1);
        });
        seen[1] = handed;
        assert_eq!(seen[0] + seen[1], 64);
        assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
        assert_eq!(h.counters().handed, handed as u64);
        assert_eq!(lanes[0].drain(usize::MAX, &mut |_| panic!("nothing")), 0);
        // The drained buffers wait in lane 1's inbox for the next hand-off, which takes one
        // instead of allocating.
        let spare = |h: &HandOff| h.inboxes[1].queue.lock().unwrap().spare.len();
        assert_eq!(spare(&h), handed);
        let client = (40000..)
            .map(|p| SocketAddr::new("198.18.0.2".parse().unwrap(), p))
            .find(|c| Lane::of(*c, server, 2) == 1)
            .unwrap();
        assert!(lanes[0].hand_off(&frame(client, server)));
        assert_eq!(spare(&h), handed - 1);
    }

    #[test]
    fn lanes_following_rss_hand_a_packet_to_the_lane_of_its_rss_queue() {
        // Lanes on queues 0 and 1; the NIC's table also names queue 7, which no lane serves.
        let key: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(29) ^ 0xa5).collect();
        let rss = Arc::new(endpoint::RssLanes {
            hash: endpoint::RssHash::new(key, (0..64).map(|i| [0, 1, 7][i % 3]).collect()).unwrap(),
            first_queue: 0,
        });
        let h = HandOff::new(2);
        let lanes = [0, 1]
            .map(|i| LaneLink::new(Lane::new(i, 2).unwrap().following(rss.clone()), h.clone()));
        let server: SocketAddr = "198.18.0.1:4791".parse().unwrap();
        let (mut handed, mut kept, mut disagree) = (0, 0, 0);
        for port in 40000..40200 {
            let client = SocketAddr::new("198.18.0.2".parse().unwrap(), port);
            let queue = rss.hash.queue_of(client, server).unwrap();
            // Arrived on lane 0 (a kernel peer's transmit queue, say): handed over exactly when
            // the NIC's RSS gives the flow to lane 1; a flow of queue 7 stays.
            let moved = lanes[0].hand_off(&frame(client, server));
            assert_eq!(moved, queue == 1, "port {port} queue {queue}");
            handed += usize::from(moved);
            kept += usize::from(queue == 7);
            disagree += usize::from(queue < 2 && u32::from(Lane::of(client, server, 2)) != queue);
        }
        assert!(handed > 30 && kept > 30, "{handed} {kept}");
        // The symmetric hash would have moved other packets: the RSS decides here.
        assert!(disagree > 30, "{disagree}");
        assert_eq!(h.counters().handed, handed as u64);
    }

    #[test]
    fn a_full_inbox_drops_and_counts() {
        let h = HandOff::new(2);
        let lane0 = LaneLink::new(Lane::new(0, 2).unwrap(), h.clone());
        let server: SocketAddr = "198.18.0.1:4791".parse().unwrap();
        let client = (40000..)
            .map(|p| SocketAddr::new("198.18.0.2".parse().unwrap(), p))
            .find(|c| Lane::of(*c, server, 2) == 1)
            .unwrap();
        let f = frame(client, server);
        for _ in 0..INBOX_MAX + 5 {
            assert!(lane0.hand_off(&f));
        }
        assert_eq!(
            h.counters(),
            HandOffCounters {
                handed: INBOX_MAX as u64,
                dropped: 5
            }
        );
        // Not a TCP frame: the receiving lane keeps it.
        assert!(!lane0.hand_off(&[0u8; 20]));
    }
}
