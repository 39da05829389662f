//! The endpoint's caps: connections, each listener's backlog of unfinished MPA
//! startups, what a peer may send before MPA is up, the application's accept deadline,
//! neighbours and outstanding work. Each refusal is counted; memory per connection in startup
//! is small and given back once the connections are gone.

mod pair;
mod raw_clients;

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use ddp::{Access, WcStatus, WorkRequest};
use endpoint::{Endpoint, EndpointConfig, EndpointError, EndpointEvent, QpSettings};
use pair::*;
use raw_clients::RawClients;
use tcp_offload::{CloseReason, Config, Connection, FourTuple, IsnGenerator, State};

fn cfg_b(f: impl FnOnce(&mut EndpointConfig)) -> EndpointConfig {
    let mut c = endpoint_cfg(MAC_B, IP_B, MAC_A);
    f(&mut c);
    c
}

fn pair_with_b(f: impl FnOnce(&mut EndpointConfig)) -> Pair {
    Pair::with_configs(
        endpoint_cfg(MAC_A, IP_A, MAC_B),
        cfg_b(f),
        link(),
        link(),
        1,
    )
}

fn startup_timeout(secs: u64) -> QpSettings {
    let mut s = settings(false, true);
    s.startup.timeout = Duration::from_secs(secs);
    s
}

/// Per-connection memory, measured on B: a connection whose MPA startup has
/// not finished holds its TCP and startup state only (the queue pair's framing and RDMAP state
/// start empty and grow with use); a connection at Full Operation that has carried a Send each
/// way costs more.
#[test]
fn a_connection_costs_little_before_mpa_is_up() {
    const N: u16 = 64;
    let mut p = pair_with_b(|c| c.listener.max_accept_queue = usize::from(N));
    p.b.listen(6000, startup_timeout(30)).unwrap();
    let mut raw = RawClients::open(&p, N, 6000);
    let mut heap = 0i64;
    for _ in 0..50 {
        heap += raw.step(&mut p, Duration::from_millis(1));
    }
    assert_eq!(p.b.connection_count(), usize::from(N));
    let startup = heap / i64::from(N);

    let mut p = Pair::clean();
    p.b.listen(6000, settings(false, true)).unwrap();
    let conns: Vec<_> = (0..N)
        .map(|_| {
            p.a.connect(p.now, SocketAddrV4::new(IP_B, 6000), settings(false, true))
                .unwrap()
        })
        .collect();
    p.run_until(1_000_000, |p| {
        conns.iter().all(|c| established(&p.events_a, *c))
    });
    let cbs = established_conns(&p.events_b);
    assert_eq!(cbs.len(), usize::from(N));
    // A Send each way (the Initiator first, MPA-85).
    let (ra, _) = p.a.register(64, Access::LOCAL_WRITE);
    let (rb, _) = p.b.register(64, Access::LOCAL_WRITE);
    for (i, (ca, cb)) in conns.iter().zip(&cbs).enumerate() {
        let i = i as u64;
        p.b.post(*cb, WorkRequest::recv(i, buf(rb, 64))).unwrap();
        p.a.post(*ca, WorkRequest::recv(i, buf(ra, 64))).unwrap();
        p.a.post(
            *ca,
            WorkRequest::send(1000 + i, buf(ra, 64), Default::default()),
        )
        .unwrap();
    }
    p.run_until(1_000_000, |p| p.wc_b.len() == usize::from(N));
    for (i, cb) in cbs.iter().enumerate() {
        let i = i as u64;
        p.b.post(
            *cb,
            WorkRequest::send(1000 + i, buf(rb, 64), Default::default()),
        )
        .unwrap();
    }
    p.run_until(1_000_000, |p| p.wc_a.len() == 2 * usize::from(N));
    let full = p.heap_b / i64::from(N);
    println!("B's heap per connection: {startup} octets in MPA startup, {full} at Full Operation");
    assert!(
        startup < 8 << 10,
        "{startup} octets per connection in startup"
    );
    assert!(full < 64 << 10, "{full} octets per connection in use");
}

