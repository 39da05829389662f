//! Fair admission: a listener's backlog (connections whose MPA startup has not finished) is
//! shared among sources. An idle flood from one address holds only that address's share and a
//! client from another address gets in at once; in a full backlog the oldest connection of the
//! source holding the most gives way to a source holding fewer, and a source holding as many
//! as any other is refused rather than evicting.

mod pair;
mod raw_clients;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use ddp::{Access, WcStatus, WorkRequest};
use endpoint::{EndpointConfig, QpSettings, SourceShare};
use pair::*;
use raw_clients::{RawClients, IP_C};
use tcp_offload::State;

fn pair_with_b(backlog: usize, per_source: usize) -> Pair {
    let mut b: EndpointConfig = endpoint_cfg(MAC_B, IP_B, MAC_A);
    b.listener.max_accept_queue = backlog;
    b.limits.backlog_share = SourceShare {
        per_source,
        ..SourceShare::default()
    };
    Pair::with_configs(endpoint_cfg(MAC_A, IP_A, MAC_B), b, link(), link(), 1)
}

fn startup_timeout(secs: u64) -> QpSettings {
    let mut s = settings(false, true);
    s.startup.timeout = Duration::from_secs(secs);
    s
}

/// A's connection to B's port 6000 comes up and carries a Send whose octets arrive intact.
fn a_connects_and_sends(p: &mut Pair) {
    let ca =
        p.a.connect(p.now, SocketAddrV4::new(IP_B, 6000), settings(false, true))
            .unwrap();
    p.run_until(100_000, |p| established(&p.events_a, ca));
    let cb = *established_conns(&p.events_b)
        .last()
        .expect("B's side is up");
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let (src, _) = filled(&mut p.a, &data, Access::LOCAL_WRITE);
    let (dst, _) = p.b.register(4096, Access::LOCAL_WRITE);
    p.b.post(cb, WorkRequest::recv(1, buf(dst, 4096))).unwrap();
    p.a.post(ca, WorkRequest::send(2, buf(src, 4096), Default::default()))
        .unwrap();
    assert_eq!(p.wait_wc(false, 1).status, WcStatus::Success);
    assert_eq!(p.b.region(dst).unwrap(), &data[..], "the Send's octets");
}

/// 400 idle clients from 198.18.0.3 against a backlog of 64 with a share of 16: 16 are held,
/// the other 384 reset at once (counted as share refusals); A (198.18.0.1) then connects at
/// once and its Send arrives, while the 16 are still held.
#[test]
fn an_idle_flood_from_one_address_holds_its_share_and_another_address_gets_in() {
    let mut p = pair_with_b(64, 16);
    let l = p.b.listen(6000, startup_timeout(30)).unwrap();
    let mut raw = RawClients::open(&p, 400, 6000);
    for _ in 0..50 {
        raw.step(&mut p, Duration::from_millis(1));
        assert!(p.b.backlog_len(l) <= 16);
    }
    assert_eq!(p.b.backlog_len(l), 16);
    let c = p.b.counters();
    assert_eq!(c.backlog_share_refused, 384, "{c:?}");
    assert_eq!(c.connections_refused, 384, "{c:?}");
    assert_eq!(c.backlog_evictions, 0, "{c:?}");
    assert_eq!(raw.resets, 384, "each refused client got a RST");
    a_connects_and_sends(&mut p);
    assert_eq!(p.b.connection_count(), 17, "the flood's 16 are still held");
    assert_eq!(p.b.backlog_len(l), 16, "A's connection left the backlog");
}

/// A backlog of 8 with no share below it: 8 idle clients from .3 fill it. A client from .4
/// evicts .3's oldest (reset, counted); another from .3 is refused (its source would still
/// hold the most); A then evicts .3's next oldest and its connection works.
#[test]
fn a_full_backlog_gives_way_to_a_source_holding_fewer() {
    let mut p = pair_with_b(8, 8);
    let l = p.b.listen(6000, startup_timeout(30)).unwrap();
    let mut raw = RawClients::open(&p, 8, 6000);
    for _ in 0..10 {
        raw.step(&mut p, Duration::from_millis(1));
    }
    assert_eq!((raw.established(), p.b.backlog_len(l)), (8, 8));
    let d = raw.add(&p, Ipv4Addr::new(198, 18, 0, 4), 6000);
    for _ in 0..10 {
        raw.step(&mut p, Duration::from_millis(1));
    }
    assert_eq!(raw.conns[0].state(), State::Closed, ".3's oldest was reset");
    assert_eq!(raw.conns[1].state(), State::Established);
    assert_eq!(raw.conns[d].state(), State::Established, ".4 got in");
    assert_eq!(p.b.backlog_len(l), 8);
    let c = p.b.counters();
    assert_eq!(
        (c.backlog_evictions, c.connections_refused),
        (1, 0),
        "{c:?}"
    );

    let again = raw.add(&p, IP_C, 6000);
    for _ in 0..10 {
        raw.step(&mut p, Duration::from_millis(1));
    }
    assert_eq!(raw.conns[again].state(), State::Closed, "refused: reset");
    assert_eq!(raw.conns[1].state(), State::Established, "nothing evicted");
    let c = p.b.counters();
    assert_eq!(
        (c.backlog_evictions, c.connections_refused),
        (1, 1),
        "{c:?}"
    );
    assert_eq!(c.backlog_share_refused, 0, "{c:?}");

    a_connects_and_sends(&mut p);
    let c = p.b.counters();
    assert_eq!(c.backlog_evictions, 2, "{c:?}");
    // .3's second connection was reset by B (its RST went towards A's wire, not the raw
    // clients'): B holds six of .3's, .4's one and A's.
    assert_eq!(p.b.connection_count(), 8);
    assert_eq!(p.b.backlog_len(l), 7, "A's connection left the backlog");
}
