//! Per-RPC cost of this crate's work for a storage READ through a write chunk: client encode,
//! server receive + decode, server reply encode, client receive + decode, with both sessions'
//! credit and XID bookkeeping. Prints nanoseconds per round trip.
//!
//! `cargo run --release -p rpcrdma --example codec_rate [iterations]`

use rpcrdma::storage::{ReadArgs, ReadOk, StorageCall, StorageReply};
use rpcrdma::storage_send::CallChunks;
use rpcrdma::{
    ChunkPlanner, ClientEvent, ClientSession, Payload, Rules, Segment, ServerEvent, ServerSession,
    WriteChunk,
};
use std::time::{Duration, Instant};

fn main() {
    let iterations: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut client = ClientSession::new(64, 1, ChunkPlanner::default(), Rules::default());
    let mut server = ServerSession::new(64, Rules::default(), Duration::from_secs(1));
    let n = server.credits().receives_to_post();
    server.posted_receives(n);
    let chunks = CallChunks {
        read_result: Some(WriteChunk::new(vec![Segment {
            handle: 0x42,
            length: 1 << 20,
            offset: 0x7000_0000,
        }])),
        ..CallChunks::default()
    };
    let call = StorageCall::Read(ReadArgs {
        offset: 0,
        count: 1 << 20,
    });
    let mut send = [0u8; 1024];
    let mut out = [0u8; 1024];
    let start = Instant::now();
    let mut bytes = 0u64;
    let (mut call_len, mut reply_len) = (0, 0);
    for _ in 0..iterations {
        let (_, len) = client
            .start_call(&mut send, &call, &chunks)
            .expect("credit");
        let m = match server.handle_receive(&send[..len]) {
            ServerEvent::Call {
                xid,
                requested,
                chunks,
                call,
            } => {
                let StorageCall::Read(a) = call.call else {
                    unreachable!()
                };
                let reply = StorageReply::Read(Ok(ReadOk {
                    eof: false,
                    data: Payload::WriteChunk {
                        index: 0,
                        len: a.count,
                    },
                }));
                server
                    .encode_reply(&mut out, xid, requested, &chunks, &reply)
                    .expect("reply")
            }
            other => panic!("{other:?}"),
        };
        (call_len, reply_len) = (len, m);
        let p = server.credits().receives_to_post();
        server.posted_receives(p);
        match client.handle_receive(&out[..m]) {
            ClientEvent::Reply { reply, .. } => {
                if let Some(StorageReply::Read(Ok(ok))) = reply.reply {
                    bytes += u64::from(ok.data.len());
                }
            }
            other => panic!("{other:?}"),
        }
    }
    let el = start.elapsed();
    println!(
        "{iterations} READ round trips (call {call_len} B, reply {reply_len} B): {:.0} ns per RPC, \
         {:.2} M RPC/s; {} MiB described",
        el.as_nanos() as f64 / iterations as f64,
        iterations as f64 / el.as_secs_f64() / 1e6,
        bytes >> 20,
    );
}
