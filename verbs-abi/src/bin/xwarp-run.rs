//! `xwarp-run`: runs an unmodified RDMA program (perftest, rping, ibv_devinfo, ...) on xwarp's
//! libibverbs.so.1 and librdmacm.so.1. See `xwarp-run --help`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use verbs_abi::settings::{interfaces, Transport, INTERFACE_VAR, TRANSPORT_VAR};

const HELP: &str = "\
xwarp-run: run an RDMA program unchanged over xwarp (iWARP in software, no RDMA NIC or
kernel module): its libibverbs.so.1 and librdmacm.so.1 are xwarp's.

usage: xwarp-run [--transport kernel|xdp] [--interface IF[,IF...]] [--lib-dir DIR]
                 -- PROGRAM [ARGS...]

  --transport kernel   MPA/DDP/RDMAP over the kernel's TCP sockets (the default)
  --transport xdp      AF_XDP with xwarp's own TCP (kernel bypass; needs root, attaches an
                       XDP program to each interface while the program runs)
  --interface IF       one iWARP device per interface, named xwarp_IF, its GID the
                       interface's address (default: the first interface that is up, not
                       loopback and has an IPv4 address; else lo)
  --lib-dir DIR        where xwarp's libraries are (default: xwarp-lib beside this program)
  -h, --help           this text

Each device: transport iWARP, node type RNIC, link layer Ethernet, one active port.
Runs: reliable connected queue pairs made with rdma_cm (perftest's -R, rping), Send, RDMA
Write and RDMA Read, unsignaled work requests, inline data, completion channels and async
events.
Not supported (a clear errno and one log line, never a crash): UD/UC/XRC queue pairs,
atomics, immediate data, shared receive queues, extended verbs (ibv_wr_*; perftest picks
the old post send for this device itself), memory windows, connections without rdma_cm.
XWARP_VERBS_DEBUG=1 prints the library's connection events and queue pair state changes.
XWARP_VERBS_ASSIST=0 (xdp) leaves the engine to its thread: by default the program's posts
and polls drive it too while it waits in a poll loop (a third of the latency).

examples:
  xwarp-run -- ibv_devinfo -v
  xwarp-run --interface eth1 -- ib_write_bw -R -n 5000                  (server)
  xwarp-run --interface eth1 -- ib_write_bw -R -n 5000 192.0.2.1        (client)
  xwarp-run --transport xdp --interface eth1 -- rping -s -a 192.0.2.1 -v
";

fn fail(msg: &str) -> ExitCode {
    eprintln!("xwarp-run: {msg}");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let mut transport: Option<Transport> = None;
    let mut interface: Option<String> = None;
    let mut lib_dir: Option<PathBuf> = None;
    let mut program: Vec<std::ffi::OsString> = Vec::new();
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("-h" | "--help") => {
                print!("{HELP}");
                return ExitCode::SUCCESS;
            }
            Some("--transport") => {
                let v = args.next().and_then(|v| v.into_string().ok());
                match v.as_deref().and_then(Transport::parse) {
                    Some(t) => transport = Some(t),
                    None => return fail("--transport needs kernel or xdp"),
                }
            }
            Some("--interface") => match args.next().and_then(|v| v.into_string().ok()) {
                Some(v) if !v.is_empty() => interface = Some(v),
                _ => return fail("--interface needs a name"),
            },
            Some("--lib-dir") => match args.next() {
                Some(v) => lib_dir = Some(PathBuf::from(v)),
                None => return fail("--lib-dir needs a folder"),
            },
            Some("--") => {
                program.extend(args.by_ref());
                break;
            }
            Some(s) if s.starts_with('-') => {
                return fail(&format!("unknown option {s} (see --help)"));
            }
            _ => {
                program.push(a);
                program.extend(args.by_ref());
                break;
            }
        }
    }
    if program.is_empty() {
        return fail("no program to run (xwarp-run [OPTIONS] -- PROGRAM [ARGS...]; see --help)");
    }
    let lib_dir = match lib_dir.or_else(default_lib_dir) {
        Some(d) => d,
        None => return fail("cannot find xwarp-lib beside this program: give --lib-dir"),
    };
    if !lib_dir.join("libibverbs.so.1").is_file() || !lib_dir.join("librdmacm.so.1").is_file() {
        return fail(&format!(
            "{} has no libibverbs.so.1 and librdmacm.so.1 (build them: deploy/verbs-libs --release)",
            lib_dir.display()
        ));
    }
    if let Some(list) = &interface {
        let known = interfaces();
        for name in list.split(',') {
            if !known.iter().any(|i| i.name == name) {
                return fail(&format!(
                    "no interface named {name} in this network namespace"
                ));
            }
        }
    }
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..]);
    let mut path = lib_dir.as_os_str().to_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    cmd.env("LD_LIBRARY_PATH", path);
    if let Some(t) = transport {
        let name = match t {
            Transport::Kernel => "kernel",
            Transport::Xdp => "xdp",
        };
        cmd.env(TRANSPORT_VAR, name);
    }
    if let Some(i) = interface {
        cmd.env(INTERFACE_VAR, i);
    }
    let err = cmd.exec();
    fail(&format!(
        "cannot run {}: {err}",
        Path::new(&program[0]).display()
    ))
}

/// `xwarp-lib` beside this executable.
fn default_lib_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let d = exe.parent()?.join("xwarp-lib");
    d.is_dir().then_some(d)
}
