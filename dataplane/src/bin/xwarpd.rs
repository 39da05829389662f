//! xwarpd: the xwarp daemon. Serves RDMA listeners and an RPC-over-RDMA block store on the
//! kernel transport (the AF_XDP engine will be a config choice), with counters on a control
//! socket (`xwarpd stats`) and a Prometheus endpoint.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dataplane::daemon::{self, config::DEFAULT_CONTROL, DaemonConfig, DaemonError, Overrides};

/// xwarpd: the xwarp data-plane daemon.
///
/// Serves iWARP (MPA/DDP/RDMAP) listeners and, with --store, a block store over RPC-over-RDMA:
/// a file mmap'ed shared and served with READ (server RDMA-Writes into the client's buffer),
/// WRITE (server RDMA-Reads it), COMMIT (msync + fsync) and GETATTR. Settings come from
/// --config FILE (TOML, see deploy/xwarpd.example.toml) with flags on top. Counters: `xwarpd
/// stats`, or Prometheus text over HTTP at --metrics. SIGINT or SIGTERM stops it cleanly.
#[derive(Debug, Parser)]
#[command(name = "xwarpd", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// TOML configuration file; flags given here override it.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Transport: "kernel" (kernel TCP sockets) or "xdp" (AF_XDP engine; not available yet).
    #[arg(long, value_name = "NAME")]
    transport: Option<String>,
    /// Serve a block store backed by this file (created when --size is given).
    #[arg(long, value_name = "PATH")]
    store: Option<PathBuf>,
    /// Store size (e.g. 1GiB); the file is extended to it, never shrunk.
    #[arg(long, value_name = "N")]
    size: Option<String>,
    /// Address the store listens on [default: 0.0.0.0:20049].
    #[arg(long, value_name = "ADDR")]
    store_listen: Option<String>,
    /// An echo listener (each Send comes back); repeat for more.
    #[arg(long, value_name = "ADDR")]
    listen: Vec<String>,
    /// Prometheus endpoint, or "off" [default: 127.0.0.1:9464].
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Unix control socket for `xwarpd stats` [default: /run/xwarpd/control.sock].
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// Log filter (info, debug, dataplane=trace, ...) [default: info].
    #[arg(long, value_name = "FILTER")]
    log: Option<String>,
    /// Ask for MPA markers on what we receive.
    #[arg(long, value_name = "BOOL")]
    markers: Option<bool>,
    /// Ask for MPA CRC [default: true].
    #[arg(long, value_name = "BOOL")]
    crc: Option<bool>,
    /// Kernel transport: give every FPDU its own TCP segment (slow; for wire captures).
    #[arg(long, value_name = "BOOL")]
    segment_per_fpdu: Option<bool>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the counters of a running xwarpd (asks its control socket).
    Stats {
        /// The daemon's control socket.
        #[arg(long, value_name = "PATH", default_value = DEFAULT_CONTROL)]
        control: PathBuf,
    },
    /// Check a configuration (file and flags) and print it, without starting anything.
    CheckConfig {
        #[command(flatten)]
        run: RunArgs,
    },
}

fn load(a: &RunArgs) -> Result<DaemonConfig, DaemonError> {
    let o = Overrides {
        transport: a.transport.clone(),
        control_socket: a.control.clone(),
        metrics: a.metrics.clone(),
        log: a.log.clone(),
        store: a.store.clone(),
        size: a.size.clone(),
        store_listen: a.store_listen.clone(),
        listen: a.listen.clone(),
        markers: a.markers,
        crc: a.crc,
        segment_per_fpdu: a.segment_per_fpdu,
    };
    Ok(DaemonConfig::load(a.config.as_deref(), &o)?)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Stats { control }) => match daemon::control::query_stats(&control) {
            Ok(s) => {
                print!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("xwarpd stats: {e}");
                ExitCode::FAILURE
            }
        },
        Some(Command::CheckConfig { run }) => match load(&run) {
            Ok(c) => {
                println!("{c:#?}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("xwarpd: {e}");
                ExitCode::from(2)
            }
        },
        None => {
            let cfg = match load(&cli.run) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("xwarpd: {e}");
                    return ExitCode::from(2);
                }
            };
            let filter = tracing_subscriber::EnvFilter::try_new(&cfg.log)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .init();
            match daemon::run(&cfg) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("{e}");
                    eprintln!("xwarpd: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
