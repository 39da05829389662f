//! Wire oracle: Wireshark's own RPC-over-RDMA dissector (`rpcordma`, tshark) reads the storage
//! traffic this crate encodes, over hand-framed MPA/DDP/RDMAP on a TCP connection, and finds
//! every header, chunk and ONC RPC message with no malformed packet and no expert warning.
//!
//! The capture is written to a file (no network, no root). Needs `tshark`: under `CI=true` a
//! missing tshark fails the test; elsewhere the test is skipped with a message.

use rpcrdma::storage::{
    CommitArgs, CommitOk, GetattrOk, ReadArgs, ReadOk, StorageCall, StorageProc, StorageReply,
    WriteArgs, WriteOk,
};
use rpcrdma::storage_send::{
    call_header, encode_call, encode_long_call, encode_reply, encode_reply_message,
    reply_chunk_header, CallChunks,
};
use rpcrdma::{
    receive_at_server, Body, CallHeader, ChunkLists, HeaderRepr, Payload, ReadSegment,
    ReducedWriter, ReplyHeader, Rules, Segment, ServerInbound, WriteChunk,
};
use testkit::synthetic::{ACK, PSH};
use testkit::{require_tool, Capture, Peer, TempPath, Tshark};

const CLIENT_PORT: u16 = 40123;
const SERVER_PORT: u16 = 20049;

fn seg(handle: u32, length: u32, offset: u64) -> Segment {
    Segment {
        handle,
        length,
        offset,
    }
}

/// One TCP connection (the client 198.18.0.1, the server 198.18.0.2) carrying MPA, DDP and
/// RDMAP framed by hand.
struct Conversation {
    cap: Capture,
    /// Next MSN per direction and queue (QN 0 Send, QN 1 Read Request).
    msn: [[u32; 2]; 2],
}

fn peer(from_client: bool) -> Peer {
    if from_client {
        Peer::Client
    } else {
        Peer::Server
    }
}

impl Conversation {
    fn new() -> Self {
        Self {
            cap: Capture::new(CLIENT_PORT, SERVER_PORT),
            msn: [[1, 1], [1, 1]],
        }
    }

    fn tcp(&mut self, from_client: bool, flags: u8, payload: &[u8]) {
        self.cap.segment(peer(from_client), flags, payload);
    }

    fn handshake(&mut self) {
        self.cap.handshake();
        // MPA Rev 1 startup frames, CRC on, no markers, no private data.
        let req = [&b"MPA ID Req Frame"[..], &[0x40, 1, 0, 0]].concat();
        let rep = [&b"MPA ID Rep Frame"[..], &[0x40, 1, 0, 0]].concat();
        self.tcp(true, PSH | ACK, &req);
        self.tcp(false, PSH | ACK, &rep);
    }

