//! The daemon as a service manager and a monitoring system see it: `READY=1`, `RELOADING=1`
//! and `STOPPING=1` on a notify socket (NOTIFY_SOCKET, a Unix datagram socket the test binds),
//! SIGHUP reloading the log filter and naming what needs a restart, `xwarpd status`, the
//! metrics endpoint parsed by a Prometheus text parser (with no series left for a closed
//! connection), `check-config` as TOML, `--version`, and a clean stop with the store synced.

mod xwarpd_support;

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::{Duration, Instant};

use dataplane::Access;
use prometheus_parse::Scrape;
use xwarpd::store::{ClientOptions, StoreClient};
use xwarpd_support::{http_get, Daemon, Tmp, BIN};

/// The next notification on `sock` (within 20 s).
fn next_notification(sock: &UnixDatagram) -> String {
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("a notification within 20 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn scrape(metrics: &str) -> Scrape {
    let answer = http_get(metrics);
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text parses")
}

fn value(s: &Scrape, name: &str) -> Option<f64> {
    s.samples
        .iter()
        .find(|x| x.metric == name)
        .map(|x| match x.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => f64::NAN,
        })
}

fn xwarpd(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn config(store: &Tmp, ctl: &Tmp, log: &str, metrics: &str) -> String {
    format!(
        "log = \"{log}\"\ncontrol_socket = \"{}\"\nmetrics = \"{metrics}\"\n[store]\npath = \"{}\"\nsize = \"8MiB\"\nlisten = \"127.0.0.1:0\"\n",
        ctl.as_str(),
        store.as_str()
    )
}

#[test]
fn notify_ready_reload_on_sighup_status_metrics_and_a_clean_stop_with_the_store_synced() {
    let store = Tmp::new("life.img");
    let ctl = Tmp::new("life.sock");
    let conf = Tmp::new("life.toml");
    let notify = Tmp::new("life.notify");
    std::fs::write(conf.path(), config(&store, &ctl, "info", "127.0.0.1:0")).unwrap();
    let sock = UnixDatagram::bind(notify.path()).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.args(["--config", conf.as_str()])
        .env("NOTIFY_SOCKET", notify.path());
    let mut d = Daemon::spawn(cmd);
    let ready = next_notification(&sock);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    assert!(ready.contains("STATUS=xwarpd ready"), "{ready:?}");

    // status, for people.
    let out = xwarpd(&["status", "--control", ctl.as_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = String::from_utf8_lossy(&out.stdout);
    for want in [
        "xwarpd ",
        "transport   kernel",
        "0 connections open (64 at most)",
        "totals      rx",
    ] {
        assert!(st.contains(want), "{want:?} missing in\n{st}");
    }

    // A connection's series while it is open; none once it closed, its calls in the totals.
    let metrics = d.field("metrics");
    let before = scrape(&metrics);
    assert_eq!(value(&before, "xwarpd_build_info"), Some(1.0));
    let mut c =
        StoreClient::connect(d.field("store").parse().unwrap(), &ClientOptions::default()).unwrap();
    let buf = c.pd().register(1 << 16, Access::ALL).unwrap();
    buf.write(0, &[0x5a; 1 << 16]).unwrap();
    c.write(4096, &buf, 0..1 << 16).unwrap();
    let open = scrape(&metrics);
    let per_conn = |s: &Scrape| {
        s.samples
            .iter()
            .filter(|x| x.labels.get("conn").is_some())
            .count()
    };
    assert!(per_conn(&open) > 0, "no per-connection series while open");
    assert_eq!(value(&open, "xwarpd_store_connections"), Some(1.0));
    let st = String::from_utf8_lossy(&xwarpd(&["status", "--control", ctl.as_str()]).stdout)
        .into_owned();
    assert!(st.contains("1 connection open"), "{st}");
    drop(buf);
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(20);
    let closed = loop {
        let s = scrape(&metrics);
        if value(&s, "xwarpd_store_connections") == Some(0.0) || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(value(&closed, "xwarpd_store_connections"), Some(0.0));
    assert_eq!(per_conn(&closed), 0, "series left for a closed connection");
    assert_eq!(value(&closed, "xwarpd_store_writes_total"), Some(1.0));

    // SIGHUP: the new log filter applies, the changed metrics address waits for a restart.
    std::fs::write(conf.path(), config(&store, &ctl, "debug", "127.0.0.1:1")).unwrap();
    d.signal(libc::SIGHUP);
    let reloading = next_notification(&sock);
    assert!(
        reloading.lines().any(|l| l == "RELOADING=1"),
        "{reloading:?}"
    );
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading:?}");
    assert!(next_notification(&sock).lines().any(|l| l == "READY=1"));
    let log = d.log();
    assert!(log.contains("log filter applied"), "{log}");
    assert!(log.contains("metrics changed"), "{log}");
    // A broken file is refused and the daemon goes on.
    std::fs::write(conf.path(), "transport = \"carrier-pigeon\"\n").unwrap();
    d.signal(libc::SIGHUP);
    next_notification(&sock);
    next_notification(&sock);
    assert!(d.log().contains("keeping the running one"), "{}", d.log());
    assert!(xwarpd(&["status", "--control", ctl.as_str()])
        .status
        .success());
    assert!(
        value(&scrape(&metrics), "xwarpd_build_info").is_some(),
        "still serving"
    );

    d.signal(libc::SIGTERM);
    assert!(next_notification(&sock).lines().any(|l| l == "STOPPING=1"));
    let (status, out, err) = d.wait(Duration::from_secs(20));
    assert!(status.success(), "{status:?}\n{err}");
    assert!(out.contains("xwarpd stopped signal=15"), "{out}");
    // The write is in the file.
    let data = std::fs::read(store.path()).unwrap();
    assert!(data[4096..4096 + (1 << 16)].iter().all(|&b| b == 0x5a));
}

#[test]
fn check_config_prints_toml_that_reads_back_and_version_names_the_release() {
    let out = xwarpd(&[
        "check-config",
        "--listen",
        "127.0.0.1:18999",
        "--metrics",
        "off",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(t.contains("transport = \"kernel\""), "{t}");
    assert!(t.contains("metrics = \"off\""), "{t}");
    assert!(t.contains("addr = \"127.0.0.1:18999\""), "{t}");
    let f = Tmp::new("effective.toml");
    std::fs::write(f.path(), &t).unwrap();
    let again = xwarpd(&["check-config", "--config", f.as_str()]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&again.stdout), t);

    let v = xwarpd(&["--version"]);
    assert!(v.status.success());
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("xwarpd {}", env!("CARGO_PKG_VERSION"))
    );
}
