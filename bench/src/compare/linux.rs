//! The `linux` column of `compare` and its polling rows: Linux TCP itself on the same testbed
//! with the same pinning, the yardstick a bypass stack has to beat. Latency tests run
//! sockperf's TCP ping-pong with messages of the test's size (sockperf reports half the round
//! trip, as the bench does); bandwidth tests run iperf3 with writes of the test's size
//! (`rpc_read` reversed: the server sends, as the store does). The message rate of a bandwidth
//! test is bytes / size per second. sockperf runs as shipped (blocking sockets: each message
//! wakes a sleeping thread) for the `linux` column, and with `--nonblocked` at both ends for
//! the polling rows ([`super::polling`]), where its server polls its socket without sleeping,
//! as our transports poll their rings.

use std::process::{Output, Stdio};
use std::time::Duration;

use super::pair::side_command;
use super::record::{Cell, CompareRecord};
use crate::cli::TestKind;
use crate::testbed::{Testbed, ADDR_A};

/// How long one Linux TCP measurement runs.
pub fn seconds(short: bool) -> u64 {
    if short {
        1
    } else {
        4
    }
}

/// How sockperf's sockets wait for a message (latency tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sockets {
    /// As shipped: blocking sockets (the `linux` column).
    Blocking,
    /// `--nonblocked` at both ends (the polling rows).
    NonBlocking,
}

impl Sockets {
    /// The cell of the records measured this way.
    pub fn cell(self) -> Cell {
        match self {
            Self::Blocking => Cell::Linux,
            Self::NonBlocking => Cell::LinuxPoll,
        }
    }

    fn sockperf_args(self) -> &'static [&'static str] {
        match self {
            Self::Blocking => &[],
            Self::NonBlocking => &["--nonblocked"],
        }
    }
}

/// Runs `test` with messages of `bytes` over Linux TCP between the testbed's namespaces;
/// `sockets` says how a latency test's sockperf waits (a bandwidth test ignores it).
pub fn run(
    tb: &Testbed,
    test: TestKind,
    bytes: u64,
    secs: u64,
    port: u16,
    pin: bool,
    sockets: Sockets,
) -> Result<CompareRecord, String> {
    let port_s = port.to_string();
    let mut rec = CompareRecord::new(test, sockets.cell(), bytes);
    if test.is_latency() {
        let mut server = vec!["sr", "--tcp", "-i", ADDR_A, "-p", &port_s];
        let size = bytes.max(14).to_string();
        let secs_s = secs.to_string();
        let mut client = vec![
            "pp", "--tcp", "-i", ADDR_A, "-p", &port_s, "-m", &size, "-t", &secs_s,
        ];
        server.extend_from_slice(sockets.sockperf_args());
        client.extend_from_slice(sockets.sockperf_args());
        let out = with_server(tb, pin, "sockperf", &server, &client)?;
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        rec.t_typical_us = Some(sockperf_percentile(&text, "50.000").ok_or("no sockperf p50")?);
        rec.p99_us = sockperf_percentile(&text, "99.000");
    } else {
        let server = ["-s", "-1", "-B", ADDR_A, "-p", &port_s];
        let len = bytes.to_string();
        let secs_s = secs.to_string();
        let mut client = vec!["-c", ADDR_A, "-p", &port_s, "-l", &len, "-t", &secs_s, "-J"];
        if test == TestKind::RpcRead {
            client.push("-R");
        }
        let out = with_server(tb, pin, "iperf3", &server, &client)?;
        let bps =
            iperf3_received_bps(&String::from_utf8_lossy(&out.stdout)).ok_or("no iperf3 result")?;
        rec.bw_gbps = Some(bps / 1e9);
        rec.msg_rate_mpps = Some(bps / 8.0 / bytes.max(1) as f64 / 1e6);
    }
    Ok(rec)
}

/// Starts `tool` as the server in namespace a, runs it as the client in namespace b (retrying
/// while the server is not listening yet; the client ends by itself after its run time), and
/// stops the server.
fn with_server(
    tb: &Testbed,
    pin: bool,
    tool: &str,
    server_args: &[&str],
    client_args: &[&str],
) -> Result<Output, String> {
    let path = which(tool).ok_or_else(|| format!("{tool} is not installed"))?;
    let mut server = side_command(tb, true, &path, pin)
        .args(server_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {tool}: {e}"))?;
    let mut last = String::new();
    let mut result = Err(String::new());
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(100));
        let out = side_command(tb, false, &path, pin)
            .args(client_args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {tool}: {e}"))?;
        if out.status.success() {
            result = Ok(out);
            break;
        }
        last = String::from_utf8_lossy(&out.stderr).trim().to_string();
    }
    let _ = server.kill();
    let _ = server.wait();
    result.map_err(|_| format!("{tool} client failed: {last}"))
}

/// The full path of `tool` on PATH.
fn which(tool: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// sockperf's `percentile P = X` line, in microseconds.
pub fn sockperf_percentile(text: &str, p: &str) -> Option<f64> {
    let key = format!("percentile {p} =");
    text.lines()
        .find_map(|l| l.split_once(&key).map(|(_, v)| v))
        .and_then(|v| {
            v.trim()
                .trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })
}

/// What iperf3's JSON says the receiver got, in bits per second.
pub fn iperf3_received_bps(json: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("end")?
        .get("sum_received")?
        .get("bits_per_second")?
        .as_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockperf_percentiles_are_read_past_colour_codes() {
        let text = "sockperf: \u{1b}[2;35m====> avg-latency=34.974 (std-dev=144.808)\u{1b}[0m\n\
                    sockperf: ---> percentile 99.000 =   53.685\n\
                    sockperf: ---> percentile 50.000 =   25.422\n";
        assert_eq!(sockperf_percentile(text, "50.000"), Some(25.422));
        assert_eq!(sockperf_percentile(text, "99.000"), Some(53.685));
        assert_eq!(sockperf_percentile(text, "90.000"), None);
    }

    #[test]
    fn iperf3_json_gives_the_receivers_rate() {
        let json = r#"{"end":{"sum_sent":{"bits_per_second":2e10},
                       "sum_received":{"bits_per_second":1.23e10}}}"#;
        assert_eq!(iperf3_received_bps(json), Some(1.23e10));
        assert_eq!(iperf3_received_bps("{}"), None);
        assert_eq!(iperf3_received_bps("not json"), None);
    }
}
