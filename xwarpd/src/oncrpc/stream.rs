//! The byte stream ONC RPC runs over, and the TCP RDMA option's calls on it.
//!
//! [`RpcStream`] is what std's `TcpStream` offers (read, write, a read timeout, the peer);
//! streams of our own TCP (the xdp transport) also offer [`TransferOption`] when the option
//! was negotiated: the sender's marks (message starts, transfer runs; draft §3.1, TCPRDMA-09,
//! -11, -21) and the receiver's buffers per RID that segments are placed into as they arrive
//! (TCPRDMA-08). A kernel socket has no option: the ULP simply copies.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

pub use tcp_offload::rdma::{PlacedTransfer, Transfer};

/// A reliable, ordered byte stream (a TCP connection).
pub trait RpcStream: Send {
    /// Reads at least one octet (blocking up to the read timeout); `Ok(0)` at the end.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes all of `buf`.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// How long a read may wait (`None`: for ever); expiry is `WouldBlock` or `TimedOut` and
    /// loses no octet.
    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()>;
    /// The peer's address.
    fn peer_addr(&self) -> io::Result<SocketAddr>;
    /// The TCP RDMA option's calls, when the option was negotiated on this stream.
    fn option(&mut self) -> Option<&mut dyn TransferOption> {
        None
    }
}

/// The TCP RDMA option on a stream where it was negotiated (draft-csapuntz-tcprdma-00).
pub trait TransferOption {
    /// Stream offset (from 0) of the next octet written.
    fn send_position(&self) -> u64;
    /// A = 1 on the segment that starts at stream offset `at` (not yet written).
    fn mark_message_start(&mut self, at: u64) -> io::Result<()>;
    /// Marks `[start, start + len)` (not yet written) as octets of transfer `t`; `len == 0` is
    /// a zero-length transfer at `start`.
    fn mark_transfer(&mut self, start: u64, len: u32, t: Transfer) -> io::Result<()>;
    /// Registers `buf` as the destination of transfer `rid` (before its octets can arrive).
    fn expect_transfer(&mut self, rid: u64, buf: Vec<u8>) -> io::Result<()>;
    /// Consumes up to `len` in-order stream octets that are octets `[buffer_offset, ..)` of
    /// transfer `rid`: placed ones are skipped, the others copied into its buffer. Blocks for
    /// at least one octet; returns how many were consumed (0: end of stream).
    fn read_transfer(&mut self, rid: u64, buffer_offset: u32, len: u32) -> io::Result<u32>;
    /// The buffer of `rid` back, with what was placed and copied; forgets the RID.
    fn take_transfer(&mut self, rid: u64) -> Option<PlacedTransfer>;
    /// Octets the receiver did not copy because they were placed already (connection total).
    fn copies_avoided(&self) -> u64;
}

/// True for the errors a read timeout gives.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl RpcStream for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match Read::read(self, buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        Write::write_all(self, buf)
    }
    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        TcpStream::peer_addr(self)
    }
}

/// Where a server's connections come from.
pub trait RpcListener: Send {
    /// The next connection, waiting at most `t`; `Ok(None)` when none came.
    fn accept_timeout(&self, t: Duration) -> io::Result<Option<Box<dyn RpcStream>>>;
    /// The bound address.
    fn local_addr(&self) -> SocketAddr;
}

/// A kernel TCP listener (std), polled without blocking.
#[derive(Debug)]
pub struct KernelListener {
    inner: TcpListener,
    local: SocketAddr,
}

impl KernelListener {
    /// Listens on `addr` (port 0: any free port).
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let inner = TcpListener::bind(addr)?;
        inner.set_nonblocking(true)?;
        let local = inner.local_addr()?;
        Ok(Self { inner, local })
    }
}

impl RpcListener for KernelListener {
    fn accept_timeout(&self, t: Duration) -> io::Result<Option<Box<dyn RpcStream>>> {
        let until = Instant::now() + t;
        loop {
            match self.inner.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    s.set_nodelay(true)?;
                    return Ok(Some(Box::new(s)));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= until {
                        return Ok(None);
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An in-memory stream: reads come from `input` at most `chunk` octets at a time, writes
    /// go to `output`.
    pub(crate) struct MemStream {
        input: Vec<u8>,
        at: usize,
        chunk: usize,
        pub(crate) output: Vec<u8>,
    }

    impl MemStream {
        pub(crate) fn new(input: Vec<u8>, chunk: usize) -> Self {
            Self {
                input,
                at: 0,
                chunk,
                output: Vec::new(),
            }
        }
    }

    impl RpcStream for MemStream {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.chunk).min(self.input.len() - self.at);
            buf[..n].copy_from_slice(&self.input[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
        fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
            self.output.extend_from_slice(buf);
            Ok(())
        }
        fn set_read_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
            Ok(())
        }
        fn peer_addr(&self) -> io::Result<SocketAddr> {
            Ok("198.18.0.2:1".parse().unwrap())
        }
    }
}
