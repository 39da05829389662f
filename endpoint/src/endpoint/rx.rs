//! Receive: the checks and demultiplexing of one received frame (ours or not by [`classify`];
//! Ethernet, IPv4 or IPv6, TCP; flow table, then listeners, else a RST), and the one copy from the
//! frame into the region.

use std::time::Instant;

use ddp::{Memory, StagTable, VecMemory};
use tcp_offload::{emit_rst_for, Connection, LeanSegment, RxSink};

use super::service::frame_out;
use super::Endpoint;
use crate::classify::{classify, FrameVerdict, OwnedAddrs};
use crate::conn::{Conn, FeedSink, Iwarp};
use crate::counters::EndpointCounters;
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
    ///
    /// Before that, when the fast path is on (`EndpointConfig::tcp.fast_path`), a frame of a
    /// connection's common case (see `handle_lean_frame`) goes straight to its TCP's header
    /// prediction, with the same result.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.clock.set(now);
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += frame.len() as u64;
        if self.cfg.tcp.fast_path && self.handle_lean_frame(now, frame) {
            return;
        }
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
        let ts = self.clock.stamp;
        if let Some(&id) = self.flows.get(&seg.tuple) {
            if let Some(c) = self.conns.get_mut(&id) {
                let (tags, mem, counters) = (&mut self.tags, &mut self.mem, &mut self.counters);
                deliver(c, tags, mem, counters, now, |tcp, sink| match sink {
                    Some(sink) => tcp.handle_segment_with(ts, seg, sink),
                    None => tcp.handle_segment(ts, seg),
                });
                c.mark(id, &mut self.dirty);
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
            self.listeners[li].tcp.handle_segment(ts, seg);
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

    /// The fast path of a received frame: a segment of the common layout
    /// ([`LeanSegment::parse`]) to our MAC and address, on a steered port, of a connection in
    /// the flow table, that its TCP takes through header prediction. What `classify`, the
    /// checks after it and the flow table would decide for such a frame is decided by these
    /// checks already. False, having changed nothing, for any other frame: the full path judges
    /// it.
    fn handle_lean_frame(&mut self, now: Instant, frame: &[u8]) -> bool {
        let Some((eth, ip)) = frame.split_first_chunk::<{ ethernet::HEADER_LEN }>() else {
            return false;
        };
        // Untagged, to our MAC, an EtherType that matches the IP version.
        let ethertype = u16::from_be_bytes([eth[12], eth[13]]);
        if eth[..6] != self.cfg.mac || ethertype != ethernet::ethertype_of(ip) {
            return false;
        }
        // Borrowed where it was parsed, as on the full path (not moved out of the `Option`).
        let parsed = LeanSegment::parse(ip);
        let Some(seg) = &parsed else {
            return false;
        };
        let id = match &self.last_flow {
            // Its local address is ours and its port steered: checked before it was cached,
            // and what is steered only grows while a flow lives (listeners stay, closed ones
            // too; a flow's removal clears the cache).
            Some((ends, id)) if ends.matches(seg) => {
                debug_assert!({
                    let tuple = seg.tuple();
                    let local = tuple.local;
                    local.ip() == self.cfg.ip
                        && self.is_steered(local.port())
                        && self.flows.get(&tuple) == Some(id)
                });
                *id
            }
            _ => {
                let tuple = seg.tuple();
                let local = tuple.local;
                if local.ip() != self.cfg.ip || !self.is_steered(local.port()) {
                    return false;
                }
                let Some(&id) = self.flows.get(&tuple) else {
                    return false;
                };
                self.last_flow = Some((seg.ends(), id));
                id
            }
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return false;
        };
        let (ts, tags, mem, counters) = (
            self.clock.stamp,
            &mut self.tags,
            &mut self.mem,
            &mut self.counters,
        );
        let taken = if seg.payload.is_empty() {
            // (No payload, nothing for a receive sink: none built, no domain locked.)
            c.tcp.handle_lean(ts, seg, None)
        } else {
            deliver(c, tags, mem, counters, now, |tcp, sink| {
                tcp.handle_lean(ts, seg, sink)
            })
        };
        if !taken {
            return false;
        }
        c.mark(id, &mut self.dirty);
        true
    }

    /// Whether TCP to local `port` is steered to us: a listening port, the port of a closed
    /// listener (the XDP program keeps it while connections accepted on it live; a segment of
    /// none of them gets RST), or the active-open range (what the XDP program's port map
    /// holds).
    #[inline(always)]
    fn is_steered(&self, port: u16) -> bool {
        self.cfg.local_ports.contains(&port)
            || self.listeners.iter().any(|l| l.tcp.local().port() == port)
    }
}

/// Hands a received segment to `c`'s TCP through `handle`, with a receive sink when `c` is an
/// iWARP connection in record mode: the one copy, TCP lending the payload and placement
/// writing it into the region of `c`'s protection domain (locked for the segment) or of the
/// endpoint's own memory (`tags`, `mem`). Inlined: it runs once per segment received.
#[inline(always)]
fn deliver<D: Domain, R>(
    c: &mut Conn<D>,
    tags: &mut StagTable,
    mem: &mut VecMemory,
    counters: &mut EndpointCounters,
    now: Instant,
    handle: impl FnOnce(&mut Connection, Option<&mut dyn RxSink>) -> R,
) -> R {
    match c.state.iwarp_mut() {
        Some(Iwarp { qp, rx, .. }) if c.tcp.record_mode() => {
            let mut guard = c.pd.as_ref().map(|p| p.lock());
            let (tags, mem): (&mut StagTable, &mut dyn Memory) = match guard.as_mut() {
                Some(g) => g.parts(),
                None => (tags, mem),
            };
            let mut sink = FeedSink {
                qp,
                rx,
                tags,
                mem,
                now,
                counters,
            };
            handle(&mut c.tcp, Some(&mut sink))
        }
        _ => handle(&mut c.tcp, None),
    }
}
