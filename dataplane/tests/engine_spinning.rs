//! `Engine::poll_spinning` (the inline drive and the engine thread spin on it) reads the clock
//! lazily: an idle round compares the timers with the last reading and reads the clock only
//! every `CLOCK_EVERY_IDLE` idle rounds. Driven here with a virtual clock that counts its
//! readings: idle spinning costs few readings, and a timer that falls due still fires within
//! `CLOCK_EVERY_IDLE` rounds (issue 11 item 3).

mod engine_pair;

use std::cell::Cell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use dataplane::engine::{FaultConfig, CLOCK_EVERY_IDLE};
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
