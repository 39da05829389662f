//! A worked byte-level example, byte for byte, both ways: a CALL with two read segments at
//! position 52 (8192 octets of WRITE data), the reduced call, and a REPLY whose write chunk
//! was filled short (6000 octets RDMA Written, 100 sent), all from the XDR of draft §4.2.

use rpcrdma::{Body, ChunkLists, HeaderRepr, ReadSegment, Segment, WriteChunk};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The CALL's transport header, contiguous hex.
const CALL_HEADER: &str =
    "1a2b3c4d0000000100000020000000000000000100000034112233440000100000007f3ac0de0000\
0000000100000034556677880000100000007f3ac0ff100000000000000000010000000299aabbcc\
0000100000007f3ad000000099aabbcc0000100000007f3ad00010000000000000000000";

/// The reduced RPC call that follows it in the same Send.
const CALL_MESSAGE: &str = "1a2b3c4d000000000000000220000099000000010000000300000000000000000000000000000000000000000000100000002000000000000000200000002000";

/// The REPLY (transport header and RPC reply, one Send).
const REPLY_SEND: &str = "1a2b3c4d00000001000000200000000000000000000000010000000299aabbcc0000100000007f3ad000000099aabbcc0000077000007f3ad000100000000000000000001a2b3c4d00000001000000000000000000000000000000000000000000001770";

fn seg(handle: u32, length: u32, offset: u64) -> Segment {
    Segment {
        handle,
        length,
        offset,
    }
}

fn call_write_chunk() -> WriteChunk {
    WriteChunk::new(vec![
        seg(0x99aa_bbcc, 4096, 0x0000_7f3a_d000_0000),
        seg(0x99aa_bbcc, 4096, 0x0000_7f3a_d000_1000),
    ])
}

fn call_header() -> HeaderRepr {
    HeaderRepr {
        xid: 0x1a2b_3c4d,
        credit: 32,
        body: Body::Msg(ChunkLists {
            reads: vec![
                ReadSegment {
                    position: 52,
                    target: seg(0x1122_3344, 4096, 0x0000_7f3a_c0de_0000),
                },
                ReadSegment {
                    position: 52,
                    target: seg(0x5566_7788, 4096, 0x0000_7f3a_c0ff_1000),
                },
            ],
            writes: vec![call_write_chunk()],
            reply: None,
        }),
    }
}

#[test]
fn rpcrdma_27_call_header_11_1_byte_for_byte() {
    let want = hex(CALL_HEADER);
    assert_eq!(want.len(), 116);
    let h = call_header();
    assert_eq!(h.buffer_len(), 116);
    assert_eq!(h.to_vec(), want);
    let (back, rest) = HeaderRepr::parse_bytes(&want).unwrap();
    assert_eq!(back, h);
    assert!(rest.is_empty());
}

#[test]
fn rpcrdma_14_call_11_1_read_entries_form_one_8192_byte_chunk() {
    let mut send = hex(CALL_HEADER);
    send.extend(hex(CALL_MESSAGE));
    assert_eq!(send.len(), 180, "the whole Send is 116 + 64 bytes");
    let (h, message) = HeaderRepr::parse_bytes(&send).unwrap();
    assert_eq!(message, &hex(CALL_MESSAGE)[..]);
    let lists = h.body.chunks().unwrap();
    let chunks: Vec<_> = lists.read_chunks().collect();
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].position, 52);
    assert_eq!(chunks[0].total_len(), 8192);
    // RPCRDMA-12: the length word stays inline at 48 and equals the chunk sum (RPCRDMA-13).
    assert_eq!(&message[48..52], &8192u32.to_be_bytes());
    // The rules of the requirement table accept it as a call.
    assert_eq!(rpcrdma::Rules::default().check_call(&h), Ok(()));
}

