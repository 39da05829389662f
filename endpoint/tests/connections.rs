//! 64 concurrent connections over two listeners, each verified; graceful close and RST.

mod pair;
use ddp::WorkRequest;
use std::net::SocketAddrV4;

use ddp::{Access, RemoteBuf, WcStatus};
use endpoint::{ConnId, Endpoint, EndpointError, EndpointEvent};
use pair::*;
use tcp_offload::{CloseReason, TcpConfigError};

#[test]
fn sixty_four_connections_over_two_listeners_each_verified() {
    let mut p = Pair::clean();
    p.b.listen(5001, settings(true, true)).unwrap();
    p.b.listen(5002, settings(false, true)).unwrap();
    let mut conns = Vec::new();
    for i in 0..64u16 {
        let port = 5001 + (i % 2);
        let c =
            p.a.connect(
                p.now,
                SocketAddrV4::new(IP_B, port),
                settings(i % 3 == 0, true),
            )
            .unwrap();
        conns.push(c);
    }
    p.run_until(200_000, |p| {
        conns.iter().all(|c| established(&p.events_a, *c))
            && p.events_b
                .iter()
                .filter(|e| matches!(e, EndpointEvent::Established { .. }))
                .count()
                == 64
    });
    // Each connection writes its own pattern into its own region at B.
    let mut expect = Vec::new();
    for (i, c) in conns.iter().enumerate() {
        let len = 1000 + i * 997;
        let data = pattern(len, i as u64 + 100);
        let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
        let (dst, stag) = p.b.register(len, Access::REMOTE_WRITE);
        p.a.post(
            *c,
            WorkRequest::write(i as u64, buf(src, len), RemoteBuf { stag, to: 0 }),
        )
        .unwrap();
        expect.push((dst, data));
    }
    p.run_until(1_000_000, |p| p.wc_a.len() >= 64);
    assert!(p.wc_a.iter().all(|(_, w)| w.status == WcStatus::Success));
    for (dst, data) in expect {
        assert!(p.b.region(dst).unwrap() == &data[..]);
    }
    assert_eq!(p.b.connection_count(), 64);
}

