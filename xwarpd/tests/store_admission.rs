//! Who the store serves, in process over loopback: the connection cap (more connections are
//! refused and counted, a freed slot admits again), the idle timeout (a connection with no call
//! is closed and counted), and the allow-list (a client outside it is refused and counted). The
//! allow-list's default (the listen address's subnet) between namespaces is in `xwarpd_admission`.

mod store_support;

use std::time::{Duration, Instant};

use store_support::{server_with, TempFile};
use xwarpd::store::{
    AllowList, ClientOptions, IpNet, ServerOptions, StoreClient, StoreServer, StoreSnapshot,
};

fn wait_for(srv: &StoreServer, what: &str, f: impl Fn(&StoreSnapshot) -> bool) -> StoreSnapshot {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = srv.stats().snapshot();
        if f(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn connections_past_the_cap_are_refused_and_a_freed_slot_admits_again() {
    let f = TempFile::new("cap");
    let opts = ServerOptions {
        max_connections: 2,
        // The cap alone: the two held never give way, however slowly the test runs.
        silent_after: Duration::MAX,
        ..ServerOptions::default()
    };
    let (_dev, srv) = server_with(&f, 1 << 20, opts);
    let o = ClientOptions::default();
    let mut a = StoreClient::connect(srv.local_addr(), &o).unwrap();
    let mut b = StoreClient::connect(srv.local_addr(), &o).unwrap();
    let c = StoreClient::connect(srv.local_addr(), &o);
    assert!(
        c.is_err(),
        "a third connection past a cap of 2 was admitted"
    );
    a.getattr().unwrap();
    b.getattr().unwrap();
    let s = srv.stats().snapshot();
    assert_eq!((s.accepted, s.refused_full, s.open.len()), (2, 1, 2));
    drop(a);
    wait_for(&srv, "the first connection's slot comes back", |s| {
        s.open.len() == 1
    });
    let mut d = StoreClient::connect(srv.local_addr(), &o).unwrap();
    d.getattr().unwrap();
    assert_eq!(srv.stats().snapshot().accepted, 3);
}

#[test]
fn a_connection_without_calls_is_closed_after_the_idle_timeout() {
    let f = TempFile::new("idle");
    let opts = ServerOptions {
        idle_timeout: Duration::from_secs(1),
        ..ServerOptions::default()
    };
    let (_dev, srv) = server_with(&f, 1 << 20, opts);
    let mut busy = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    let mut idle = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    idle.getattr().unwrap();
    // The busy client calls every 200 ms and stays; the idle one is closed.
    let start = Instant::now();
    while srv.stats().snapshot().idle_closed == 0 {
        busy.getattr().unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the idle connection was never closed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(start.elapsed() >= Duration::from_millis(900));
    let s = wait_for(&srv, "one connection open", |s| s.open.len() == 1);
    assert_eq!(s.idle_closed, 1);
    assert!(idle.getattr().is_err(), "the idle connection still answers");
    busy.getattr().unwrap();
}

#[test]
fn a_client_outside_the_allow_list_is_refused_and_counted() {
    let f = TempFile::new("allow");
    let net: IpNet = "198.18.0.0/15".parse().unwrap();
    let opts = ServerOptions {
        allow: AllowList::Nets(vec![net]),
        ..ServerOptions::default()
    };
    let (_dev, srv) = server_with(&f, 1 << 20, opts);
    assert_eq!(srv.allowed(), &[net]);
    for _ in 0..2 {
        assert!(StoreClient::connect(srv.local_addr(), &ClientOptions::default()).is_err());
    }
    let s = srv.stats().snapshot();
    assert_eq!((s.accepted, s.refused_not_allowed), (0, 2));
    // The default admits the listen address's subnet: 127.0.0.0/8 on loopback.
    let (_dev2, open) = server_with(&f, 1 << 20, ServerOptions::default());
    assert_eq!(open.allowed(), &["127.0.0.0/8".parse::<IpNet>().unwrap()]);
    StoreClient::connect(open.local_addr(), &ClientOptions::default())
        .unwrap()
        .getattr()
        .unwrap();
}
