//! RPC-over-RDMA long messages against the store over loopback (kernel transport):
//! calls and replies longer than the inline size (8 KiB), every byte checked.
//!
//! - Long calls (RPCRDMA-29, -36): with DDP off, WRITE data stays in the call, which goes as
//!   RDMA_NOMSG with the message in a position-0 read chunk; the server RDMA-Reads it.
//! - Long replies (RPCRDMA-30): READ data in the reply, RDMA-Written by the server into the
//!   call's reply chunk, announced by RDMA_NOMSG.
//! - The read-chunk fallback (draft §5.2): without a reply chunk the server returns the long
//!   reply as a position-0 read chunk; the client RDMA-Reads it and sends RDMA_DONE, which frees
//!   the server to expose the next one.
//! - Bounds: a long call longer than the server takes is ERR_CHUNK before anything is read.

mod store_support;

use std::collections::HashMap;
use std::sync::Arc;

use dataplane::Access;
use rpcrdma::storage::{StorageCall, StorageProc, WriteArgs};
use rpcrdma::storage_send::{call_header, encode_long_call, CallChunks};
use rpcrdma::{receive_at_client, ClientInbound, ErrorBody, Payload, Rules, Segment};
use store_support::{pattern, raw_connect, raw_exchange, server, TempFile};
use xwarpd::store::{
    ClientOptions, Finished, MessagePolicy, StoreClient, INLINE_SIZE, MAX_LONG_MESSAGE,
};

/// Sizes on both sides of the inline size, up to what a long WRITE call can carry.
const SIZES: [usize; 8] = [1, 4000, 8100, 8192, 8193, 12_345, 40_000, 65_000];

/// Data in the messages (no DDP), with or without reply chunks.
fn in_message(reply_chunks: bool) -> MessagePolicy {
    MessagePolicy {
        ddp: false,
        reply_chunks,
    }
}

fn client(addr: std::net::SocketAddr, policy: MessagePolicy) -> StoreClient {
    let mut c = StoreClient::connect(addr, &ClientOptions::default()).unwrap();
    c.set_policy(policy);
    c
}

/// Writes every size, then reads each back into an unaligned place, comparing every byte;
/// returns how many of them were longer than the inline size.
fn round_trip(c: &mut StoreClient, seed: u64) -> u64 {
    let src = c.pd().register(1 << 17, Access::ALL).unwrap();
    let dst = c.pd().register(1 << 17, Access::ALL).unwrap();
    let mut offset = 5u64;
    let mut long = 0;
    for (i, &n) in SIZES.iter().enumerate() {
        let data = pattern(seed + i as u64, n);
        src.write(0, &data).unwrap();
        let w = c.write(offset, &src, 0..n).unwrap();
        assert_eq!(w.count as usize, n);
        dst.write(3, &vec![0xEE; n]).unwrap();
        let r = c.read(offset, &dst, 3..3 + n).unwrap();
        assert_eq!(r.len as usize, n, "size {n}");
        let mut got = vec![0u8; n];
        dst.read(3, &mut got).unwrap();
        assert!(got == data, "size {n} at offset {offset}: data differs");
        offset += n as u64 + 4091;
        // 8100 bytes still fit with their headers (84 for the call, 64 for the reply); from
        // 8192 on nothing does.
        long += u64::from(n >= INLINE_SIZE as usize);
    }
    long
}

#[test]
fn long_calls_and_long_replies_through_reply_chunks_carry_every_byte() {
    let f = TempFile::new("long-rc");
    let (_dev, srv) = server(&f, 16 << 20);
    let mut c = client(srv.local_addr(), in_message(true));
    let long = round_trip(&mut c, 100);
    let st = srv.stats().snapshot().totals;
    assert_eq!(
        st.long_calls, long,
        "every WRITE past the inline size went long"
    );
    assert_eq!(
        st.long_replies, long,
        "every READ past it came through the reply chunk"
    );
    assert_eq!((st.errors, st.refused), (0, 0));
    // The bytes are in the file itself.
    c.commit(0, 0).unwrap();
    let file = std::fs::read(f.path()).unwrap();
    let last = SIZES.len() - 1;
    let at = 5 + SIZES[..last].iter().map(|&n| n as u64 + 4091).sum::<u64>();
    let want = pattern(100 + last as u64, SIZES[last]);
    assert!(file[at as usize..at as usize + SIZES[last]] == want[..]);
}

#[test]
fn without_a_reply_chunk_long_replies_fall_back_to_a_read_chunk_and_a_done() {
    let f = TempFile::new("long-fallback");
    let (_dev, srv) = server(&f, 16 << 20);
    let mut c = client(srv.local_addr(), in_message(false));
    // Several read-chunk replies in a row: each needs the DONE of the one before (the server
    // exposes one at a time and would answer TOO_BIG otherwise).
    let long = round_trip(&mut c, 200);
    let long2 = round_trip(&mut c, 300);
    let st = srv.stats().snapshot().totals;
    assert_eq!(st.long_replies, long + long2);
    assert_eq!(st.long_calls, long + long2);
    assert_eq!((st.errors, st.refused), (0, 0));
}

#[test]
fn the_default_policy_uses_chunks_and_never_goes_long() {
    let f = TempFile::new("long-default");
    let (_dev, srv) = server(&f, 16 << 20);
    let mut c = client(srv.local_addr(), MessagePolicy::default());
    round_trip(&mut c, 400);
    let st = srv.stats().snapshot().totals;
    assert_eq!((st.long_calls, st.long_replies), (0, 0));
}

