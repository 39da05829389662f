//! Lossless open / data / close between two of our connections.

mod harness;

use std::time::Duration;

use harness::Pair;
use tcp_offload::{Config, Event, State};

/// The shared test pattern (`testkit::pattern`).
fn payload(n: usize) -> Vec<u8> {
    testkit::pattern(n, 7)
}

#[test]
fn open_transfer_close_lossless() {
    let mut p = Pair::new(Config::default(), Config::default());
    assert!(p.run_until(Duration::from_secs(5), |p| p.a.state()
        == State::Established
        && p.b.state() == State::Established));
    assert_eq!(p.a.poll_event(), Some(Event::Connected));
    let data = payload(300_000);
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    let ok = p.run_until(Duration::from_secs(60), |p| {
        if sent < data.len() {
            sent += p.a.send(&data[sent..]).unwrap();
        }
        loop {
            let n = p.b.recv(&mut buf);
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() == data.len()
    });
    assert!(ok, "got {} of {}", got.len(), data.len());
    assert_eq!(got, data);
    p.a.close(p.now);
    assert!(p.run_until(Duration::from_secs(5), |p| p.b.state() == State::CloseWait));
    p.b.close(p.now);
    assert!(
        p.run_until(Duration::from_secs(5), |p| p.a.state() == State::TimeWait
            && p.b.state() == State::Closed)
    );
    assert!(p.run_until(Duration::from_secs(120), |p| p.a.state() == State::Closed));
    assert_eq!(p.a.counters().retransmits, 0);
    assert_eq!(p.b.counters().retransmits, 0);
}

#[test]
fn open_transfer_close_over_ipv6() {
    use tcp_offload::{Connection, FourTuple, IsnGenerator};
    let t0 = tcp_offload::Timestamp::ZERO;
    let g = IsnGenerator::new([9; 16], t0);
    let t = FourTuple {
        local: "[2001:db8::1]:40000".parse().unwrap(),
        remote: "[2001:db8::2]:5000".parse().unwrap(),
    };
    let mut a = Connection::connect(Config::default(), t, &g, t0).expect("valid TCP settings");
    let mut b =
        Connection::listen(Config::default(), t.remote, &g, t0).expect("valid TCP settings");
    netsim::exchange(&mut a, &mut b, t0, 4);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
    a.send(b"over v6").unwrap();
    netsim::exchange(&mut a, &mut b, t0, 4);
    let mut buf = [0u8; 16];
    let n = b.recv(&mut buf);
    assert_eq!(&buf[..n], b"over v6");
    a.close(t0);
    netsim::exchange(&mut a, &mut b, t0, 4);
    b.close(t0);
    netsim::exchange(&mut a, &mut b, t0, 4);
    assert_eq!((a.state(), b.state()), (State::TimeWait, State::Closed));
}

/// RFC 9293 §3.7.1: a SYN without an MSS option means 536 over IPv4 and 1220 over IPv6 (the
/// IPv6 minimum MTU, RFC 8200 §5, less 60); our own SYN announces at most the MTU less 40 (IPv4)
/// or 60 (IPv6).
#[test]
fn default_and_announced_mss_follow_the_address_family() {
    use tcp_offload::wire::{self, Flags, SegmentRepr, TcpOptions};
    use tcp_offload::{Connection, FourTuple, SeqNum};
    let t0 = tcp_offload::Timestamp::ZERO;
    for (local, remote, default, announced) in [
        ("198.18.0.1:40000", "198.18.0.2:5000", 536, 1460),
        ("[2001:db8::1]:40000", "[2001:db8::2]:5000", 1220, 1440),
    ] {
        let tuple = FourTuple {
            local: local.parse().unwrap(),
            remote: remote.parse().unwrap(),
        };
        let cfg = Config {
            timestamps: false,
            ..Config::default()
        };
        let mut c =
            Connection::connect(cfg, tuple, &harness::gen(t0), t0).expect("valid TCP settings");
        let mut buf = vec![0u8; 200];
        let n = c.poll_transmit(t0, &mut buf).expect("SYN");
        let syn = wire::parse(&buf[..n]).unwrap();
        assert_eq!(syn.options.mss, Some(announced), "{local}");
        let synack = SegmentRepr {
            tuple: FourTuple {
                local: tuple.remote,
                remote: tuple.local,
            },
            seq: SeqNum(1000),
            ack: Some(SeqNum(syn.seq.0.wrapping_add(1))),
            flags: Flags {
                syn: true,
                ..Flags::default()
            },
            window: 65535,
            options: TcpOptions::default(),
        };
        c.handle_packet(t0, &harness::raw(synack, &[])).unwrap();
        assert_eq!(c.state(), State::Established);
        assert_eq!(c.emss(), default, "{local}: no MSS option");
    }
}

/// With data events off, a transfer both ways queues only the state events: no Readable,
/// Writable or RecordAcked (an iWARP queue pair learns of data through its sink and SND.UNA);
/// on, the same transfer queues each of them.
#[test]
fn data_events_can_be_turned_off_state_events_stay() {
    let events_of = |on: bool| {
        let mut p = Pair::new(Config::default(), Config::default());
        p.a.set_data_events(on);
        p.b.set_data_events(on);
        p.a.enter_record_mode();
        p.b.enter_record_mode();
        assert!(p.run_until(Duration::from_secs(5), |p| p.a.state()
            == State::Established
            && p.b.state() == State::Established));
        p.a.send_record_bytes(&payload(3000)).unwrap();
        // An external record (its bytes the source's): acknowledged, it is RecordAcked.
        p.a.send_record(1000, 7).unwrap();
        p.b.send_record_bytes(&payload(500)).unwrap();
        assert!(
            p.run_until(Duration::from_secs(5), |p| p.a.send_queued() == 0
                && p.b.send_queued() == 0)
        );
        let now = p.now;
        p.a.close(now);
        assert!(p.run_until(Duration::from_secs(5), |p| p.b.state() == State::CloseWait));
        let mut ev: Vec<_> = std::iter::from_fn(|| p.a.poll_event()).collect();
        ev.extend(std::iter::from_fn(|| p.b.poll_event()));
        ev
    };
    let data = |e: &Event| matches!(e, Event::Readable | Event::Writable | Event::RecordAcked(_));
    let off = events_of(false);
    assert!(!off.iter().any(data), "{off:?}");
    assert!(
        off.contains(&Event::Connected) && off.contains(&Event::PeerClosed),
        "{off:?}"
    );
    let on = events_of(true);
    for want in [Event::Readable, Event::Writable] {
        assert!(on.contains(&want), "{want:?} missing from {on:?}");
    }
    assert!(on.contains(&Event::RecordAcked(7)), "{on:?}");
}

/// Regression: a configuration that fails `Config::validate` is refused by every constructor
/// that takes one (it was accepted before), with the setting named.
#[test]
fn constructors_refuse_a_configuration_that_fails_validate() {
    use tcp_offload::{
        Connection, FourTuple, IsnGenerator, ListenerConfig, TcpConfigError, TcpListener,
    };
    let t0 = tcp_offload::Timestamp::ZERO;
    let g = IsnGenerator::new([9; 16], t0);
    let t = FourTuple {
        local: "198.18.0.1:40000".parse().unwrap(),
        remote: "198.18.0.2:5000".parse().unwrap(),
    };
    // 1 MiB of receive buffer cannot be advertised without window scaling.
    let bad = Config {
        window_scale: None,
        ..Config::default()
    };
    let e = Connection::connect(bad.clone(), t, &g, t0).unwrap_err();
    assert_eq!(e, TcpConfigError::BadRecvBuffer);
    assert!(e.to_string().contains("`recv_buffer`"), "{e}");
    assert_eq!(
        Connection::listen(bad.clone(), t.remote, &g, t0).unwrap_err(),
        TcpConfigError::BadRecvBuffer
    );
    let small_mss = Config {
        mss: 40,
        ..Config::default()
    };
    assert_eq!(
        TcpListener::new(small_mss, ListenerConfig::default(), t.remote, g.clone()).unwrap_err(),
        TcpConfigError::BadMss
    );
    assert!(Connection::connect(Config::default(), t, &g, t0).is_ok());
}
