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
use xwarpd::store::{
    CallId, ClientOptions, ServerOptions, StoreClient, StoreError, StoreServer, MAX_IN_FLIGHT,
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
        let conns = server.stats().snapshot();
        if !conns.is_empty() && conns.iter().all(|c| !c.connected) {
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
    println!("{RULE}");
    println!(
        "                    {} over {} ({addr}), Gb/sec = 10^9 bit/s",
        spec.test.name(),
        args.transport.name()
    );
    println!("{RULE}");
    println!("{}", report::header(spec.test));
    let mut rows = Vec::new();
    for &size in &spec.sizes {
        let row = run_size(&mut c, spec, size)?;
        println!("{}", row.row());
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
                    fill_pattern(offset, &mut b);
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
            if let Some(bad) = got.and_then(|b| first_mismatch(offset, &b)) {
                return Err(format!(
                    "rpc_read {size} B: data mismatch at store offset {} (expected the \
                     rpc_write --verify pattern)",
                    offset + bad as u64
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

/// The byte `rpc_write --verify` stores at store offset `pos` (never constant over a page, and
/// different for every offset within 2^24 bytes of another, so a misplaced block is caught).
fn pattern_byte(pos: u64) -> u8 {
    let x = pos.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x >> 56) as u8 ^ (pos as u8)
}

/// Fills `buf` with the pattern of the store range starting at `offset`.
fn fill_pattern(offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(offset + i as u64);
    }
}

/// The index of the first byte of `buf` that differs from the pattern at `offset`.
fn first_mismatch(offset: u64, buf: &[u8]) -> Option<usize> {
    buf.iter()
        .enumerate()
        .position(|(i, &b)| b != pattern_byte(offset + i as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_round_trips_and_catches_a_flipped_or_shifted_byte() {
        let mut buf = vec![0u8; 8192];
        fill_pattern(4096, &mut buf);
        assert_eq!(first_mismatch(4096, &buf), None);
        // The same bytes read at another offset (a misplaced block) are caught.
        assert!(first_mismatch(0, &buf).is_some());
        assert!(first_mismatch(4097, &buf).is_some());
        buf[5000] ^= 1;
        assert_eq!(first_mismatch(4096, &buf), Some(5000));
    }

    #[test]
    fn zeroed_store_does_not_pass_for_the_pattern() {
        let buf = vec![0u8; 4096];
        assert!(first_mismatch(0, &buf).is_some());
    }
}
