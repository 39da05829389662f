//! [`PacketIo`] over an AF_XDP queue ([`XskQueue`]): received frames are handled straight from
//! the UMEM (placement copies from there) and go back to the free pool after the batch;
//! transmit frames are taken from the pool, written in place, and queued on the tx ring.
//!
//! On a multi-buffer socket (jumbo MTUs) a packet may span several frames: a received chain
//! is held until its last frame and, when its frames sit end to end on the receive strip
//! ([`XskQueue::chain_run`]), lent to the endpoint in place; otherwise (no strip, or a chain
//! across the strip's end) it is gathered into one buffer first. A transmitted packet is
//! written in place into a transmit slab (contiguous frames, [`XskQueue::alloc_slab`]) and
//! sent as a chain; without a free slab (or on a queue without slabs) it is written into one
//! buffer and then scattered over frames. A packet that fits one frame takes the copy-free
//! path either way.

use std::time::Instant;

use endpoint::{FrameSink, TxOutcome};

use super::chain::RxChain;
use super::handoff::LaneLink;
use super::io::PacketIo;
use afxdp::xsk::MAX_FRAGMENTS;
use afxdp::{Frame, XskQueue};

/// Most frames of one chain held while it is received; a longer one is dropped (its gather
/// would exceed the largest packet anyway).
const MAX_HELD: usize = MAX_FRAGMENTS + 2;

/// An engine's packet I/O on one AF_XDP socket.
pub struct XskIo {
    queue: XskQueue,
    rx: Vec<Frame>,
    tx: Vec<Frame>,
    /// Multi-buffer only: the chain received so far, and the buffer a transmitted packet is
    /// written into before it is scattered over frames.
    chain: Option<Chains>,
    /// Multi-queue devices: packets of flows another lane owns go to its inbox, and this
    /// lane's inbox is drained after the ring.
    lanes: Option<LaneLink>,
}

/// Buffers for packets that span frames.
struct Chains {
    /// Frames of the chain being received (it may end in a later batch), kept until it ends:
    /// a chain on consecutive strip positions is read in place.
    held: Vec<Frame>,
    /// Chains read in place (one run of the strip), and gathered.
    in_place: u64,
    gathered: u64,
    /// Gathers a chain that is not one run of the UMEM.
    rx: RxChain,
    tx: Vec<u8>,
    /// Frames the longest packet needs: checked free before a packet is written.
    tx_frames: usize,
}

impl Chains {
    /// Hands the chain in `held` (complete, or cut at [`MAX_HELD`] frames) to `deliver`: in
    /// place when it is one run of the strip, else gathered (a cut chain is dropped by the
    /// gather as too long).
    fn deliver(&mut self, queue: &XskQueue, deliver: &mut dyn FnMut(&[u8])) {
        let complete = self.held.last().is_some_and(|f| !f.continues());
        if complete {
            if let Some(run) = queue.chain_run(&self.held) {
                self.in_place += 1;
                deliver(run);
                return;
            }
        }
        self.gathered += 1;
        let dropped = self.rx.dropped();
        for f in &self.held {
            if let Some(packet) = self.rx.feed(queue.data(f), f.continues()) {
                deliver(packet);
            }
        }
        if self.rx.dropped() != dropped {
            tracing::warn!(
                dropped = self.rx.dropped(),
                "a received chain of frames longer than the largest packet was dropped"
            );
        }
    }
}

impl XskIo {
    /// Wraps a bound queue whose frames the endpoint may fill up to the queue's largest
    /// packet.
    pub fn new(queue: XskQueue) -> Self {
        let max = queue.max_packet();
        Self::with_max_frame(queue, max)
    }

    /// Wraps a bound queue; packets are at most `max_frame` octets each way (the link's MTU
    /// plus the Ethernet header), or the queue's largest packet if that is less.
    pub fn with_max_frame(queue: XskQueue, max_frame: usize) -> Self {
        let max = max_frame.min(queue.max_packet());
        let chain = queue.is_multi_buffer().then(|| Chains {
            held: Vec::with_capacity(MAX_HELD),
            in_place: 0,
            gathered: 0,
            rx: RxChain::new(max),
            tx: vec![0; max],
            tx_frames: max.div_ceil(queue.frame_capacity()),
        });
        XskIo {
            queue,
            rx: Vec::with_capacity(64),
            tx: Vec::with_capacity(64),
            chain,
            lanes: None,
        }
    }

