//! `Endpoint::service_received`: after a receive batch that left its connections nothing to
//! send, their rounds are done at once (completions queued, timers armed) and the rest of the
//! engine's round may wait; anything else gets the whole round.

mod pair;
use ddp::{Access, LocalBuf, RemoteBuf, Stag, WcOpcode, WcStatus, WorkRequest};
use endpoint::{ConnId, Endpoint};
use pair::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

struct Setup {
    p: Pair,
    ca: ConnId,
    cb: ConnId,
    a_out: LocalBuf,
    b_out: LocalBuf,
    a_in: (LocalBuf, Stag),
    b_in: (LocalBuf, Stag),
}

fn local(e: &mut Endpoint, len: usize, fill: u8, access: Access) -> (LocalBuf, Stag) {
    let (region, stag) = filled(e, &vec![fill; len], access);
    (buf(region, len), stag)
}

/// A connection past TCP's quick-ACK phase (its first 16 data segments each way are
/// acknowledged at once), quiet.
fn setup() -> Setup {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4500, settings(true, true), settings(true, true));
    let rw = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::LOCAL_WRITE;
    let (a_out, _) = local(&mut p.a, 64, 0xA1, Access::LOCAL_WRITE);
    let (b_out, _) = local(&mut p.b, 64, 0xB2, Access::LOCAL_WRITE);
    let a_in = local(&mut p.a, 64, 0, rw);
    let b_in = local(&mut p.b, 64, 0, rw);
    for i in 0..20 {
        let to_b = RemoteBuf {
            stag: b_in.1,
            to: 0,
        };
        let to_a = RemoteBuf {
            stag: a_in.1,
            to: 0,
        };
        p.a.post(ca, WorkRequest::write(100 + i, a_out, to_b))
            .unwrap();
        p.b.post(cb, WorkRequest::write(200 + i, b_out, to_a))
            .unwrap();
        p.wait_wc(true, 100 + i);
        p.wait_wc(false, 200 + i);
    }
    p.run_until(1_000_000, |p| {
        p.ab.next_arrival().is_none() && p.ba.next_arrival().is_none()
    });
    // Each one's round at this time (the last step stopped at a timer of one of them).
    p.poll_a();
    p.poll_b();
    for e in [&mut p.a, &mut p.b] {
        while e.poll_completion().is_some() {}
        assert!(e.poll_timeout().is_none_or(|t| t > p.now), "nothing due");
    }
    Setup {
        p,
        ca,
        cb,
        a_out,
        b_out,
        a_in,
        b_in,
    }
}

/// `e` posts RDMA Write `wr_id` of `from` to `to` on the idle `conn` and frames it at once
/// (the inline engine's `transmit_now`): the one frame.
fn write_now(
    e: &mut Endpoint,
    conn: ConnId,
    wr_id: u64,
    from: LocalBuf,
    to: Stag,
    now: Instant,
) -> Vec<u8> {
    let remote = RemoteBuf { stag: to, to: 0 };
    e.post(conn, WorkRequest::write(wr_id, from, remote))
        .unwrap();
    let mut out = Keep::default();
    e.transmit_conn(now, conn, &mut out);
    assert_eq!(out.0.len(), 1, "one segment");
    out.0.pop().unwrap()
}

/// What `e` transmits in a round at `now`.
fn round(e: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Keep::default();
    e.handle_timeout(now);
    e.poll_transmit(now, &mut out);
    out.0
}

