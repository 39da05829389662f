//! xwarp-bench: see the crate documentation (`bench::cli` for the options).
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    // `-t tcp|rdma` names the RPC transport on the rpc tests (-t is the TX depth elsewhere).
    let cli = bench::cli::Cli::parse_from(bench::rpc_tcp::short_form(std::env::args_os()));
    // Warnings (generic XDP, copy mode, fallbacks in the dataplane) on stderr; RUST_LOG
    // overrides the level.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .init();
    let result = bench::run(cli);
    // Built with `--features stage-times`: where this side's messages spent their time.
    if let Some(r) = dataplane::stage_times::report() {
        eprint!("xwarp-bench: {r}");
    }
    if let Err(e) = result {
        // One line, no panic, non-zero exit.
        eprintln!("xwarp-bench: error: {}", e.replace('\n', " "));
        std::process::exit(1);
    }
}
