//! The AF_XDP engine on both ends: an engine in namespace A and one in
//! namespace B, each with XDP attached natively, AF_XDP in copy mode, and its own thread. Send,
//! RDMA Write and RDMA Read of 1 B, 4 KiB, 1 MiB and 16 MiB both ways, verified byte for byte at
//! both ends, each side connecting, over every MPA negotiation outcome: markers in neither,
//! either or both directions (MPA-98), CRC off or on because one or both sides asked (MPA-99).
//!
//! Root needed: skipped elsewhere, a failure under CI=true.

mod afxdp_support;

use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use afxdp_support::*;
use endpoint::{EndpointCounters, EndpointEvent};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

/// What each engine asks for in its MPA frame: (markers on what it receives, CRC).
#[derive(Clone, Copy, Debug)]
struct Case {
    a: (bool, bool),
    b: (bool, bool),
    /// The side that connects (the other listens).
    connects: Side,
    port: u16,
}

/// Markers: none, A-bound only, B-bound only, both; CRC: off, A asks, B asks, both ask; A and
/// B take turns connecting.
fn cases() -> Vec<Case> {
    let marks = [(false, false), (true, false), (false, true), (true, true)];
    let crcs = [(true, false), (false, false), (true, true), (false, true)];
    (0..4)
        .map(|k| Case {
            a: (marks[k].0, crcs[k].0),
            b: (marks[k].1, crcs[k].1),
            connects: if k % 2 == 0 { Side::A } else { Side::B },
            port: 4700 + k as u16,
        })
        .collect()
}

/// What the two engine threads tell each other.
#[derive(Debug, PartialEq, Eq)]
enum Msg {
    /// The listener of the current case is up.
    Listening,
    /// This end checked everything it received and every request it made.
    Verified,
}

/// Polls until the peer thread sends `want` (panics after `timeout`).
fn wait_for(h: &mut EngineHost, rx: &Receiver<Msg>, want: Msg, timeout: Duration) {
    let mut got = None;
    h.run_until(timeout, &format!("the peer's {want:?}"), |_| {
        if got.is_none() {
            got = rx.try_recv().ok();
        }
        got.is_some()
    });
    assert_eq!(got, Some(want), "out of step with the peer engine");
}

/// One engine's side of every case, on its own thread.
fn engine_side(
    tb: &VethTestbed,
    me: Side,
    mine: &Sources,
    theirs: &Sources,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
) -> EndpointCounters {
    let layout = Layout::new(&SIZES);
    let mut h = EngineHost::new(tb, me, |c| c.tcp.time_wait = Duration::from_millis(100));
    let end = EngineEnd::register(&mut h, &layout, mine);
    for case in cases() {
        let (wish, peer_wish) = match me {
            Side::A => (case.a, case.b),
            Side::B => (case.b, case.a),
        };
        let who = format!("engine {me:?} in {case:?}");
        let started = Instant::now();
        end.reset(&mut h);
        let settings = engine_settings(wish.0, wish.1, end.private_data());
        let connecting = case.connects == me;
        let conn = if connecting {
            wait_for(&mut h, &rx, Msg::Listening, Duration::from_secs(60));
            let peer = addr(tb, me.peer(), case.port);
            let conn =
                h.e.endpoint_mut()
                    .connect(Instant::now(), peer, settings)
                    .unwrap();
            h.run_until(Duration::from_secs(30), &who, |h| {
                h.established(conn).is_some()
            });
            conn
        } else {
            let lid = h.listen(case.port, settings);
            tx.send(Msg::Listening).unwrap();
            h.run_until(Duration::from_secs(30), &who, |h| {
                !h.accepted(lid).is_empty()
            });
            h.accepted(lid)[0]
        };
        // Receives before the peer can Send: at Accepted, or at Established for the Initiator
        // (the Responder sends nothing before the Initiator's first FPDU, MPA-85).
        end.post_recvs(&mut h, conn);
        h.run_until(Duration::from_secs(30), &who, |h| {
            h.established(conn).is_some()
        });
        let (neg, pd) = h.established(conn).unwrap();
        expect_negotiated(&neg, wish, peer_wish, &who);
        end.post_ops(&mut h, conn, parse_stags(&pd));
        h.run_until(Duration::from_secs(120), &who, |h| {
            end.finished(h, conn, BOTH)
        });
        end.verify(&h, conn, BOTH, theirs, &who);
        tx.send(Msg::Verified).unwrap();
        wait_for(&mut h, &rx, Msg::Verified, Duration::from_secs(120));
        // The connecting side closes gracefully; the other sees the FIN (half-closed, DDP-69)
        // and closes too (DDP-70).
        if connecting {
            h.e.endpoint_mut().close(Instant::now(), conn).unwrap();
        } else {
            h.run_until(Duration::from_secs(30), &who, |h| {
                h.events
                    .iter()
                    .any(|e| matches!(e, EndpointEvent::PeerClosed { conn: c } if *c == conn))
            });
            h.e.endpoint_mut().close(Instant::now(), conn).unwrap();
        }
        h.run_until(Duration::from_secs(30), &who, |h| h.closed(conn).is_some());
        assert_eq!(
            h.closed(conn),
            Some(tcp_offload::CloseReason::Normal),
            "{who}"
        );
        if !connecting {
            assert!(
                h.events
                    .iter()
                    .any(|e| matches!(e, EndpointEvent::PeerClosed { conn: c } if *c == conn)),
                "{who}: no PeerClosed"
            );
        }
        println!(
            "{who}: {} MiB each way, verified, closed in {:?}",
            layout.octets_each_way() >> 20,
            started.elapsed()
        );
    }
    h.e.endpoint().counters()
}

/// Engines on both ends; Send, Write and Read of 1 B..16 MiB both ways, verified at
/// both ends, each side connecting, under each marker direction case (MPA-98) and each CRC
/// case (MPA-99); every connection then closes gracefully.
#[test]
fn engine_to_engine_send_write_read_1b_to_16mib_every_mpa_negotiation() {
    let Some(tb) = or_skip("xep", for_test("xep")) else {
        return;
    };
    let _serial = serial();
    let layout = Layout::new(&SIZES);
    let (src_a, src_b) = (Sources::new(&layout, 21), Sources::new(&layout, 22));
    let (a_tx, a_rx) = channel();
    let (b_tx, b_rx) = channel();
    let started = Instant::now();
    let (ca, cb) = thread::scope(|s| {
        let a = s.spawn(|| engine_side(&tb, Side::A, &src_a, &src_b, a_tx, b_rx));
        let b = s.spawn(|| engine_side(&tb, Side::B, &src_b, &src_a, b_tx, a_rx));
        let join = |t: thread::ScopedJoinHandle<'_, EndpointCounters>| {
            t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        };
        (join(a), join(b))
    });
    println!(
        "engine pair: {:?}\n  A: {ca:?}\n  B: {cb:?}",
        started.elapsed()
    );
    for c in [ca, cb] {
        assert_eq!(
            c.crc_errors + c.framing_errors + c.terminates_sent + c.internal_errors,
            0,
            "{c:?}"
        );
        assert_eq!(c.connections_opened, 4, "{c:?}");
        assert_eq!(c.connections_closed, 4, "{c:?}");
    }
}
