//! RFC 5961 protections, PAWS, malformed input, SYN floods, arbitrary bytes.

mod harness;

use std::time::Duration;

use tcp_offload::Timestamp;

use harness::script::Script;
use harness::{gen, raw, tuple_a, tuple_b};
use proptest::prelude::*;
use tcp_offload::wire::{self, Flags, SegmentRepr, TcpOptions};
use tcp_offload::{Config, Connection, ListenerConfig, SeqNum, State, WireError};

fn cfg() -> Config {
    Config {
        delayed_ack: None,
        ..Config::default()
    }
}

fn ts_opts() -> TcpOptions {
    TcpOptions {
        timestamps: Some((1000, 0)),
        sack_permitted: true,
        window_scale: Some(7),
        mss: Some(1460),
        ..Default::default()
    }
}

#[test]
fn rfc5961_s3_2_in_window_inexact_rst_gets_challenge_ack() {
    let mut s = Script::establish_active(cfg(), TcpOptions::default());
    let rcv = s.p_nxt;
    s.inject_raw(rcv + 1000, None, "R", TcpOptions::default(), b"");
    assert_eq!(s.c.state(), State::Established);
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert!(out[0].is_pure_ack() && out[0].ack == Some(rcv));
    assert_eq!(s.c.counters().challenge_acks, 1);
}

#[test]
fn rfc5961_s3_2_out_of_window_rst_is_dropped_silently() {
    let mut s = Script::establish_active(cfg(), TcpOptions::default());
    s.inject_raw(
        s.p_nxt.wrapping_add(0x4000_0000),
        None,
        "R",
        TcpOptions::default(),
        b"",
    );
    assert_eq!(s.c.state(), State::Established);
    assert!(s.drain().is_empty());
}

#[test]
fn rfc5961_s4_2_syn_in_established_gets_challenge_ack() {
    let mut s = Script::establish_active(cfg(), TcpOptions::default());
    // In-window SYN and an exact-sequence SYN both: challenge ACK, no reset.
    for seq in [s.p_nxt, s.p_nxt + 10] {
        s.inject_raw(seq, None, "S", TcpOptions::default(), b"");
        assert_eq!(s.c.state(), State::Established);
        let out = s.drain();
        assert!(out.len() == 1 && out[0].is_pure_ack());
    }
    assert_eq!(s.c.counters().challenge_acks, 2);
}

#[test]
fn rfc9293_s3_10_7_4_out_of_window_data_is_dropped_with_an_ack() {
    let mut s = Script::establish_active(cfg(), TcpOptions::default());
    let ack = s.c_snd_nxt();
    s.inject_raw(
        s.p_nxt.wrapping_add(2_000_000),
        Some(ack),
        "A",
        TcpOptions::default(),
        b"evil",
    );
    let out = s.drain();
    assert!(out.len() == 1 && out[0].is_pure_ack() && out[0].ack == Some(s.p_nxt));
    assert_eq!(s.c.counters().out_of_window, 1);
    assert_eq!(s.c.recv_ready(), 0);
    // An old duplicate too.
    s.inject_raw(
        s.p_nxt.wrapping_sub(5000),
        Some(ack),
        "A",
        TcpOptions::default(),
        b"old",
    );
    assert!(s.drain()[0].is_pure_ack());
}

#[test]
fn rfc5961_s5_2_ack_of_unsent_data_is_dropped_with_an_ack() {
    let mut s = Script::establish_active(cfg(), TcpOptions::default());
    let ack = s.c_snd_nxt().wrapping_add(5000);
    s.inject_raw(s.p_nxt, Some(ack), "A", TcpOptions::default(), b"data");
    assert_eq!(s.c.recv_ready(), 0, "segment dropped");
    assert_eq!(s.c.counters().bad_acks, 1);
    assert!(s.drain()[0].is_pure_ack());
}

#[test]
fn rfc5961_s5_2_too_old_ack_is_dropped() {
    let mut s = Script::establish_active(cfg(), TcpOptions::default());
    let ack = s.c_snd_nxt().wrapping_sub(1_000_000);
    s.inject_raw(s.p_nxt, Some(ack), "A", TcpOptions::default(), b"data");
    assert_eq!(s.c.recv_ready(), 0);
    assert_eq!(s.c.counters().bad_acks, 1);
}

