//! `raw_lat` / `raw_bw`: the same traffic pattern as plain Ethernet/IPv4/TCP-shaped frames over
//! AF_XDP ([`ping_pong`], [`flood`]), no TCP state, no MPA/DDP: the ceiling of the host.
//!
//! raw_lat busy-polls its rings with the default `--engine inline` (the xdp transport's inline
//! engine spins the same way), and sleeps in poll(2) with `--engine threaded`.
//!
//! Both sides attach the steering XDP program to `--interface` and bind an AF_XDP socket on
//! `--queue`, steering the test port. The server echoes (`raw_lat`) or counts (`raw_bw`) until
//! the client has been quiet for a while after its traffic. The client reports:
//! `raw_lat` half the round trip per sample (its wait makes no system call); `raw_bw` what the
//! server received, which the client asks for after each run (payload bits and frames per
//! second over the receiver's first-to-last arrival: the MsgRate column is the packet rate).
//! Packets follow the interface MTU: a packet longer than one UMEM frame (jumbo MTUs) goes as
//! a chain of frames on a multi-buffer socket, as the xdp transport's do; messages larger than
//! one packet's payload go as several packets.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use afxdp::netlink::RtNetlink;
use afxdp::program::ifindex;
use afxdp::xsk::{frame_size_for_mtu, multi_buffer_for_mtu};
use afxdp::{
    resolve_next_hop, steered_queue, AttachPolicy, PortKind, XdpProgram, XskConfig, XskQueue,
};
use testbed::tcp_frame::{RawEndpoint, HEADERS_LEN};

pub mod flood;
pub mod ping_pong;
mod receive;

pub use flood::{raw_flood, raw_sink, raw_sink_report, RawRun};
pub use ping_pong::{raw_echo, raw_ping_pong, PingPongConfig, PingPongReport};

use crate::cli::{Length, RunSpec, TestKind};
use crate::report::{self, Record, RULE};
use crate::session::resolve;
use crate::stats::{gbps, BwStats, LatencyRecorder};

/// IPv4 and TCP header bytes inside the MTU.
const IP_TCP_HEADERS: usize = 40;
/// How long the server waits for a client at all.
const SERVE_WAIT: Duration = Duration::from_secs(120);
/// Quiet time after which the server decides the client is done.
const IDLE: Duration = Duration::from_secs(2);

fn iface(spec: &RunSpec) -> Result<&str, String> {
    spec.args.interface.as_deref().ok_or_else(|| {
        format!(
            "{} needs --interface (the AF_XDP socket binds to an interface)",
            spec.test.name()
        )
    })
}

fn xdp_err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// The steering program on `ifname` and an AF_XDP socket on `--queue`, the port steered, with
/// UMEM frames sized for the interface's MTU (multi-buffer when a frame is too short); also the
/// TCP payload one packet carries.
fn open_queue(spec: &RunSpec, ifname: &str) -> Result<(XdpProgram, XskQueue, usize), String> {
    let mtu = RtNetlink::new()
        .and_then(|mut nl| nl.link_mtu(ifindex(ifname)?))
        .map_err(|e| xdp_err("cannot read the MTU", e))?;
    let cfg = XskConfig {
        frame_size: frame_size_for_mtu(mtu),
        multi_buffer: multi_buffer_for_mtu(mtu),
        ..XskConfig::default()
    };
    let (prog, q) = steered_queue(
        ifname,
        spec.args.queue(),
        AttachPolicy::NativeOnly,
        cfg,
        &[(spec.args.port, PortKind::Listen)],
    )
    .map_err(|e| xdp_err("cannot set up AF_XDP", e))?;
    let payload = max_payload(mtu, q.max_packet());
    Ok((prog, q, payload))
}

/// TCP payload of a full packet: what the MTU allows, within the `capacity` packet bytes the
/// socket sends (one frame, or a chain of them).
fn max_payload(mtu: u32, capacity: usize) -> usize {
    let by_mtu = (mtu as usize).saturating_sub(IP_TCP_HEADERS);
    let by_frame = capacity.saturating_sub(HEADERS_LEN);
    by_mtu.min(by_frame).max(8)
}

