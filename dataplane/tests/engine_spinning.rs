//! `Engine::poll_spinning` (the inline drive and the engine thread spin on it) reads the clock
//! lazily: an idle round compares the timers with the last reading and reads the clock only
//! every `CLOCK_EVERY_IDLE` idle rounds. Driven here with a virtual clock that counts its
//! readings: idle spinning costs few readings, and a timer that falls due still fires within
//! `CLOCK_EVERY_IDLE` rounds.

mod engine_pair;

use std::cell::Cell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use dataplane::engine::{FaultConfig, CLOCK_EVERY_IDLE};
use ddp::{Access, LocalBuf, RemoteBuf, WcOpcode, WcStatus, WorkRequest};
use endpoint::QpSettings;
use engine_pair::*;

#[test]
fn idle_spinning_reads_the_clock_rarely_and_a_due_timer_still_fires() {
    let mut p = Pair::new(
        link(),
        link(),
        7,
        FaultConfig::default(),
        FaultConfig::default(),
    );
    let t0 = p.now;
    // A connects to B, which never runs: the SYN stays unanswered and its RTO timer is A's
    // only timer.
    p.a.endpoint_mut()
        .connect(
            t0,
            SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 2), 4000),
            QpSettings::default(),
        )
        .expect("connect");
    let now = Cell::new(t0);
    let reads = Cell::new(0u32);
    let mut clock = || {
        reads.set(reads.get() + 1);
        now.get()
    };
    let sent = |p: &Pair| p.a.io().tx_stats().sent;
    p.a.poll_spinning_with(&mut clock);
    assert_eq!(sent(&p), 1, "the SYN leaves on the first round");

    // Idle: nothing arrives, no timer due.
    reads.set(0);
    const IDLE: u32 = 10 * CLOCK_EVERY_IDLE;
    for _ in 0..IDLE {
        p.a.poll_spinning_with(&mut clock);
    }
    assert!(
        reads.get() <= IDLE / CLOCK_EVERY_IDLE,
        "{} clock readings in {IDLE} idle rounds",
        reads.get()
    );
    assert_eq!(sent(&p), 1, "nothing more to send before the RTO");

    // Time passes the RTO; only the clock knows. The SYN is sent again within
    // CLOCK_EVERY_IDLE rounds.
    let due = p.a.poll_timeout().expect("the SYN's retransmission timer");
    assert!(due > t0, "{due:?}");
    now.set(due + Duration::from_millis(1));
    let mut rounds = 0;
    while sent(&p) == 1 {
        p.a.poll_spinning_with(&mut clock);
        rounds += 1;
        assert!(
            rounds <= CLOCK_EVERY_IDLE,
            "the RTO had not fired after {rounds} rounds"
        );
    }
    assert_eq!(sent(&p), 2, "one retransmitted SYN");
}

/// Spins `e` (at virtual time `now`) until a call receives frames; returns that call's count.
fn spin_until_received(e: &mut dataplane::engine::Engine<MemPort>, now: Instant) -> usize {
    let mut clock = || now;
    for _ in 0..=2 * CLOCK_EVERY_IDLE {
        let n = e.poll_spinning_with(&mut clock);
        if n > 0 {
            return n;
        }
    }
    panic!("nothing arrived");
}

/// `e` posts RDMA Write `wr_id` of `from` to the peer's region `to` on the idle `conn` and
/// transmits it at once (as an inline post does).
fn write_now(
    e: &mut dataplane::engine::Engine<MemPort>,
    conn: endpoint::ConnId,
    wr_id: u64,
    from: LocalBuf,
    to: ddp::Stag,
    now: Instant,
) {
    let remote = RemoteBuf { stag: to, to: 0 };
    e.endpoint_mut()
        .post(conn, WorkRequest::write(wr_id, from, remote))
        .unwrap();
    e.transmit_now(now, conn);
}

/// A region of `e`'s own memory of `len` octets holding `fill`.
fn region(
    e: &mut dataplane::engine::Engine<MemPort>,
    len: usize,
    fill: u8,
    access: Access,
) -> (LocalBuf, ddp::Stag) {
    let (region, stag) = e.endpoint_mut().register(len, access);
    e.endpoint_mut().region_mut(region).unwrap().fill(fill);
    let buf = LocalBuf {
        region,
        offset: 0,
        len: len as u32,
    };
    (buf, stag)
}