#[test]
fn rfc7323_s5_paws_drops_old_timestamps_with_an_ack() {
    let mut s = Script::establish_active(cfg(), ts_opts());
    assert!(s.c.timestamps_enabled());
    s.inject("A", b"fresh", true);
    assert_eq!(s.c.recv_ready(), 5);
    s.drain();
    let ack = s.c_snd_nxt();
    let old = TcpOptions {
        timestamps: Some((5, 0)),
        ..Default::default()
    };
    s.inject_raw(s.p_nxt, Some(ack), "A", old, b"stale");
    assert_eq!(s.c.recv_ready(), 5, "old timestamp dropped");
    assert_eq!(s.c.counters().paws_dropped, 1);
    assert!(s.drain()[0].is_pure_ack());
}

#[test]
fn malformed_headers_are_dropped_and_counted() {
    let mut s = Script::establish_active(cfg(), TcpOptions::default());
    let repr = SegmentRepr {
        tuple: tuple_b(),
        seq: SeqNum(s.p_nxt),
        ack: Some(SeqNum(s.c_snd_nxt())),
        flags: Flags::default(),
        window: 100,
        options: TcpOptions {
            timestamps: Some((1, 1)),
            ..Default::default()
        },
    };
    let good = raw(repr, b"payload!");
    // Bad data offset (3).
    let mut p = good.clone();
    p[32] = (3 << 4) | (p[32] & 0xF);
    assert_eq!(s.c.handle_packet(s.now, &p), Err(WireError::BadDataOffset));
    // Bad option length (re-checksummed so only the option is wrong).
    let mut p = good.clone();
    p[43] = 3;
    fix_tcp_checksum(&mut p);
    assert_eq!(s.c.handle_packet(s.now, &p), Err(WireError::BadOption));
    // Truncated.
    assert_eq!(
        s.c.handle_packet(s.now, &good[..30]),
        Err(WireError::Truncated)
    );
    assert_eq!(
        s.c.handle_packet(s.now, &good[..good.len() - 1]),
        Err(WireError::Truncated)
    );
    // Corrupted payload.
    let mut p = good.clone();
    p[55] ^= 0x40;
    assert_eq!(s.c.handle_packet(s.now, &p), Err(WireError::BadChecksum));
    assert_eq!(s.c.counters().malformed, 5);
    assert_eq!(s.c.counters().bad_checksum, 1);
    assert_eq!(s.c.recv_ready(), 0);
    // The good one still works.
    s.c.handle_packet(s.now, &good).unwrap();
    assert_eq!(s.c.recv_ready(), 8);
}

