//! A TCP byte stream on the xdp transport: `std::net::TcpStream`'s shape (blocking `Read` and
//! `Write`, timeouts, shutdown, clones sharing the connection) plus the TCP RDMA option's
//! marks and placement.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use endpoint::{ConnId, Endpoint, EndpointError};
use tcp_offload::rdma::{AnnotateError, PlacedTransfer, PlacementError, Transfer};
use tcp_offload::CloseReason;

use super::tcp_listener::xdp_of;
use super::{io_err, StreamConfig, StreamCounters};
use crate::engine::PdHandle;
use crate::xdp_device::{State, XdpLane};
use crate::Device;

/// A TCP connection on the device's AF_XDP engine. Clones ([`TcpStream::try_clone`]) share
/// it (one reading and one writing thread is the intended use); when the last handle drops,
/// the connection closes (FIN after the queued octets, RST after the close timeout).
#[derive(Debug, Clone)]
pub struct TcpStream {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dev: Arc<XdpLane>,
    conn: ConnId,
    local: SocketAddr,
    peer: SocketAddr,
    read_timeout: Mutex<Option<Duration>>,
    write_timeout: Mutex<Option<Duration>>,
    read_shut: AtomicBool,
}

/// Waits "forever" when no timeout is set.
const FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

impl Device {
    /// Opens a plain TCP stream to `addr` from the engine's active-open port range; returns
    /// once the handshake completed (or failed: `ConnectionRefused`, `TimedOut`).
    pub fn tcp_connect(&self, addr: SocketAddr, cfg: &StreamConfig) -> io::Result<TcpStream> {
        let dev = xdp_of(self)?.next_lane();
        if addr.is_ipv4() != dev.shared.ip.is_ipv4() {
            return Err(io_err(
                io::ErrorKind::Unsupported,
                "the address family differs from the address the xdp device serves",
            ));
        }
        dev.learn_next_hop(addr.ip(), cfg.connect_timeout)?;
        let conn = {
            let mut st = dev.shared.lock();
            let conn = st
                .engine
                .endpoint_mut()
                .stream_connect(Instant::now(), addr, cfg.options())
                .map_err(|e| io::Error::new(io::ErrorKind::AddrNotAvailable, e))?;
            st.streams.conns.insert(conn, None);
            if dev.shared.inline {
                st.engine.transmit_now(Instant::now(), conn);
            }
            conn
        };
        let local = {
            let st = dev.shared.lock();
            st.engine
                .endpoint()
                .tcp(conn)
                .map(|t| t.tuple().local)
                .unwrap_or(SocketAddr::new(dev.shared.ip, 0))
        };
        let s = TcpStream::new(dev.clone(), conn, local, addr);
        let deadline = Instant::now() + cfg.connect_timeout;
        let up = dev.shared.wait_until(deadline, |st| {
            match st.engine.endpoint().stream_is_connected(conn) {
                Ok(true) => Some(Ok(())),
                Ok(false) => None,
                Err(_) => Some(Err(ended(st, conn, io::ErrorKind::ConnectionRefused))),
            }
        });
        match up {
            Some(Ok(())) => Ok(s),
            Some(Err(e)) => Err(e),
            None => {
                let _ = dev.shared.lock().engine.endpoint_mut().abort(conn);
                Err(io_err(io::ErrorKind::TimedOut, "TCP handshake timed out"))
            }
        }
    }
}

/// The error for a connection the engine no longer holds: how it ended, `default` if that is
/// not known.
fn ended(st: &State, conn: ConnId, default: io::ErrorKind) -> io::Error {
    let kind = match st.streams.conns.get(&conn).copied().flatten() {
        Some(CloseReason::Reset) => io::ErrorKind::ConnectionReset,
        Some(CloseReason::Refused) => io::ErrorKind::ConnectionRefused,
        Some(CloseReason::TimedOut) => io::ErrorKind::TimedOut,
        Some(CloseReason::Aborted) => io::ErrorKind::ConnectionAborted,
        Some(CloseReason::Normal) | None => default,
    };
    io::Error::new(kind, "the TCP connection has ended")
}

fn annotate_io(e: EndpointError) -> io::Error {
    match e {
        EndpointError::Annotate(AnnotateError::NotNegotiated)
        | EndpointError::Placement(PlacementError::NotNegotiated) => io_err(
            io::ErrorKind::Unsupported,
            "the TCP RDMA option was not negotiated",
        ),
        EndpointError::NoConnection => io_err(io::ErrorKind::NotConnected, "connection ended"),
        e => io::Error::new(io::ErrorKind::InvalidInput, e),
    }
}

impl TcpStream {
    pub(super) fn new(
        dev: Arc<XdpLane>,
        conn: ConnId,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Self {
        TcpStream {
            inner: Arc::new(Inner {
                dev,
                conn,
                local,
                peer,
                read_timeout: Mutex::new(None),
                write_timeout: Mutex::new(None),
                read_shut: AtomicBool::new(false),
            }),
        }
    }

    /// Another handle to the same connection.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(self.clone())
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.inner.peer
    }