/// Whether the raw ping-pong spins on its rings (as the inline engine does: `--engine inline`,
/// the default) or sleeps in poll(2) (`--engine threaded`).
fn busy_polls(spec: &RunSpec) -> bool {
    spec.args.engine() == crate::cli::EngineArg::Inline
}

/// Payload bytes per frame for messages of `size` when a frame carries at most `max`.
pub fn frame_payload(size: u64, max: usize) -> usize {
    (size as usize).clamp(8, max.max(8))
}

/// Frames per message of `size` when a frame carries at most `max` payload bytes.
pub fn frames_per_message(size: u64, max: usize) -> u64 {
    (size.max(1)).div_ceil(frame_payload(size, max) as u64)
}

/// Raw server: echo or sink until the client is done.
pub fn serve(spec: &RunSpec) -> Result<(), String> {
    let ifname = iface(spec)?;
    let port = spec.args.port;
    let (_prog, mut q, _) = open_queue(spec, ifname)?;
    println!(
        "xwarp-bench {} server listening on {ifname} queue {} port {port} (raw AF_XDP)",
        spec.test.name(),
        spec.args.queue()
    );
    let _ = std::io::Write::flush(&mut std::io::stdout());
    let start = Instant::now();
    let mut total = 0u64;
    // raw_lat spins like an inline engine; the raw_bw sink sleeps in poll(2), which leaves the
    // flooding sender (and the kernel's copy-mode work) more of a small host's cores.
    let busy = spec.test == TestKind::RawLat && busy_polls(spec);
    while start.elapsed() < SERVE_WAIT || total > 0 {
        let n = if spec.test == TestKind::RawLat {
            raw_echo(&mut q, u64::MAX, IDLE, busy).map_err(|e| xdp_err("echo", e))?
        } else {
            raw_sink(&mut q, u64::MAX, IDLE, busy)
                .map_err(|e| xdp_err("sink", e))?
                .frames
        };
        if n == 0 && total > 0 {
            eprintln!("xwarp-bench: {} server: {total} frames", spec.test.name());
            return Ok(());
        }
        total += n;
    }
    Err(format!("no client within {} s", SERVE_WAIT.as_secs()))
}

