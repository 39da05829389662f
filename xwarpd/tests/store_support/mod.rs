//! Fixtures of the in-process store tests: a temporary store file, a server over it on
//! loopback (kernel transport), deterministic data.
#![allow(dead_code)]

use std::time::Duration;

use dataplane::{Access, ConnectionConfig, Device, MappedFile, QpInit, Transport};
use xwarpd::store::{ServerOptions, StoreServer};

/// A store file in the temp directory, removed on drop.
pub use testkit::TempPath as TempFile;

/// A store of `size` bytes over `file`, served on 127.0.0.1 (any port) with `opts`.
pub fn server_with(file: &TempFile, size: u64, opts: ServerOptions) -> (Device, StoreServer) {
    let dev = Device::open(Transport::Kernel).unwrap();
    let f = MappedFile::open(file.path(), Some(size)).unwrap();
    let s = StoreServer::start(&dev, "127.0.0.1:0".parse().unwrap(), f, opts).unwrap();
    (dev, s)
}

/// [`server_with`] default options.
pub fn server(file: &TempFile, size: u64) -> (Device, StoreServer) {
    server_with(file, size, ServerOptions::default())
}

/// Deterministic bytes (testkit's pattern; this module's callers name the seed first).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    testkit::pattern(len, seed)
}

/// A plain verbs connection to a store: its queue pair, a 16 KiB buffer (Sends from its
/// first half, the one receive posted in its second) and the receive completion queue.
pub struct RawConn {
    pub qp: dataplane::QueuePair,
    pub mr: dataplane::MemoryRegion,
    pub rcq: dataplane::CompletionQueue,
    _dev: Device,
}

/// Connects to `addr` offering 8 KiB inline (RFC 8797 private data), one receive posted.
pub fn raw_connect(addr: std::net::SocketAddr) -> RawConn {
    let dev = Device::open(Transport::Kernel).unwrap();
    let pd = dev.alloc_pd();
    let (scq, rcq) = (dev.create_cq(), dev.create_cq());
    let mr = pd.register(16384, Access::LOCAL_WRITE).unwrap();
    let init = QpInit {
        pd: pd.clone(),
        send_cq: scq,
        recv_cq: rcq.clone(),
    };
    let pdata = rpcrdma::negotiation::PrivateData {
        remote_invalidation: false,
        send_size: 8192,
        recv_size: 8192,
    }
    .encode();
    let qp = dev
        .connect(addr, init, &ConnectionConfig::default(), &pdata)
        .unwrap();
    qp.post_recv(1, &mr, 8192..16384).unwrap();
    RawConn {
        qp,
        mr,
        rcq,
        _dev: dev,
    }
}

impl RawConn {
    /// Sends `msg` as one Send.
    pub fn send(&self, msg: &[u8]) {
        self.mr.write(0, msg).unwrap();
        self.qp.post_send(2, &self.mr, 0..msg.len()).unwrap();
    }
}

/// Sends raw bytes as one Send on a plain verbs connection and returns the answer.
pub fn raw_exchange(addr: std::net::SocketAddr, msg: &[u8]) -> Vec<u8> {
    let conn = raw_connect(addr);
    conn.send(msg);
    let c = conn.rcq.wait(Duration::from_secs(20)).expect("an answer");
    assert!(c.is_ok());
    let mut out = vec![0u8; c.byte_len as usize];
    conn.mr.read(8192, &mut out).unwrap();
    out
}
