//! Timers and options: RTO management (RFC 6298), Karn's rule, delayed and quick ACKs (RFC 5681
//! §4.2), persist / zero-window probes (RFC 9293 §3.8.6.1), keepalive (RFC 9293 §3.8.4), option
//! negotiation (RFC 7323, RFC 2018, RFC 9293 §3.7.1).

mod harness;

use std::time::Duration;

use harness::script::Script;
use tcp_offload::wire::TcpOptions;
use tcp_offload::{CloseReason, Config, Event, Keepalive, State};

fn plain() -> Config {
    Config {
        timestamps: false,
        sack: false,
        window_scale: None,
        recv_buffer: 65535,
        ..Config::default()
    }
}

fn all_opts() -> TcpOptions {
    TcpOptions {
        mss: Some(1200),
        window_scale: Some(5),
        sack_permitted: true,
        timestamps: Some((1000, 0)),
        ..TcpOptions::default()
    }
}

#[test]
fn rfc7323_rfc2018_options_are_negotiated_and_emss_reflects_them() {
    let s = Script::establish_active(Config::default(), all_opts());
    assert!(s.c.sack_enabled() && s.c.timestamps_enabled());
    assert_eq!(s.c.window_scales(), Some((7, 5)));
    // EMSS = min(peer MSS, our MSS, MTU - 40) - 12 octets of timestamp option (MPA §3.6 EMSS).
    assert_eq!(s.c.emss(), 1200 - 12);
    let s = Script::establish_active(Config::default(), TcpOptions::default());
    assert!(!s.c.sack_enabled() && !s.c.timestamps_enabled());
    assert_eq!(s.c.window_scales(), None);
    assert_eq!(
        s.c.emss(),
        536,
        "no MSS option: the RFC 9293 default of 536"
    );
}

#[test]
fn rfc7323_s2_3_peer_window_is_scaled_after_the_syn() {
    let mut s = Script::establish_active(Config::default(), all_opts());
    // The SYN-ACK's window (65535) is not scaled; later windows are shifted by 5.
    assert_eq!(s.c.peer_window(), 65535);
    s.inject("A", b"", true);
    assert_eq!(s.c.peer_window(), 65535 << 5);
}

#[test]
fn rfc7323_s4_rtt_is_measured_from_timestamps() {
    let mut s = Script::establish_active(Config::default(), all_opts());
    s.c.send(&[1; 1000]).unwrap();
    let out = s.drain();
    let tsval = out[0].options.timestamps.unwrap().0;
    s.advance(Duration::from_millis(80));
    let ack = s.c_snd_nxt();
    let o = TcpOptions {
        timestamps: Some((s.peer_ts + 5, tsval)),
        ..TcpOptions::default()
    };
    s.inject_raw(s.p_nxt, Some(ack), "A", o, b"");
    let srtt = s.c.srtt().expect("sampled");
    assert!(
        srtt >= Duration::from_millis(79) && srtt <= Duration::from_millis(81),
        "{srtt:?}"
    );
}

/// RFC 7323 §5.4: TSval never decreases, even when the caller's clock does (several threads
/// driving one engine, each reading the clock before taking its lock). A smaller TSval would
/// have the peer's PAWS check (§5.3) drop the segment as an old duplicate.
#[test]
fn rfc7323_s5_4_tsval_never_decreases_when_the_callers_time_goes_back() {
    let mut s = Script::establish_active(Config::default(), all_opts());
    s.advance(Duration::from_millis(50));
    s.c.send(&[1; 1000]).unwrap();
    let first = s.drain()[0].options.timestamps.unwrap().0;
    s.now -= Duration::from_millis(5);
    s.c.send(&[2; 1000]).unwrap();
    let out = s.drain();
    let second = out[0].options.timestamps.unwrap().0;
    assert!(
        (second.wrapping_sub(first) as i32) >= 0,
        "TSval went back: {first} then {second}"
    );
    // Time going forward again moves it on.
    s.now += Duration::from_millis(20);
    s.c.send(&[3; 1000]).unwrap();
    let third = s.drain()[0].options.timestamps.unwrap().0;
    assert_eq!(third, first.wrapping_add(15));
}