/// Raw client: runs every size against `host`.
pub fn run_client(spec: &RunSpec, host: &str) -> Result<Vec<Record>, String> {
    let ifname = iface(spec)?;
    let port = spec.args.port;
    let addr = resolve(host, port)?;
    let IpAddr::V4(server_ip) = addr.ip() else {
        return Err("raw tests run over IPv4 only".into());
    };
    let (_prog, mut q, max) = open_queue(spec, ifname)?;
    let hop = resolve_next_hop(IpAddr::V4(server_ip), Duration::from_secs(3))
        .map_err(|e| format!("cannot reach {server_ip}: {e}"))?;
    let (local, remote): (RawEndpoint, RawEndpoint) =
        RawEndpoint::pair_from_hop(&hop, port, server_ip, port)
            .ok_or_else(|| "raw tests need an IPv4 source address".to_string())?;
    let iterations = match spec.length {
        Length::Iterations(n) => n,
        Length::Duration(_) => {
            return Err(format!("{} takes -n, not -D", spec.test.name()));
        }
    };
    println!("{RULE}");
    println!(
        "                    {} over raw AF_XDP ({ifname} -> {server_ip})",
        spec.test.name()
    );
    println!("{RULE}");
    let unit = spec.args.bw_unit();
    println!(
        "{}",
        report::header_line(spec.test, unit, spec.args.cpu_util)
    );
    let mut rows = Vec::new();
    for (run_id, &size) in (1u64..).zip(&spec.sizes) {
        let cpu = spec.args.cpu_util.then(crate::cpu::CpuSampler::start);
        let mut row = if spec.test == TestKind::RawLat {
            let cfg = PingPongConfig {
                local,
                remote,
                payload_len: frame_payload(size, max),
                iterations: u32::try_from(iterations).unwrap_or(u32::MAX),
                reply_timeout: Duration::from_secs(2),
                busy_poll: busy_polls(spec),
            };
            let rep = raw_ping_pong(&mut q, &cfg).map_err(|e| xdp_err("ping-pong", e))?;
            let mut rec = LatencyRecorder::new();
            for r in &rep.rtts {
                rec.record(*r / 2);
            }
            let st = rec.summary().ok_or("no samples")?;
            let mut r = Record::latency(spec.test, "raw", size, &st);
            r.percentiles_us = Some(rec.percentiles());
            r
        } else {
            let payload = frame_payload(size, max);
            let frames = iterations.saturating_mul(frames_per_message(size, max));
            let sent = raw_flood(
                &mut q,
                &local,
                &remote,
                payload,
                frames,
                Duration::from_secs(60),
            )
            .map_err(|e| xdp_err("flood", e))?;
            // What arrived, by the receiver's count and clock.
            let run = raw_sink_report(&mut q, &local, &remote, run_id, Duration::from_secs(5))
                .map_err(|e| xdp_err("report", e))?;
            if run.frames < sent.frames {
                eprintln!(
                    "xwarp-bench: {}: {} of {} frames arrived",
                    spec.test.name(),
                    run.frames,
                    sent.frames
                );
            }
            let secs = run.elapsed.as_secs_f64();
            let avg = gbps(run.frames * payload as u64, secs);
            let b = BwStats {
                iterations: run.frames,
                peak_gbps: avg,
                avg_gbps: avg,
                msg_rate_mpps: if secs > 0.0 {
                    run.frames as f64 / secs / 1e6
                } else {
                    0.0
                },
            };
            Record::bandwidth(spec.test, "raw", size, &b)
        };
        if let Some(u) = cpu.map(|c| c.finish()) {
            row.cpu_util = Some(u.process);
            row.cpu_util_engine = u.engine;
        }
        println!("{}", row.row_in(unit));
        rows.push(row);
    }
    println!("{RULE}");
    if let Some(path) = &spec.args.json {
        report::write_json(path, &rows)?;
    }
    if let Some(path) = &spec.args.csv {
        report::write_csv(path, &rows)?;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Headroom the kernel keeps in front of a frame in the UMEM (XDP_PACKET_HEADROOM).
    const UMEM_HEADROOM: usize = 256;

    #[test]
    fn messages_split_into_mtu_frames() {
        let max = max_payload(1500, 2048 - UMEM_HEADROOM);
        assert_eq!(max, 1460);
        assert_eq!(
            frame_payload(2, max),
            8,
            "at least the 8-byte sequence number"
        );
        assert_eq!(frame_payload(64, max), 64);
        assert_eq!(frame_payload(65_536, max), 1460);
        assert_eq!(frames_per_message(64, max), 1);
        // 65536 / 1460 = 44.9 -> 45 frames
        assert_eq!(frames_per_message(65_536, max), 45);
        assert_eq!(frames_per_message(1 << 20, max), 719);
    }

    #[test]
    fn packets_follow_the_mtu() {
        // MTU 3498 fits a 4096-byte frame: 3458 payload bytes.
        assert_eq!(max_payload(3498, 4096 - UMEM_HEADROOM), 3458);
        // MTU 9000 takes a chain of 4096-byte frames (multi-buffer): all of the MTU.
        assert!(multi_buffer_for_mtu(9000));
        let chain = afxdp::xsk::MAX_FRAGMENTS * (4096 - UMEM_HEADROOM);
        assert_eq!(max_payload(9000, chain), 8960);
        // Without multi-buffer it would be cut to one frame.
        assert_eq!(max_payload(9000, 4096 - UMEM_HEADROOM), 4096 - 256 - 54);
    }
}
