//! What the examples share: the device named on the command line, the window a server
//! advertises in its MPA Reply, and waiting for completions.

#![allow(dead_code)] // each example uses its part

use std::time::Duration;

use dataplane::{Completion, CompletionQueue, Device, EngineMode, Transport, XdpConfig};

/// The examples' error type.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// How long an example waits for one completion.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Opens the device the arguments name: `--xdp IFACE` (removed from `args`) for the AF_XDP
/// transport with a threaded engine, the kernel transport otherwise.
pub fn device(args: &mut Vec<String>) -> Result<Device, Error> {
    match args.iter().position(|a| a == "--xdp") {
        Some(i) if i + 1 < args.len() => {
            let iface = args.remove(i + 1);
            args.remove(i);
            let mut cfg = XdpConfig::new(iface);
            cfg.mode = EngineMode::Threaded;
            Ok(Device::open_xdp(cfg)?)
        }
        Some(_) => Err("--xdp needs an interface name".into()),
        None => Ok(Device::open(Transport::Kernel)?),
    }
}

/// The next completion, which must be successful.
pub fn wait_ok(cq: &CompletionQueue, what: &str) -> Result<Completion, Error> {
    let c = cq
        .wait(TIMEOUT)
        .ok_or_else(|| format!("{what}: no completion within {TIMEOUT:?}"))?;
    if !c.is_ok() {
        return Err(format!("{what}: {c:?}").into());
    }
    Ok(c)
}

/// A server's window as its MPA Reply's private data: STag and length, big-endian.
pub fn window_to_bytes(stag: u32, len: u64) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&stag.to_be_bytes());
    b[4..].copy_from_slice(&len.to_be_bytes());
    b
}

/// The window from a server's private data.
pub fn window_from_bytes(b: &[u8]) -> Result<(u32, u64), Error> {
    let b: &[u8; 12] = b.try_into().map_err(|_| "the server sent no window")?;
    let stag = u32::from_be_bytes(b[..4].try_into()?);
    let len = u64::from_be_bytes(b[4..].try_into()?);
    Ok((stag, len))
}

/// The argument at `i`, parsed, or `default`.
pub fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> Result<T, Error> {
    match args.get(i) {
        Some(s) => s.parse().map_err(|_| format!("bad argument {s:?}").into()),
        None => Ok(default),
    }
}