#[test]
fn rfc6298_s5_rto_timer_starts_with_data_restarts_on_ack_and_stops_when_all_acked() {
    let mut s = Script::establish_active(plain(), TcpOptions::default());
    assert_eq!(s.c.poll_timeout(), None, "no data, no timer (5.2)");
    s.c.send(&[1; 3000]).unwrap();
    let t0 = s.now;
    s.drain();
    let first = s.c.poll_timeout().expect("armed on send (5.1)");
    assert_eq!(first, t0 + s.c.rto());
    // More data later does not restart a running timer.
    s.advance(Duration::from_millis(100));
    s.c.send(&[2; 100]).unwrap();
    s.drain();
    assert_eq!(s.c.poll_timeout(), Some(first));
    // An ACK of new data restarts it (5.3).
    let ack = s.c.snd_una().0 + 1448;
    s.inject_raw(s.p_nxt, Some(ack), "A", TcpOptions::default(), b"");
    let restarted = s.c.poll_timeout().unwrap();
    assert!(restarted > first);
    // Everything acknowledged: stopped (5.2).
    let all = s.c_snd_nxt();
    s.inject_raw(s.p_nxt, Some(all), "A", TcpOptions::default(), b"");
    assert_eq!(s.c.poll_timeout(), None);
}

#[test]
fn rfc6298_s5_5_backoff_doubles_and_karn_skips_retransmitted_samples() {
    let mut s = Script::establish_active(plain(), TcpOptions::default());
    s.c.send(&[1; 500]).unwrap();
    s.drain();
    let rto0 = s.c.rto();
    let before = s.c.srtt();
    s.advance(rto0);
    let out = s.drain();
    assert_eq!(
        out.len(),
        1,
        "the first unacked segment is retransmitted (5.4)"
    );
    assert_eq!(s.c.rto(), rto0 * 2, "backed off (5.5)");
    assert_eq!(s.c.counters().rto_expiries, 1);
    // The ACK of the retransmitted segment gives no RTT sample (Karn).
    s.inject("A", b"", false);
    assert_eq!(s.c.srtt(), before);
}

#[test]
fn rfc5681_s4_2_delayed_ack_every_second_segment_or_timer() {
    let cfg = Config {
        quick_acks: 0,
        delayed_ack: Some(Duration::from_millis(40)),
        ..plain()
    };
    let mut s = Script::establish_active(cfg, TcpOptions::default());
    s.inject("A", &[1; 500], false);
    assert!(s.drain().is_empty(), "first segment: ACK delayed");
    s.inject("A", &[1; 500], false);
    assert_eq!(s.drain().len(), 1, "second segment: ACK at once");
    s.inject("A", &[1; 500], false);
    assert!(s.drain().is_empty());
    s.advance(Duration::from_millis(40));
    let out = s.drain();
    assert_eq!(out.len(), 1, "delayed-ACK timer fired");
    assert_eq!(s.c.counters().delayed_acks, 1);
}

#[test]
fn short_segments_are_acknowledged_after_their_own_shorter_delay() {
    let cfg = Config {
        quick_acks: 0,
        delayed_ack: Some(Duration::from_millis(40)),
        short_segment_ack: Some(Duration::from_micros(25)),
        ..plain()
    };
    let mut s = Script::establish_active(cfg, TcpOptions::default());
    let full = s.c.emss() as usize;
    // A full segment waits for the ordinary delayed-ACK timer.
    s.inject("A", &vec![1; full], false);
    assert!(s.drain().is_empty(), "full segment: ACK delayed");
    s.advance(Duration::from_micros(25));
    assert!(s.drain().is_empty(), "not on the short timer");
    s.advance(Duration::from_millis(40));
    assert_eq!(s.drain().len(), 1, "the 40 ms timer");
    // A short one (its sender had no more to send) after 25 us.
    s.inject("A", &[1; 100], false);
    assert!(s.drain().is_empty(), "not at once");
    s.advance(Duration::from_micros(25));
    assert_eq!(s.drain().len(), 1, "the short-segment timer");
    assert_eq!(s.c.counters().delayed_acks, 2);
}

