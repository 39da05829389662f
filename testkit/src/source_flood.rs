//! Floods from one source address, for the fair-admission tests: idle connections (TCP up, no
//! MPA Request) and silent MPA connections (MPA Request sent and answered, then nothing), each
//! bound to the flooding address, so that a client from another address can be shown to get
//! in meanwhile. The clients' namespace and its second address belong to the test.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use nix::sys::socket::{
    bind, connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
    SockaddrIn6,
};
use nix::sys::time::TimeVal;

/// The flooding address beside the testbed's clients (198.18.0.2): added to B's interface.
pub const FLOOD_SOURCE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
/// Idle connections of the fair-admission flood.
pub const IDLE: usize = 5_000;
/// Silent MPA connections of the fair-admission flood: more than the store's 64 slots.
pub const SILENT: usize = 80;

/// A TCP connection from `src` (any port) to `dst`, giving up after `timeout`.
pub fn connect_from(src: IpAddr, dst: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let family = match dst {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)?;
    // A blocking connect gives up after the send timeout (EINPROGRESS).
    let t = TimeVal::new(timeout.as_secs() as i64, timeout.subsec_micros().into());
    setsockopt(&fd, sockopt::SendTimeout, &t)?;
    let raw = fd.as_raw_fd();
    match (src, dst) {
        (IpAddr::V4(s), SocketAddr::V4(d)) => {
            bind(raw, &SockaddrIn::from(std::net::SocketAddrV4::new(s, 0)))?;
            connect(raw, &SockaddrIn::from(d))?;
        }
        (IpAddr::V6(s), SocketAddr::V6(d)) => {
            bind(
                raw,
                &SockaddrIn6::from(std::net::SocketAddrV6::new(s, 0, 0, 0)),
            )?;
            connect(raw, &SockaddrIn6::from(d))?;
        }
        _ => return Err(io::Error::from(io::ErrorKind::InvalidInput)),
    }
    Ok(TcpStream::from(fd))
}

/// Opens `n` connections from `src` to `dst` from four threads, each first calling `enter`
/// (to move into the clients' namespace; its guard lives while the thread connects), and
/// keeps them. A connection reset before `connect` returned (refused as soon as the handshake
/// completed) completed the handshake too: returns the sockets held and how many were reset
/// so. Any other failure panics.
pub fn idle<G>(
    src: Option<IpAddr>,
    dst: SocketAddr,
    n: usize,
    timeout: Duration,
    enter: impl Fn() -> G + Sync,
) -> (Vec<TcpStream>, usize) {
    const THREADS: usize = 4;
    std::thread::scope(|s| {
        let clients: Vec<_> = (0..THREADS)
            .map(|t| {
                let enter = &enter;
                s.spawn(move || {
                    let _guard = enter();
                    let mine = n / THREADS + usize::from(t < n % THREADS);
                    let mut held = Vec::with_capacity(mine);
                    let mut reset = 0;
                    for _ in 0..mine {
                        let c = match src {
                            Some(src) => connect_from(src, dst, timeout),
                            None => TcpStream::connect_timeout(&dst, timeout),
                        };
                        match c {
                            Ok(c) => held.push(c),
                            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => reset += 1,
                            Err(e) => panic!("TCP connect to {dst}: {e}"),
                        }
                    }
                    (held, reset)
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|h| h.join().expect("idle client"))
            .fold((Vec::new(), 0), |(mut all, n), (held, reset)| {
                all.extend(held);
                (all, n + reset)
            })
    })
}

/// What a silent flood got.
#[derive(Debug, Default)]
pub struct SilentFlood {
    /// The connections whose MPA startup finished: held open, saying nothing.
    pub held: Vec<TcpStream>,
    /// Connections the server rejected (MPA Reply with R=1) or closed before its Reply.
    pub turned_away: usize,
}

/// Opens `n` connections from `src` to `dst` one after another, sends each an MPA Request
/// (Rev 2, no private data, CRC on) and reads the Reply, within `timeout` each; keeps those the
/// server accepted and sends nothing more on them. Call it inside the clients' namespace.
pub fn silent_mpa(src: IpAddr, dst: SocketAddr, n: usize, timeout: Duration) -> SilentFlood {
    let mut out = SilentFlood::default();
    for _ in 0..n {
        match mpa_startup(src, dst, timeout) {
            Ok(Some(s)) => out.held.push(s),
            Ok(None) => out.turned_away += 1,
            Err(e) => panic!("silent MPA connection to {dst}: {e}"),
        }
    }
    out
}

/// One MPA startup as Initiator over a connection from `src`: the stream once established,
/// `None` when rejected or closed before the Reply.
fn mpa_startup(src: IpAddr, dst: SocketAddr, timeout: Duration) -> io::Result<Option<TcpStream>> {
    let mut s = match connect_from(src, dst, timeout) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(None),
        Err(e) => return Err(e),
    };
    s.set_nodelay(true)?;
    let now = Instant::now();
    let mut init = mpa::Initiator::new(
        mpa::StartupConfig::default(),
        now,
        b"",
        mpa::ReadDepths::default(),
    )
    .map_err(io::Error::other)?;
    if let Some(req) = init.poll_transmit() {
        s.write_all(&req)?;
    }
    s.set_read_timeout(Some(timeout))?;
    let mut buf = [0u8; 1024];
    loop {
        if let Some(ev) = init.poll_event() {
            return Ok(match ev {
                mpa::StartupEvent::Established(_) => Some(s),
                _ => None,
            });
        }
        match s.read(&mut buf) {
            Ok(0) => init.handle_close(),
            Ok(n) => {
                init.handle_input(Instant::now(), &buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => init.handle_close(),
            Err(e) => return Err(e),
        }
    }
}
