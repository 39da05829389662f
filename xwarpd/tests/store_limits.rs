//! Lengths a client controls are refused before the server allocates or copies anything for
//! them: an inline READ whose reply cannot fit is refused before up to 16 MiB are allocated and
//! copied.
//!
//! An inline READ (no write chunk) whose data cannot fit the largest long reply
//! ([`MAX_LONG_MESSAGE`]) is answered TOO_BIG at once, whatever its count up to `max_io`.
//! Before, the server allocated and copied `count` bytes (16 MiB with `max_io` 16 MiB), found
//! the reply too long, and answered SYSTEM_ERR: this test failed there (SYSTEM_ERR instead of
//! TOO_BIG). One longer than the client's receive buffer but within that bound comes as a long
//! reply: without a reply chunk, as a position-0 read chunk (draft §5.2).

mod store_support;

use rpcrdma::storage::{ReadArgs, StorageCall, StorageProc, StorageReply, StoreStatus};
use rpcrdma::storage_send::{call_header, decode_reply_message, encode_call, CallChunks};
use rpcrdma::{receive_at_client, Body, ChunkLists, ClientInbound, Rules};
use store_support::{pattern, raw_exchange, server_with, TempFile};
use xwarpd::store::{ServerOptions, INLINE_SIZE, MAX_LONG_MESSAGE};

/// Sends an inline READ of `count` bytes at `offset` (no write chunk) and decodes the answer.
fn inline_read(
    addr: std::net::SocketAddr,
    offset: u64,
    count: u32,
) -> Result<Vec<u8>, StoreStatus> {
    let out = exchange_read(addr, offset, count);
    let ClientInbound::Reply { header, message } = receive_at_client(&out, &Rules::default())
    else {
        panic!("READ of {count}: not a reply: {out:?}");
    };
    let reply = decode_reply_message(&header, message, &ChunkLists::default(), StorageProc::Read)
        .unwrap_or_else(|e| panic!("READ of {count}: undecodable reply {e:?}"));
    match reply.reply {
        Some(StorageReply::Read(Ok(ok))) => match ok.data {
            rpcrdma::Payload::Inline(d) => Ok(d.to_vec()),
            other => panic!("READ of {count}: data as {other:?}"),
        },
        Some(StorageReply::Read(Err(s))) => Err(s),
        other => panic!("READ of {count}: {other:?} (RPC {:?})", reply.rpc),
    }
}

/// The answer to a READ of `count` bytes at `offset` without chunks.
fn exchange_read(addr: std::net::SocketAddr, offset: u64, count: u32) -> Vec<u8> {
    let mut buf = vec![0u8; 1024];
    let call = StorageCall::Read(ReadArgs { offset, count });
    let n = encode_call(
        &mut buf,
        1,
        &call_header(0x77, StorageProc::Read),
        &call,
        &CallChunks::default(),
    )
    .unwrap();
    raw_exchange(addr, &buf[..n])
}

#[test]
fn an_inline_read_too_long_for_the_clients_buffer_is_too_big_without_a_copy() {
    let f = TempFile::new("inline-limit");
    let opts = ServerOptions {
        max_io: rpcrdma::storage::MAX_IO,
        ..ServerOptions::default()
    };
    let (_dev, srv) = server_with(&f, 32 << 20, opts);
    let data = pattern(21, 4000);
    std::fs::OpenOptions::new()
        .write(true)
        .open(f.path())
        .and_then(|file| std::os::unix::fs::FileExt::write_all_at(&file, &data, 0))
        .unwrap();
    let addr = srv.local_addr();
    // What fits comes back inline.
    assert_eq!(inline_read(addr, 0, 4000).unwrap(), data);
    // 16 MiB, the largest count max_io allows; and just past the largest long reply.
    for count in [rpcrdma::storage::MAX_IO, MAX_LONG_MESSAGE + 1] {
        assert_eq!(
            inline_read(addr, 0, count),
            Err(StoreStatus::TooBig),
            "{count}"
        );
    }
    // Data that fits but not with the reply's headers: TOO_BIG as well.
    assert_eq!(
        inline_read(addr, 0, MAX_LONG_MESSAGE - 8),
        Err(StoreStatus::TooBig)
    );
    // Past the receive buffer but within the bound: a long reply as a position-0 read chunk
    // of the whole reply message (RPC header 24, status, eof, length word, padded data).
    let out = exchange_read(addr, 0, INLINE_SIZE + 1);
    let ClientInbound::Reply { header, .. } = receive_at_client(&out, &Rules::default()) else {
        panic!("not a reply: {out:?}");
    };
    let Body::NoMsg(c) = header.body else {
        panic!("not a long reply: {header:?}");
    };
    assert_eq!(c.reads.len(), 1);
    assert_eq!(c.reads[0].position, 0);
    assert_eq!(c.reads[0].target.length, 24 + 12 + (INLINE_SIZE + 4));
    let st = srv.stats().snapshot();
    assert_eq!(st.totals.errors, 3);
    assert_eq!(st.totals.long_replies, 1);
    assert_eq!(
        st.totals.bytes_read,
        4000 + u64::from(INLINE_SIZE) + 1,
        "no byte counted for the refused READs"
    );
}