    /// This I/O as one lane of a multi-queue device (`engine::handoff`).
    pub fn with_lane(mut self, link: LaneLink) -> Self {
        self.lanes = (link.lane().count() > 1).then_some(link);
        self
    }
    /// The queue.
    pub fn queue(&self) -> &XskQueue {
        &self.queue
    }
    /// The queue, mutably.
    pub fn queue_mut(&mut self) -> &mut XskQueue {
        &mut self.queue
    }

    /// Received chains of frames so far: read in place (one run of the receive strip) and
    /// gathered into a buffer.
    pub fn rx_chains(&self) -> (u64, u64) {
        self.chain
            .as_ref()
            .map_or((0, 0), |c| (c.in_place, c.gathered))
    }
}

impl PacketIo for XskIo {
    fn rx_batch(&mut self, _now: Instant, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let n = self.queue.recv(&mut self.rx, max);
        let XskIo {
            queue,
            rx,
            chain,
            lanes,
            ..
        } = self;
        let mut deliver = |packet: &[u8]| {
            if !lanes.as_ref().is_some_and(|l| l.hand_off(packet)) {
                f(packet);
            }
        };
        match chain.as_mut() {
            None => {
                for frame in rx.iter() {
                    deliver(queue.data(frame));
                }
                queue.release(rx);
            }
            Some(chain) => {
                let mut done = std::mem::take(rx);
                for frame in done.drain(..) {
                    if chain.rx.mid_chain() {
                        // The rest of a chain cut at MAX_HELD frames: the gather takes (and
                        // drops) it.
                        if let Some(packet) = chain.rx.feed(queue.data(&frame), frame.continues()) {
                            deliver(packet);
                        }
                        queue.release_one(frame);
                        continue;
                    }
                    if chain.held.is_empty() && !frame.continues() {
                        deliver(queue.data(&frame));
                        queue.release_one(frame);
                        continue;
                    }
                    let ends = !frame.continues();
                    chain.held.push(frame);
                    if !ends && chain.held.len() < MAX_HELD {
                        continue;
                    }
                    // A cut chain leaves the gather mid-chain: its rest goes there.
                    chain.deliver(queue, &mut deliver);
                    queue.release(&mut chain.held);
                }
                *rx = done;
            }
        }
        match lanes.as_mut() {
            Some(l) => n + l.drain(max, f),
            None => n,
        }
    }

    fn flush(&mut self, _now: Instant) {
        // `send` kicks the kernel for what it queued; in copy mode that `sendto` usually
        // completes the batch, so reclaim first and kick again only for what is left.
        self.queue.send(&mut self.tx);
        self.queue.reclaim();
        self.queue.kick_tx();
    }
}

impl FrameSink for XskIo {
    fn tx_frame(
        &mut self,
        _now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        if self.tx.len() >= 64 {
            self.queue.send(&mut self.tx);
        }
        if let Some(chain) = self.chain.as_mut() {
            let max = chain.tx.len();
            if self.queue.slab_capacity() >= max {
                if let Some(mut slab) = self.queue.alloc_slab() {
                    let written = fill(&mut self.queue.slab_mut(&mut slab)[..max]);
                    return match written {
                        Some(n) if n > 0 && n <= max => {
                            if self.queue.send_slab(slab, n, &mut self.tx) {
                                TxOutcome::Queued
                            } else {
                                TxOutcome::Empty
                            }
                        }
                        _ => {
                            self.queue.release_slab(slab);
                            TxOutcome::Empty
                        }
                    };
                }
            }
            // Enough frames for the longest packet first, so that what `fill` writes is
            // never lost for want of frames to scatter it over.
            if self.queue.free_frames(chain.tx_frames) < chain.tx_frames {
                return TxOutcome::NoBuffer;
            }
            return match fill(&mut chain.tx) {
                Some(n) if n > 0 && n <= chain.tx.len() => {
                    match self.queue.scatter(&chain.tx[..n], &mut self.tx) {
                        Some(_) => TxOutcome::Queued,
                        None => TxOutcome::Empty,
                    }
                }
                _ => TxOutcome::Empty,
            };
        }
        let Some(mut frame) = self.queue.alloc() else {
            return TxOutcome::NoBuffer;
        };
        let written = fill(self.queue.data_mut_full(&mut frame));
        match written {
            Some(n) if self.queue.set_len(&mut frame, n).is_ok() => {
                self.tx.push(frame);
                TxOutcome::Queued
            }
            _ => {
                self.queue.release_one(frame);
                TxOutcome::Empty
            }
        }
    }
}
