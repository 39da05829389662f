//! Receive: the checks and demultiplexing of one received frame (ours or not by [`classify`];
//! Ethernet, IPv4 or IPv6, TCP; flow table, then listeners, else a RST), and the one copy from the
//! frame into the region.

use std::time::Instant;

use ddp::{Memory, StagTable};
use tcp_offload::emit_rst_for;

use super::service::frame_out;
use super::Endpoint;
use crate::classify::{classify, FrameVerdict, OwnedAddrs};
use crate::conn::{FeedSink, Iwarp};
use crate::domain::{Domain, DomainGuard};
use crate::ethernet::{self, EthernetFrame};

/// Most RSTs for strays waiting for a transmit buffer.
pub(crate) const PENDING_TX_MAX: usize = 1024;

impl<D: Domain> Endpoint<D> {
    /// Handles one received Ethernet frame (no FCS). The slice is only borrowed for the call:
    /// in-order payload is placed straight from it. Never panics; bad frames are counted and
    /// dropped.
    ///
    /// First decision: [`classify`] with our address and steered ports (listening ports and
    /// the active-open range), as the XDP program decides. Not ours counts as a drop, a first
    /// fragment as a fragment, a malformed frame as malformed; then a frame for another MAC is dropped, and
    /// `tcp_offload::wire` checks checksums and options.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.last_now = now;
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += frame.len() as u64;
        let own = [self.cfg.ip];
        match classify(frame, OwnedAddrs(&own), |port| self.is_steered(port)) {
            FrameVerdict::Ours => {}
            FrameVerdict::NotOurs => {
                self.counters.drops += 1;
                return;
            }
            FrameVerdict::Fragment => {
                self.counters.fragments += 1;
                return;
            }
            FrameVerdict::Malformed => {
                self.counters.malformed += 1;
                return;
            }
        }
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            self.counters.malformed += 1;
            return;
        };
        let dst = eth.dst();
        if dst != self.cfg.mac && dst != ethernet::BROADCAST {
            self.counters.drops += 1;
            return;
        }
        // Borrowed where it was parsed (the segment is a few hundred octets: not moved).
        let parsed = tcp_offload::wire::parse(eth.payload());
        let seg = match &parsed {
            Ok(s) => s,
            Err(e) => {
                if e.is_malformed() {
                    self.counters.malformed += 1;
                } else {
                    self.counters.drops += 1;
                }
                return;
            }
        };
        if let Some(&id) = self.flows.get(&seg.tuple) {
            if let Some(c) = self.conns.get_mut(&id) {
                match c.state.iwarp_mut() {
                    // The one copy: TCP lends the payload, placement writes it into the region.
                    Some(Iwarp { qp, rx, .. }) if c.tcp.record_mode() => {
                        let mut guard = c.pd.as_ref().map(|p| p.lock());
                        let (tags, mem): (&mut StagTable, &mut dyn Memory) = match guard.as_mut() {
                            Some(g) => g.parts(),
                            None => (&mut self.tags, &mut self.mem),
                        };
                        let mut sink = FeedSink {
                            qp,
                            rx,
                            tags,
                            mem,
                            now,
                            counters: &mut self.counters,
                        };
                        c.tcp.handle_segment_with(now, seg, &mut sink);
                    }
                    _ => c.tcp.handle_segment(now, seg),
                }
                // Marked for the next round (`mark`, without a second lookup).
                if !c.dirty {
                    c.dirty = true;
                    self.dirty.push(id);
                }
            }
            return;
        }
        if let Some(li) = self
            .listeners
            .iter()
            .position(|l| !l.closed && l.tcp.matches(seg))
        {
            // A SYN's source MAC is where its answer goes (the peer, or the router it came
            // through), unverified: it is learnt as a next hop only once the handshake
            // completes through it (`take_accepted`).
            if seg.flags.syn && !seg.flags.ack {
                self.neighbours.note_syn(seg.tuple.remote.ip(), eth.src());
            }
            self.listener_rx = true;
            self.listeners[li].tcp.handle_segment(now, seg);
            self.take_accepted(now, li, Some(eth.src()));
            return;
        }
        self.counters.drops += 1;
        if !seg.flags.rst {
            let mut buf = vec![0u8; 128];
            let src = self.cfg.mac;
            let dst = eth.src();
            if let Some(n) = frame_out(&mut buf, src, dst, |b| {
                emit_rst_for(seg, b, self.cfg.tcp.tx_checksum)
            }) {
                buf.truncate(n);
                self.counters.rsts_for_unknown += 1;
                if self.pending_tx.len() < PENDING_TX_MAX {
                    self.pending_tx.push(buf);
                }
            }
        }
    }

    /// Whether TCP to local `port` is steered to us: a listening port, the port of a closed
    /// listener (the XDP program keeps it while connections accepted on it live; a segment of
    /// none of them gets RST), or the active-open range (what the XDP program's port map
    /// holds).
    fn is_steered(&self, port: u16) -> bool {
        self.cfg.local_ports.contains(&port)
            || self.listeners.iter().any(|l| l.tcp.local().port() == port)
    }
}
