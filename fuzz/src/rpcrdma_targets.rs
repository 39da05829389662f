//! RPC-over-RDMA: the transport header with its chunk lists (XDR), and the block store's
//! calls and replies as the store server and client decode them.

use rpcrdma::storage::StorageProc;
use rpcrdma::storage_send::{
    decode_call_message, decode_reply_message, long_message_len, CallRejection,
};
use rpcrdma::{
    receive_at_client, receive_at_server, Body, ChunkLists, ClientInbound, HeaderRepr, Rules,
    ServerInbound,
};

use crate::Input;

/// Arbitrary octets as a transport header: a parsed header re-emits to the octets it was
/// parsed from, and re-parses to itself.
pub fn rpcrdma_header(data: &[u8]) {
    let Ok((h, rest)) = HeaderRepr::parse_bytes(data) else {
        return;
    };
    let n = data.len() - rest.len();
    assert_eq!(h.buffer_len(), n);
    let mut buf = vec![0u8; n];
    assert_eq!(h.emit(&mut buf), Ok(n));
    assert_eq!(&buf[..], &data[..n]);
    let (again, tail) = HeaderRepr::parse_bytes(&buf).expect("what we emit parses");
    assert!(tail.is_empty());
    assert_eq!(again, h);
}

/// Largest long call the fuzzed server takes (the store's `MAX_LONG_MESSAGE`).
const MAX_LONG_CALL: u32 = 64 << 10;

/// Arbitrary octets as a Send arriving at the store server: the header checks and the call
/// decoding never panic, whatever the chunk lists and the message claim, and every answer
/// carries the transport header's XID, which takes precedence (RPCRDMA-25). For a long call
/// (RDMA_NOMSG) the octets after the header stand for what the RDMA Read of its position-0
/// chunk brought: its claimed length is bounded first, as the store does before reading.
pub fn store_call(data: &[u8]) {
    let ServerInbound::Call { header, message } = receive_at_server(data, &Rules::default(), 32)
    else {
        return;
    };
    let message = match &header.body {
        Body::NoMsg(chunks) => match long_message_len(chunks, MAX_LONG_CALL) {
            Ok(n) => {
                assert!(n <= MAX_LONG_CALL);
                &message[..message.len().min(n as usize)]
            }
            Err(_) => return,
        },
        _ => message,
    };
    match decode_call_message(&header, message) {
        Ok(call) => assert_eq!(call.xid_mismatch, call.rpc.xid != header.xid),
        Err(CallRejection::Rpc(reply)) => assert_eq!(reply.xid, header.xid),
        Err(CallRejection::Transport(_)) => {}
    }
}

/// Arbitrary octets as a Send arriving at the store client, answering a call of an
/// input-chosen procedure without chunks: decoding never panics.
pub fn store_reply(data: &[u8]) {
    let mut input = Input::new(data);
    let proc = match input.u8() % 5 {
        0 => StorageProc::Null,
        1 => StorageProc::Read,
        2 => StorageProc::Write,
        3 => StorageProc::Commit,
        _ => StorageProc::Getattr,
    };
    let data = input.rest();
    if let ClientInbound::Reply { header, message } = receive_at_client(data, &Rules::default()) {
        let _ = decode_reply_message(&header, message, &ChunkLists::default(), proc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rpcrdma::storage::StorageCall;

    /// The long-call seed reaches the decoder: a WRITE of 200 bytes inside the message its
    /// position-0 chunk names (the path the store serves after its RDMA Read).
    #[test]
    fn the_long_call_seed_decodes_to_a_write() {
        let seed = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("corpus/store_call/seed-long_call"),
        )
        .unwrap();
        let ServerInbound::Call { header, message } =
            receive_at_server(&seed, &Rules::default(), 32)
        else {
            panic!("seed refused")
        };
        let Body::NoMsg(chunks) = &header.body else {
            panic!("not a long call")
        };
        let n = long_message_len(chunks, MAX_LONG_CALL).unwrap() as usize;
        assert_eq!(n, message.len());
        let call = decode_call_message(&header, &message[..n]).unwrap();
        assert!(matches!(call.call, StorageCall::Write(w) if w.offset == 4096));
        store_call(&seed);
    }
}