#[test]
fn a_write_and_the_ack_completing_one_are_served_without_a_round() {
    let mut s = setup();
    let (ca, cb, a_out, b_out) = (s.ca, s.cb, s.a_out, s.b_out);
    let (a_in, b_in, p) = (s.a_in, s.b_in, &mut s.p);
    let now = p.now;
    // A writes to B.
    let frame = write_now(&mut p.a, ca, 1, a_out, b_in.1, now);
    // B receives it: quiet (its ACK is delayed), so served without a round.
    p.b.handle_frame(now, &frame);
    assert!(p.b.service_received());
    assert_eq!(p.b.region(b_in.0.region).unwrap(), &[0xA1; 64][..]);
    let due = p.b.poll_timeout().expect("the delayed ACK is armed");
    assert!(due > now, "nothing left for an immediate round");
    // B answers; its Write carries the ACK of A's.
    let frame = write_now(&mut p.b, cb, 2, b_out, a_in.1, now);
    // A receives it: Write 1's completion is there at once, B's data placed.
    p.a.handle_frame(now, &frame);
    assert!(p.a.service_received());
    let (_, wc) = p.a.poll_completion().expect("Write 1's completion");
    assert_eq!(
        (wc.wr_id, wc.opcode, wc.status),
        (1, WcOpcode::Write, WcStatus::Success)
    );
    assert_eq!(p.a.region(a_in.0.region).unwrap(), &[0xB2; 64][..]);
    // A's delayed ACK goes out when due, and completes B's Write.
    let due = p.a.poll_timeout().expect("the delayed ACK is armed");
    assert!(due > now && due <= now + Duration::from_millis(1));
    assert!(round(&mut p.a, now).is_empty(), "nothing before it is due");
    let acks = round(&mut p.a, due + Duration::from_micros(50));
    assert_eq!(acks.len(), 1, "the delayed ACK");
    let later = due + Duration::from_micros(50);
    p.b.handle_frame(later, &acks[0]);
    assert!(p.b.service_received());
    let (_, wc) = p.b.poll_completion().expect("Write 2's completion");
    assert_eq!((wc.wr_id, wc.status), (2, WcStatus::Success));
}

#[test]
fn a_read_request_gets_its_round_at_once() {
    let Setup {
        mut p,
        ca,
        a_in,
        b_in,
        ..
    } = setup();
    let now = p.now;
    let from_b = RemoteBuf {
        stag: b_in.1,
        to: 0,
    };
    p.a.post(ca, WorkRequest::read(3, a_in.0, from_b)).unwrap();
    let mut out = Keep::default();
    p.a.transmit_conn(now, ca, &mut out);
    p.b.handle_frame(now, &out.0[0]);
    assert!(!p.b.service_received(), "a Read Response to send");
    assert_eq!(round(&mut p.b, now).len(), 1, "the Read Response");
}

#[test]
fn a_frame_for_a_listener_gets_its_round_at_once() {
    let Setup { mut p, .. } = setup();
    let now = p.now;
    p.b.listen(4600, settings(true, true)).unwrap();
    // A connects to B's new listener: B's answer (the SYN-ACK) needs the round.
    let mut out = Keep::default();
    let peer = SocketAddr::new(p.b.config().ip, 4600);
    p.a.connect(now, peer, settings(true, true)).unwrap();
    p.a.poll_transmit(now, &mut out);
    assert_eq!(out.0.len(), 1, "the SYN");
    p.b.handle_frame(now, &out.0[0]);
    assert!(!p.b.service_received());
    assert_eq!(round(&mut p.b, now).len(), 1, "the SYN-ACK");
}

