//! xwarp-bench: see the crate documentation (`bench::cli` for the options).
#![forbid(unsafe_code)]

use clap::Parser;

fn main() {
    let cli = bench::cli::Cli::parse();
    if let Err(e) = bench::run(cli) {
        // One line, no panic, non-zero exit.
        eprintln!("xwarp-bench: error: {}", e.replace('\n', " "));
        std::process::exit(1);
    }
}
