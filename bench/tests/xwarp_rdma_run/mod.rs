//! Running `xwarp-rdma` in a [`VethTestbed`]: the server in side A, the client in side B, and
//! child processes killed on drop.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use testbed::{Side, VethTestbed};

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

/// Starts `xwarp-rdma server` in side A and waits until it listens.
pub fn start_server(tb: &VethTestbed, port: u16, extra: &[&str]) -> Guarded {
    start_server_at(tb, &tb.ip(Side::A).to_string(), port, extra)
}

/// Starts `xwarp-rdma server` in side A bound to `bind` and waits until it listens.
pub fn start_server_at(tb: &VethTestbed, bind: &str, port: u16, extra: &[&str]) -> Guarded {
    let mut c = tb.command(Side::A, rdma_bin());
    c.args([
        "server",
        "--bind",
        bind,
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

/// Runs `xwarp-rdma client` in side B against the server in side A; returns its output.
pub fn run_client(tb: &VethTestbed, port: u16, args: &[&str]) -> Output {
    run_client_to(tb, &tb.ip(Side::A).to_string(), port, args)
}

/// Runs `xwarp-rdma client` in side B against the server at `connect`; returns its output.
pub fn run_client_to(tb: &VethTestbed, connect: &str, port: u16, args: &[&str]) -> Output {
    let mut c = tb.command(Side::B, rdma_bin());
    c.args([
        "client",
        "--connect",
        connect,
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

/// Asserts that the client of `--ops send,write,read --sizes 1,4K,1M` succeeded and printed a
/// verified line for each op and size.
pub fn assert_all_verified(test: &str, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{test}: client failed ({:?})\n{stdout}\n{stderr}",
        out.status
    );
    for op in ["send", "write", "read"] {
        for size in ["1", "4096", "1048576"] {
            assert!(
                stdout.lines().any(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.first() == Some(&op)
                        && f.get(1) == Some(&size)
                        && f.last() == Some(&"verified")
                }),
                "{test}: no verified {op} of {size} bytes in\n{stdout}"
            );
        }
    }
}