fn closed(ev: &[EndpointEvent]) -> Vec<(ConnId, CloseReason)> {
    ev.iter()
        .filter_map(|e| match e {
            EndpointEvent::Closed { conn, reason } => Some((*conn, *reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn graceful_close_after_work_completes_both_sides_closed() {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4000, settings(false, true), settings(false, true));
    transfer_all(&mut p, ca, cb, 12_345, 1);
    p.a.close(p.now, ca).unwrap();
    // B sees A's FIN (half-closed, DDP-69) and closes its own side (DDP-70).
    p.run_until(1_000_000, |p| {
        p.events_b
            .iter()
            .any(|e| matches!(e, EndpointEvent::PeerClosed { .. }))
    });
    p.b.close(p.now, cb).unwrap();
    p.run_until(1_000_000, |p| {
        closed(&p.events_a).iter().any(|c| c.0 == ca)
            && closed(&p.events_b).iter().any(|c| c.0 == cb)
    });
    assert_eq!(closed(&p.events_b)[0].1, CloseReason::Normal);
    assert!(p
        .events_b
        .iter()
        .any(|e| matches!(e, EndpointEvent::PeerClosed { .. })));
    assert_eq!(p.a.connection_count() + p.b.connection_count(), 0);
}

#[test]
fn abort_sends_rst_peer_sees_reset_and_flushes() {
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(4000, settings(false, true), settings(false, true));
    let (dst, _) = p.b.register(100, Access::LOCAL_WRITE);
    p.b.post(cb, WorkRequest::recv(77, buf(dst, 100))).unwrap();
    p.a.abort(ca).unwrap();
    p.run_until(100_000, |p| closed(&p.events_b).iter().any(|c| c.0 == cb));
    assert_eq!(closed(&p.events_b)[0].1, CloseReason::Reset);
    // The posted receive is flushed, not lost.
    assert!(p
        .wc_b
        .iter()
        .any(|(_, w)| w.wr_id == 77 && w.status == WcStatus::Flushed));
}

/// Regression: a peer's handshake ACK and its first data (the MPA Request) arriving in one
/// receive batch. The listener hands the connection over at the ACK; the data must find the
/// connection, not the listener (which answered it with a RST before the endpoint moved the
/// connection into its flow table right after each listener segment).
#[test]
fn data_right_behind_the_handshake_ack_reaches_the_new_connection() {
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};
    use tcp_offload::{Config, Connection, FourTuple, IsnGenerator, Timestamp};

    let base = Instant::now();
    // The raw client's clock counts from `base`.
    let ts = |t: Instant| Timestamp::since(base, t);
    // The raw client sends on `to_b` and reads `from_b`.
    let (mut to_b, mut from_b) = wires(base, link(), link(), 9);
    let mut b: Endpoint =
        Endpoint::new(endpoint_cfg(MAC_B, IP_B, MAC_A), base).expect("valid configuration");
    b.listen(7000, settings(false, true)).unwrap();
    let tuple = FourTuple {
        local: SocketAddr::V4(SocketAddrV4::new(IP_A, 41000)),
        remote: SocketAddr::V4(SocketAddrV4::new(IP_B, 7000)),
    };
    let mut now = base;
    let mut client = Connection::connect(
        Config::default(),
        tuple,
        &IsnGenerator::new([3; 16], Timestamp::ZERO),
        ts(now),
    )
    .expect("valid TCP settings");
    let frame = |ip_packet: &[u8]| {
        let mut f = Vec::with_capacity(14 + ip_packet.len());
        f.extend_from_slice(&MAC_B);
        f.extend_from_slice(&MAC_A);
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        f.extend_from_slice(ip_packet);
        f
    };
    let mut out = vec![0u8; 2048];
    let mut rsts = 0;
    let mut mpa_reply = false;
    let mut sent_request = false;
    for _ in 0..200 {
        now += Duration::from_millis(1);
        // Everything the client has to send goes out in one batch (ACK + Request together).
        while let Some(n) = client.poll_transmit(ts(now), &mut out) {
            to_b.send(now, frame(&out[..n]));
        }
        drive(
            &mut b,
            &mut to_b,
            &mut from_b,
            now + Duration::from_millis(1),
        );
        from_b.recv_batch(now + Duration::from_millis(1), 64, |f: &[u8]| {
            let seg = tcp_offload::wire::parse(&f[14..]).expect("a TCP segment");
            rsts += u32::from(seg.flags.rst);
            mpa_reply |= seg.payload.starts_with(b"MPA ID Rep Frame");
            let _ = client.handle_packet(ts(now), &f[14..]);
        });
        if client.state() == tcp_offload::State::Established && !sent_request {
            // The pure handshake ACK, then the MPA Request right behind it, injected together.
            let mut batch = Vec::new();
            while let Some(n) = client.poll_transmit(ts(now), &mut out) {
                batch.push(frame(&out[..n]));
            }
            assert_eq!(batch.len(), 1, "one pure ACK");
            let mut init = mpa::Initiator::new(
                settings(false, true).startup,
                now,
                b"",
                mpa::ReadDepths::default(),
            )
            .unwrap();
            client.send(&init.poll_transmit().unwrap()).unwrap();
            while let Some(n) = client.poll_transmit(ts(now), &mut out) {
                batch.push(frame(&out[..n]));
            }
            assert_eq!(batch.len(), 2, "ACK and Request");
            for f in batch {
                to_b.send(now, f);
            }
            sent_request = true;
        }
        if mpa_reply {
            break;
        }
    }
    assert_eq!(
        rsts,
        0,
        "the endpoint reset the new connection: {:?}",
        b.counters()
    );
    assert!(mpa_reply, "no MPA Reply: {:?}", b.counters());
}

/// iWARP completes a Write when TCP has it acknowledged, so a lone small Write must not wait
/// for the peer's delayed-ACK timer: the endpoint acknowledges a short segment at its next round
/// (virtual time over the simulated link: the completion comes within a few link delays).
#[test]
fn a_lone_small_write_completes_without_waiting_for_the_delayed_ack_timer() {
    use std::time::Duration;
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(7100, settings(false, true), settings(false, true));
    let (_, stag) = p.b.register(64, Access::REMOTE_WRITE);
    let (src, _) = filled(&mut p.a, &[7u8; 64], Access::LOCAL_WRITE);
    // Past TCP's initial quick ACKs (every segment acknowledged at once at the start).
    for i in 0..40 {
        p.a.post(
            ca,
            WorkRequest::write(1000 + i, buf(src, 64), RemoteBuf { stag, to: 0 }),
        )
        .unwrap();
        p.wait_wc(true, 1000 + i);
    }
    let settle = p.now + Duration::from_millis(50);
    p.run_until(1_000_000, |p| p.now >= settle);
    let start = p.now;
    p.a.post(
        ca,
        WorkRequest::write(77, buf(src, 64), RemoteBuf { stag, to: 0 }),
    )
    .unwrap();
    // Step by hand: `now` before the step that delivered the completion is when it happened.
    let mut took = None;
    for _ in 0..100_000 {
        let t = p.now;
        p.step();
        if let Some((_, wc)) = p.wc_a.iter().find(|(_, c)| c.wr_id == 77) {
            assert_eq!(wc.status, WcStatus::Success);
            took = Some(t - start);
            break;
        }
    }
    let took = took.expect("the Write completed");
    // The link's one-way delay is 50 µs; the delayed-ACK timer is 1 ms.
    assert!(
        took < Duration::from_micros(500),
        "the Write completed after {took:?} (virtual): the ACK waited for a timer; a {:?} b {:?} tcp b {:?}", p.a.counters(), p.b.counters(), p.b.tcp(cb).map(|t| *t.counters())
    );
}

/// Timers in the endpoint's wheel include MPA's: an Initiator whose peer completes TCP but never
/// answers the MPA Request gives up after the startup timeout (MPA-82), reports it and closes
/// the connection. The peer here is a bare tcp-offload listener over the simulated link.
#[test]
fn mpa_startup_timeout_fires_from_the_endpoint_timer_wheel() {
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};
    use tcp_offload::{Config, IsnGenerator, ListenerConfig, TcpListener, Timestamp};

    let base = Instant::now();
    // The raw server's clock counts from `base`.
    let ts = |t: Instant| Timestamp::since(base, t);
    // The raw server reads `from_a` and sends on `to_a`.
    let (mut from_a, mut to_a) = wires(base, link(), link(), 5);
    let mut a: Endpoint =
        Endpoint::new(endpoint_cfg(MAC_A, IP_A, MAC_B), base).expect("valid configuration");
    let mut l = TcpListener::new(
        Config::default(),
        ListenerConfig::default(),
        SocketAddr::V4(SocketAddrV4::new(IP_B, 7300)),
        IsnGenerator::new([9; 16], Timestamp::ZERO),
    )
    .expect("valid TCP settings");
    let mut s = settings(false, true);
    s.startup.timeout = Duration::from_secs(2);
    let conn = a.connect(base, SocketAddrV4::new(IP_B, 7300), s).unwrap();
    let mut server = None;
    let mut now = base;
    let mut out = vec![0u8; 2048];
    let mut failed = None;
    let mut closed = false;
    while now < base + Duration::from_secs(10) && !(failed.is_some() && closed) {
        now += Duration::from_millis(5);
        drive(&mut a, &mut to_a, &mut from_a, now);
        while let Some(e) = a.poll_event() {
            match e {
                EndpointEvent::StartupFailed { conn: c, event } if c == conn => {
                    failed = Some((now - base, event))
                }
                EndpointEvent::Closed { conn: c, .. } if c == conn => closed = true,
                _ => {}
            }
        }
        from_a.recv_batch(now, 64, |f: &[u8]| match server.as_mut() {
            Some(c) => {
                let _ = tcp_offload::Connection::handle_packet(c, ts(now), &f[14..]);
            }
            None => {
                let _ = l.handle_packet(ts(now), &f[14..]);
            }
        });
        if server.is_none() {
            server = l.accept();
        }
        let mut frames = Vec::new();
        while let Some(n) = l.poll_transmit(ts(now), &mut out) {
            frames.push(out[..n].to_vec());
        }
        while let Some(n) = server
            .as_mut()
            .and_then(|c| c.poll_transmit(ts(now), &mut out))
        {
            frames.push(out[..n].to_vec());
        }
        for p in frames {
            to_a.send(now, [&MAC_A[..], &MAC_B[..], &[0x08, 0x00], &p].concat());
        }
    }
    let (after, event) = failed.expect("MPA startup never timed out");
    assert_eq!(
        event,
        ddp::QpEvent::StartupFailed(mpa::StartupError::Timeout),
        "MPA-82"
    );
    assert!(
        after >= Duration::from_secs(2) && after < Duration::from_secs(3),
        "timed out after {after:?} (virtual), not at the 2 s startup timeout"
    );
    assert!(closed, "the connection was not closed");
    assert!(server.is_some(), "TCP itself was established");
}

/// A Send completes when TCP has it acknowledged, not when it is sent: with the peer endpoint
/// stopped (nothing acknowledges), the Send stays outstanding however long the sender runs; once
/// the peer runs, it completes.
#[test]
fn a_send_completes_on_the_peers_ack_not_on_transmission() {
    use std::time::Duration;
    let mut p = Pair::clean();
    let (ca, cb) = p.establish(7400, settings(false, true), settings(false, true));
    let (dst, _) = p.b.register(4096, Access::LOCAL_WRITE);
    p.b.post(cb, WorkRequest::recv(1, buf(dst, 4096))).unwrap();
    p.run_until(1000, |p| p.wake_b().is_none_or(|t| t > p.now));
    let (src, _) = filled(&mut p.a, &pattern(4096, 3), Access::LOCAL_WRITE);
    p.a.post(ca, WorkRequest::send(2, buf(src, 4096), Default::default()))
        .unwrap();
    // Only A runs, for longer than any delayed ACK (but short of the RTO).
    let sent_before = p.a.counters().tx_packets;
    for _ in 0..100 {
        p.now += Duration::from_millis(1);
        p.poll_a();
    }
    assert!(
        p.a.counters().tx_packets > sent_before,
        "the Send was transmitted"
    );
    assert!(
        p.a.poll_completion().is_none(),
        "the Send completed without an ACK"
    );
    let wc = p.wait_wc(true, 2);
    assert_eq!(wc.status, WcStatus::Success);
}

/// Regression: `Endpoint::new` refuses a configuration whose TCP settings fail
/// `tcp_offload::Config::validate` (it accepted any before), and the error names the setting.
#[test]
fn endpoint_refuses_a_bad_tcp_setting_and_names_it() {
    let now = std::time::Instant::now();
    let mut cfg = endpoint_cfg(MAC_A, IP_A, MAC_B);
    cfg.tcp.rto_min = cfg.tcp.rto_max * 2;
    let r: Result<Endpoint, _> = Endpoint::new(cfg.clone(), now);
    let e = r.err().expect("refused");
    assert_eq!(e, EndpointError::Config(TcpConfigError::BadRto));
    assert_eq!(cfg.validate(), Err(e));
    assert!(e.to_string().contains("`rto_initial`"), "{e}");
    let mut cfg = endpoint_cfg(MAC_A, IP_A, MAC_B);
    cfg.tcp.mtu = 60;
    let r: Result<Endpoint, _> = Endpoint::new(cfg, now);
    let e = r.err().expect("refused");
    assert!(e.to_string().contains("`mtu`"), "{e}");
    let r: Result<Endpoint, _> = Endpoint::new(endpoint_cfg(MAC_A, IP_A, MAC_B), now);
    assert!(r.is_ok());
}