#[test]
fn quick_acks_acknowledge_every_segment_during_mpa_startup() {
    let cfg = Config {
        quick_acks: 0,
        delayed_ack: Some(Duration::from_millis(40)),
        ..plain()
    };
    let mut s = Script::establish_active(cfg, TcpOptions::default());
    s.c.quick_ack(2);
    for _ in 0..2 {
        s.inject("A", &[1; 100], false);
        assert_eq!(s.drain().len(), 1, "quick ACK");
    }
    s.inject("A", &[1; 100], false);
    assert!(s.drain().is_empty(), "back to delayed ACKs");
}

/// A pure ACK from the peer advertising `window`.
fn window_update(s: &mut Script, window: u16) {
    let repr = tcp_offload::wire::SegmentRepr {
        tuple: harness::tuple_b(),
        seq: tcp_offload::SeqNum(s.p_nxt),
        ack: Some(tcp_offload::SeqNum(s.c_snd_nxt())),
        flags: tcp_offload::wire::Flags::default(),
        window,
        options: TcpOptions::default(),
    };
    s.c.handle_packet(s.now, &harness::raw(repr, b"")).unwrap();
}

#[test]
fn rfc9293_s3_8_6_1_zero_window_is_probed_by_the_persist_timer() {
    let mut s = Script::establish_active(plain(), TcpOptions::default());
    window_update(&mut s, 0);
    assert_eq!(s.c.peer_window(), 0);
    s.c.send(&[7; 1000]).unwrap();
    assert!(s.drain().is_empty(), "nothing fits a zero window");
    let t = s.c.poll_timeout().expect("persist timer armed");
    s.now = t;
    s.c.handle_timeout(t);
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert!(
        out[0].payload.is_empty(),
        "probe carries no data (keeps record alignment)"
    );
    assert_eq!(s.c.counters().window_probes, 1);
    // Unanswered: probes continue, backed off.
    let t2 = s.c.poll_timeout().unwrap();
    assert!(t2 - t >= s.c.rto());
    // The window opens: data flows.
    window_update(&mut s, 4096);
    let out = s.drain();
    assert_eq!(out.iter().map(|o| o.payload.len()).sum::<usize>(), 1000);
}

/// Established, keepalive after 10 s idle, every 2 s, 3 probes.
fn keepalive_conn() -> Script {
    let ka = Keepalive {
        idle: Duration::from_secs(10),
        interval: Duration::from_secs(2),
        probes: 3,
    };
    Script::establish_active(
        Config {
            keepalive: Some(ka),
            ..plain()
        },
        TcpOptions::default(),
    )
}

#[test]
fn rfc9293_s3_8_4_keepalive_probes_then_drops_a_dead_peer() {
    let mut s = keepalive_conn();
    let mut probes = 0;
    for _ in 0..20 {
        let Some(t) = s.c.poll_timeout() else { break };
        s.now = t;
        s.c.handle_timeout(t);
        probes += s
            .drain()
            .iter()
            .filter(|o| o.payload.is_empty() && o.ack.is_some())
            .count();
        if s.c.state() == State::Closed {
            break;
        }
    }
    assert_eq!(probes, 3);
    assert_eq!(s.c.state(), State::Closed);
    assert_eq!(s.c.counters().keepalive_timeouts, 1);
    let ev: Vec<_> = std::iter::from_fn(|| s.c.poll_event()).collect();
    assert!(ev.contains(&Event::Closed(CloseReason::TimedOut)));
}

/// The first probe is due the idle time after the last segment; an idle time too long to
/// count in nanoseconds arms nothing, the same as keepalive off.
#[test]
fn rfc9293_s3_8_4_keepalive_due_the_idle_time_after_the_last_segment() {
    let mut s = keepalive_conn();
    s.now += Duration::from_millis(1500);
    s.inject("A", b"", false);
    assert_eq!(s.c.poll_timeout(), Some(s.now + Duration::from_secs(10)));
    for keepalive in [
        None,
        Some(Keepalive {
            idle: Duration::MAX,
            interval: Duration::from_secs(2),
            probes: 3,
        }),
    ] {
        let s = Script::establish_active(
            Config {
                keepalive,
                ..plain()
            },
            TcpOptions::default(),
        );
        assert_eq!(s.c.poll_timeout(), None, "{keepalive:?}");
    }
}

