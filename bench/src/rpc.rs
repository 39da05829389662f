//! `rpc_read` / `rpc_write`: the storage tests, fio-like, through a [`BlockClient`] (the block
//! store's RPC-over-RDMA client, `xwarpd::store`): READ (the server RDMA-Writes into our
//! buffer) and WRITE (the server RDMA-Reads it) of `-s`/`--bs` bytes at the offsets of `--rw`
//! (sequential or seeded random, [`crate::io_pattern`]), `--iodepth` calls in flight (within
//! the server's credits). Reported as bandwidth, IOPS and the latency of each call from its
//! start to its answer (p50, p90, p99, p99.9; the JSON has the whole percentile curve).
//!
//! The client talks to any store server (`xwarpd --store`, or this tool without an address,
//! which serves a 64 MiB temporary store and exits when its client has gone).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use dataplane::MappedFile;
use tool_support::Pattern;
use xwarpd::store::{AllowList, ServerOptions, StoreServer};

use crate::block_client::{connections_for, BlockClient, RpcRdmaClient};
use crate::cli::{Length, RunSpec, TestKind, MAX_SIZE};
use crate::cpu::CpuSampler;
use crate::io_pattern::Offsets;
use crate::report::{self, Record, RULE};
use crate::session::{connection_config, open_device, resolve};
use crate::stats::{bandwidth, LatencyRecorder};

/// Size of the temporary store the server mode serves.
const STORE_SIZE: u64 = 64 << 20;

struct TempStore(std::path::PathBuf);

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Serves a temporary store until the first client has come and gone.
pub fn serve(spec: &RunSpec) -> Result<(), String> {
    let args = &spec.args;
    let device = open_device(args, None)?;
    let bind = resolve(&args.bind, args.port)?;
    let tmp = TempStore(
        std::env::temp_dir().join(format!("xwarp-bench-store-{}.img", std::process::id())),
    );
    let file = MappedFile::open(&tmp.0, Some(STORE_SIZE))
        .map_err(|e| format!("cannot create the store {}: {e}", tmp.0.display()))?;
    let opts = ServerOptions {
        max_io: MAX_SIZE as u32,
        connection: connection_config(args),
        // A measurement server for one client on a testbed, bound to --bind (by default every
        // address): any client network.
        allow: AllowList::any(),
        ..ServerOptions::default()
    };
    let server = StoreServer::start(&device, bind, file, opts)
        .map_err(|e| format!("cannot serve the store on {bind}: {e}"))?;
    println!(
        "xwarp-bench {} server listening on {} (store of {} MiB, transport {})",
        spec.test.name(),
        server.local_addr(),
        STORE_SIZE >> 20,
        args.transport.name()
    );
    let _ = std::io::Write::flush(&mut std::io::stdout());
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let s = server.stats().snapshot();
        if s.accepted > 0 && s.open.is_empty() {
            crate::session::report_engine_counters(&device, "server");
            server.shutdown();
            return Ok(());
        }
    }
}

/// Runs READs or WRITEs of every size against the store at `host`.
pub fn run_client(spec: &RunSpec, host: &str) -> Result<Vec<Record>, String> {
    let args = &spec.args;
    let addr = resolve(host, args.port)?;
    let device = open_device(args, Some(addr.ip()))?;
    let connections = connections_for(args.iodepth());
    let mut c = RpcRdmaClient::connect(&device, addr, connection_config(args), connections)?;
    let unit = args.bw_unit();
    let mut params = crate::facts::params(spec, &device, Some(c.negotiated()));
    params.store_size = Some(c.store_size()?);
    println!("{RULE}");
    println!(
        "                    {} over {} ({addr}), {}",
        spec.test.name(),
        args.transport.name(),
        match unit {
            report::BwUnit::Gigabits => "Gb/sec = 10^9 bit/s, latency of each call in usec",
            report::BwUnit::MegaBytes => "MB/sec = 2^20 bytes/s, latency of each call in usec",
        }
    );
    print!("{}", params.block());
    crate::facts::warn(&params);
    println!("{RULE}");
    println!("{}", report::header_line(spec.test, unit, args.cpu_util));
    let mut rows = Vec::new();
    for &size in &spec.sizes {
        let mut row = run_size(&mut c, spec, size)?;
        row.params = Some(params.clone());
        println!("{}", row.row_in(unit));
        rows.push(row);
    }
    println!("{RULE}");
    crate::session::report_engine_counters(&device, "client");
    if args.verify {
        let what = if spec.test == TestKind::RpcRead {
            "read back and verified"
        } else {
            "written with the verify pattern"
        };
        println!("every byte {what}");
    }
    if let Some(path) = &args.json {
        report::write_json(path, &rows)?;
    }
    if let Some(path) = &args.csv {
        report::write_csv(path, &rows)?;
    }
    Ok(rows)
}