    /// Our address.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// How long `read` waits (`None`: without limit); past it, `WouldBlock` as std on Linux.
    pub fn set_read_timeout(&self, t: Option<Duration>) {
        *self
            .inner
            .read_timeout
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = t;
    }

    /// How long `write` waits for send-buffer room (`None`: without limit).
    pub fn set_write_timeout(&self, t: Option<Duration>) {
        *self
            .inner
            .write_timeout
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = t;
    }

    /// `Write`: a FIN follows the queued octets, reading goes on. `Read`: later reads return
    /// end of stream. `Both`: both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            self.inner.read_shut.store(true, Ordering::Release);
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            self.with_endpoint(|e, c| e.stream_shutdown(c))
                .map_err(|_| io_err(io::ErrorKind::NotConnected, "connection ended"))?;
            self.kick();
        }
        Ok(())
    }

    /// Runs `f` on the engine's endpoint under the device lock.
    fn with_endpoint<R>(&self, f: impl FnOnce(&mut Endpoint<PdHandle>, ConnId) -> R) -> R {
        let mut st = self.inner.dev.shared.lock();
        f(st.engine.endpoint_mut(), self.inner.conn)
    }

    /// Inline mode: transmit what the connection has now (nobody else drives the engine).
    fn kick(&self) {
        if self.inner.dev.shared.inline {
            let mut st = self.inner.dev.shared.lock();
            st.engine.transmit_now(Instant::now(), self.inner.conn);
        }
    }

    /// Runs `f` on the state until it returns `Some` (driving the engine in inline mode), or
    /// `WouldBlock` (as std on Linux) once `timeout` passed.
    fn wait<T>(
        &self,
        timeout: &Mutex<Option<Duration>>,
        what: &'static str,
        mut f: impl FnMut(&mut State, ConnId) -> Option<io::Result<T>>,
    ) -> io::Result<T> {
        let t = *timeout.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = Instant::now() + t.unwrap_or(FOREVER);
        let conn = self.inner.conn;
        self.inner
            .dev
            .shared
            .wait_until(deadline, |st| f(st, conn))
            .unwrap_or_else(|| Err(io_err(io::ErrorKind::WouldBlock, what)))
    }

    /// Waits until `f` makes progress on the connection: `Some(n)` octets, or end of stream
    /// (`Ok(0)`), or the connection's end; `WouldBlock` at the read timeout.
    fn wait_read(
        &self,
        mut f: impl FnMut(&mut Endpoint<PdHandle>, ConnId) -> Result<usize, EndpointError>,
    ) -> io::Result<usize> {
        if self.inner.read_shut.load(Ordering::Acquire) {
            return Ok(0);
        }
        let inline = self.inner.dev.shared.inline;
        self.wait(&self.inner.read_timeout, "read timed out", |st, conn| {
            let ep = st.engine.endpoint_mut();
            match f(ep, conn) {
                Ok(0) => match ep.stream_eof(conn) {
                    Ok(true) => Some(Ok(0)),
                    Ok(false) => None,
                    Err(_) => Some(end_of(st, conn)),
                },
                Ok(n) => {
                    if inline {
                        // The window may have opened: tell the peer now.
                        st.engine.transmit_now(Instant::now(), conn);
                    }
                    Some(Ok(n))
                }
                Err(EndpointError::NoConnection) => Some(end_of(st, conn)),
                Err(e) => Some(Err(annotate_io(e))),
            }
        })
    }

    /// Marks `len` octets of the send stream from stream offset `start` (not yet written,
    /// after every earlier run; see [`Self::send_position`]) as bytes of transfer `t`.
    /// `Unsupported` when the option was not negotiated.
    pub fn mark_transfer(&self, start: u64, len: u32, t: Transfer) -> io::Result<()> {
        self.with_endpoint(|e, c| e.stream_mark_transfer(c, start, len, t))
            .map_err(annotate_io)
    }

    /// The segment starting at stream offset `at` carries A = 1 (a ULP message starts there).
    pub fn mark_message_start(&self, at: u64) -> io::Result<()> {
        self.with_endpoint(|e, c| e.stream_mark_message_start(c, at))
            .map_err(annotate_io)
    }

    /// Stream offset (from 0) of the next octet `write` queues.
    pub fn send_position(&self) -> u64 {
        self.with_endpoint(|e, c| e.stream_send_position(c))
            .unwrap_or(0)
    }

    /// True when both SYNs carried the TCP RDMA option.
    pub fn rdma_enabled(&self) -> bool {
        self.with_endpoint(|e, c| e.stream_rdma_enabled(c))
            .unwrap_or(false)
    }

    /// Writes all of `data` as bytes of transfer `t` (marked first when the option is on; a
    /// plain write otherwise). One writer at a time: the marks name stream offsets.
    pub fn write_transfer(&self, data: &[u8], t: Transfer) -> io::Result<()> {
        if !data.is_empty() && self.rdma_enabled() {
            let len = u32::try_from(data.len())
                .map_err(|_| io_err(io::ErrorKind::InvalidInput, "transfer over 4 GiB"))?;
            let at = self.send_position();
            self.mark_transfer(at, len, t)?;
        }
        let mut w = self;
        w.write_all(data)
    }

    /// Registers `buf` as the destination of transfer `rid` (before its bytes can arrive):
    /// annotated bytes are placed there as they arrive, in order or not.
    pub fn expect_transfer(&self, rid: u64, buf: Vec<u8>) -> io::Result<()> {
        self.with_endpoint(|e, c| e.stream_expect_transfer(c, rid, buf))
            .map_err(annotate_io)
    }

    /// Consumes the next in-order octets (up to `len`, at least one; blocks), which the caller
    /// knows are octets `[buffer_offset, ..)` of transfer `rid`: placed ones are skipped (no
    /// copy), the others copied into the buffer. Returns the octets consumed, 0 at end of
    /// stream.
    pub fn read_transfer(&self, rid: u64, buffer_offset: u32, len: u32) -> io::Result<u32> {
        if len == 0 {
            return Ok(0);
        }
        self.wait_read(|e, c| {
            e.stream_recv_transfer(c, rid, buffer_offset, len)
                .map(|n| n as usize)
        })
        .map(|n| n as u32)
    }

    /// The buffer of `rid` with what was placed and copied; forgets the RID.
    pub fn take_transfer(&self, rid: u64) -> Option<PlacedTransfer> {
        self.with_endpoint(|e, c| e.stream_take_transfer(c, rid))
            .ok()
            .flatten()
    }

    /// The connection's TCP RDMA option and retransmission counters (zeros once it ended).
    pub fn counters(&self) -> StreamCounters {
        let st = self.inner.dev.shared.lock();
        let Some(t) = st.engine.endpoint().tcp(self.inner.conn) else {
            return StreamCounters::default();
        };
        let t = t.counters();
        StreamCounters {
            segments_annotated: t.rdma_segments_annotated,
            bytes_placed: t.rdma_bytes_placed,
            ooo_bytes_placed: t.rdma_ooo_bytes_placed,
            copies_avoided: t.rdma_copies_avoided,
            bytes_copied: t.rdma_bytes_copied,
            retransmissions: t.retransmits,
        }
    }
}