/// 400 clients complete TCP and never send an MPA Request. B takes at most its backlog (64)
/// at a time and resets the rest at once (counted); the ones it took are reaped by the MPA
/// startup timeout (MPA-82). Each costs B little heap while it waits, all of it given back
/// once they are gone, and a real MPA client connects afterwards.
#[test]
fn idle_connections_past_the_backlog_are_refused_and_the_rest_reaped() {
    let mut p = pair_with_b(|c| c.listener.max_accept_queue = 64);
    let l = p.b.listen(6000, startup_timeout(2)).unwrap();
    let mut raw = RawClients::open(&p, 400, 6000);
    let mut heap = 0i64;
    let mut held_max = 0;
    for _ in 0..50 {
        heap += raw.step(&mut p, Duration::from_millis(1));
        held_max = held_max.max(p.b.connection_count());
        assert!(p.b.backlog_len(l) <= 64);
    }
    assert_eq!(held_max, 64, "the backlog filled");
    let c = p.b.counters();
    assert_eq!(c.connections_refused, 400 - 64, "{c:?}");
    // The listener's SYN-ACKs and resets count in the octets sent too (each at least an
    // Ethernet, IPv4 and TCP header).
    assert!(c.tx_packets >= 400, "{c:?}");
    assert!(c.tx_bytes >= c.tx_packets * 54, "{c:?}");
    assert_eq!(raw.resets, 400 - 64, "each refused client got a RST");
    // B's heap while it holds 64 connections in startup (the clients' own memory and the
    // wires' are not counted: they opt out or run outside the measure).
    let per_conn = heap / 64;
    assert!(
        per_conn < 16 << 10,
        "{per_conn} octets per connection in startup"
    );
    // The startup timeout reaps them; the memory comes back.
    let mut t = Duration::ZERO;
    while p.b.connection_count() > 0 {
        heap += raw.step(&mut p, Duration::from_millis(50));
        t += Duration::from_millis(50);
        assert!(t < Duration::from_secs(5), "not reaped");
    }
    assert!(t >= Duration::from_millis(1900), "reaped early: {t:?}");
    assert_eq!(p.b.backlog_len(l), 0);
    assert!(
        heap < 64 << 10,
        "{heap} octets still held after the connections are gone"
    );
    let failed = p
        .events_b
        .iter()
        .filter(|e| {
            matches!(e, EndpointEvent::StartupFailed { event, .. }
                if *event == ddp::QpEvent::StartupFailed(mpa::StartupError::Timeout))
        })
        .count();
    assert_eq!(failed, 64);
    // A real client gets in.
    let ca =
        p.a.connect(p.now, SocketAddrV4::new(IP_B, 6000), settings(false, true))
            .unwrap();
    p.run_until(100_000, |p| established(&p.events_a, ca));
}

/// Past `max_connections`, a completed handshake is reset (counted) and `connect` fails.
#[test]
fn connections_past_the_cap_are_reset_and_connect_is_refused() {
    let mut p = pair_with_b(|c| c.limits.max_connections = 8);
    p.b.listen(6100, settings(false, true)).unwrap();
    let conns: Vec<_> = (0..20)
        .map(|_| {
            p.a.connect(p.now, SocketAddrV4::new(IP_B, 6100), settings(false, true))
                .unwrap()
        })
        .collect();
    p.run_until(200_000, |p| {
        p.events_a
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    EndpointEvent::Established { .. } | EndpointEvent::Closed { .. }
                )
            })
            .count()
            == 20
    });
    let up = conns
        .iter()
        .filter(|c| established(&p.events_a, **c))
        .count();
    assert_eq!(up, 8);
    let reset = p
        .events_a
        .iter()
        .filter(|e| {
            matches!(
                e,
                EndpointEvent::Closed {
                    reason: CloseReason::Reset,
                    ..
                }
            )
        })
        .count();
    assert_eq!(reset, 12);
    assert_eq!(p.b.counters().connections_refused, 12);
    assert_eq!(p.b.connection_count(), 8);
    // B's own active opens stop at the cap too.
    assert_eq!(
        p.b.connect(p.now, SocketAddrV4::new(IP_A, 7000), settings(false, true)),
        Err(EndpointError::TooManyConnections)
    );
}