#[test]
fn rfc9293_s3_8_4_keepalive_answered_keeps_the_connection() {
    let mut s = keepalive_conn();
    for _ in 0..10 {
        let t = s.c.poll_timeout().unwrap();
        s.now = t;
        s.c.handle_timeout(t);
        if !s.drain().is_empty() {
            // The peer answers the probe with an ACK.
            s.inject("A", b"", false);
        }
    }
    assert_eq!(s.c.state(), State::Established);
    assert!(s.c.counters().keepalives >= 5);
}

/// Runs the connection's timers until it closes or `limit` (virtual) has passed, the peer
/// answering every probe with `answer` (a window update) when given. Returns the segments sent.
fn run_timers(s: &mut Script, limit: Duration, answer: Option<u16>) -> Vec<harness::script::Out> {
    let end = s.now + limit;
    let mut sent = Vec::new();
    while let Some(t) = s.c.poll_timeout() {
        if t > end || s.c.state() == State::Closed {
            break;
        }
        s.now = t;
        s.c.handle_timeout(t);
        let out = s.drain();
        let probed = !out.is_empty();
        sent.extend(out);
        if let (true, Some(w)) = (probed, answer) {
            if s.c.state() != State::Closed {
                window_update(s, w);
            }
        }
    }
    sent
}

/// A peer that keeps its window shut forever while answering every probe: RFC 6429 lets the
/// connection be ended; it is reset after `persist_limit`, counted.
#[test]
fn rfc6429_a_window_shut_forever_ends_the_connection_at_the_persist_limit() {
    let cfg = Config {
        persist_limit: Some(Duration::from_secs(30)),
        ..plain()
    };
    let mut s = Script::establish_active(cfg, TcpOptions::default());
    window_update(&mut s, 0);
    s.c.send(&[7; 1000]).unwrap();
    assert!(s.drain().is_empty());
    let start = s.now;
    let sent = run_timers(&mut s, Duration::from_secs(600), Some(0));
    assert_eq!(s.c.state(), State::Closed);
    let waited = s.now - start;
    assert!(
        waited >= Duration::from_secs(30) && waited < Duration::from_secs(90),
        "reset after {waited:?}, not at the 30 s persist limit"
    );
    assert!(sent.last().is_some_and(|o| o.flags.rst), "RST sent last");
    assert!(s.c.counters().window_probes >= 3, "probed meanwhile");
    assert_eq!(s.c.counters().persist_timeouts, 1);
    let ev: Vec<_> = std::iter::from_fn(|| s.c.poll_event()).collect();
    assert!(ev.contains(&Event::Closed(CloseReason::TimedOut)));
}

/// The persist limit counts one zero-window stretch: a window that opens (and data that
/// flows) starts the clock again, so a slow reader is not cut off.
#[test]
fn rfc6429_a_window_that_opens_restarts_the_persist_clock() {
    let cfg = Config {
        persist_limit: Some(Duration::from_secs(30)),
        ..plain()
    };
    let mut s = Script::establish_active(cfg, TcpOptions::default());
    for _ in 0..3 {
        window_update(&mut s, 0);
        s.c.send(&[7; 100]).unwrap();
        s.drain();
        // Shut for 20 s (two thirds of the limit), then the window opens and data flows.
        run_timers(&mut s, Duration::from_secs(20), Some(0));
        assert_eq!(s.c.state(), State::Established);
        window_update(&mut s, 4096);
        let out = s.drain();
        assert_eq!(out.iter().map(|o| o.payload.len()).sum::<usize>(), 100);
        s.inject("A", b"", false);
    }
    assert_eq!(s.c.counters().persist_timeouts, 0);
}

