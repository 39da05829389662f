//! The idle-connection flood (at least 10,000 connections that complete TCP and never send an
//! MPA Request), shared by the engine's and the daemon's flood tests: the plan,
//! the memory bounds both state, and the clients that open the connections; and idle
//! connections from a chosen source address ([`open_from`], the soak's bursts).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Idle connections opened.
pub const CONNECTIONS: usize = 10_000;
/// The listener's backlog during the flood (connections whose MPA startup has not finished).
pub const BACKLOG: usize = 2048;
/// Most resident memory per idle connection held (before MPA is up a connection has no queue
/// pair buffers: a few KB of TCP and MPA state; about 5.5 KB measured).
pub const RSS_PER_CONN: u64 = 24 << 10;
/// Most the resident set may grow while the idle connections are held.
pub const RSS_TOTAL: u64 = 64 << 20;
/// Most the resident set may stay above where it started once they are gone (0.8-1.5 MiB
/// measured with the allocator's thresholds fixed, `dataplane::heap`; 7-8 MiB without).
pub const RSS_LEFT: u64 = 6 << 20;

/// Opens `CONNECTIONS` TCP connections to `dst` from four threads, each first calling `enter`
/// (e.g. to move into the clients' network namespace; its guard lives while the thread
/// connects), and keeps them: [`crate::source_flood::idle`] from the namespace's own address.
pub fn open<G>(
    dst: SocketAddr,
    timeout: Duration,
    enter: impl Fn() -> G + Sync,
) -> (Vec<TcpStream>, usize) {
    crate::source_flood::idle(None, dst, CONNECTIONS, timeout, enter)
}

/// Opens up to `n` TCP connections to `dst` from source address `src` (one of this thread's
/// namespace's addresses), each connect bounded by `timeout`, and keeps those that connect.
/// Returns them and how many failed (reset at once, refused, timed out): a flood may be turned
/// away, which is no error here.
pub fn open_from(
    src: std::net::Ipv4Addr,
    dst: std::net::SocketAddrV4,
    n: usize,
    timeout: Duration,
) -> (Vec<TcpStream>, usize) {
    let mut held = Vec::with_capacity(n);
    let mut failed = 0;
    for _ in 0..n {
        match crate::source_flood::connect_from(src.into(), dst.into(), timeout) {
            Ok(s) => held.push(s),
            Err(_) => failed += 1,
        }
    }
    (held, failed)
}
