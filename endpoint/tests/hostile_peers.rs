//! Hostile peers against endpoint A, in virtual time over
//! the seeded link: a peer that never acknowledges, one that keeps its window shut forever, an
//! endless stream of 1-octet FPDUs, Read Requests beyond IRD, a client that vanishes in the
//! middle of a transfer. Each gets the response the specs name (close, RST, Terminate) and a
//! counter; A's heap stays within a stated bound and comes back; and a second, well-behaved
//! connection between the same endpoints moves 2 MiB about as fast as it does alone.
//!
//! The hostile end is B's side of the connection (an endpoint like A), made hostile by what a
//! tap on the wire does to its frames, or by what B's application does.

mod pair;

use std::net::SocketAddrV4;
use std::time::Duration;

use ddp::{Access, RemoteBuf, WcStatus, WorkRequest};
use endpoint::{ConnId, EndpointEvent, QpSettings};
use pair::*;
use tcp_offload::CloseReason;

/// Octets the good connection writes.
const GOOD_LEN: usize = 2 << 20;
/// Most heap A's rounds may hold above where they started while the hostile peer runs (the
/// most seen is about 270 KB: 4 MiB of Write queued towards a shut window).
const HEAP_BOUND: i64 = 1 << 20;
/// What A may keep after the hostile connection is gone (a few KB seen).
const HEAP_LEFT: i64 = 64 << 10;

/// The good connection's 2 MiB RDMA Write from A to B; returns the virtual time it took.
fn good_write(p: &mut Pair, ca: ConnId, cb: ConnId, id: u64) -> Duration {
    let data = pattern(GOOD_LEN, id);
    let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
    let (dst, stag) = p.b.register(GOOD_LEN, Access::REMOTE_WRITE);
    let _ = cb;
    let start = p.now;
    p.a.post(
        ca,
        WorkRequest::write(id, buf(src, GOOD_LEN), RemoteBuf { stag, to: 0 }),
    )
    .unwrap();
    let wc = p.wait_wc(true, id);
    assert_eq!(wc.status, WcStatus::Success);
    let took = p.now - start;
    assert!(p.b.region(dst).unwrap() == &data[..], "good data differs");
    took
}

/// The good connection's time alone (same link, same seed).
fn baseline() -> Duration {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(5000, settings(false, true), settings(false, true));
    good_write(&mut p, ca, cb, 1)
}

/// A pair with the good connection (port 5000) and the hostile one (port 6000, A's settings
/// `sa`, B's `sb`) established.
struct Scene {
    p: Pair,
    good: (ConnId, ConnId),
    bad: (ConnId, ConnId),
    /// A's local port of the hostile connection.
    bad_port: u16,
    heap_start: i64,
}

fn scene(sa: QpSettings, sb: QpSettings) -> Scene {
    let mut p = Pair::clean();
    let good = p.establish(5000, settings(false, true), settings(false, true));
    p.b.listen(6000, sb).unwrap();
    let ca =
        p.a.connect(p.now, SocketAddrV4::new(IP_B, 6000), sa)
            .unwrap();
    p.run_until(100_000, |p| established(&p.events_a, ca));
    let cb = established_conns(&p.events_b)
        .into_iter()
        .find(|c| *c != good.1)
        .expect("B's end of the hostile connection");
    let bad_port = p.a.tcp(ca).unwrap().tuple().local.port();
    // A first good Write grows what the good connection keeps for its later ones (send queue,
    // unacknowledged FPDUs): the heap is counted from after it.
    good_write(&mut p, good.0, good.1, 1000);
    let heap_start = p.heap_a;
    p.heap_a_peak = p.heap_a;
    Scene {
        p,
        good,
        bad: (ca, cb),
        bad_port,
        heap_start,
    }
}

/// TCP ports of an Ethernet/IPv4/TCP frame: (source, destination).
fn ports(f: &[u8]) -> Option<(u16, u16)> {
    let ihl = usize::from(f.get(14)? & 0x0f) * 4;
    let t = f.get(14 + ihl..14 + ihl + 4)?;
    Some((
        u16::from_be_bytes([t[0], t[1]]),
        u16::from_be_bytes([t[2], t[3]]),
    ))
}