fn fix_tcp_checksum(p: &mut [u8]) {
    p[36] = 0;
    p[37] = 0;
    let tcp_len = (p.len() - 20) as u16;
    let pseudo = [&[0, 6][..], &tcp_len.to_be_bytes()].concat();
    let c = testkit::internet_checksum(&[&p[12..20], &pseudo, &p[20..]]);
    p[36..38].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn rfc4987_syn_flood_keeps_memory_bounded_and_a_real_connection_opens() {
    let t0 = Timestamp::ZERO;
    let lcfg = ListenerConfig {
        max_half_open: 256,
        max_tx_queue: 64,
        ..ListenerConfig::default()
    };
    let mut l = harness::listener(t0, lcfg);
    let mut buf = vec![0u8; 2000];
    let mut now = t0;
    for i in 0..100_000u32 {
        let src = std::net::SocketAddr::from((
            [198, 19, (i >> 16) as u8, (i >> 8) as u8],
            (i as u16) | 1024,
        ));
        let repr = SegmentRepr {
            tuple: tcp_offload::FourTuple {
                local: src,
                remote: tuple_b().local,
            },
            seq: SeqNum(i.wrapping_mul(2_654_435_761)),
            ack: None,
            flags: Flags {
                syn: true,
                ..Default::default()
            },
            window: 1000,
            options: TcpOptions {
                mss: Some(1460),
                ..Default::default()
            },
        };
        l.handle_packet(now, &raw(repr, b"")).unwrap();
        // The engine drains replies now and then; between drains the queue stays bounded.
        if i % 1000 == 0 {
            while l.poll_transmit(now, &mut buf).is_some() {}
            now += Duration::from_millis(1);
            l.handle_timeout(now);
        }
        assert!(l.half_open_len() <= 256 && l.tx_queue_len() <= 64);
    }
    let c = *l.counters();
    assert_eq!(c.syns, 100_000);
    // Every SYN got a half-open entry, a cookie, or was shed because the reply queue was full.
    assert_eq!(c.synacks + c.cookies_sent + c.tx_overflow, 100_000, "{c:?}");
    assert_eq!(c.synacks, 256);
    assert!(c.cookies_sent > 1000 && c.tx_overflow > 0, "{c:?}");
    // A real client still connects (its SYN gets a cookie; its ACK completes the open).
    while l.poll_transmit(now, &mut buf).is_some() {}
    let g = gen(t0);
    let mut client =
        Connection::connect(Config::default(), tuple_a(), &g, now).expect("valid TCP settings");
    let mut established = false;
    for _ in 0..10 {
        while let Some(n) = client.poll_transmit(now, &mut buf) {
            let _ = l.handle_packet(now, &buf[..n]);
        }
        while let Some(n) = l.poll_transmit(now, &mut buf) {
            if wire::parse(&buf[..n]).unwrap().tuple.local == tuple_a().local {
                client.handle_packet(now, &buf[..n]).unwrap();
            }
        }
        if let Some(mut server) = l.accept() {
            assert_eq!(server.state(), State::Established);
            assert_eq!(client.state(), State::Established);
            // Options survived the cookie (carried in the timestamp).
            assert!(server.sack_enabled() && server.timestamps_enabled());
            assert_eq!(
                server.window_scales(),
                client.window_scales().map(|(a, b)| (b, a))
            );
            client.send(b"hello").unwrap();
            while let Some(n) = client.poll_transmit(now, &mut buf) {
                server.handle_packet(now, &buf[..n]).unwrap();
            }
            let mut b = [0u8; 8];
            assert_eq!(server.recv(&mut b), 5);
            established = true;
            break;
        }
    }
    assert!(established);
    assert!(l.counters().cookies_accepted >= 1);
}

#[test]
fn listener_half_open_entry_completes_without_cookies() {
    let t0 = Timestamp::ZERO;
    let mut l = harness::listener(t0, ListenerConfig::default());
    let g = gen(t0);
    let mut client =
        Connection::connect(Config::default(), tuple_a(), &g, t0).expect("valid TCP settings");
    harness::handshake_via(&mut l, &mut client, t0);
    let server = l.accept().expect("accepted");
    assert_eq!(server.state(), State::Established);
    assert_eq!(l.counters().cookies_sent, 0);
    assert_eq!(l.half_open_len(), 0);
}

/// Regression: data the client sends right after its handshake ACK, before the user takes the
/// connection with `accept`, belongs to that connection; the listener used to answer it with a
/// RST (it looked like an ACK for a cookie it never sent).
#[test]
fn listener_hands_data_before_accept_to_the_queued_connection() {
    let t0 = Timestamp::ZERO;
    let mut l = harness::listener(t0, ListenerConfig::default());
    let g = gen(t0);
    let mut client =
        Connection::connect(Config::default(), tuple_a(), &g, t0).expect("valid TCP settings");
    harness::handshake_via(&mut l, &mut client, t0);
    assert_eq!(l.accept_queue_len(), 1, "established, not yet accepted");
    let mut buf = vec![0u8; 2000];
    client.send(b"first data").unwrap();
    while let Some(n) = client.poll_transmit(t0, &mut buf) {
        l.handle_packet(t0, &buf[..n]).unwrap();
    }
    assert!(
        l.poll_transmit(t0, &mut buf).is_none(),
        "the listener answered the data (RST)"
    );
    let mut server = l.accept().expect("accepted");
    let mut got = [0u8; 32];
    let n = server.recv(&mut got);
    assert_eq!(&got[..n], b"first data");
}

#[test]
fn listener_rejects_forged_cookie_ack_with_rst() {
    let t0 = Timestamp::ZERO;
    let mut l = harness::listener(t0, ListenerConfig::default());
    let repr = SegmentRepr {
        tuple: tuple_a(),
        seq: SeqNum(1234),
        ack: Some(SeqNum(0xDEAD_BEEF)),
        flags: Flags::default(),
        window: 1000,
        options: TcpOptions::default(),
    };
    l.handle_packet(t0, &raw(repr, b"")).unwrap();
    assert!(l.accept().is_none());
    assert_eq!(l.counters().cookies_rejected, 1);
    let mut buf = vec![0u8; 200];
    let n = l.poll_transmit(t0, &mut buf).unwrap();
    let s = wire::parse(&buf[..n]).unwrap();
    assert!(s.flags.rst && s.seq == SeqNum(0xDEAD_BEEF));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = wire::parse(&bytes);
        let _ = wire::parse_options(&bytes[..bytes.len().min(40)]);
    }

    #[test]
    fn arbitrary_segments_never_panic_a_connection(
        segs in proptest::collection::vec((any::<u32>(), any::<u32>(), any::<u8>(), any::<u16>(), proptest::collection::vec(any::<u8>(), 0..40), proptest::collection::vec(any::<u8>(), 0..60)), 1..20)
    ) {
        let mut s = Script::establish_active(cfg(), ts_opts());
        s.c.send(&[7u8; 3000]).unwrap();
        s.drain();
        for (seq, ack, fl, win, opts, payload) in segs {
            // Arbitrary header fields and raw option bytes behind a valid IP/TCP frame.
            let mut pkt = raw(SegmentRepr {
                tuple: tuple_b(),
                seq: SeqNum(seq),
                ack: (fl & 0x10 != 0).then_some(SeqNum(ack)),
                flags: Flags { fin: fl & 1 != 0, syn: fl & 2 != 0, rst: fl & 4 != 0, psh: fl & 8 != 0, ack: false },
                window: win,
                options: TcpOptions::default(),
            }, &payload);
            // Splice option bytes in (data offset adjusted), then fix the lengths and checksum.
            let olen = opts.len() / 4 * 4;
            let mut p = pkt[..40].to_vec();
            p.extend_from_slice(&opts[..olen]);
            p.extend_from_slice(&pkt[40..]);
            p[32] = (((20 + olen) / 4) as u8) << 4 | (p[32] & 0xF);
            let tl = p.len() as u16;
            p[2..4].copy_from_slice(&tl.to_be_bytes());
            p[10] = 0; p[11] = 0;
            let sum = testkit::internet_checksum(&[&p[..20]]);
            p[10..12].copy_from_slice(&sum.to_be_bytes());
            fix_tcp_checksum(&mut p);
            pkt = p;
            let _ = s.c.handle_packet(s.now, &pkt);
            s.drain();
            s.advance(Duration::from_millis(300));
            s.drain();
        }
    }
}