/// A client that sends more than its MPA Request before the Reply (MPA §7.1: FPDUs only after
/// the Reply) is reset, counted; nothing past the Request is kept.
#[test]
fn octets_past_the_startup_frame_before_mpa_is_up_reset_the_connection() {
    let mut p = Pair::clean();
    p.b.listen_manual(6200, settings(false, true)).unwrap();
    let mut raw = RawClients::open(&p, 1, 6200);
    for _ in 0..10 {
        raw.step(&mut p, Duration::from_millis(1));
    }
    assert_eq!(raw.established(), 1);
    let mut init = mpa::Initiator::new(
        settings(false, true).startup,
        p.now,
        b"",
        mpa::ReadDepths::default(),
    )
    .unwrap();
    let c = &mut raw.conns[0];
    c.send(&init.poll_transmit().unwrap()).unwrap();
    for _ in 0..5 {
        raw.step(&mut p, Duration::from_millis(1));
    }
    assert!(
        p.events_b
            .iter()
            .any(|e| matches!(e, EndpointEvent::ConnectRequest { .. })),
        "the Request alone is fine"
    );
    raw.conns[0].send(&[0x55; 4000]).unwrap();
    for _ in 0..10 {
        raw.step(&mut p, Duration::from_millis(1));
    }
    assert_eq!(p.b.counters().startup_overruns, 1);
    assert_eq!(p.b.connection_count(), 0);
    assert_eq!(raw.conns[0].state(), State::Closed, "reset");
}

/// An MPA Request the application never answers is reset at `accept_timeout` (counted), and
/// reported as a failed startup.
#[test]
fn a_request_the_application_never_answers_is_reset_at_the_accept_timeout() {
    let mut p = Pair::clean();
    let mut s = settings(false, true);
    s.accept_timeout = Duration::from_secs(3);
    p.b.listen_manual(6300, s).unwrap();
    let ca =
        p.a.connect(p.now, SocketAddrV4::new(IP_B, 6300), settings(false, true))
            .unwrap();
    p.run_until(100_000, |p| {
        p.events_b
            .iter()
            .any(|e| matches!(e, EndpointEvent::ConnectRequest { .. }))
    });
    let asked = p.now;
    p.run_until(1_000_000, |p| {
        p.events_a
            .iter()
            .any(|e| matches!(e, EndpointEvent::Closed { conn, .. } if *conn == ca))
    });
    let waited = p.now - asked;
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
        "reset after {waited:?}"
    );
    assert_eq!(p.b.counters().accept_timeouts, 1);
    assert!(p.events_b.iter().any(|e| matches!(
        e,
        EndpointEvent::StartupFailed { event, .. }
            if *event == ddp::QpEvent::StartupFailed(mpa::StartupError::Timeout)
    )));
    assert_eq!(p.b.connection_count(), 0);
}

/// Spoofed SYNs neither grow the neighbour table nor change a next hop: 20,000 SYNs from as
/// many addresses (one of them claiming A's address from another MAC) leave the table as it
/// was, the unverified SYN sources bounded; the connection to A keeps its next hop; a
/// handshake that completes is learnt.
#[test]
fn spoofed_syns_neither_grow_nor_override_the_neighbour_table() {
    let mut p = pair_with_b(|c| {
        c.default_next_hop = None;
        c.limits.max_syn_sources = 256;
    });
    p.b.listen(6400, settings(false, true)).unwrap();
    let (ca, cb) = {
        let ca =
            p.a.connect(p.now, SocketAddrV4::new(IP_B, 6400), settings(false, true))
                .unwrap();
        p.run_until(100_000, |p| established(&p.events_a, ca));
        (ca, p.b.connection_count())
    };
    assert_eq!(cb, 1);
    assert_eq!(
        p.b.neighbour_count(),
        1,
        "learnt from the completed handshake"
    );
    let evil: [u8; 6] = [2, 0xee, 0, 0, 0, 1];
    let gen = IsnGenerator::new([1; 16], tcp_offload::Timestamp::ZERO);
    let mut out = vec![0u8; 128];
    for i in 0..20_000u32 {
        let src = if i == 7 {
            IP_A
        } else {
            std::net::Ipv4Addr::from(0xc613_0000 | i)
        };
        let tuple = FourTuple {
            local: SocketAddr::V4(SocketAddrV4::new(src, 1024 + (i % 50_000) as u16)),
            remote: SocketAddr::V4(SocketAddrV4::new(IP_B, 6400)),
        };
        let mut c = Connection::connect(Config::default(), tuple, &gen, p.ts(p.now))
            .expect("valid TCP settings");
        let n = c.poll_transmit(p.ts(p.now), &mut out).unwrap();
        let f = [&MAC_B[..], &evil[..], &[8, 0], &out[..n]].concat();
        p.b.handle_frame(p.now, &f);
        if i % 64 == 63 {
            p.poll_b();
        }
    }
    assert_eq!(p.b.neighbour_count(), 1);
    assert!(p.b.syn_source_count() <= 256);
    // B still reaches A through A's MAC: a Write over the connection completes.
    let (src, _) = filled(&mut p.a, &[9; 4096], Access::LOCAL_WRITE);
    let (dst, _) = p.b.register(4096, Access::LOCAL_WRITE);
    let cb = established_conns(&p.events_b)[0];
    p.b.post(cb, WorkRequest::recv(1, buf(dst, 4096))).unwrap();
    p.a.post(ca, WorkRequest::send(2, buf(src, 4096), Default::default()))
        .unwrap();
    assert_eq!(p.wait_wc(false, 1).status, WcStatus::Success);
    assert_eq!(p.wait_wc(true, 2).status, WcStatus::Success);
    // Once the half-open entries have given up (SYN-ACK retries: 1 + 2 + 4 + 8 + 16 + 32 s),
    // nothing of the flood is left: no half-open entry, no SYN source.
    let end = p.now + Duration::from_secs(120);
    p.run_until(10_000_000, |p| {
        assert!(
            p.now < end,
            "half-open entries left: {}",
            p.b.half_open_count()
        );
        p.b.half_open_count() == 0
    });
    p.step();
    assert_eq!(p.b.syn_source_count(), 0);
}