/// Sets the TCP window of a frame to 0, fixing the checksum (RFC 1624 incremental update).
fn shut_window(f: &mut [u8]) {
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let t = 14 + ihl;
    let old = u16::from_be_bytes([f[t + 14], f[t + 15]]);
    let ck = u16::from_be_bytes([f[t + 16], f[t + 17]]);
    // HC' = ~(~HC + ~m + m'), with m' = 0.
    let mut sum = u32::from(!ck) + u32::from(!old);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let ck = !(sum as u16);
    f[t + 14..t + 16].copy_from_slice(&[0, 0]);
    f[t + 16..t + 18].copy_from_slice(&ck.to_be_bytes());
}

fn closed(ev: &[EndpointEvent], c: ConnId) -> Option<CloseReason> {
    ev.iter().find_map(|e| match e {
        EndpointEvent::Closed { conn, reason } if *conn == c => Some(*reason),
        _ => None,
    })
}

impl Scene {
    /// Runs until A's hostile connection is gone (at most `limit` of virtual time); returns
    /// how it ended.
    fn until_bad_closed(&mut self, limit: Duration) -> CloseReason {
        let ca = self.bad.0;
        let end = self.p.now + limit;
        self.p.run_until(50_000_000, |p| {
            assert!(
                p.now <= end,
                "the hostile connection is still open after {limit:?}"
            );
            closed(&p.events_a, ca).is_some()
        });
        closed(&self.p.events_a, ca).unwrap()
    }

    /// The good connection's Write now; asserts it took at most twice its time alone plus
    /// 20 ms (virtual).
    fn good_keeps_its_throughput(&mut self, alone: Duration, id: u64) {
        let (ca, cb) = self.good;
        let took = good_write(&mut self.p, ca, cb, id);
        assert!(
            took <= alone * 2 + Duration::from_millis(20),
            "the good connection took {took:?} beside the hostile one, {alone:?} alone"
        );
    }

    /// A's heap stayed within the bound, and came back once the hostile connection was gone.
    fn heap_bounded(&self) {
        let peak = self.p.heap_a_peak - self.heap_start;
        assert!(peak < HEAP_BOUND, "A held {peak} octets more at its peak");
        let left = self.p.heap_a - self.heap_start;
        assert!(left < HEAP_LEFT, "A still holds {left} octets more");
    }
}

/// A peer that never acknowledges: A retransmits with backoff and gives the connection up
/// after `max_retries` (RFC 9293 §3.8.3, R2), reports it timed out and flushes the Write.
#[test]
fn a_peer_that_never_acks_is_given_up_after_r2() {
    let alone = baseline();
    let mut s = scene(settings(false, true), settings(false, true));
    let port = s.bad_port;
    s.p.ba.tap = Some(Box::new(move |f| {
        ports(f).is_none_or(|(_, dst)| dst != port)
    }));
    let (src, _) = filled(&mut s.p.a, &pattern(256 << 10, 9), Access::LOCAL_WRITE);
    let (_, stag) = s.p.b.register(256 << 10, Access::REMOTE_WRITE);
    s.p.a
        .post(
            s.bad.0,
            WorkRequest::write(99, buf(src, 256 << 10), RemoteBuf { stag, to: 0 }),
        )
        .unwrap();
    s.good_keeps_its_throughput(alone, 1);
    let why = s.until_bad_closed(Duration::from_secs(3600));
    assert_eq!(why, CloseReason::TimedOut);
    let wc =
        s.p.wc_a
            .iter()
            .find(|(_, c)| c.wr_id == 99)
            .expect("Write completed");
    assert_ne!(wc.1.status, WcStatus::Success);
    assert!(
        s.p.a.counters().retransmissions >= 15,
        "{:?}",
        s.p.a.counters()
    );
    s.heap_bounded();
    s.good_keeps_its_throughput(alone, 2);
}

