//! Test fixtures: a two-namespace testbed (network namespaces joined by a veth pair) and helpers
//! to run `xwarp-rdma` in it.
//!
//! Names are unique per process and testbed (pid + counter); addresses are 198.18.0.1/24 and
//! 198.18.0.2/24 (the 198.18.0.0/15 benchmark range), which only exist inside the namespaces.
//! Nothing in the root namespace is touched except creating and moving the veth pair. The
//! namespaces (and with them the veth pair) are deleted on drop, also when a test panics.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub const ADDR_A: &str = "198.18.0.1";
pub const ADDR_B: &str = "198.18.0.2";

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// True when privileged tests can run. Under CI=true a missing privilege is a failure; elsewhere
/// the test is skipped with a message saying why.
pub fn require_root(test: &str) -> bool {
    // Safety: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        return true;
    }
    assert!(
        !in_ci(),
        "{test}: needs root (network namespaces) and CI=true forbids skipping"
    );
    eprintln!("SKIP {test}: needs root to create network namespaces (run as root, or under CI=true to enforce)");
    false
}

/// Finds a tool; under CI=true its absence fails the test, elsewhere the test is skipped.
pub fn require_tool(test: &str, tool: &str) -> bool {
    let ok = Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return true;
    }
    assert!(
        !in_ci(),
        "{test}: {tool} is missing and CI=true forbids skipping (deploy/xwarp installs it)"
    );
    eprintln!("SKIP {test}: {tool} is not installed");
    false
}

fn run_ok(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect("spawn");
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two network namespaces joined by a veth pair.
pub struct Testbed {
    pub ns_a: String,
    pub ns_b: String,
    pub if_a: String,
    pub if_b: String,
}

impl Testbed {
    /// Builds the testbed (needs root).
    pub fn new() -> Testbed {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}x{n}", std::process::id());
        let tb = Testbed {
            ns_a: format!("xwt{id}a"),
            ns_b: format!("xwt{id}b"),
            // interface names: at most 15 characters
            if_a: format!("xw{}a", &id[id.len().saturating_sub(11)..]),
            if_b: format!("xw{}b", &id[id.len().saturating_sub(11)..]),
        };
        // From here on, Drop cleans up whatever was created.
        run_ok(&["ip", "netns", "add", &tb.ns_a]);
        run_ok(&["ip", "netns", "add", &tb.ns_b]);
        run_ok(&[
            "ip", "link", "add", &tb.if_a, "type", "veth", "peer", "name", &tb.if_b,
        ]);
        run_ok(&["ip", "link", "set", &tb.if_a, "netns", &tb.ns_a]);
        run_ok(&["ip", "link", "set", &tb.if_b, "netns", &tb.ns_b]);
        run_ok(&[
            "ip",
            "-n",
            &tb.ns_a,
            "addr",
            "add",
            &format!("{ADDR_A}/24"),
            "dev",
            &tb.if_a,
        ]);
        run_ok(&[
            "ip",
            "-n",
            &tb.ns_b,
            "addr",
            "add",
            &format!("{ADDR_B}/24"),
            "dev",
            &tb.if_b,
        ]);
        for (ns, dev) in [(&tb.ns_a, &tb.if_a), (&tb.ns_b, &tb.if_b)] {
            run_ok(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            run_ok(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        tb
    }

    /// A command run inside namespace `ns` (`ip netns exec`).
    pub fn cmd(&self, ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it the pair.
        for ns in [&self.ns_a, &self.ns_b] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.if_a])
            .stderr(Stdio::null())
            .status();
    }
}

/// A child process killed on drop.
pub struct Guarded(pub Option<Child>);

impl Guarded {
    pub fn wait_output(mut self, timeout: Duration) -> Output {
        let child = self.0.take().expect("child");
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        match rx.recv_timeout(timeout) {
            Ok(o) => o.expect("wait"),
            Err(_) => {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                panic!("process {pid} did not finish within {timeout:?}");
            }
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn rdma_bin() -> &'static str {
    env!("CARGO_BIN_EXE_xwarp-rdma")
}

/// Starts `xwarp-rdma server` in namespace A and waits until it listens.
pub fn start_server(tb: &Testbed, port: u16, extra: &[&str]) -> Guarded {
    let mut c = tb.cmd(&tb.ns_a, rdma_bin());
    c.args([
        "server",
        "--bind",
        ADDR_A,
        "--port",
        &port.to_string(),
        "--connections",
        "1",
    ])
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn server");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = lines.next().and_then(|l| l.ok()).unwrap_or_default();
    assert!(
        first.starts_with("listening on"),
        "server did not start: {first:?}"
    );
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.by_ref() {});
    Guarded(Some(child))
}

/// Runs `xwarp-rdma client` in namespace B; returns its output.
pub fn run_client(tb: &Testbed, port: u16, args: &[&str]) -> Output {
    let mut c = tb.cmd(&tb.ns_b, rdma_bin());
    c.args([
        "client",
        "--connect",
        ADDR_A,
        "--port",
        &port.to_string(),
        "--wait-server",
        "10",
    ])
    .args(args)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    Guarded(Some(c.spawn().expect("spawn client"))).wait_output(Duration::from_secs(300))
}

/// Waits until `pred` holds or the deadline passes.
pub fn wait_until(timeout: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if pred() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    pred()
}

/// A tshark capture running in a namespace; stopped (SIGINT) on `stop` or drop.
pub struct Capture {
    child: Option<Child>,
    pub path: std::path::PathBuf,
}

impl Capture {
    /// Starts tshark on `dev` in `ns` for TCP port `port` and waits until it captures.
    pub fn start(tb: &Testbed, ns: &str, dev: &str, port: u16) -> Capture {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("xwarp-oracle-{}-{n}.pcap", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mut child = tb
            .cmd(ns, "tshark")
            .args(["-i", dev, "-w"])
            .arg(&path)
            .args(["-f", &format!("tcp port {port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tshark");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let mut seen = Vec::new();
        loop {
            match lines.next() {
                Some(Ok(l)) => {
                    let started = l.contains("Capturing on");
                    seen.push(l);
                    if started {
                        break;
                    }
                }
                _ => panic!("tshark did not start capturing: {seen:?}"),
            }
        }
        std::thread::spawn(move || for _ in lines.by_ref() {});
        // "Capturing on" is printed as the capture opens; give the ring a moment.
        std::thread::sleep(Duration::from_millis(300));
        Capture {
            child: Some(child),
            path,
        }
    }

    /// Stops the capture and waits until the file is complete.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            std::thread::sleep(Duration::from_millis(300));
            // Safety: signalling our own child process by its pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs tshark over a capture file with the MPA heuristic first and the RPC-over-RDMA heuristic
/// off (these captures carry no RPC); returns stdout.
pub fn tshark_read(path: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args([
            "-o",
            "tcp.try_heuristic_first:TRUE",
            "--disable-heuristic",
            "rpcrdma_iwarp",
        ])
        .args(args)
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Number of packets matching a display filter.
pub fn tshark_count(path: &std::path::Path, filter: &str) -> usize {
    tshark_read(path, &["-Y", filter])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}