/// The instants the endpoint acts at are TCP's deadlines rounded up to the wheel's tick,
/// counted from the instant the endpoints were made: B's delayed ACK of a Write, then A's
/// retransmissions of that Write when the ACK is lost (the RTO, then the RTO backed off).
/// Pinned to the nanosecond, as they were when times were held as `Instant`s.
#[test]
fn delayed_ack_and_retransmission_instants_are_pinned() {
    let mut s = setup();
    let (ca, a_out, b_in, p) = (s.ca, s.a_out, s.b_in, &mut s.p);
    let (base, now) = (p.base, p.now);
    let frame = write_now(&mut p.a, ca, 1, a_out, b_in.1, now);
    p.b.handle_frame(now, &frame);
    assert!(round(&mut p.b, now).is_empty(), "B's ACK is delayed");
    // Each endpoint woken at its `poll_timeout` until it sends: when it sent, and how often
    // it was woken (a wheel entry armed for an earlier deadline fires early and is re-armed).
    let next_send = |e: &mut Endpoint| {
        for wakes in 1..100 {
            let t = e.poll_timeout().expect("a timer is armed");
            if !round(e, t).is_empty() {
                return (t.duration_since(base), wakes);
            }
        }
        panic!("nothing sent");
    };
    let ack = next_send(&mut p.b);
    let first = next_send(&mut p.a);
    let second = next_send(&mut p.a);
    let us = Duration::from_micros;
    assert_eq!(now.duration_since(base), us(4_000_100));
    // The short segment's 25 us ACK delay; RTO 200 ms (its minimum), then 400 ms.
    assert_eq!(ack, (us(4_000_125), 1));
    assert_eq!(first, (us(4_200_100), 1));
    assert_eq!(second, (us(4_600_100), 1));
}

/// A delayed ACK that went out with data, then armed again later: the deadline queued for
/// the first fires early and is followed to TCP's new one without a frame, and the ACK goes
/// out at the new deadline's tick. The instants are those of the wheel entry that carried
/// every deadline of the connection (armed for the first ACK, fired early, re-armed).
#[test]
fn a_delayed_ack_sent_with_data_and_armed_again_goes_out_at_its_new_deadline() {
    let mut s = setup();
    let (ca, cb, a_out, b_out, a_in, b_in) = (s.ca, s.cb, s.a_out, s.b_out, s.a_in, s.b_in);
    let p = &mut s.p;
    let (base, t0) = (p.base, p.now);
    let us = Duration::from_micros;
    // A writes; B's ACK of it is delayed (25 us for a short segment).
    let f = write_now(&mut p.a, ca, 1, a_out, b_in.1, t0);
    p.b.handle_frame(t0, &f);
    assert!(round(&mut p.b, t0).is_empty(), "B's ACK is delayed");
    // 5 us later B writes: the ACK goes with its data.
    write_now(&mut p.b, cb, 2, b_out, a_in.1, t0 + us(5));
    // 10 us after the first, A writes again: B's next ACK is due 25 us later.
    let t2 = t0 + us(10);
    let f = write_now(&mut p.a, ca, 3, a_out, b_in.1, t2);
    p.b.handle_frame(t2, &f);
    assert!(round(&mut p.b, t2).is_empty(), "B's ACK is delayed");
    // B woken at its `poll_timeout` until it sends.
    let mut wakes = Vec::new();
    let sent = loop {
        let t = p.b.poll_timeout().expect("a timer is armed");
        let out = round(&mut p.b, t);
        wakes.push(t.duration_since(base));
        if !out.is_empty() {
            break out;
        }
        assert!(wakes.len() < 10, "B never sent: {wakes:?}");
    };
    assert_eq!(t0.duration_since(base), us(4_000_100));
    // The first ACK's deadline (4,000,125 us) wakes B for nothing; the second's
    // (4,000,135 us, rounded up to the 25 us tick) sends it.
    assert_eq!(wakes, [us(4_000_125), us(4_000_150)]);
    assert_eq!(sent.len(), 1, "the delayed ACK");
}

/// A connection keeps its next hop between rounds only while the neighbour table stays the
/// same: a new entry for its peer takes its very next frame.
#[test]
fn a_changed_next_hop_takes_the_next_frame() {
    let Setup {
        mut p,
        ca,
        a_out,
        b_in,
        ..
    } = setup();
    let now = p.now;
    let first = write_now(&mut p.a, ca, 1, a_out, b_in.1, now);
    assert_eq!(first[..6], MAC_B, "the default next hop");
    let router = [2, 0, 0, 0, 0, 0x99];
    p.a.add_neighbour(IP_B, router).unwrap();
    let second = write_now(&mut p.a, ca, 2, a_out, b_in.1, now);
    assert_eq!(second[..6], router, "the new entry");
}