#[test]
fn pipelined_long_calls_and_replies_come_back_equal() {
    pipelined(in_message(true), "long-pipe");
}

/// Several read-chunk replies outstanding at once: each stays readable until its own DONE.
#[test]
fn pipelined_read_chunk_replies_come_back_equal() {
    pipelined(in_message(false), "long-pipe-rc");
}

/// Long WRITEs then long READs, 12 of each started before any answer is taken.
fn pipelined(policy: MessagePolicy, name: &str) {
    let f = TempFile::new(name);
    let (_dev, srv) = server(&f, 16 << 20);
    let mut c = client(srv.local_addr(), policy);
    let slot = 1 << 16;
    let n = 12;
    let src = Arc::new(c.pd().register(slot * n, Access::ALL).unwrap());
    let dst = Arc::new(c.pd().register(slot * n, Access::ALL).unwrap());
    let mut ids = HashMap::new();
    let mut expect = Vec::new();
    for i in 0..n {
        let len = 9000 + i * 4000;
        let data = pattern(500 + i as u64, len);
        src.write(i * slot, &data).unwrap();
        let offset = (i * slot) as u64 + 7;
        let id = c
            .start_write(offset, &src, i * slot..i * slot + len, false)
            .unwrap();
        ids.insert(id, i);
        expect.push((offset, data));
    }
    while c.in_flight() > 0 {
        let (id, r) = c.wait_any().unwrap();
        let i = ids.remove(&id).expect("an answer for a call we started");
        assert!(matches!(r.unwrap(), Finished::Write(w) if w.count as usize == expect[i].1.len()));
    }
    for (i, (offset, data)) in expect.iter().enumerate() {
        let id = c
            .start_read(*offset, &dst, i * slot..i * slot + data.len())
            .unwrap();
        ids.insert(id, i);
    }
    while c.in_flight() > 0 {
        let (id, r) = c.wait_any().unwrap();
        let i = ids.remove(&id).unwrap();
        assert!(matches!(r.unwrap(), Finished::Read(x) if x.len as usize == expect[i].1.len()));
    }
    for (i, (_, data)) in expect.iter().enumerate() {
        let mut got = vec![0u8; data.len()];
        dst.read(i * slot, &mut got).unwrap();
        assert!(got == *data, "call {i}: data differs");
    }
    let st = srv.stats().snapshot().totals;
    assert_eq!((st.long_calls, st.long_replies), (n as u64, n as u64));
    assert_eq!((st.errors, st.refused), (0, 0));
}

/// The RDMA_NOMSG header of a long WRITE call `xid` of 100 bytes whose position-0 chunk
/// claims `len` bytes at `handle`.
fn long_write_call(xid: u32, handle: u32, len: u32) -> rpcrdma::HeaderRepr {
    let data = vec![7u8; 100];
    let call = StorageCall::Write(WriteArgs {
        offset: 0,
        stable: false,
        data: Payload::Inline(&data),
    });
    let claim = Segment {
        handle,
        length: len,
        offset: 0,
    };
    let (mlen, header) = encode_long_call(
        &mut [0u8; 4096],
        1,
        &call_header(xid, StorageProc::Write),
        &call,
        &CallChunks::default(),
        &[claim],
    )
    .unwrap();
    assert!(mlen <= 256, "the message fits what the chunk claims");
    header
}

#[test]
fn a_long_call_longer_than_the_server_takes_is_err_chunk_before_any_read() {
    let f = TempFile::new("long-bound");
    let (_dev, srv) = server(&f, 1 << 20);
    // A handle no one registered: any RDMA Read of it would break the connection instead.
    let header = long_write_call(0x55, 0xDEAD_BEEF, MAX_LONG_MESSAGE + 1);
    let out = raw_exchange(srv.local_addr(), &header.to_vec());
    let ClientInbound::Error { xid, body, .. } = receive_at_client(&out, &Rules::default()) else {
        panic!("not an RDMA_ERROR: {out:?}");
    };
    assert_eq!((xid, body), (0x55, ErrorBody::Chunk));
    let st = srv.stats().snapshot().totals;
    assert_eq!((st.refused, st.long_calls, st.writes), (1, 0, 0));
}

#[test]
fn a_long_call_whose_chunk_cannot_be_read_ends_only_its_connection() {
    let f = TempFile::new("long-badstag");
    let (_dev, srv) = server(&f, 1 << 20);
    // Within the bound, at a handle this client never registered: the server's RDMA Read fails.
    let header = long_write_call(0x56, 0x0BAD_57A6, 256);
    let conn = raw_connect(srv.local_addr());
    conn.send(&header.to_vec());
    // No answer: the connection ends (the receive is flushed) instead.
    let c = conn.rcq.wait(std::time::Duration::from_secs(20));
    assert!(c.is_none_or(|c| !c.is_ok()), "an answer came: {c:?}");
    // Nothing was served, and the server still serves others.
    let mut other = client(srv.local_addr(), in_message(true));
    let buf = other.pd().register(20_000, Access::ALL).unwrap();
    buf.write(0, &pattern(9, 20_000)).unwrap();
    assert_eq!(other.write(0, &buf, 0..20_000).unwrap().count, 20_000);
    let st = srv.stats().snapshot().totals;
    assert_eq!((st.writes, st.long_calls), (1, 1));
}
