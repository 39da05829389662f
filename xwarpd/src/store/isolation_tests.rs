//! One protection domain per store connection, so no client can reach another client's RPC
//! buffers: a second client that names the first connection's buffers (its
//! receive buffers, its reply buffer, its registration of the file) in RDMA Writes and Reads
//! finds no such STag in its own connection's domain (Terminate "invalid STag"), and the first
//! client's data and connection are untouched.
//!
//! With one domain shared by all connections the STags existed for every connection and only
//! their access rights refused the Write or Read (Terminate "access rights violation"): this
//! test failed there, on the Terminate's code.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use dataplane::{
    Access, ConnectionConfig, Device, MappedFile, QpError, QueuePair, RemoteAddr, Transport,
};
use rpcrdma::negotiation::PrivateData;

use super::server::tests_support::{stags_of, ConnStags};
use super::{ClientOptions, ServerOptions, StoreClient, StoreServer, INLINE_SIZE};

/// Waits until the server at `srv` has recorded `n` connections; their STags.
fn stags(srv: SocketAddr, n: usize) -> Vec<ConnStags> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let s = stags_of(srv);
        if s.len() >= n {
            return s;
        }
        assert!(Instant::now() < deadline, "connection {n} not recorded");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A plain verbs connection to the store (the second, hostile client).
fn raw_client(dev: &Device, srv: SocketAddr) -> (QueuePair, dataplane::MemoryRegion) {
    let pd = dev.alloc_pd();
    let cq = dev.create_cq();
    let mr = pd.register(4096, Access::LOCAL_WRITE).unwrap();
    mr.write(0, &[0xee; 4096]).unwrap();
    let init = dataplane::QpInit {
        pd,
        send_cq: cq.clone(),
        recv_cq: cq,
    };
    let pdata = PrivateData {
        remote_invalidation: false,
        send_size: INLINE_SIZE,
        recv_size: INLINE_SIZE,
    }
    .encode();
    let qp = dev
        .connect(srv, init, &ConnectionConfig::default(), &pdata)
        .unwrap();
    (qp, mr)
}

/// The Terminate the server sent this queue pair.
fn terminate_of(qp: &QueuePair) -> QpError {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(e) = qp.error() {
            return e;
        }
        assert!(Instant::now() < deadline, "no Terminate from the server");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_second_client_cannot_write_or_read_the_first_clients_buffers() {
    let path = testkit::TempPath::new("store-isolation.img");
    let dev = Device::open(Transport::Kernel).unwrap();
    let file = MappedFile::open(path.path(), Some(1 << 20)).unwrap();
    let srv = StoreServer::start(
        &dev,
        "127.0.0.1:0".parse().unwrap(),
        file,
        ServerOptions::default(),
    )
    .unwrap();
    let addr = srv.local_addr();
    let mut a = StoreClient::connect(addr, &ClientOptions::default()).unwrap();
    let abuf = a.pd().register(65536, Access::ALL).unwrap();
    let data = testkit::pattern(65536, 11);
    abuf.write(0, &data).unwrap();
    a.write(4096, &abuf, 0..65536).unwrap();
    let first = stags(addr, 1)[0];

    // Each attempt ends the hostile connection; a fresh one per target.
    let targets = [
        ("RDMA Write into its receive buffers", first.recv, true),
        ("RDMA Write into its file registration", first.file, true),
        ("RDMA Read of its reply buffer", first.send, false),
        ("RDMA Read of its file registration", first.file, false),
    ];
    for (i, (what, stag, write)) in targets.into_iter().enumerate() {
        let (qp, mr) = raw_client(&dev, addr);
        let mine = stags(addr, i + 2)[i + 1];
        assert_ne!(
            (mine.recv, mine.send, mine.file),
            (first.recv, first.send, first.file)
        );
        let remote = RemoteAddr { stag, to: 0 };
        if write {
            qp.post_write(1, &mr, 0..64, remote).unwrap();
        } else {
            qp.post_read(1, &mr, 0..64, remote).unwrap();
        }
        match terminate_of(&qp) {
            // A protection error (DDP 1/0x1/x or RDMAP 0/0x1/x): mostly "invalid STag" (0x00),
            // the first client's STag being in no table of this domain. STag keys are 8 random
            // bits, so about one run in 256 this domain holds a region at the same index with
            // the same key: one of its own, which the remote may not touch either (access
            // rights 0x02, bounds 0x01, other stream 0x03). Never a success.
            QpError::TerminateReceived {
                layer: 0 | 1,
                etype: 0x1,
                code: 0x00..=0x03,
            } => {}
            e => panic!("{what}: expected a protection Terminate, got {e:?}"),
        }
        let mut back = [0u8; 64];
        mr.read(0, &mut back).unwrap();
        assert_eq!(back, [0xee; 64], "{what}: bytes came back");
    }

    // The first client's connection and data are untouched.
    let check = a.pd().register(65536, Access::ALL).unwrap();
    let r = a.read(4096, &check, 0..65536).unwrap();
    assert_eq!(r.len, 65536);
    let mut got = vec![0u8; 65536];
    check.read(0, &mut got).unwrap();
    assert!(got == data, "the first client's data changed");
    let small = a.read(4096, &check, 0..100).unwrap();
    assert_eq!(small.len, 100);
    let st = srv.stats().snapshot();
    assert_eq!(st.accepted, 5);
    assert_eq!(st.totals.errors, 0);
}