/// FIN-WAIT-2 is bounded: a peer that acknowledges our FIN and never sends its own is reset
/// after `fin_wait2_timeout`, counted.
#[test]
fn fin_wait_2_ends_at_its_timeout_with_rst() {
    let cfg = Config {
        fin_wait2_timeout: Some(Duration::from_secs(60)),
        ..plain()
    };
    let mut s = Script::establish_active(cfg, TcpOptions::default());
    s.c.close(s.now);
    s.drain();
    s.inject("A", b"", false);
    assert_eq!(s.c.state(), State::FinWait2);
    let start = s.now;
    let sent = run_timers(&mut s, Duration::from_secs(600), None);
    assert_eq!(s.c.state(), State::Closed);
    assert_eq!(s.now - start, Duration::from_secs(60));
    assert!(sent.iter().any(|o| o.flags.rst), "RST sent: {sent:?}");
    assert_eq!(s.c.counters().fin_wait2_timeouts, 1);
}

/// Without the limit FIN-WAIT-2 waits for the peer's FIN (RFC 9293).
#[test]
fn fin_wait_2_without_a_timeout_waits() {
    let cfg = Config {
        fin_wait2_timeout: None,
        ..plain()
    };
    let mut s = Script::establish_active(cfg, TcpOptions::default());
    s.c.close(s.now);
    s.drain();
    s.inject("A", b"", false);
    run_timers(&mut s, Duration::from_secs(600), None);
    assert_eq!(s.c.state(), State::FinWait2);
}

/// `handle_delayed_ack_timeout` (what the endpoint calls when a delayed ACK it queued falls
/// due) leaves the connection as `handle_timeout` does, whenever the delayed ACK is due: alone,
/// with the RTO due too, with the keepalive due too, armed for a first segment or again.
#[test]
fn the_delayed_ack_timeout_does_what_handle_timeout_does_when_the_ack_is_due() {
    let ms = Duration::from_millis;
    let ka = Keepalive {
        idle: Duration::from_secs(10),
        interval: Duration::from_secs(2),
        probes: 3,
    };
    // (data of ours in flight: the RTO armed; the timer armed for a first segment, or again
    // after an ACK went with data; how long after)
    let cases = [
        (false, true, ms(40)),
        (true, true, ms(40)),
        (true, true, ms(1_500)),
        (false, true, ms(10_000)),
        (true, true, ms(10_000)),
        (true, false, ms(1_500)),
    ];
    for (in_flight, first, after) in cases {
        let make = || {
            let cfg = Config {
                quick_acks: 0,
                delayed_ack: Some(ms(40)),
                keepalive: Some(ka),
                ..plain()
            };
            let mut s = Script::establish_active(cfg, TcpOptions::default());
            let una = s.c.snd_una().0;
            if in_flight {
                s.c.send(&[2; 100]).unwrap();
                assert_eq!(s.drain().len(), 1);
            }
            // The peer's data, acknowledging none of ours: the ACK of it is delayed.
            let p = s.p_nxt;
            s.inject_raw(p, Some(una), "A", TcpOptions::default(), &[1; 300]);
            s.p_nxt = p.wrapping_add(300);
            if !first {
                // (Its ACK sent with data of ours: the timer stopped, then armed again.)
                s.c.send(&[3; 50]).unwrap();
                assert_eq!(s.drain().len(), 1);
                s.inject_raw(s.p_nxt, Some(una), "A", TcpOptions::default(), &[1; 300]);
            }
            assert!(s.drain().is_empty(), "the ACK is delayed");
            assert!(s.c.delayed_ack_deadline().is_some());
            s.now += after;
            assert!(s.c.delayed_ack_deadline().is_some_and(|d| d <= s.now));
            s
        };
        let (mut a, mut b) = (make(), make());
        a.c.handle_timeout(a.now);
        b.c.handle_delayed_ack_timeout(b.now);
        let case = (in_flight, first, after);
        assert_eq!(format!("{:?}", a.c), format!("{:?}", b.c), "{case:?}");
        assert_eq!(a.drain(), b.drain(), "{case:?}");
        assert_eq!(a.c.poll_timeout(), b.c.poll_timeout(), "{case:?}");
    }
}
