//! The xwarpd binary end to end on loopback: clear config errors (never a panic), the ready
//! line, `xwarpd stats` and the Prometheus endpoint with counters that move, clean shutdown on
//! SIGTERM and SIGINT, and committed data surviving kill -9 and a restart on the same file.

mod xwarpd_support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use dataplane::Access;
use xwarpd::oncrpc::{TcpClientOptions, TcpStoreClient};
use xwarpd::store::{ClientOptions, StoreClient};
use xwarpd_support::{http_get, sample, Daemon, Tmp, BIN};

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn store_args<'a>(store: &'a Path, ctl: &'a Path, size: &'a str) -> Vec<&'a str> {
    vec![
        "--store",
        store.to_str().unwrap(),
        "--size",
        size,
        "--store-listen",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        "--control",
        ctl.to_str().unwrap(),
    ]
}

#[test]
fn config_errors_are_clear_one_line_messages_and_never_panics() {
    let bad = Tmp::new("bad.toml");
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "transport = \"rdma\"\n",
            &[],
            &["transport", "\"kernel\" or \"xdp\""],
        ),
        (
            "",
            &["--transport", "xdp"],
            &["xdp", "needs an interface", "--interface"],
        ),
        (
            "transport = \"xdp\"\n[xdp]\ninterface = \"eth9\"\nengine = \"inline\"\n",
            &[],
            &["xdp.engine", "\"threaded\""],
        ),
        (
            "",
            &[
                "--transport",
                "xdp",
                "--interface",
                "eth9",
                "--bind",
                "fast",
            ],
            &["--bind", "\"zerocopy\""],
        ),
        ("", &["--interface", "eth9"], &["--transport xdp"]),
        (
            "",
            &[
                "--transport",
                "xdp",
                "--interface",
                "eth9",
                "--core",
                "99999",
            ],
            &["--core", "not a CPU"],
        ),
        (
            "",
            &[
                "--transport",
                "xdp",
                "--interface",
                "eth9",
                "--listen",
                "198.18.0.1:40005",
            ],
            &["40005", "local port range"],
        ),
        (
            "[store]\npath = \"/tmp/x\"\nsize = \"lots\"\n",
            &[],
            &["store.size"],
        ),
        ("[store]\ncredits = 3\n", &[], &[]),
        ("metrics = 9464\n", &[], &["bad.toml"]),
        ("nonsense = true\n", &[], &["unknown field", "nonsense"]),
        (
            "",
            &["--metrics", "localhost"],
            &["metrics", "IP address and port"],
        ),
        ("", &["--size", "1G"], &["without a store path"]),
        (
            "[store]\npath = \"/tmp/x\"\n",
            &[],
            &[
                "store needs a listen address",
                "--store-listen",
                "no 0.0.0.0",
            ],
        ),
        (
            "",
            &["--store", "/tmp/x", "--store-listen", "0.0.0.0:20049"],
            &["every address", "--store-allow"],
        ),
        (
            "",
            &[
                "--store",
                "/tmp/x",
                "--store-listen",
                "127.0.0.1:1",
                "--store-allow",
                "lan",
            ],
            &["--store-allow", "\"lan\""],
        ),
        (
            "[store]\npath = \"/tmp/x\"\nlisten = \"127.0.0.1:1\"\nidle_timeout = \"later\"\n",
            &[],
            &["store.idle_timeout", "1s to 7 days"],
        ),
        (
            "",
            &[
                "--store",
                "/tmp/x",
                "--store-listen",
                "127.0.0.1:1",
                "--store-max-connections",
                "0",
            ],
            &["--store-max-connections", "1 to 4096"],
        ),
    ];
    for (text, flags, needles) in cases {
        std::fs::write(&bad.0, text).unwrap();
        let mut args = vec!["--config", bad.0.to_str().unwrap()];
        args.extend_from_slice(flags);
        // "[store]" without a path is fine (no store): checked without starting a daemon.
        if needles.is_empty() {
            let out = run(&[&["check-config"][..], &args].concat());
            assert!(
                out.status.success(),
                "{text:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?} {flags:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        for n in *needles {
            assert!(err.contains(n), "{text:?} {flags:?}: {err:?} lacks {n:?}");
        }
    }
    // A missing file names the file.
    let out = run(&["--config", "/nonexistent/xwarpd.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/xwarpd.toml"));
    // The example config in deploy/ is valid.
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/xwarpd.example.toml");
    let out = run(&["check-config", "--config", example]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn check_config_accepts_an_xdp_configuration_without_touching_the_interface() {
    // No such interface here: check-config validates settings only, it opens nothing.
    let out = run(&[
        "check-config",
        "--transport",
        "xdp",
        "--interface",
        "xwnosuch0",
        "--queue",
        "2",
        "--bind",
        "copy",
        "--attach",
        "generic",
        "--local-ports",
        "45000-45099",
        "--engine",
        "threaded",
    ]);
    let o = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for n in [
        "transport = \"xdp\"",
        "interface = \"xwnosuch0\"",
        "queue = 2",
        "bind = \"copy\"",
        "attach = \"generic\"",
        "local_ports = \"45000-45099\"",
        "engine = \"threaded\"",
    ] {
        assert!(o.contains(n), "check-config output lacks {n}:\n{o}");
    }
}

#[test]
fn help_explains_the_daemon_and_its_subcommands() {
    let out = run(&["--help"]);
    assert!(out.status.success());
    let h = String::from_utf8_lossy(&out.stdout);
    for n in [
        "--store",
        "--size",
        "--config",
        "--metrics",
        "stats",
        "SIGTERM",
        "RPC-over-RDMA",
        "--transport",
        "--interface",
        "--queue",
        "--bind",
        "zerocopy",
        "--attach",
        "generic",
        "--local-ports",
        "--engine",
        "threaded",
        "--core",
        "detached",
        "retransmissions",
        "--store-allow",
        "--store-max-connections",
        "--store-idle-timeout",
        "No wildcard default",
        "exit status 70",
    ] {
        assert!(h.contains(n), "--help lacks {n}:\n{h}");
    }
}

/// `--store-tcp on`: the same store over ONC RPC on kernel TCP beside RPC/RDMA (what one
/// writes the other reads), its address in the ready line; off by default.
#[test]
fn store_tcp_serves_the_same_store_over_onc_rpc() {
    let store = Tmp::new("tcp.img");
    let ctl = Tmp::new("tcp.sock");
    let mut args = store_args(&store.0, &ctl.0, "8MiB");
    args.extend(["--store-tcp", "on", "--store-tcp-port", "0"]);
    let mut d = Daemon::start(&args);
    let mut t = TcpStoreClient::connect_kernel(
        d.field("store_tcp").parse().unwrap(),
        &TcpClientOptions::default(),
    )
    .unwrap();
    t.write(4096, &[0x5a; 10_000], false).unwrap();
    let mut c =
        StoreClient::connect(d.field("store").parse().unwrap(), &ClientOptions::default()).unwrap();
    let buf = c.pd().register(10_000, Access::ALL).unwrap();
    c.read(4096, &buf, 0..10_000).unwrap();
    let mut got = vec![0u8; 10_000];
    buf.read(0, &mut got).unwrap();
    assert!(got.iter().all(|&b| b == 0x5a));
    let mut back = Vec::new();
    assert_eq!(t.read(4096, &mut back, 10_000).unwrap().len, 10_000);
    assert!(back.iter().all(|&b| b == 0x5a));
    // Each service counts its own calls: the TCP one under xwarpd_store_tcp_*.
    let m = http_get(&d.field("metrics"));
    assert_eq!(sample(&m, "xwarpd_store_tcp_writes_total"), 1, "{m}");
    assert_eq!(sample(&m, "xwarpd_store_tcp_reads_total"), 1, "{m}");
    assert_eq!(
        sample(&m, "xwarpd_store_tcp_read_bytes_total"),
        10_000,
        "{m}"
    );
    assert_eq!(sample(&m, "xwarpd_store_tcp_connections"), 1, "{m}");
    assert_eq!(sample(&m, "xwarpd_store_reads_total"), 1, "{m}");
    assert_eq!(sample(&m, "xwarpd_store_writes_total"), 0, "{m}");
    d.signal(libc::SIGTERM);
    let (status, _, _) = d.wait(Duration::from_secs(20));
    assert!(status.success());
    let mut plain = Daemon::start(&store_args(&store.0, &ctl.0, "8MiB"));
    assert!(!plain.log().contains("store_tcp="), "off by default");
    let m = http_get(&plain.field("metrics"));
    assert!(
        !m.contains("xwarpd_store_tcp"),
        "no TCP service, no series:\n{m}"
    );
    plain.signal(libc::SIGTERM);
    let _ = plain.wait(Duration::from_secs(20));
}

#[test]
fn stats_and_prometheus_counters_move_and_sigterm_shuts_down_cleanly() {
    let store = Tmp::new("stats.img");
    let ctl = Tmp::new("stats.sock");
    let mut d = Daemon::start(&store_args(&store.0, &ctl.0, "8MiB"));
    let metrics = d.field("metrics");
    let before = http_get(&metrics);
    assert!(before.starts_with("HTTP/1.0 200 OK"), "{before}");
    let b_rx = sample(&before, "xwarpd_rx_bytes_total");

    let mut c =
        StoreClient::connect(d.field("store").parse().unwrap(), &ClientOptions::default()).unwrap();
    let buf = c.pd().register(1 << 20, Access::ALL).unwrap();
    buf.write(0, &[0xa5; 1 << 20]).unwrap();
    c.write(0, &buf, 0..1 << 20).unwrap();
    c.read(0, &buf, 0..1 << 20).unwrap();
    c.commit(0, 0).unwrap();

    let after = http_get(&metrics);
    assert!(
        sample(&after, "xwarpd_rx_bytes_total") > b_rx + (1 << 20),
        "{after}"
    );
    assert_eq!(sample(&after, "xwarpd_store_writes_total"), 1);
    assert_eq!(sample(&after, "xwarpd_store_commits_total"), 1);
    assert_eq!(sample(&after, "xwarpd_store_read_bytes_total"), 1 << 20);
    assert_eq!(sample(&after, "xwarpd_store_connections"), 1);

    let out = run(&["stats", "--control", ctl.0.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8_lossy(&out.stdout);
    assert_eq!(sample(&s, "xwarpd_store_written_bytes_total"), 1 << 20);
    assert!(sample(&s, "xwarpd_mpa_established_total") >= 1);

    // SIGTERM with a client still connected: exits 0, says so, removes the control socket.
    d.signal(libc::SIGTERM);
    let (status, out, err) = d.wait(Duration::from_secs(20));
    assert!(status.success(), "{status:?}\n{err}");
    assert!(out.contains("xwarpd stopped signal=15"), "{out}");
    assert!(err.contains("stopped cleanly"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!ctl.0.exists(), "control socket left behind");
    // The client sees the connection go.
    assert!(c.getattr().is_err());
    // `xwarpd stats` against a stopped daemon: a clear error, not a hang.
    let out = run(&["stats", "--control", ctl.0.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is it running"));
}

#[test]
fn sigint_shuts_down_cleanly_too() {
    let ctl = Tmp::new("int.sock");
    let mut d = Daemon::start(&[
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        "off",
        "--control",
        ctl.0.to_str().unwrap(),
    ]);
    assert!(d.ready.contains("listener=127.0.0.1:"));
    d.signal(libc::SIGINT);
    let (status, out, _) = d.wait(Duration::from_secs(20));
    assert!(status.success());
    assert!(out.contains("signal=2"));
    assert!(!ctl.0.exists());
}

#[test]
fn committed_data_survives_kill_9_and_restart_on_the_same_file() {
    let store = Tmp::new("kill.img");
    let ctl = Tmp::new("kill.sock");
    let mut d = Daemon::start(&store_args(&store.0, &ctl.0, "32MiB"));
    let mut c =
        StoreClient::connect(d.field("store").parse().unwrap(), &ClientOptions::default()).unwrap();
    let buf = c.pd().register(4 << 20, Access::ALL).unwrap();
    // Several writes of different sizes at unaligned offsets, then COMMIT.
    let mut expect = Vec::new();
    let mut off = 777u64;
    for (i, n) in [1usize, 4000, 5000, 1 << 20, 4 << 20]
        .into_iter()
        .enumerate()
    {
        let data: Vec<u8> = (0..n).map(|j| (j * 31 + i * 7 + 1) as u8).collect();
        buf.write(0, &data).unwrap();
        c.write(off, &buf, 0..n).unwrap();
        expect.push((off, data));
        off += n as u64 + 12_289;
    }
    let v1 = c.commit(0, 0).unwrap();
    d.signal(libc::SIGKILL);
    let (status, _, _) = d.wait(Duration::from_secs(10));
    assert!(!status.success());
    drop(c);

    // Restart on the same file (no --size: the existing size is used); the stale control
    // socket left by the kill is replaced.
    let mut d = Daemon::start(&[
        "--store",
        store.0.to_str().unwrap(),
        "--store-listen",
        "127.0.0.1:0",
        "--metrics",
        "off",
        "--control",
        ctl.0.to_str().unwrap(),
    ]);
    let mut c =
        StoreClient::connect(d.field("store").parse().unwrap(), &ClientOptions::default()).unwrap();
    let a = c.getattr().unwrap();
    assert_eq!(a.size, 32 << 20);
    assert_ne!(a.verifier, v1, "a restarted server has a new verifier");
    let buf = c.pd().register(4 << 20, Access::ALL).unwrap();
    for (off, data) in &expect {
        let r = c.read(*off, &buf, 0..data.len()).unwrap();
        assert_eq!(r.len as usize, data.len());
        let mut got = vec![0u8; data.len()];
        buf.read(0, &mut got).unwrap();
        assert!(
            &got == data,
            "{} bytes at {off} lost after kill -9",
            data.len()
        );
    }
    d.signal(libc::SIGTERM);
    assert!(d.wait(Duration::from_secs(20)).0.success());
}

/// A store larger than the free space of its filesystem is refused at start with one clear
/// line. Before, the file was extended sparse: on ext4 the daemon started and the first RDMA
/// Read placed into a page of the shared mapping the filesystem could not back, and the kernel
/// killed the daemon with SIGBUS mid-transfer (CI saw exactly that on a nearly full disk); on
/// tmpfs mlock failed with a misleading "raise RLIMIT_MEMLOCK".
///
/// Each case runs xwarpd in its own mount namespace (`unshare -m`) over a small filesystem
/// (a 4 MiB ext4 image on a loop device, a 1 MiB tmpfs), so the machine's mounts never change,
/// even if the test fails. Needs root; under CI=true it must run.
#[test]
fn a_store_larger_than_its_filesystem_is_refused_at_start_not_killed_by_sigbus_later() {
    if !testkit::require_root("a_store_larger_than_its_filesystem_is_refused_at_start") {
        return;
    }
    let image = Tmp::new("small-fs.ext4");
    let f = std::fs::File::create(&image.0).unwrap();
    f.set_len(4 << 20).unwrap();
    drop(f);
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&image.0)
        .output()
        .expect("mkfs.ext4 (e2fsprogs)");
    assert!(mkfs.status.success(), "{mkfs:?}");
    let ext4 = format!("mount -o loop {}", image.0.display());
    let mut cases = vec![("tmpfs", "mount -t tmpfs -o size=1m xwarp-test".to_string())];
    // The ext4 case needs loop devices, which some kernels or sandboxes lack: the tmpfs case
    // still checks the contract there.
    let probe = Tmp::new("small-fs-probe");
    std::fs::create_dir_all(&probe.0).unwrap();
    let loop_ok = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!("{ext4} {0} && umount {0}", probe.0.display()))
        .output()
        .is_ok_and(|o| o.status.success());
    let _ = std::fs::remove_dir(&probe.0);
    if loop_ok {
        cases.push(("ext4", ext4));
    } else {
        eprintln!("no loop device here: the ext4 case is left out, tmpfs runs");
    }
    for (fs, mount) in cases {
        let dir = Tmp::new(&format!("small-fs-{fs}"));
        std::fs::create_dir_all(&dir.0).unwrap();
        let d = dir.0.to_str().unwrap();
        let script = format!(
            "{mount} {d} && exec {BIN} --store {d}/store.img --size 8MiB \
             --store-listen 127.0.0.1:0 --metrics off --control {d}/control.sock"
        );
        let mut child = Command::new("timeout")
            .args(["30", "unshare", "--mount", "--propagation", "private"])
            .args(["sh", "-c", &script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut first,
        )
        .unwrap();
        if first.starts_with("xwarpd ready") {
            // The old behaviour: it started. Write the whole store to show what follows.
            let addr = first
                .split_whitespace()
                .find_map(|w| w.strip_prefix("store="))
                .unwrap()
                .parse()
                .unwrap();
            let outcome =
                StoreClient::connect(addr, &ClientOptions::default()).and_then(|mut c| {
                    let buf = c.pd().register(4 << 20, Access::ALL).unwrap();
                    c.write(0, &buf, 0..(4 << 20))?;
                    c.write(4 << 20, &buf, 0..(4 << 20))
                });
            // The daemon has died (SIGBUS: timeout reports 135) or not; stop it either way.
            for _ in 0..50 {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{fs}: started on a filesystem that cannot hold the store; writing it gave \
                 {outcome:?}, daemon {:?}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = child.wait_with_output().unwrap();
        let _ = std::fs::remove_dir(&dir.0);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{fs}: {stderr}");
        let last = stderr.trim().lines().last().unwrap_or_default();
        assert!(
            last.starts_with("xwarpd: ") && last.contains("no space") && last.contains("8388608"),
            "{fs}: {stderr}"
        );
    }
}

/// The control socket's path is claimed only when it is free or a stale socket of ours: a
/// regular file, a directory and a socket another process listens on are refused with one clear
/// line, and left as they were. Before, the daemon deleted a file (or empty directory) there.
#[test]
fn a_control_path_held_by_something_else_is_refused_and_left_alone() {
    let file = Tmp::new("ctl-file");
    std::fs::write(&file.0, b"not a socket").unwrap();
    let dir = Tmp::new("ctl-dir");
    std::fs::create_dir_all(&dir.0).unwrap();
    let live = Tmp::new("ctl-live.sock");
    let other = std::os::unix::net::UnixListener::bind(&live.0).unwrap();
    for (path, needle) in [
        (&file.0, "a regular file"),
        (&dir.0, "a directory"),
        (&live.0, "live socket"),
    ] {
        let out = run(
            &["--listen", "127.0.0.1:0", "--metrics", "off", "--control"]
                .into_iter()
                .chain([path.to_str().unwrap()])
                .collect::<Vec<_>>(),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{path:?}: {err}");
        let last = err.trim().lines().last().unwrap_or_default();
        assert!(
            last.starts_with("xwarpd: control socket") && last.contains(needle),
            "{path:?}: {err}"
        );
    }
    assert_eq!(std::fs::read(&file.0).unwrap(), b"not a socket");
    assert!(dir.0.is_dir());
    assert!(std::os::unix::net::UnixStream::connect(&live.0).is_ok());
    drop(other);
    let _ = std::fs::remove_dir(&dir.0);
}

/// A panicking store or echo connection thread stops the daemon: ONE log line naming the thread
/// and the panic, exit status 70 (systemd's Restart=on-failure restarts it), nothing left
/// behind. The panic is injected through XWARP_TEST_PANIC (read in debug builds only). Before,
/// the daemon logged Rust's panic message and kept running with the dead thread.
#[test]
fn a_panicking_connection_thread_stops_the_daemon_with_one_line_and_exit_70() {
    for place in ["store", "echo"] {
        let store = Tmp::new(&format!("panic-{place}.img"));
        let ctl = Tmp::new(&format!("panic-{place}.sock"));
        let mut cmd = Command::new(BIN);
        cmd.args(store_args(&store.0, &ctl.0, "1MiB"))
            .args(["--listen", "127.0.0.1:0"])
            .env("XWARP_TEST_PANIC", place);
        let d = Daemon::spawn(cmd);
        let target = if place == "store" {
            d.field("store")
        } else {
            d.field("listener")
        };
        let target: std::net::SocketAddr = target.parse().unwrap();
        // The connection's thread panics as it starts: the client's connect fails or hangs up.
        let client = std::thread::spawn(move || {
            let dev = dataplane::Device::open(dataplane::Transport::Kernel).unwrap();
            let pd = dev.alloc_pd();
            let cq = dev.create_cq();
            let init = dataplane::QpInit {
                pd,
                send_cq: cq.clone(),
                recv_cq: cq,
            };
            let _ = dev.connect(target, init, &dataplane::ConnectionConfig::default(), b"");
        });
        let (status, out, log) = d.wait(Duration::from_secs(30));
        let _ = client.join();
        assert_eq!(status.code(), Some(70), "{place}: {status:?}\n{log}");
        let lines: Vec<&str> = log.lines().filter(|l| l.contains("panicked")).collect();
        assert_eq!(lines.len(), 1, "{place}: one line about the panic:\n{log}");
        let thread = if place == "store" {
            "xwarp-store-conn"
        } else {
            "xwarpd-echo-conn"
        };
        assert!(
            lines[0].contains(&format!("thread '{thread}' panicked"))
                && lines[0].contains(&format!("XWARP_TEST_PANIC={place}"))
                && lines[0].contains("exit 70"),
            "{place}: {log}"
        );
        assert!(!log.contains("RUST_BACKTRACE"), "{place}: {log}");
        assert!(!out.contains("xwarpd stopped"), "{place}: {out}");
        assert!(!ctl.0.exists(), "{place}: control socket left behind");
    }
}
