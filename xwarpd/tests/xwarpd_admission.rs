//! The store's allow-list between network namespaces (root): by default xwarpd admits only the
//! listen address's own subnet, taken from its interface's prefix (198.18.0.0/24 here); a client
//! whose source address lies outside (198.19.5.2, routed over the same veth) is refused, counted
//! and logged once; `--store-allow` replaces the default.

mod xwarpd_support;

use std::net::SocketAddr;

use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;
use xwarpd::store::{ClientOptions, StoreClient};
use xwarpd_support::{sample, Daemon, Tmp, BIN};

/// The outside address B's connections to A come from once [`use_outside_source`] ran.
const OUTSIDE: &str = "198.19.5.2";

/// Gives B a second address outside A's /24 and routes A's address from it; A routes it back.
fn use_outside_source(tb: &VethTestbed, on: bool) {
    let (ifa, ifb) = (tb.ifname(Side::A), tb.ifname(Side::B));
    let a = tb.ip(Side::A).to_string();
    if on {
        tb.ip_cmd(
            Side::B,
            &["addr", "add", &format!("{OUTSIDE}/32"), "dev", ifb],
        )
        .unwrap();
        tb.ip_cmd(
            Side::A,
            &["route", "add", &format!("{OUTSIDE}/32"), "dev", ifa],
        )
        .unwrap();
        tb.ip_cmd(
            Side::B,
            &[
                "route",
                "add",
                &format!("{a}/32"),
                "dev",
                ifb,
                "src",
                OUTSIDE,
            ],
        )
        .unwrap();
    } else {
        tb.ip_cmd(Side::B, &["route", "del", &format!("{a}/32")])
            .unwrap();
    }
}

fn start(tb: &VethTestbed, store: &Tmp, ctl: &Tmp, extra: &[&str]) -> Daemon {
    let listen = format!("{}:20049", tb.ip(Side::A));
    let mut c = tb.command(Side::A, BIN);
    c.args(["--store", store.as_str(), "--size", "1MiB"])
        .args(["--store-listen", &listen, "--metrics", "off"])
        .args(["--control", ctl.as_str()])
        .args(extra);
    Daemon::spawn(c)
}

/// Connects from B and makes one call; whether it worked.
fn call_from_b(tb: &VethTestbed) -> bool {
    let addr: SocketAddr = format!("{}:20049", tb.ip(Side::A)).parse().unwrap();
    tb.run_in(Side::B, || {
        StoreClient::connect(addr, &ClientOptions::default())
            .and_then(|mut c| c.getattr())
            .is_ok()
    })
}

fn stats(tb: &VethTestbed, ctl: &Tmp) -> String {
    let out = tb
        .exec(Side::A, &[BIN, "stats", "--control", ctl.as_str()])
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_default_admits_the_listen_subnet_only_and_the_flag_replaces_it() {
    let Some(tb) = or_skip("xwarpd_admission", for_test("xwa")) else {
        return;
    };
    let store = Tmp::new("admission.img");
    let ctl = Tmp::new("admission.sock");
    let mut d = start(&tb, &store, &ctl, &[]);
    assert!(call_from_b(&tb), "198.18.0.2, in A's /24, was refused");
    use_outside_source(&tb, true);
    for _ in 0..3 {
        assert!(
            !call_from_b(&tb),
            "{OUTSIDE}, outside A's /24, was admitted"
        );
    }
    let s = stats(&tb, &ctl);
    assert_eq!(
        sample(
            &s,
            "xwarpd_store_connections_refused_total{reason=\"not_allowed\"}"
        ),
        3,
        "{s}"
    );
    assert_eq!(sample(&s, "xwarpd_store_connections_accepted_total"), 1);
    d.signal(libc::SIGTERM);
    let (status, _, log) = d.wait(std::time::Duration::from_secs(20));
    assert!(status.success(), "{log}");
    let refusals: Vec<&str> = log.lines().filter(|l| l.contains("refused")).collect();
    assert_eq!(refusals.len(), 1, "logged once per peer per minute:\n{log}");
    assert!(refusals[0].contains(OUTSIDE) && refusals[0].contains("not_allowed"));
    assert!(log.contains("allow=198.18.0.0/24"), "{log}");

    // --store-allow replaces the default: now only the outside network is admitted.
    let mut d = start(&tb, &store, &ctl, &["--store-allow", "198.19.5.0/24"]);
    assert!(call_from_b(&tb), "{OUTSIDE} refused despite --store-allow");
    use_outside_source(&tb, false);
    assert!(
        !call_from_b(&tb),
        "198.18.0.2 admitted outside --store-allow"
    );
    d.signal(libc::SIGTERM);
    assert!(d.wait(std::time::Duration::from_secs(20)).0.success());
}

/// Admission over IPv6. Listening on 2001:db8::1, the default admits the
/// listen address's /64 (B's 2001:db8::2 is in it); an allow-list without B's address refuses
/// it, one with it admits it.
#[test]
fn ipv6_clients_are_admitted_by_the_listen_subnet_and_the_allow_list() {
    let Some(tb) = or_skip("xwarpd_admission6", for_test("xw6")) else {
        return;
    };
    let store = Tmp::new("admission6.img");
    let ctl = Tmp::new("admission6.sock");
    let listen = format!("[{}]:20049", tb.ip6(Side::A));
    let run = |extra: &[&str]| {
        let mut c = tb.command(Side::A, BIN);
        c.args(["--store", store.as_str(), "--size", "1MiB"])
            .args(["--store-listen", &listen, "--metrics", "off"])
            .args(["--control", ctl.as_str()])
            .args(extra);
        let mut d = Daemon::spawn(c);
        let addr: SocketAddr = listen.parse().unwrap();
        let ok = tb.run_in(Side::B, || {
            StoreClient::connect(addr, &ClientOptions::default())
                .and_then(|mut c| c.getattr())
                .is_ok()
        });
        d.signal(libc::SIGTERM);
        let (status, _, log) = d.wait(std::time::Duration::from_secs(20));
        assert!(status.success(), "{log}");
        (ok, log)
    };
    let (ok, log) = run(&[]);
    assert!(ok, "2001:db8::2, in A's /64, was refused:\n{log}");
    assert!(log.contains("allow=2001:db8::/64"), "{log}");
    let (ok, log) = run(&["--store-allow", "2001:db8::99/128"]);
    assert!(!ok, "2001:db8::2 admitted outside --store-allow:\n{log}");
    assert!(log.contains("not_allowed"), "{log}");
    let (ok, log) = run(&[
        "--store-allow",
        "198.18.0.0/24",
        "--store-allow",
        "2001:db8::2/128",
    ]);
    assert!(ok, "2001:db8::2 refused despite --store-allow:\n{log}");
}
