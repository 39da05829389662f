//! The block store over loopback, in process: what the client writes reads back equal (1 B to
//! 4 MiB, unaligned offsets, inline and chunked paths), GETATTR, range errors, and bad
//! transport headers answered with RDMA_ERROR as the rpcrdma crate decides (RPCRDMA ERR_VERS,
//! ERR_CHUNK).

mod store_support;

use dataplane::Access;
use rpcrdma::storage::StoreStatus;
use rpcrdma::{receive_at_client, ClientInbound, ErrorBody, HeaderRepr, Rules};
use store_support::{pattern, raw_exchange, server, TempFile};
use xwarpd::store::{ClientOptions, StoreClient, StoreError};

#[test]
fn write_then_read_back_equal_from_1_byte_to_4_mib_at_unaligned_offsets() {
    let f = TempFile::new("rt");
    let (_dev, srv) = server(&f, 64 << 20);
    let mut c = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    let attr = c.getattr().unwrap();
    assert_eq!(attr.size, 64 << 20);
    assert!(attr.max_io >= 4 << 20);
    let src = c.pd().register(4 << 20, Access::ALL).unwrap();
    let dst = c.pd().register((4 << 20) + 8, Access::ALL).unwrap();
    let sizes = [
        1usize,
        3,
        100,
        1023,
        4095,
        4096,
        4097,
        65_537,
        1 << 20,
        (1 << 20) + 7,
        4 << 20,
    ];
    let mut offset = 1u64; // unaligned on purpose
    for (i, &n) in sizes.iter().enumerate() {
        let data = pattern(i as u64 + 7, n);
        src.write(0, &data).unwrap();
        let w = c.write(offset, &src, 0..n).unwrap();
        assert_eq!(w.count as usize, n);
        // Read into an unaligned place of another buffer.
        let r = c.read(offset, &dst, 3..3 + n).unwrap();
        assert_eq!(r.len as usize, n, "size {n}");
        let mut got = vec![0u8; n];
        dst.read(3, &mut got).unwrap();
        assert!(got == data, "size {n} at offset {offset}: data differs");
        offset += n as u64 + 4093;
    }
    // The bytes are in the file itself (the mapping is shared).
    c.commit(0, 0).unwrap();
    let bytes = std::fs::read(f.path()).unwrap();
    assert_eq!(bytes[1], pattern(7, 1)[0]);
    let st = srv.stats().snapshot();
    assert_eq!(st.open.len(), 1);
    assert_eq!(st.open[0].counts, st.totals);
    assert_eq!(st.totals.writes, sizes.len() as u64);
    assert_eq!(st.totals.reads, sizes.len() as u64);
    assert_eq!(st.totals.bytes_written, sizes.iter().sum::<usize>() as u64);
}

#[test]
fn read_at_the_end_is_short_with_eof_and_beyond_is_out_of_range() {
    let f = TempFile::new("eof");
    let (_dev, srv) = server(&f, 10_000);
    let mut c = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    let b = c.pd().register(1 << 16, Access::ALL).unwrap();
    // Chunked (>= 4096) and inline reads across the end.
    let r = c.read(9_000, &b, 0..8192).unwrap();
    assert_eq!((r.len, r.eof), (1000, true));
    let r = c.read(9_990, &b, 0..100).unwrap();
    assert_eq!((r.len, r.eof), (10, true));
    let r = c.read(0, &b, 0..100).unwrap();
    assert!(!r.eof);
    assert!(matches!(
        c.read(20_000, &b, 0..10),
        Err(StoreError::Status(StoreStatus::OutOfRange))
    ));
    assert!(matches!(
        c.write(9_999, &b, 0..2),
        Err(StoreError::Status(StoreStatus::OutOfRange))
    ));
    assert!(matches!(
        c.write(5_000, &b, 0..8192),
        Err(StoreError::Status(StoreStatus::OutOfRange))
    ));
    // The connection still works after refusals.
    assert_eq!(c.getattr().unwrap().size, 10_000);
    // A buffer of another protection domain is refused locally (the server could not reach it).
    let other = dataplane::Device::open(dataplane::Transport::Kernel)
        .unwrap()
        .alloc_pd();
    let foreign = other.register(8192, Access::ALL).unwrap();
    assert!(matches!(
        c.read(0, &foreign, 0..8192),
        Err(StoreError::Invalid(_))
    ));
    // A buffer without remote access is refused locally for chunked transfers.
    let local = c.pd().register(8192, Access::LOCAL_WRITE).unwrap();
    assert!(matches!(
        c.read(0, &local, 0..8192),
        Err(StoreError::Invalid(_))
    ));
}

#[test]
fn two_clients_see_each_others_committed_writes() {
    let f = TempFile::new("two");
    let (_dev, srv) = server(&f, 1 << 20);
    let mut a = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    let mut b = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    let ba = a.pd().register(65536, Access::ALL).unwrap();
    let bb = b.pd().register(65536, Access::ALL).unwrap();
    ba.write(0, &pattern(3, 65536)).unwrap();
    a.write_with(12_345, &ba, 0..65536, true).unwrap();
    b.read(12_345, &bb, 0..65536).unwrap();
    let mut got = vec![0u8; 65536];
    bb.read(0, &mut got).unwrap();
    assert!(got == pattern(3, 65536));
    assert_eq!(srv.stats().snapshot().open.len(), 2);
}

#[test]
fn rpcrdma_bad_version_is_answered_with_err_vers() {
    let f = TempFile::new("vers");
    let (_dev, srv) = server(&f, 1 << 20);
    // A call header claiming version 2.
    let mut msg = HeaderRepr::done(0x1234, 1).to_vec();
    msg[4..8].copy_from_slice(&2u32.to_be_bytes());
    msg.extend_from_slice(&[0u8; 32]);
    let out = raw_exchange(srv.local_addr(), &msg);
    match receive_at_client(&out, &Rules::default()) {
        ClientInbound::Error { xid, body, .. } => {
            assert_eq!(xid, 0x1234);
            assert!(matches!(body, ErrorBody::Vers { .. }), "{body:?}");
        }
        other => panic!("expected RDMA_ERROR, got {other:?}"),
    }
    assert_eq!(srv.stats().snapshot().totals.refused, 1);
}

#[test]
fn rpcrdma_bad_chunk_is_answered_with_err_chunk() {
    let f = TempFile::new("chunk");
    let (_dev, srv) = server(&f, 1 << 20);
    // RDMA_MSG whose read list is cut short: present flag, then nothing.
    let mut msg = Vec::new();
    for w in [
        0x55u32, 1, 8, 0, /* RDMA_MSG */
        1, /* read list: an entry follows */
    ] {
        msg.extend_from_slice(&w.to_be_bytes());
    }
    let out = raw_exchange(srv.local_addr(), &msg);
    match receive_at_client(&out, &Rules::default()) {
        ClientInbound::Error { xid, body, .. } => {
            assert_eq!(xid, 0x55);
            assert_eq!(body, ErrorBody::Chunk, "{body:?}");
        }
        other => panic!("expected RDMA_ERROR, got {other:?}"),
    }
}
