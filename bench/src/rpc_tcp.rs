//! `rpc_read` / `rpc_write` over ONC RPC on plain TCP (`-t tcp`, `--rpc-transport tcp`): the
//! block store's TCP service (`xwarpd::oncrpc`), one call at a time. On `--transport xdp` the
//! streams are xwarp's own TCP and the TCP RDMA option is offered (`--tcp-rdma-option on`, the
//! default there), so READ data is placed by RID where both ends offer it; on kernel TCP the
//! option does not exist. Reported per size: bandwidth and the client's CPU time per GB
//! (getrusage of the whole client process: its engine thread included), beside the copies the
//! option avoided: what placement saves, measured.
//!
//! `-t` is perftest's TX depth everywhere else; on the rpc tests `-t tcp` / `-t rdma` name the
//! RPC transport ([`short_form`] rewrites them before parsing).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use dataplane::MappedFile;
use tool_support::Pattern;
use xwarpd::oncrpc::{
    SharedStore, TcpClientOptions, TcpServerOptions, TcpStoreClient, TcpStoreServer,
};
use xwarpd::store::AllowList;

use crate::cli::{Length, RunSpec, TestKind, TransportArg, MAX_SIZE};
use crate::report::Record;
use crate::session::{open_device, resolve};

/// Size of the temporary store the server mode serves.
const STORE_SIZE: u64 = 64 << 20;
/// What `--verify` writes and checks (the store offset is the pattern offset).
const VERIFY_PATTERN: Pattern = Pattern::new(0x7877_6172_7074_6370);

/// Rewrites `-t tcp` / `-t rdma` (also `-ttcp`, `-t=tcp`) into `--rpc-transport …` when the
/// subcommand is `rpc_read` or `rpc_write`; every other `-t` (a TX depth) is left alone.
pub fn short_form(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let args: Vec<OsString> = args.into_iter().collect();
    let rpc = args
        .iter()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'))
        .is_some_and(|a| a == "rpc_read" || a == "rpc_write");
    if !rpc {
        return args;
    }
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy().into_owned();
        let attached = s
            .strip_prefix("-t=")
            .or_else(|| s.strip_prefix("-t").filter(|v| !v.is_empty()));
        if let Some(v @ ("tcp" | "rdma")) = attached {
            out.push("--rpc-transport".into());
            out.push(v.into());
            continue;
        }
        if s == "-t" {
            if let Some(v) = it.peek().map(|v| v.to_string_lossy().into_owned()) {
                if v == "tcp" || v == "rdma" {
                    it.next();
                    out.push("--rpc-transport".into());
                    out.push(v.into());
                    continue;
                }
            }
        }
        out.push(a);
    }
    out
}

struct TempStore(std::path::PathBuf);

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Whether this run offers the TCP RDMA option (xdp only; on by default there).
fn offers_option(spec: &RunSpec) -> bool {
    spec.args.transport == TransportArg::Xdp && spec.args.tcp_rdma_option.unwrap_or(true)
}

/// Serves a temporary store over ONC RPC on TCP until the first client has come and gone.
pub fn serve(spec: &RunSpec) -> Result<(), String> {
    let args = &spec.args;
    let device = open_device(args, None)?;
    let mut bind = resolve(&args.bind, args.port)?;
    if args.transport == TransportArg::Xdp && bind.ip().is_unspecified() {
        let ip = device
            .local_ip()
            .ok_or("the xdp interface has no IPv4 address to listen on")?;
        bind = SocketAddr::new(ip, args.port);
    }
    let tmp = TempStore(
        std::env::temp_dir().join(format!("xwarp-bench-tcpstore-{}.img", std::process::id())),
    );
    let file = MappedFile::open(&tmp.0, Some(STORE_SIZE))
        .map_err(|e| format!("cannot create the store {}: {e}", tmp.0.display()))?;
    let store = SharedStore::open(&device, file).map_err(|e| e.to_string())?;
    let opts = TcpServerOptions {
        max_io: MAX_SIZE as u32,
        allow: AllowList::any(),
        ..TcpServerOptions::default()
    };
    let server = match args.transport {
        TransportArg::Kernel => TcpStoreServer::start_kernel(bind, store, opts),
        TransportArg::Xdp => {
            TcpStoreServer::start_xdp(&device, bind, store, opts, offers_option(spec))
        }
    }
    .map_err(|e| format!("cannot serve the store on {bind}: {e}"))?;
    println!(
        "xwarp-bench {} server listening on {} (ONC RPC over TCP, store of {} MiB, transport {}, TCP RDMA option {})",
        spec.test.name(),
        server.local_addr(),
        STORE_SIZE >> 20,
        args.transport.name(),
        if offers_option(spec) { "offered" } else { "off" }
    );
    let _ = std::io::Write::flush(&mut std::io::stdout());
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let s = server.stats().snapshot();
        if s.accepted > 0 && s.open.is_empty() {
            server.shutdown();
            return Ok(());
        }
    }
}

/// The process's CPU time so far (user + system, every thread).
fn cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(Duration::ZERO, |u| {
        let t = |tv: nix::sys::time::TimeVal| {
            Duration::new(tv.tv_sec() as u64, tv.tv_usec() as u32 * 1000)
        };
        t(u.user_time()) + t(u.system_time())
    })
}