/// A full neighbour table makes room from addresses without a live connection, and refuses
/// (counted) only when every entry is in use.
#[test]
fn a_full_neighbour_table_evicts_unused_entries_and_refuses_only_when_all_are_in_use() {
    let mut cfg = endpoint_cfg(MAC_A, IP_A, MAC_B);
    cfg.limits.max_neighbours = 4;
    let mut e: Endpoint =
        Endpoint::new(cfg, std::time::Instant::now()).expect("valid configuration");
    for i in 0..4u32 {
        e.add_neighbour(std::net::Ipv4Addr::from(0xc612_0100 + i), MAC_B)
            .unwrap();
    }
    // Room is made from entries no connection uses.
    e.add_neighbour(IP_B, MAC_B).unwrap();
    assert_eq!(e.neighbour_count(), 1);
    // Four connections to four peers: the table is full of addresses in use.
    let now = std::time::Instant::now();
    for i in 0..4u32 {
        let ip = std::net::Ipv4Addr::from(0xc612_0200 + i);
        e.add_neighbour(ip, MAC_B).unwrap();
        e.connect(now, SocketAddrV4::new(ip, 5000), settings(false, true))
            .unwrap();
    }
    assert_eq!(
        e.add_neighbour(std::net::Ipv4Addr::new(198, 18, 9, 9), MAC_B),
        Err(EndpointError::NeighboursFull)
    );
    assert_eq!(e.counters().neighbours_refused, 1);
}

/// Posts stop at `max_outstanding_work` (work posted and not yet taken with
/// `poll_completion`, which bounds the completion queue), counted; taking completions makes
/// room again.
#[test]
fn posts_past_the_outstanding_work_limit_are_refused() {
    let mut p = Pair::with_configs(
        {
            let mut c = endpoint_cfg(MAC_A, IP_A, MAC_B);
            c.limits.max_outstanding_work = 4;
            c
        },
        endpoint_cfg(MAC_B, IP_B, MAC_A),
        link(),
        link(),
        1,
    );
    let (ca, _cb) = p.establish(6500, settings(false, true), settings(false, true));
    let (r, _) = p.a.register(64, Access::LOCAL_WRITE);
    for i in 0..4 {
        p.a.post(ca, WorkRequest::recv(i, buf(r, 64))).unwrap();
    }
    assert_eq!(
        p.a.post(ca, WorkRequest::recv(9, buf(r, 64))),
        Err(EndpointError::TooMuchWork)
    );
    assert_eq!(p.a.counters().work_refused, 1);
    // Closing flushes the four; once taken, posting works again (and fails only because the
    // connection is closed).
    p.a.close(p.now, ca).unwrap();
    let flushed = std::iter::from_fn(|| p.a.poll_completion())
        .filter(|(_, c)| c.status == WcStatus::Flushed)
        .count();
    assert_eq!(flushed, 4);
    assert_eq!(p.a.outstanding_work(), 0);
    assert!(matches!(
        p.a.post(ca, WorkRequest::recv(10, buf(r, 64))),
        Err(EndpointError::Post(_))
    ));
}
