//! One run of compare on the testbed: the server in namespace a and the client in namespace b,
//! each a child process pinned to its own core when asked ([`side_command`]); [`PairRun`] runs
//! a child `xwarp-bench` at each end and returns the client's record.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::cli::{TestKind, TransportArg};
use crate::report::Record;
use crate::testbed::{Testbed, ADDR_A};

/// The command running `exe` on one side: in its namespace, pinned to its own core when `pin`
/// (the server to CPU 0, the client to CPU 1, with `taskset`).
pub fn side_command(tb: &Testbed, in_a: bool, exe: &Path, pin: bool) -> std::process::Command {
    if !pin {
        return tb.exec(in_a, exe);
    }
    let mut c = tb.exec(in_a, Path::new("taskset"));
    c.args(["-c", if in_a { "0" } else { "1" }]).arg(exe);
    c
}

/// One `xwarp-bench` test with its server in namespace a and its client in namespace b.
#[derive(Debug, Clone, Copy)]
pub struct PairRun<'a> {
    /// The test both ends run.
    pub test: TestKind,
    /// Its `--transport`.
    pub transport: TransportArg,
    /// Message size.
    pub bytes: u64,
    /// Iterations.
    pub iters: u64,
    /// The port both ends use.
    pub port: u16,
    /// Where the client writes its JSON.
    pub json: &'a Path,
    /// Pin the server to CPU 0 and the client to CPU 1.
    pub pin: bool,
    /// More arguments for both ends.
    pub extra: &'a [&'a str],
}

impl PairRun<'_> {
    /// Runs `exe` at both ends; the client's record, or the last line either end said on
    /// failing.
    pub fn run(&self, tb: &Testbed, exe: &Path) -> Result<Record, String> {
        let (test, transport) = (self.test.name(), self.transport.name());
        let port = self.port.to_string();
        let mut server = Server {
            child: side_command(tb, true, exe, self.pin)
                .args([test, "--transport", transport, "--port", &port])
                .args(self.iface_args(&tb.if_a))
                .args(self.extra)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start the server: {e}"))?,
        };
        if !server.listening(Duration::from_secs(20)) {
            let _ = server.wait(Duration::from_secs(2));
            return Err(last_line(&server.stderr()));
        }
        let out = side_command(tb, false, exe, self.pin)
            .args([test, ADDR_A, "--transport", transport, "--port", &port])
            .args(["-s", &self.bytes.to_string(), "-n", &self.iters.to_string()])
            .arg("--json")
            .arg(self.json)
            .args(self.iface_args(&tb.if_b))
            .args(self.extra)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot start the client: {e}"))?;
        if !out.status.success() {
            return Err(last_line(&String::from_utf8_lossy(&out.stderr)));
        }
        if server.wait(Duration::from_secs(10)).is_none() {
            eprintln!("xwarp-bench compare: the server did not exit after the run; stopping it");
        }
        let text =
            std::fs::read_to_string(self.json).map_err(|e| format!("no client JSON: {e}"))?;
        let mut rows: Vec<Record> =
            serde_json::from_str(&text).map_err(|e| format!("bad client JSON: {e}"))?;
        rows.pop().ok_or_else(|| "empty client JSON".into())
    }

    /// `--interface IF` for what binds AF_XDP to the testbed's veth end (the raw tests and the
    /// xdp transport), nothing for the kernel transport.
    fn iface_args(&self, ifname: &str) -> Vec<String> {
        let raw = matches!(self.test, TestKind::RawLat | TestKind::RawBw);
        if raw || self.transport == TransportArg::Xdp {
            vec!["--interface".into(), ifname.into()]
        } else {
            Vec::new()
        }
    }
}

/// The last non-empty line of a child's stderr, without our prefix.
fn last_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("exited without a message")
        .trim_start_matches("xwarp-bench: ")
        .trim_start_matches("error: ")
        .to_string()
}

/// The server child: stopped and reaped when dropped.
struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Server {
    /// Whether its first line of output says "listening" within `timeout` (false when it
    /// exits or says something else first). The rest of its output is drained.
    fn listening(&mut self, timeout: Duration) -> bool {
        let stdout = self.child.stdout.take();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let Some(out) = stdout else { return };
            let mut lines = BufReader::new(out).lines();
            let ready = lines
                .next()
                .and_then(|l| l.ok())
                .is_some_and(|l| l.contains("listening"));
            let _ = tx.send(ready);
            for _ in lines {}
        });
        rx.recv_timeout(timeout).unwrap_or(false)
    }

    /// Waits up to `timeout` for the child to exit.
    fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(e) = self.child.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(test: TestKind, transport: TransportArg) -> PairRun<'static> {
        PairRun {
            test,
            transport,
            bytes: 64,
            iters: 1,
            port: 1,
            json: Path::new("/nonexistent"),
            pin: false,
            extra: &[],
        }
    }

    #[test]
    fn xdp_and_raw_runs_bind_the_veth_end_kernel_runs_do_not() {
        let a = ["--interface".to_string(), "veth0".to_string()];
        let iface = |t, tr| run(t, tr).iface_args("veth0");
        assert_eq!(iface(TestKind::RawLat, TransportArg::Xdp), a);
        assert_eq!(iface(TestKind::RawBw, TransportArg::Kernel), a);
        assert_eq!(iface(TestKind::WriteLat, TransportArg::Xdp), a);
        assert!(iface(TestKind::WriteLat, TransportArg::Kernel).is_empty());
    }

    #[test]
    fn last_line_strips_the_prefix() {
        assert_eq!(
            last_line("progress\nxwarp-bench: error: cannot reach x\n\n"),
            "cannot reach x"
        );
        assert_eq!(last_line(""), "exited without a message");
    }
}
