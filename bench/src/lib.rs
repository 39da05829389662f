//! xwarp-bench: perftest-style latency and bandwidth tests over xwarp's transports, and
//! `compare`, which runs them against the raw AF_XDP ceiling and the kernel transport on a
//! two-namespace testbed.
#![forbid(unsafe_code)]

pub mod block_client;
pub mod cli;
pub mod compare;
pub mod cpu;
pub mod facts;
pub mod handshake;
pub mod host_load;
pub mod io_pattern;
pub mod perftest;
pub mod plot;
pub mod raw;
pub mod report;
pub mod rpc;
pub mod rpc_tcp;
pub mod session;
pub mod stats;
pub mod testbed;

use cli::{Cli, Command, RunSpec};

/// Runs a parsed command line. Errors are one line, ready to print.
pub fn run(cli: Cli) -> Result<(), String> {
    if let Command::Compare(c) = &cli.command {
        return compare::run(c);
    }
    if let Command::Plot(p) = &cli.command {
        return plot::run(&p.input, &p.output);
    }
    let Some((test, args)) = cli.command.test() else {
        return Ok(());
    };
    let spec = RunSpec::new(test, args)?;
    use cli::TestKind::{RawBw, RawLat, RpcRead, RpcWrite};
    let addr = spec.args.address.as_deref();
    let tcp = spec.args.rpc_transport == Some(cli::RpcTransportArg::Tcp);
    match (test, addr) {
        (RawLat | RawBw, None) => raw::serve(&spec),
        (RawLat | RawBw, Some(host)) => raw::run_client(&spec, host).map(|_| ()),
        (RpcRead | RpcWrite, None) if tcp => rpc_tcp::serve(&spec),
        (RpcRead | RpcWrite, Some(host)) if tcp => rpc_tcp::run_client(&spec, host),
        (RpcRead | RpcWrite, None) => rpc::serve(&spec),
        (RpcRead | RpcWrite, Some(host)) => rpc::run_client(&spec, host).map(|_| ()),
        (_, None) => perftest::serve(&spec),
        (_, Some(host)) => perftest::run_client(&spec, host).map(|_| ()),
    }
}