/// A read on a connection the engine no longer holds: end of stream after an orderly close,
/// else the error of how it ended.
fn end_of(st: &State, conn: ConnId) -> io::Result<usize> {
    match st.streams.conns.get(&conn).copied().flatten() {
        Some(CloseReason::Normal) => Ok(0),
        _ => Err(ended(st, conn, io::ErrorKind::ConnectionReset)),
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.wait_read(|e, c| e.stream_recv(c, buf))
    }
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}

impl Write for &TcpStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let inline = self.inner.dev.shared.inline;
        self.wait(&self.inner.write_timeout, "write timed out", |st, conn| {
            let ep = st.engine.endpoint_mut();
            let idle = ep.is_idle_to_send(conn);
            match ep.stream_send(conn, data) {
                Ok(0) => None,
                Ok(n) => {
                    if inline && idle {
                        st.engine.transmit_now(Instant::now(), conn);
                    }
                    Some(Ok(n))
                }
                Err(EndpointError::NoConnection) => {
                    Some(Err(ended(st, conn, io::ErrorKind::BrokenPipe)))
                }
                Err(_) => Some(Err(io_err(
                    io::ErrorKind::BrokenPipe,
                    "the sending half is shut",
                ))),
            }
        })
    }

    /// Threaded engine: returns at once (octets written are queued to our TCP, which the
    /// engine sends on its own). Inline engine, where nothing moves unless the application
    /// calls: drives the engine until the peer acknowledged every octet written, and the FIN
    /// after [`TcpStream::shutdown`], or `WouldBlock` at the write timeout. Call it before
    /// the last drop of an inline stream that must deliver what it wrote.
    fn flush(&mut self) -> io::Result<()> {
        if !self.inner.dev.shared.inline {
            return Ok(());
        }
        self.wait(&self.inner.write_timeout, "flush timed out", |st, conn| {
            match st.engine.endpoint().stream_flushed(conn) {
                Ok(true) => Some(Ok(())),
                Ok(false) => None,
                // Both FINs exchanged and the connection gone: all delivered.
                Err(_) if st.streams.conns.get(&conn) == Some(&Some(CloseReason::Normal)) => {
                    Some(Ok(()))
                }
                Err(_) => Some(Err(ended(st, conn, io::ErrorKind::BrokenPipe))),
            }
        })
    }
}

impl Write for TcpStream {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        (&*self).write(data)
    }

    fn flush(&mut self) -> io::Result<()> {
        (&*self).flush()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let mut st = self.dev.shared.lock();
        let now = Instant::now();
        let _ = st.engine.endpoint_mut().close(now, self.conn);
        st.streams.conns.remove(&self.conn);
        if self.dev.shared.inline {
            st.engine.transmit_now(now, self.conn);
        }
    }
}