#[test]
fn rfc5961_s7_challenge_acks_are_rate_limited() {
    let mut s = Script::establish_active(
        Config {
            challenge_acks_per_sec: 5,
            ..cfg()
        },
        TcpOptions::default(),
    );
    for k in 0..20 {
        s.inject_raw(s.p_nxt + 100 + k, None, "R", TcpOptions::default(), b"");
    }
    assert_eq!(s.c.counters().challenge_acks, 5);
    assert_eq!(s.c.counters().challenge_acks_limited, 15);
    assert_eq!(s.drain().len(), 1, "one ACK carries them");
    s.advance(Duration::from_secs(1));
    s.inject_raw(s.p_nxt + 7, None, "R", TcpOptions::default(), b"");
    assert_eq!(
        s.c.counters().challenge_acks,
        6,
        "a new second, a new budget"
    );
    assert_eq!(s.c.state(), State::Established);
}

#[test]
fn listener_accept_queue_is_bounded_and_overflow_is_reset() {
    let t0 = Timestamp::ZERO;
    let mut l = harness::listener(
        t0,
        ListenerConfig {
            max_accept_queue: 1,
            ..ListenerConfig::default()
        },
    );
    let g = gen(t0);
    let mut clients: Vec<Connection> = (0..2u16)
        .map(|k| {
            let t = tcp_offload::FourTuple {
                local: std::net::SocketAddr::from(([198, 18, 0, 1], 40000 + k)),
                remote: tuple_b().local,
            };
            Connection::connect(Config::default(), t, &g, t0).expect("valid TCP settings")
        })
        .collect();
    let mut buf = vec![0u8; 2000];
    for _ in 0..4 {
        for c in clients.iter_mut() {
            while let Some(n) = c.poll_transmit(t0, &mut buf) {
                l.handle_packet(t0, &buf[..n]).unwrap();
            }
        }
        while let Some(n) = l.poll_transmit(t0, &mut buf) {
            let to = wire::parse(&buf[..n]).unwrap().tuple.local;
            if let Some(c) = clients.iter_mut().find(|c| c.tuple().local == to) {
                c.handle_packet(t0, &buf[..n]).unwrap();
            }
        }
    }
    assert_eq!(l.accept_queue_len(), 1);
    assert_eq!(l.counters().accept_overflow, 1);
    assert_eq!(
        clients[1].state(),
        State::Closed,
        "the overflowed client was reset"
    );
    assert_eq!(clients[0].state(), State::Established);
}