/// The latency path: a spinning call that receives an RDMA Write, or the
/// ACK completing one, returns with the data placed, the completion queued and the timers
/// armed, without the rest of the round; nothing is lost by it (the delayed ACK goes out on
/// time). A Read Request (a response to send) gets its whole round at once.
#[test]
fn a_received_write_and_its_completion_come_before_the_rest_of_the_round() {
    let mut p = Pair::new(
        link(),
        link(),
        11,
        FaultConfig::default(),
        FaultConfig::default(),
    );
    let (ca, cb) = p.establish(4400, QpSettings::default(), QpSettings::default());
    let sent = |e: &dataplane::engine::Engine<MemPort>| e.io().tx_stats().sent;
    let (a_out, _) = region(&mut p.a, 64, 0xA1, Access::LOCAL_WRITE);
    let (a_in, a_stag) = region(&mut p.a, 64, 0, Access::REMOTE_WRITE | Access::LOCAL_WRITE);
    let (b_out, _) = region(&mut p.b, 64, 0xB2, Access::LOCAL_WRITE);
    let (b_in, b_stag) = region(&mut p.b, 64, 0, Access::REMOTE_WRITE | Access::REMOTE_READ);
    let delay = Duration::from_micros(60);

    // Past TCP's quick-ACK phase (the first 16 data segments each way are acknowledged at
    // once), then quiet: the last segments and delayed ACKs delivered.
    let mut now = p.now;
    for i in 0..20 {
        write_now(&mut p.a, ca, 100 + i, a_out, b_stag, now);
        write_now(&mut p.b, cb, 200 + i, b_out, a_stag, now);
        now += Duration::from_millis(1);
        p.a.poll(now);
        p.b.poll(now);
    }
    for _ in 0..200 {
        p.a.poll(now);
        p.b.poll(now);
        now += Duration::from_millis(1);
    }
    assert_eq!(p.a.io().rx_in_flight() + p.b.io().rx_in_flight(), 0);
    let warm = |e: &mut dataplane::engine::Engine<MemPort>| {
        std::iter::from_fn(|| e.endpoint_mut().poll_completion()).count()
    };
    assert_eq!((warm(&mut p.a), warm(&mut p.b)), (20, 20));
    p.b.endpoint_mut().region_mut(b_in.region).unwrap().fill(0);
    p.a.endpoint_mut().region_mut(a_in.region).unwrap().fill(0);

    // A writes to B on an idle connection: out at once.
    write_now(&mut p.a, ca, 1, a_out, b_stag, now);
    let a_sent = sent(&p.a);

    // B's call that receives it returns with the data placed and sent nothing (its ACK is
    // delayed; the round's transmission waits for the next call).
    now += delay;
    let b_sent = sent(&p.b);
    assert_eq!(spin_until_received(&mut p.b, now), 1);
    assert_eq!(p.b.endpoint().region(b_in.region).unwrap(), &[0xA1; 64][..]);
    assert_eq!(sent(&p.b), b_sent, "no transmission in the receiving call");

    // B answers with a Write of its own (which carries the ACK of A's).
    write_now(&mut p.b, cb, 2, b_out, a_stag, now);
    assert_eq!(sent(&p.b), b_sent + 1);

    // A's call that receives it returns with B's data placed and Write 1's completion queued.
    now += delay;
    assert_eq!(spin_until_received(&mut p.a, now), 1);
    assert_eq!(p.a.endpoint().region(a_in.region).unwrap(), &[0xB2; 64][..]);
    let wc =
        p.a.endpoint_mut()
            .poll_completion()
            .expect("Write 1 completed")
            .1;
    assert_eq!(
        (wc.wr_id, wc.opcode, wc.status),
        (1, WcOpcode::Write, WcStatus::Success)
    );
    assert_eq!(sent(&p.a), a_sent, "no transmission in the receiving call");
    // Its timers are armed: the ACK of B's Write is due within the short-segment delay (and
    // goes out then: B's Write 2 completes below), nothing is due before.
    let due = p.a.poll_timeout().expect("the delayed ACK");
    assert!(
        due > now && due <= now + Duration::from_micros(100),
        "{:?}",
        due - now
    );

    // A Read Request is answered in the call that receives it.
    p.a.endpoint_mut()
        .post(
            ca,
            WorkRequest::read(
                3,
                a_in,
                RemoteBuf {
                    stag: b_stag,
                    to: 0,
                },
            ),
        )
        .unwrap();
    p.a.transmit_now(now, ca);
    now += delay;
    let b_sent = sent(&p.b);
    assert_eq!(spin_until_received(&mut p.b, now), 1);
    assert_eq!(sent(&p.b), b_sent + 1, "the Read Response in the same call");

    // Everything completes: Write 2 at B (A's delayed ACK) and the Read at A.
    p.now = now;
    let mut done = Vec::new();
    for _ in 0..100_000 {
        p.a.poll(p.now);
        p.b.poll(p.now);
        done.extend(std::iter::from_fn(|| p.a.endpoint_mut().poll_completion()).map(|c| c.1.wr_id));
        done.extend(std::iter::from_fn(|| p.b.endpoint_mut().poll_completion()).map(|c| c.1.wr_id));
        if done.len() == 2 {
            break;
        }
        p.now += Duration::from_millis(1);
    }
    done.sort_unstable();
    assert_eq!(done, [2, 3]);
    assert_eq!(p.a.endpoint().region(a_in.region).unwrap(), &[0xA1; 64][..]);
}
