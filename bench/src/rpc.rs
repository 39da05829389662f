//! `rpc_read` / `rpc_write`: the storage tests, through the block store's client
//! (`xwarpd::store`): READ (the server RDMA-Writes into our buffer) and WRITE (the server
//! RDMA-Reads it), pipelined: up to `--tx-depth` calls in flight, as the server's credits allow.
//! Reported as bandwidth (a call per message).
//!
//! The client talks to any store server (`xwarpd --store`, or this tool without an address,
//! which serves a 64 MiB temporary store and exits when its client has gone).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dataplane::{Access, MappedFile};
use tool_support::Pattern;
use xwarpd::store::{
    AllowList, CallId, ClientOptions, ServerOptions, StoreClient, StoreError, StoreServer,
    MAX_IN_FLIGHT,
};

use crate::cli::{Length, RunSpec, TestKind, MAX_SIZE};
use crate::report::{self, Record, RULE};
use crate::session::{connection_config, open_device, resolve};
use crate::stats::bandwidth;

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
    let opts = ClientOptions {
        transport: match args.transport {
            crate::cli::TransportArg::Kernel => dataplane::Transport::Kernel,
            crate::cli::TransportArg::Xdp => dataplane::Transport::Xdp,
        },
        connection: connection_config(args),
        call_timeout: Duration::from_secs(30),
    };
    let mut c = StoreClient::connect_on(&device, addr, &opts)
        .map_err(|e| format!("cannot reach {addr}: {e}"))?;
    let unit = args.bw_unit();
    let params = crate::facts::params(spec, &device, None);
    println!("{RULE}");
    println!(
        "                    {} over {} ({addr}), {}",
        spec.test.name(),
        args.transport.name(),
        match unit {
            report::BwUnit::Gigabits => "Gb/sec = 10^9 bit/s",
            report::BwUnit::MegaBytes => "MB/sec = 2^20 bytes/s",
        }
    );
    print!("{}", params.block());
    crate::facts::warn(&params);
    println!("{RULE}");
    println!("{}", report::header_in(spec.test, unit));
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

/// One size: up to `--tx-depth` calls in flight (within the server's credits), each in its own
/// slot of one registered buffer; a call's time is when its answer came.
fn run_size(c: &mut StoreClient, spec: &RunSpec, size: u64) -> Result<Record, String> {
    let args = &spec.args;
    let len = size as usize;
    let reading = spec.test == TestKind::RpcRead;
    let depth = (args.tx_depth as usize).clamp(1, MAX_IN_FLIGHT);
    let buf = Arc::new(
        c.pd()
            .register(len * depth, Access::ALL)
            .map_err(|e| format!("cannot register {} bytes: {e}", len * depth))?,
    );
    let span = STORE_SIZE / size.max(1);
    let fail = |e: StoreError| format!("{} {size} B: {e}", spec.test.name());
    let mut free: Vec<usize> = (0..depth).rev().collect();
    // call -> (slot, store offset)
    let mut busy: HashMap<CallId, (usize, u64)> = HashMap::new();
    let mut times = Vec::new();
    let start = Instant::now();
    let mut issued = 0u64;
    loop {
        let more = match spec.length {
            Length::Iterations(n) => issued < n,
            Length::Duration(d) => start.elapsed() < d,
        };
        if more && !free.is_empty() {
            let slot = free.pop().expect("checked");
            let offset = (issued % span) * size;
            let range = slot * len..(slot + 1) * len;
            let id = if reading {
                c.start_read(offset, &buf, range)
            } else {
                if args.verify {
                    let mut b = vec![0; len];
                    VERIFY_PATTERN.fill(offset, &mut b);
                    buf.write(range.start, &b);
                }
                c.start_write(offset, &buf, range, false)
            }
            .map_err(fail)?;
            busy.insert(id, (slot, offset));
            issued += 1;
            continue;
        }
        if busy.is_empty() {
            break;
        }
        let (id, r) = c.wait_any().map_err(fail)?;
        r.map_err(fail)?;
        times.push(start.elapsed());
        let Some((slot, offset)) = busy.remove(&id) else {
            continue;
        };
        if args.verify && reading {
            let at = slot * len;
            let got = buf.read_vec(at, len);
            if let Some(bad) = got.and_then(|b| VERIFY_PATTERN.first_mismatch(offset, &b)) {
                return Err(format!(
                    "rpc_read {size} B: data mismatch at store offset {bad} (expected the \
                     rpc_write --verify pattern)"
                ));
            }
        }
        free.push(slot);
    }
    Ok(Record::bandwidth(
        spec.test,
        args.transport.name(),
        size,
        &bandwidth(size, &times, start.elapsed()),
    ))
}

/// The pattern `rpc_write --verify` stores (the stream offset is the store offset) and
/// `rpc_read --verify` checks: the shared `tool_support::pattern`.
const VERIFY_PATTERN: Pattern = Pattern::new(0x7877_6172_7062_656e);