/// One size's figures.
struct Row {
    size: u64,
    calls: u64,
    secs: f64,
    cpu: Duration,
    copies_avoided: u64,
}

/// Runs READs or WRITEs of every size against the store's TCP service at `host`.
pub fn run_client(spec: &RunSpec, host: &str) -> Result<(), String> {
    let args = &spec.args;
    let addr = resolve(host, args.port)?;
    let opts = TcpClientOptions::default();
    let device;
    let mut c = match args.transport {
        TransportArg::Kernel => TcpStoreClient::connect_kernel(addr, &opts),
        TransportArg::Xdp => {
            device = open_device(args, Some(addr.ip()))?;
            TcpStoreClient::connect_xdp(&device, addr, offers_option(spec), &opts)
        }
    }
    .map_err(|e| format!("cannot reach {addr}: {e}"))?;
    let placed = c.placement();
    println!(
        "{} over ONC RPC/TCP ({addr}), transport {}, TCP RDMA option {}",
        spec.test.name(),
        args.transport.name(),
        if placed {
            "negotiated"
        } else {
            "not negotiated"
        }
    );
    println!(
        " {:>10} {:>10} {:>12} {:>14} {:>16}",
        "#bytes", "#calls", "MB/sec", "CPU s/GB", "copies avoided"
    );
    let mut records = Vec::new();
    for &size in &spec.sizes {
        let r = run_size(&mut c, spec, size)?;
        let mb = r.size as f64 * r.calls as f64 / (1 << 20) as f64 / r.secs.max(1e-9);
        let gb = r.size as f64 * r.calls as f64 / 1e9;
        let cpu_per_gb = r.cpu.as_secs_f64() / gb.max(1e-12);
        println!(
            " {:>10} {:>10} {:>12.2} {:>14.3} {:>16}",
            r.size, r.calls, mb, cpu_per_gb, r.copies_avoided
        );
        records.push(Record {
            test: spec.test.name().into(),
            transport: args.transport.name().into(),
            bytes: r.size,
            iterations: r.calls,
            bw_gbps: Some(gb * 8.0 / r.secs.max(1e-9)),
            bw_average_mb_s: Some(mb),
            cpu_util: Some(100.0 * r.cpu.as_secs_f64() / r.secs.max(1e-9)),
            cpu_s_per_gb: Some(cpu_per_gb),
            copies_avoided: Some(r.copies_avoided),
            ..Record::default()
        });
    }
    if let Some(path) = &args.json {
        crate::report::write_json(path, &records)?;
    }
    if args.verify {
        println!("every byte checked against the verify pattern");
    }
    Ok(())
}

fn run_size(c: &mut TcpStoreClient, spec: &RunSpec, size: u64) -> Result<Row, String> {
    let args = &spec.args;
    let reading = spec.test == TestKind::RpcRead;
    let len = u32::try_from(size).map_err(|_| format!("size {size} too large"))?;
    let span = (STORE_SIZE / size.max(1)).max(1);
    let mut buf = Vec::new();
    let mut data = vec![0u8; len as usize];
    let fail = |e| format!("{} {size} B over TCP: {e}", spec.test.name());
    let before = c.counters().copies_avoided;
    let cpu0 = cpu_time();
    let start = Instant::now();
    let mut calls = 0u64;
    loop {
        let more = match spec.length {
            Length::Iterations(n) => calls < n,
            Length::Duration(d) => start.elapsed() < d,
        };
        if !more {
            break;
        }
        let offset = (calls % span) * size;
        if reading {
            let r = c.read(offset, &mut buf, len).map_err(fail)?;
            if args.verify {
                if let Some(bad) = VERIFY_PATTERN.first_mismatch(offset, &buf[..r.len as usize]) {
                    return Err(format!(
                        "rpc_read {size} B: data mismatch at store offset {bad} (expected the rpc_write --verify pattern)"
                    ));
                }
            }
        } else {
            if args.verify {
                VERIFY_PATTERN.fill(offset, &mut data);
            }
            c.write(offset, &data, false).map_err(fail)?;
        }
        calls += 1;
    }
    Ok(Row {
        size,
        calls,
        secs: start.elapsed().as_secs_f64(),
        cpu: cpu_time().saturating_sub(cpu0),
        copies_avoided: c.counters().copies_avoided - before,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn t_names_the_rpc_transport_only_on_the_rpc_tests() {
        assert_eq!(
            short_form(os(&["b", "rpc_read", "-t", "tcp", "host"])),
            os(&["b", "rpc_read", "--rpc-transport", "tcp", "host"])
        );
        assert_eq!(
            short_form(os(&["b", "rpc_write", "-trdma", "-t=tcp"])),
            os(&[
                "b",
                "rpc_write",
                "--rpc-transport",
                "rdma",
                "--rpc-transport",
                "tcp"
            ])
        );
        // A numeric -t stays the TX depth, on rpc tests too; other tests are untouched.
        for v in [
            os(&["b", "rpc_read", "-t", "16", "host"]),
            os(&["b", "write_bw", "-t", "tcp"]),
        ] {
            assert_eq!(short_form(v.clone()), v);
        }
    }
}