    /// An MPA FPDU (no markers, CRC on) around one DDP segment.
    fn fpdu(&mut self, from_client: bool, ulpdu: &[u8]) {
        let mut f = (ulpdu.len() as u16).to_be_bytes().to_vec();
        f.extend_from_slice(ulpdu);
        while !f.len().is_multiple_of(4) {
            f.push(0);
        }
        let crc = crc32c::crc32c(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        self.tcp(from_client, PSH | ACK, &f);
    }

    /// An untagged DDP segment with the RDMAP `opcode`, last, on queue `qn`.
    fn untagged(&mut self, from_client: bool, opcode: u8, qn: u32, payload: &[u8]) {
        let d = usize::from(!from_client);
        let msn = self.msn[d][qn as usize];
        self.msn[d][qn as usize] += 1;
        let mut u = vec![0x41, 0x40 | opcode, 0, 0, 0, 0];
        u.extend_from_slice(&qn.to_be_bytes());
        u.extend_from_slice(&msn.to_be_bytes());
        u.extend_from_slice(&0u32.to_be_bytes());
        u.extend_from_slice(payload);
        self.fpdu(from_client, &u);
    }

    /// An RDMAP Send carrying one RPC-over-RDMA message.
    fn send(&mut self, from_client: bool, msg: &[u8]) {
        self.untagged(from_client, 0x3, 0, msg);
    }

    /// A tagged DDP segment (RDMA Write opcode 0, Read Response opcode 2), last.
    fn tagged(&mut self, from_client: bool, opcode: u8, stag: u32, to: u64, data: &[u8]) {
        let mut t = vec![0xC1, 0x40 | opcode];
        t.extend_from_slice(&stag.to_be_bytes());
        t.extend_from_slice(&to.to_be_bytes());
        t.extend_from_slice(data);
        self.fpdu(from_client, &t);
    }

    fn read_request(&mut self, from_client: bool, sink: Segment, src: Segment) {
        let mut p = sink.handle.to_be_bytes().to_vec();
        p.extend_from_slice(&sink.offset.to_be_bytes());
        p.extend_from_slice(&src.length.to_be_bytes());
        p.extend_from_slice(&src.handle.to_be_bytes());
        p.extend_from_slice(&src.offset.to_be_bytes());
        self.untagged(from_client, 0x1, 1, &p);
    }

    fn pcap(&self) -> Vec<u8> {
        self.cap.pcap()
    }
}

/// Server side of one call: check it through this crate's receive path, answer `reply`.
fn answer(call_send: &[u8], reply: &StorageReply<'_>) -> Vec<u8> {
    let ServerInbound::Call { header, .. } = receive_at_server(call_send, &Rules::default(), 16)
    else {
        panic!("our own call was refused")
    };
    let chunks = header.body.chunks().unwrap();
    let mut out = vec![0u8; 4096];
    let xid = header.xid;
    let n = encode_reply(
        &mut out,
        16,
        chunks,
        &ReplyHeader::success(xid),
        Some(reply),
    )
    .unwrap();
    out.truncate(n);
    out
}

fn call(xid: u32, call: &StorageCall<'_>, chunks: &CallChunks) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let proc: StorageProc = call.proc();
    let n = encode_call(&mut buf, 16, &call_header(xid, proc), call, chunks).unwrap();
    buf.truncate(n);
    buf
}

/// The storage traffic: GETATTR, small inline WRITE, READ by write chunk (RDMA Write), WRITE by
/// read chunk (RDMA Read), COMMIT, a wrong-version call answered with ERR_VERS, and a DONE.
/// `malformed`: the GETATTR call's RPC credential claims 400 bytes the message does not have.
fn storage_conversation(malformed: bool) -> Conversation {
    let mut cap = Conversation::new();
    cap.handshake();

    let c = call(0x100, &StorageCall::Getattr, &CallChunks::default());
    let mut sent = c.clone();
    if malformed {
        // Transport header (28 bytes), then the RPC call: credential length at 28 + 28.
        sent[56..60].copy_from_slice(&400u32.to_be_bytes());
    }
    cap.send(true, &sent);
    let r = answer(
        &c,
        &StorageReply::Getattr(Ok(GetattrOk {
            size: 1 << 30,
            block_size: 4096,
            max_io: 1 << 20,
            verifier: 7,
        })),
    );
    cap.send(false, &r);

    let small = [0x5au8; 64];
    let c = call(
        0x101,
        &StorageCall::Write(WriteArgs {
            offset: 0,
            stable: false,
            data: Payload::Inline(&small),
        }),
        &CallChunks::default(),
    );
    cap.send(true, &c);
    let r = answer(
        &c,
        &StorageReply::Write(Ok(WriteOk {
            count: 64,
            committed: false,
            verifier: 7,
        })),
    );
    cap.send(false, &r);

    // READ 1024 bytes into the client's write chunk.
    let dest = seg(0x0000_1000, 1024, 0x7f00_0000_0000);
    let c = call(
        0x102,
        &StorageCall::Read(ReadArgs {
            offset: 4096,
            count: 1024,
        }),
        &CallChunks {
            read_result: Some(WriteChunk::new(vec![dest])),
            ..CallChunks::default()
        },
    );
    cap.send(true, &c);
    cap.tagged(false, 0x0, dest.handle, dest.offset, &[0xa5; 1024]);
    let r = answer(
        &c,
        &StorageReply::Read(Ok(ReadOk {
            eof: false,
            data: Payload::WriteChunk {
                index: 0,
                len: 1024,
            },
        })),
    );
    cap.send(false, &r);

    // WRITE 1024 bytes from the client's read chunk: the server RDMA-Reads it.
    let src = seg(0x0000_2000, 1024, 0x7f00_0001_0000);
    let c = call(
        0x103,
        &StorageCall::Write(WriteArgs {
            offset: 8192,
            stable: true,
            data: Payload::ReadChunk {
                position: 0,
                len: 1024,
            },
        }),
        &CallChunks {
            write_data: vec![src],
            ..CallChunks::default()
        },
    );
    cap.send(true, &c);
    let sink = seg(0x0000_3000, 1024, 0x1000);
    cap.read_request(false, sink, src);
    cap.tagged(true, 0x2, sink.handle, sink.offset, &[0x3c; 1024]);
    let r = answer(
        &c,
        &StorageReply::Write(Ok(WriteOk {
            count: 1024,
            committed: true,
            verifier: 7,
        })),
    );
    cap.send(false, &r);

    let c = call(
        0x104,
        &StorageCall::Commit(CommitArgs {
            offset: 0,
            count: 0,
        }),
        &CallChunks::default(),
    );
    cap.send(true, &c);
    let r = answer(&c, &StorageReply::Commit(Ok(CommitOk { verifier: 7 })));
    cap.send(false, &r);

    // The worked example's call (tests/worked_example.rs): XFER with 8192 bytes of write
    // data in two read segments at position 52. The server pulls both; tshark rebuilds the call
    // by inserting the data at position 52.
    let (send, sources) = worked_example_call();
    cap.send(true, &send);
    for (i, src) in sources.iter().enumerate() {
        let sink = seg(0x4000 + i as u32, src.length, 4096 * i as u64);
        cap.read_request(false, sink, *src);
        cap.tagged(
            true,
            0x2,
            sink.handle,
            sink.offset,
            &vec![0x11 * (i as u8 + 1); src.length as usize],
        );
    }

    // A long reply through the reply chunk (RPCRDMA-30): GETATTR advertising a reply chunk; the
    // server RDMA-Writes the reply message into it, then Sends RDMA_NOMSG echoing its length.
    let reply_chunk = seg(0x5000, 256, 0x8000);
    let c = call(
        0x106,
        &StorageCall::Getattr,
        &CallChunks {
            reply_chunk: Some(WriteChunk::new(vec![reply_chunk])),
            ..CallChunks::default()
        },
    );
    cap.send(true, &c);
    let getattr = StorageReply::Getattr(Ok(GetattrOk {
        size: 1 << 30,
        block_size: 4096,
        max_io: 1 << 20,
        verifier: 7,
    }));
    let mut msg = [0u8; 256];
    let mlen =
        encode_reply_message(&mut msg, &ReplyHeader::success(0x106), Some(&getattr)).unwrap();
    cap.tagged(
        false,
        0x0,
        reply_chunk.handle,
        reply_chunk.offset,
        &msg[..mlen],
    );
    let ServerInbound::Call { header, .. } = receive_at_server(&c, &Rules::default(), 16) else {
        panic!("refused")
    };
    let h = reply_chunk_header(
        0x106,
        16,
        header.body.chunks().unwrap(),
        Some(&getattr),
        mlen as u32,
    )
    .unwrap();
    cap.send(false, &h.to_vec());

    // A long call (RPCRDMA-29): RDMA_NOMSG with the whole call as a position-0 read chunk,
    // which the server pulls with RDMA Read before decoding it.
    let mut msg = [0u8; 256];
    let call_msg = seg(0x6000, 40, 0x9000);
    let (mlen, h) = encode_long_call(
        &mut msg,
        16,
        &call_header(0x107, StorageProc::Getattr),
        &StorageCall::Getattr,
        &CallChunks::default(),
        &[call_msg],
    )
    .unwrap();
    assert_eq!(mlen, 40);
    cap.send(true, &h.to_vec());
    let sink = seg(0x7000, 40, 0);
    cap.read_request(false, sink, call_msg);
    cap.tagged(true, 0x2, sink.handle, sink.offset, &msg[..mlen]);
    let mut out = vec![0u8; 512];
    let n = encode_reply(
        &mut out,
        16,
        &ChunkLists::default(),
        &ReplyHeader::success(0x107),
        Some(&getattr),
    )
    .unwrap();
    cap.send(false, &out[..n]);

    // A call whose transport header says version 7: answered with ERR_VERS (RPCRDMA-33).
    let mut bad = call(0x105, &StorageCall::Null, &CallChunks::default());
    bad[4..8].copy_from_slice(&7u32.to_be_bytes());
    let ServerInbound::Refused {
        reply: Some(err), ..
    } = receive_at_server(&bad, &Rules::default(), 16)
    else {
        panic!("version 7 accepted")
    };
    cap.send(false, &err.to_vec());
    // RDMA_DONE (as after reading a reply's read chunks).
    cap.send(true, &HeaderRepr::done(0x102, 16).to_vec());
    cap
}

/// The worked example's call built with this crate's API (the golden bytes are checked in
/// `worked_example.rs`); returns the Send and the two source segments.
fn worked_example_call() -> (Vec<u8>, Vec<Segment>) {
    let sources = vec![
        seg(0x1122_3344, 4096, 0x7f3a_c0de_0000),
        seg(0x5566_7788, 4096, 0x7f3a_c0ff_1000),
    ];
    let dest = |o| seg(0x99aa_bbcc, 4096, o);
    let mut msg = [0u8; 64];
    let mut w = ReducedWriter::new(&mut msg);
    CallHeader::new(0x1a2b_3c4d, 0x2000_0099, 1, 3)
        .encode(w.xdr())
        .unwrap();
    w.xdr().u64(0x1000).unwrap();
    let position = w.elided_opaque(8192).unwrap();
    w.xdr().u64(0x2000).unwrap();
    w.xdr().u32(8192).unwrap();
    let header = HeaderRepr {
        xid: 0x1a2b_3c4d,
        credit: 32,
        body: Body::Msg(ChunkLists {
            reads: sources
                .iter()
                .map(|&target| ReadSegment { position, target })
                .collect(),
            writes: vec![WriteChunk::new(vec![
                dest(0x7f3a_d000_0000),
                dest(0x7f3a_d000_1000),
            ])],
            reply: None,
        }),
    };
    let mut send = header.to_vec();
    send.extend_from_slice(&msg);
    (send, sources)
}

#[test]
fn tshark_decodes_storage_traffic_as_rpc_over_rdma_without_errors() {
    if !require_tool(
        "tshark_decodes_storage_traffic_as_rpc_over_rdma_without_errors",
        "tshark",
    ) {
        return;
    }
    let cap = storage_conversation(false);
    let file = TempPath::new("rpcrdma-oracle.pcap");
    let path = file.path();
    std::fs::write(path, cap.pcap()).unwrap();
    let tshark = Tshark::read(path).pref("rpc.dissect_unknown_programs:TRUE");

    // One line per RPC-over-RDMA message: frame, msg_type, xid, vers, rpc xid, rpc msg type.
    let out = tshark
        .fields(
            "rpcordma || rpc",
            &[
                "frame.number",
                "rpcordma.msg_type",
                "rpcordma.xid",
                "rpcordma.writes_count",
                "rpcordma.reads_count",
                "rpcordma.position",
                "rpc.xid",
                "rpc.msgtyp",
                "rpc.program",
            ],
        )
        .join("\n");
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    eprintln!("{out}");
    // 8 calls + 7 replies + ERR_VERS + DONE = 17 RPC-over-RDMA messages.
    let rdma = rows.iter().filter(|r| !r[1].is_empty()).count();
    assert_eq!(rdma, 17, "rpcordma messages found:\n{out}");
    // Every call and reply carries an ONC RPC message of our program that tshark decoded.
    for xid in (0x100..=0x104).chain([0x106, 0x107]) {
        let xid = format!("0x{xid:08x}");
        for msgtyp in ["0", "1"] {
            assert!(
                rows.iter().any(|r| r[6].split(',').next() == Some(&xid)
                    && r[7].split(',').next() == Some(msgtyp)
                    && r[8].split(',').next() == Some("536893527")),
                "xid {xid} msg type {msgtyp} not decoded as RPC of program 0x20005857:\n{out}"
            );
        }
    }
    // The WRITE-by-read-chunk call has one read entry at position 56 and no inline RPC; tshark
    // rebuilds the call from the RDMA Read Response by inserting the chunk at that position.
    assert!(
        rows.iter()
            .any(|r| r[2] == "0x00000103" && r[4] == "1" && r[5] == "56" && r[6].is_empty()),
        "{out}"
    );
    assert!(
        rows.iter()
            .any(|r| r[1].is_empty() && r[6] == "0x00000103" && r[7] == "0"),
        "reassembled WRITE call missing:\n{out}"
    );
    // The worked example: two read entries at 52, and the call rebuilt from the Read Responses
    // as XFER (program 0x20000099 = 536871065) of xid 0x1a2b3c4d.
    assert!(
        rows.iter()
            .any(|r| r[2] == "0x1a2b3c4d" && r[4] == "2" && r[5] == "52,52"),
        "{out}"
    );
    assert!(
        rows.iter()
            .any(|r| r[1].is_empty() && r[6] == "0x1a2b3c4d" && r[7] == "0" && r[8] == "536871065"),
        "worked example call not rebuilt:\n{out}"
    );
    // The reply-chunk reply is an RDMA_NOMSG (1) for 0x106, the long call an RDMA_NOMSG with a
    // position-0 read entry for 0x107; tshark rebuilt both messages (checked above).
    assert!(
        rows.iter().any(|r| r[1] == "1" && r[2] == "0x00000106"),
        "{out}"
    );
    assert!(
        rows.iter()
            .any(|r| r[1] == "1" && r[2] == "0x00000107" && r[4] == "1" && r[5] == "0"),
        "{out}"
    );
    // ERR_VERS (4) for xid 0x105 and DONE (3) for 0x102.
    assert!(
        rows.iter().any(|r| r[1] == "4" && r[2] == "0x00000105"),
        "{out}"
    );
    assert!(
        rows.iter().any(|r| r[1] == "3" && r[2] == "0x00000102"),
        "{out}"
    );

    // No malformed packet, no expert warning or error anywhere, every CRC good.
    let bad = ["-Y", "_ws.malformed || _ws.expert.severity >= \"Warning\""];
    let out = tshark.run(&bad);
    assert!(out.trim().is_empty(), "tshark flagged:\n{out}");
    // Controls, so that the clean answers above mean something: a flipped CRC byte is labelled
    // "Bad CRC32", and an RPC credential length running past the message is flagged by the
    // filter.
    let mut damaged = storage_conversation(false);
    *damaged.cap.frames[5].last_mut().unwrap() ^= 0xff;
    std::fs::write(path, damaged.pcap()).unwrap();
    let v = tshark.verbose("frame.number == 6");
    assert!(v.contains("Bad CRC32"), "a bad CRC went unnoticed");
    std::fs::write(path, storage_conversation(true).pcap()).unwrap();
    let out = tshark.run(&bad);
    assert!(!out.trim().is_empty(), "a malformed header went unnoticed");
    std::fs::write(path, storage_conversation(false).pcap()).unwrap();
    let verbose = tshark.verbose("iwarp_mpa.fpdu");
    assert!(!verbose.contains("Bad CRC32"), "bad CRC in our framing");
    assert!(verbose.contains("Good CRC32"), "CRC verdicts missing");
    assert!(verbose.contains("ERR_VERS"), "ERR_VERS not decoded");
}