/// A peer that keeps its window shut forever while answering every probe: A probes, then ends
/// the connection at the persist limit with RST (RFC 6429), counted.
#[test]
fn a_window_shut_forever_is_reset_at_the_persist_limit() {
    let alone = baseline();
    let mut s = scene(settings(false, true), settings(false, true));
    let port = s.bad_port;
    s.p.ba.tap = Some(Box::new(move |f| {
        if ports(f).is_some_and(|(_, dst)| dst == port) {
            shut_window(f);
        }
        true
    }));
    let len = 4 << 20;
    let (src, _) = filled(&mut s.p.a, &pattern(len, 9), Access::LOCAL_WRITE);
    let (_, stag) = s.p.b.register(len, Access::REMOTE_WRITE);
    s.p.a
        .post(
            s.bad.0,
            WorkRequest::write(99, buf(src, len), RemoteBuf { stag, to: 0 }),
        )
        .unwrap();
    s.good_keeps_its_throughput(alone, 1);
    let start = s.p.now;
    let why = s.until_bad_closed(Duration::from_secs(3600));
    assert_eq!(why, CloseReason::TimedOut);
    let c = s.p.a.counters();
    assert_eq!(c.persist_timeouts, 1, "{c:?}");
    let waited = s.p.now - start;
    assert!(
        waited >= Duration::from_secs(120) && waited < Duration::from_secs(200),
        "ended after {waited:?}, not at the 120 s persist limit"
    );
    let cb = s.bad.1;
    s.p.run_until(100_000, |p| closed(&p.events_b, cb).is_some());
    assert_eq!(
        closed(&s.p.events_b, cb),
        Some(CloseReason::Reset),
        "the peer got the RST"
    );
    s.heap_bounded();
    s.good_keeps_its_throughput(alone, 2);
}

/// An endless stream of FPDUs whose ULPDU is one octet (too short for any DDP header): A
/// answers the first with a Terminate (DDP-81, header of the offending segment), closes the
/// stream, and what keeps coming after the close is reset; nothing of it is kept.
#[test]
fn an_endless_stream_of_one_octet_fpdus_gets_a_terminate_and_a_close() {
    let alone = baseline();
    let mut s = scene(settings(false, true), settings(false, true));
    let mut fpdu = [0u8; 16];
    let cfg = mpa::FramingConfig {
        markers: false,
        crc: true,
    };
    let n = mpa::encode_fpdu(cfg, 0, &[&[0x41]], &mut fpdu).unwrap();
    let fpdu = fpdu[..n].to_vec();
    let mut sent = 0;
    let (ca, cb) = s.bad;
    // One FPDU per B round for as long as B's end lets the test queue them.
    s.p.run_until(10_000_000, |p| {
        if sent < 200_000 && p.b.inject_stream_bytes(cb, &fpdu).is_ok() {
            sent += 1;
        }
        closed(&p.events_a, ca).is_some() && closed(&p.events_b, cb).is_some()
    });
    assert!(sent >= 1);
    assert!(
        s.p.events_a.iter().any(|e| matches!(
            e,
            EndpointEvent::StreamError { conn, event: ddp::QpEvent::TerminateSent(_) }
                if *conn == ca
        )),
        "A sent a Terminate"
    );
    assert!(s.p.a.counters().terminates_sent >= 1);
    s.heap_bounded();
    s.good_keeps_its_throughput(alone, 1);
}

