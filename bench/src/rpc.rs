//! `rpc_read` / `rpc_write`: the storage tests, through the block store's client
//! (`dataplane::store`): READ (the server RDMA-Writes into our buffer) and WRITE (the server
//! RDMA-Reads it), one call at a time. Reported as bandwidth (a call per message).
//!
//! The client talks to any store server (`xwarpd --store`, or this tool without an address,
//! which serves a 64 MiB temporary store and exits when its client has gone).

use std::time::{Duration, Instant};

use dataplane::store::{ClientOptions, MappedFile, ServerOptions, StoreClient, StoreServer};
use dataplane::Access;

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
    let device = open_device(args.transport)?;
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
            server.shutdown();
            return Ok(());
        }
    }
}

/// Runs READs or WRITEs of every size against the store at `host`.
pub fn run_client(spec: &RunSpec, host: &str) -> Result<Vec<Record>, String> {
    let args = &spec.args;
    open_device(args.transport)?;
    let addr = resolve(host, args.port)?;
    let opts = ClientOptions {
        transport: match args.transport {
            crate::cli::TransportArg::Kernel => dataplane::Transport::Kernel,
            crate::cli::TransportArg::Xdp => dataplane::Transport::Xdp,
        },
        connection: connection_config(args),
        call_timeout: Duration::from_secs(30),
    };
    let mut c =
        StoreClient::connect(addr, &opts).map_err(|e| format!("cannot reach {addr}: {e}"))?;
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
        let len = size as usize;
        let buf = c
            .pd()
            .register(len, Access::ALL)
            .map_err(|e| format!("cannot register {len} bytes: {e}"))?;
        let span = STORE_SIZE / size.max(1);
        let mut times = Vec::new();
        let start = Instant::now();
        let mut i = 0u64;
        loop {
            let more = match spec.length {
                Length::Iterations(n) => i < n,
                Length::Duration(d) => start.elapsed() < d,
            };
            if !more {
                break;
            }
            let offset = (i % span) * size;
            let r = if spec.test == TestKind::RpcRead {
                c.read(offset, &buf, 0..len).map(|_| ())
            } else {
                c.write(offset, &buf, 0..len).map(|_| ())
            };
            r.map_err(|e| format!("{} {size} B: {e}", spec.test.name()))?;
            times.push(start.elapsed());
            i += 1;
        }
        let row = Record::bandwidth(
            spec.test,
            args.transport.name(),
            size,
            &bandwidth(size, &times, start.elapsed()),
        );
        println!("{}", row.row());
        rows.push(row);
    }
    println!("{RULE}");
    if let Some(path) = &args.json {
        report::write_json(path, &rows)?;
    }
    Ok(rows)
}
