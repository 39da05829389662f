//! Our own TCP on the xdp transport as the ONC RPC stream: `dataplane`'s [`TcpStream`] and
//! [`TcpListener`] behind [`RpcStream`] / [`RpcListener`], with the TCP RDMA option's calls
//! ([`TransferOption`]) where both ends offered it.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use dataplane::{Device, StreamConfig, TcpListener, TcpStream};

use super::stream::{PlacedTransfer, RpcListener, RpcStream, Transfer, TransferOption};

impl RpcStream for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Read::read(self, buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        Write::write_all(self, buf)
    }
    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t);
        Ok(())
    }
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(TcpStream::peer_addr(self))
    }
    fn option(&mut self) -> Option<&mut dyn TransferOption> {
        if self.rdma_enabled() {
            Some(self)
        } else {
            None
        }
    }
}

impl TransferOption for TcpStream {
    fn send_position(&self) -> u64 {
        TcpStream::send_position(self)
    }
    fn mark_message_start(&mut self, at: u64) -> io::Result<()> {
        TcpStream::mark_message_start(self, at)
    }
    fn mark_transfer(&mut self, start: u64, len: u32, t: Transfer) -> io::Result<()> {
        TcpStream::mark_transfer(self, start, len, t)
    }
    fn expect_transfer(&mut self, rid: u64, buf: Vec<u8>) -> io::Result<()> {
        TcpStream::expect_transfer(self, rid, buf)
    }
    fn read_transfer(&mut self, rid: u64, buffer_offset: u32, len: u32) -> io::Result<u32> {
        TcpStream::read_transfer(self, rid, buffer_offset, len)
    }
    fn take_transfer(&mut self, rid: u64) -> Option<PlacedTransfer> {
        TcpStream::take_transfer(self, rid)
    }
    fn copies_avoided(&self) -> u64 {
        self.counters().copies_avoided
    }
}

/// A stream listener of the xdp transport.
#[derive(Debug)]
pub struct XdpListener(TcpListener);

impl XdpListener {
    /// Listens on `addr` through `device` (xdp transport), offering the TCP RDMA option when
    /// `tcp_rdma`.
    pub fn bind(device: &Device, addr: SocketAddr, tcp_rdma: bool) -> io::Result<Self> {
        let cfg = StreamConfig {
            tcp_rdma,
            ..StreamConfig::default()
        };
        device.tcp_listen(addr, cfg).map(Self)
    }
}

impl RpcListener for XdpListener {
    fn accept_timeout(&self, t: Duration) -> io::Result<Option<Box<dyn RpcStream>>> {
        match self.0.accept_timeout(t) {
            Ok((s, _)) => Ok(Some(Box::new(s))),
            Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }
}

/// Connects to `addr` through `device` (xdp transport), offering the option when `tcp_rdma`.
pub fn connect(device: &Device, addr: SocketAddr, tcp_rdma: bool) -> io::Result<TcpStream> {
    let cfg = StreamConfig {
        tcp_rdma,
        ..StreamConfig::default()
    };
    device.tcp_connect(addr, &cfg)
}