#[test]
fn rpcrdma_18_reply_header_11_3_byte_for_byte() {
    let want = hex(REPLY_SEND);
    assert_eq!(want.len(), 100);
    let reply = HeaderRepr {
        xid: 0x1a2b_3c4d,
        credit: 32,
        body: Body::Msg(ChunkLists {
            writes: vec![call_write_chunk().echo(6000).unwrap()],
            ..ChunkLists::default()
        }),
    };
    assert_eq!(reply.buffer_len(), 68);
    assert_eq!(reply.to_vec(), want[..68]);
    let (back, message) = HeaderRepr::parse_bytes(&want).unwrap();
    assert_eq!(back, reply);
    assert_eq!(message, &want[68..]);
    let lists = back.body.chunks().unwrap();
    assert_eq!(
        rpcrdma::check_echo(call_header().body.chunks().unwrap(), lists),
        Ok(())
    );
    assert_eq!(rpcrdma::Rules::default().check_reply(&back), Ok(()));
}

/// The example's XFER arguments: `{ uint64 write_lba; opaque write_data<>; uint64 read_lba;
/// uint32 read_count; }` (write_data DDP-eligible).
#[test]
fn rpcrdma_12_reduced_call_11_2_byte_for_byte_and_decoded() {
    use rpcrdma::{CallHeader, Payload, ReducedReader, ReducedWriter};
    let want = hex(CALL_MESSAGE);
    assert_eq!(want.len(), 64);
    let mut buf = [0u8; 64];
    let mut w = ReducedWriter::new(&mut buf);
    CallHeader::new(0x1a2b_3c4d, 0x2000_0099, 1, 3)
        .encode(w.xdr())
        .unwrap();
    w.xdr().u64(0x1000).unwrap();
    let position = w.elided_opaque(8192).unwrap();
    assert_eq!(position, 52, "data would start at position 52");
    w.xdr().u64(0x2000).unwrap();
    w.xdr().u32(8192).unwrap();
    assert_eq!(w.position(), 64);
    assert_eq!(buf[..], want[..]);

    // Decode against the 11.1 header: the write data resolves to the 8192-byte read chunk.
    let h = call_header();
    let mut r = ReducedReader::for_call(&want, h.body.chunks().unwrap());
    let rpc = CallHeader::decode(r.xdr()).unwrap();
    assert_eq!(
        (rpc.xid, rpc.prog, rpc.vers, rpc.proc_num),
        (0x1a2b_3c4d, 0x2000_0099, 1, 3)
    );
    assert_eq!(r.xdr().u64(), Ok(0x1000));
    assert_eq!(
        r.ddp_opaque(1 << 20),
        Ok(Payload::ReadChunk {
            position: 52,
            len: 8192
        })
    );
    assert_eq!(r.xdr().u64(), Ok(0x2000));
    assert_eq!(r.xdr().u32(), Ok(8192));
    assert_eq!(r.finish(), Ok(&[][..]));
}

/// The example's reply: `{ uint32 status; opaque read_data<>; }`, read_data in write chunk 0.
#[test]
fn rpcrdma_19_reply_message_11_3_byte_for_byte_and_decoded() {
    use rpcrdma::{Payload, ReducedReader, ReducedWriter, ReplyHeader};
    let send = hex(REPLY_SEND);
    let mut buf = [0u8; 32];
    let mut w = ReducedWriter::new(&mut buf);
    ReplyHeader::success(0x1a2b_3c4d).encode(w.xdr()).unwrap();
    w.xdr().u32(0).unwrap();
    w.elided_opaque(6000).unwrap();
    assert_eq!(w.position(), 32);
    assert_eq!(buf[..], send[68..]);

    let (h, message) = HeaderRepr::parse_bytes(&send).unwrap();
    let mut r = ReducedReader::for_reply(message, h.body.chunks().unwrap());
    assert!(ReplyHeader::decode(r.xdr()).unwrap().is_success());
    assert_eq!(r.xdr().u32(), Ok(0));
    assert_eq!(
        r.ddp_opaque(1 << 20),
        Ok(Payload::WriteChunk {
            index: 0,
            len: 6000
        })
    );
    assert_eq!(r.finish(), Ok(&[][..]));
}