/// A peer that sends more RDMA Read Requests than A's IRD allows at once: A answers with a
/// Terminate (the Read Request's MSN is out of range, DDP-77e, as siw answers) and closes;
/// B's Reads fail. Both sides speak RFC 5044 (Rev 1): nothing is negotiated, so B keeps an ORD
/// of 32 (with Rev 2, RFC 6581's negotiation and ORD enforcement keep a well-behaved B within
/// A's IRD: `dataplane/tests/rfc6581_peer.rs`).
#[test]
fn read_requests_beyond_ird_get_a_terminate() {
    let alone = baseline();
    let rev1 = |mut s: QpSettings| {
        s.startup.revision = 1;
        s.startup.accept = mpa::Revisions::only(1);
        s
    };
    let mut sa = rev1(settings(false, true));
    sa.ird = 2;
    let mut sb = rev1(settings(false, true));
    sb.ord = 32;
    let mut s = scene(sa, sb);
    let len = 64 << 10;
    let (_, stag) = filled(&mut s.p.a, &pattern(len, 5), Access::REMOTE_READ);
    let (dst, _) = s.p.b.register(len * 16, Access::LOCAL_WRITE);
    let (ca, cb) = s.bad;
    // A, the Initiator, sends first (MPA-85: B may send nothing before A's first FPDU).
    let (r, _) = s.p.b.register(1, Access::LOCAL_WRITE);
    s.p.b.post(cb, WorkRequest::recv(1, buf(r, 1))).unwrap();
    let (z, _) = s.p.a.register(1, Access::LOCAL_WRITE);
    s.p.a
        .post(ca, WorkRequest::send(2, buf(z, 0), Default::default()))
        .unwrap();
    s.p.wait_wc(false, 1);
    for i in 0..16u64 {
        let local = ddp::LocalBuf {
            region: dst,
            offset: i * len as u64,
            len: len as u32,
        };
        s.p.b
            .post(
                cb,
                WorkRequest::read(100 + i, local, RemoteBuf { stag, to: 0 }),
            )
            .unwrap();
    }
    s.good_keeps_its_throughput(alone, 1);
    // Closed after TIME-WAIT (60 s).
    s.until_bad_closed(Duration::from_secs(180));
    assert!(
        s.p.events_a.iter().any(|e| matches!(
            e,
            EndpointEvent::StreamError { conn, event: ddp::QpEvent::TerminateSent(_) }
                if *conn == ca
        )),
        "A sent a Terminate"
    );
    let reads = |p: &Pair| {
        p.wc_b
            .iter()
            .filter(|(c, w)| *c == cb && w.wr_id >= 100)
            .map(|(_, w)| w.status)
            .collect::<Vec<_>>()
    };
    s.p.run_until(1_000_000, |p| reads(p).len() == 16);
    let failed = reads(&s.p)
        .iter()
        .filter(|st| **st != WcStatus::Success)
        .count();
    assert!(failed >= 1, "B's Reads past IRD failed");
    s.heap_bounded();
}

/// A client that vanishes in the middle of a transfer into A (nothing more from it, nothing
/// reaches it): A notices with keepalive (on by default: 60 s idle, then 6 probes 10 s apart),
/// closes the connection as timed out (counted) and flushes its posted receive.
#[test]
fn a_client_that_vanishes_mid_transfer_is_reaped_by_keepalive() {
    let alone = baseline();
    let mut s = scene(settings(false, true), settings(false, true));
    let (ca, cb) = s.bad;
    let len = 8 << 20;
    let (dst, _) = s.p.a.register(len, Access::LOCAL_WRITE);
    s.p.a.post(ca, WorkRequest::recv(7, buf(dst, len))).unwrap();
    let (src, _) = filled(&mut s.p.b, &pattern(len, 3), Access::LOCAL_WRITE);
    s.p.b
        .post(cb, WorkRequest::send(8, buf(src, len), Default::default()))
        .unwrap();
    let before = s.p.ba.stats().bytes_sent;
    s.p.run_until(1_000_000, |p| p.ba.stats().bytes_sent - before > 1 << 20);
    // B is gone: nothing of this connection passes either way any more.
    let port = s.bad_port;
    s.p.ba.tap = Some(Box::new(move |f| {
        ports(f).is_none_or(|(_, dst)| dst != port)
    }));
    s.p.ab.tap = Some(Box::new(move |f| {
        ports(f).is_none_or(|(src, _)| src != port)
    }));
    s.good_keeps_its_throughput(alone, 1);
    let start = s.p.now;
    let why = s.until_bad_closed(Duration::from_secs(600));
    assert_eq!(why, CloseReason::TimedOut);
    let waited = s.p.now - start;
    assert!(
        waited >= Duration::from_secs(60) && waited < Duration::from_secs(200),
        "reaped after {waited:?}"
    );
    assert_eq!(s.p.a.counters().keepalive_timeouts, 1);
    assert!(s
        .p
        .wc_a
        .iter()
        .any(|(_, w)| w.wr_id == 7 && w.status == WcStatus::Flushed));
    s.heap_bounded();
    s.good_keeps_its_throughput(alone, 2);
}