/// One block size: `--iodepth` calls in flight (as the client allows), each in its own slot;
/// a call's latency runs from its start to its answer.
pub fn run_size(c: &mut dyn BlockClient, spec: &RunSpec, size: u64) -> Result<Record, String> {
    let args = &spec.args;
    let rw = args.rw(spec.test);
    let reading = rw.reads();
    let depth = (args.iodepth() as usize).clamp(1, c.max_in_flight());
    let fail = |e: String| format!("{} {size} B: {e}", spec.test.name());
    c.prepare(size as usize, depth).map_err(fail)?;
    let mut offsets = Offsets::new(rw, size, c.store_size()?, args.seed()).map_err(fail)?;
    let mut free: Vec<usize> = (0..depth).rev().collect();
    // call -> (slot, store offset, start)
    let mut busy: HashMap<u64, (usize, u64, Instant)> = HashMap::new();
    let mut times = Vec::new();
    let mut latency = LatencyRecorder::new();
    let cpu = args.cpu_util.then(CpuSampler::start);
    let start = Instant::now();
    let mut issued = 0u64;
    loop {
        let more = match spec.length {
            Length::Iterations(n) => issued < n,
            Length::Duration(d) => start.elapsed() < d,
        };
        if more && !free.is_empty() {
            let slot = free.pop().expect("checked");
            let offset = offsets.next().expect("endless");
            if args.verify && !reading {
                let mut b = vec![0; size as usize];
                VERIFY_PATTERN.fill(offset, &mut b);
                c.fill(slot, &b).map_err(fail)?;
            }
            let t0 = Instant::now();
            let tag = c.start(reading, offset, slot).map_err(fail)?;
            busy.insert(tag, (slot, offset, t0));
            issued += 1;
            continue;
        }
        if busy.is_empty() {
            break;
        }
        let tag = c.wait_any().map_err(fail)?;
        let now = Instant::now();
        times.push(now - start);
        let Some((slot, offset, t0)) = busy.remove(&tag) else {
            continue;
        };
        latency.record(now - t0);
        if args.verify && reading {
            let got = c.contents(slot).map_err(fail)?;
            if let Some(bad) = VERIFY_PATTERN.first_mismatch(offset, &got) {
                return Err(format!(
                    "rpc_read {size} B: data mismatch at store offset {bad} (expected the \
                     rpc_write --verify pattern)"
                ));
            }
        }
        free.push(slot);
    }
    let total = start.elapsed();
    let used = cpu.map(|s| s.finish());
    let lat = latency
        .summary()
        .ok_or_else(|| fail("no call completed".into()))?;
    let p90 = latency.quantile_us(0.90).unwrap_or(f64::NAN);
    let mut r = Record::storage(
        spec.test,
        args.transport.name(),
        size,
        &bandwidth(size, &times, total),
        &lat,
        p90,
    );
    r.percentiles_us = Some(latency.percentiles());
    if let Some(u) = used {
        r.cpu_util = Some(u.process);
        r.cpu_util_engine = u.engine;
    }
    Ok(r)
}

/// The pattern `rpc_write --verify` stores (the stream offset is the store offset) and
/// `rpc_read --verify` checks: the shared `tool_support::pattern`.
const VERIFY_PATTERN: Pattern = Pattern::new(0x7877_6172_7062_656e);
