//! Writes the seed corpus of every fuzz target into `fuzz/corpus/<target>/seed-*`: valid
//! inputs built with our own encoders, so the fuzzers start from inputs that reach deep into
//! each parser. Run once when a target is added: `cargo run -p fuzz-targets --example
//! seed_corpus`; the fuzzers then grow the corpus (`deploy/xwarp fuzz`).

use ddp::WorkRequest;
use std::path::Path;

use mpa::{Framer, FramingConfig, StartupConfig};
use rpcrdma::storage::{ReadArgs, ReadOk, StorageCall, StorageProc, StorageReply, WriteArgs};
use rpcrdma::storage_send::{call_header, encode_call, encode_reply, CallChunks};
use rpcrdma::{ChunkLists, Payload, ReplyHeader, Segment, WriteChunk};
use tcp_offload::isn::FourTuple;
use tcp_offload::rdma::{RdmaAnnotation, RdmaOption};
use tcp_offload::wire::{Flags, SegmentRepr, TcpOptions};
use tcp_offload::SeqNum;

fn write(target: &str, name: &str, data: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("corpus folder");
    std::fs::write(dir.join(format!("seed-{name}")), data).expect("write seed");
}

fn tcp(v6: bool, syn: bool, payload: &[u8]) -> Vec<u8> {
    tcp_with(v6, syn, payload, None)
}

/// [`tcp`] with a TCP RDMA option (kind 25) among the options.
fn tcp_with(v6: bool, syn: bool, payload: &[u8], rdma: Option<RdmaOption>) -> Vec<u8> {
    let tuple = if v6 {
        FourTuple {
            local: "[2001:db8::1]:40000".parse().unwrap(),
            remote: "[2001:db8::2]:18515".parse().unwrap(),
        }
    } else {
        FourTuple {
            local: "198.18.0.2:40000".parse().unwrap(),
            remote: "198.18.0.1:18515".parse().unwrap(),
        }
    };
    let mut options = TcpOptions {
        timestamps: Some((1000, 2000)),
        rdma,
        ..TcpOptions::default()
    };
    if syn {
        options.mss = Some(1460);
        options.window_scale = Some(7);
        options.sack_permitted = true;
    } else if rdma.is_none() {
        // (Timestamps, the RDMA option and a SACK block do not fit 40 octets together.)
        options.sack[0] = (SeqNum(5000), SeqNum(6000));
        options.sack_count = 1;
    }
    let repr = SegmentRepr {
        tuple,
        seq: SeqNum(0x1234_5678),
        ack: (!syn).then_some(SeqNum(42)),
        flags: Flags {
            syn,
            psh: !payload.is_empty(),
            ..Flags::default()
        },
        window: 512,
        options,
    };
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr
        .emit(&mut buf, payload.len(), |p| p.copy_from_slice(payload))
        .unwrap();
    buf.truncate(n);
    buf
}

fn fpdus(cfg: FramingConfig, offset: u32, ulpdus: &[&[u8]]) -> Vec<u8> {
    let mut f = Framer::new(cfg, offset);
    let mut out = Vec::new();
    for u in ulpdus {
        f.encode_to_vec(&[u], &mut out).unwrap();
    }
    out
}

/// What a peer queue pair sends the fuzzed one: a Send, an RDMA Write into the fixture's
/// target region and an RDMA Read Request of it.
fn peer_stream(markers: bool, crc: bool) -> Vec<u8> {
    use ddp::{Access, LocalBuf, PdId, RegionSpec, RemoteBuf, SendOpts, StagTable, VecMemory};
    let target = fuzz_targets::ddp_targets::qp_fixture().target;
    let mut tags = StagTable::new(99);
    let (h, _) = tags
        .register(RegionSpec {
            base_to: 0,
            len: 4096,
            access: Access::LOCAL_WRITE,
            pd: PdId(1),
            stream: None,
        })
        .unwrap();
    let mut mem = VecMemory::new();
    mem.insert(h, (0..4096).map(|i| i as u8).collect());
    let mut qp = fuzz_targets::ddp_targets::qp_established(markers, crc);
    let buf = |offset, len| LocalBuf {
        region: h,
        offset,
        len,
    };
    qp.post(
        &tags,
        WorkRequest::send(1, buf(0, 100), SendOpts::default()),
    )
    .unwrap();
    qp.post(
        &tags,
        WorkRequest::write(
            2,
            buf(100, 3000),
            RemoteBuf {
                stag: target,
                to: 0x1000,
            },
        ),
    )
    .unwrap();
    qp.post(
        &tags,
        WorkRequest::read(
            3,
            buf(0, 512),
            RemoteBuf {
                stag: target,
                to: 0x1100,
            },
        ),
    )
    .unwrap();
    let mut out = vec![0u8; mpa::MAX_FPDU_LEN];
    let mut stream = Vec::new();
    while let Some(n) = qp.poll_transmit(&tags, &mem, &mut out) {
        stream.extend_from_slice(&out[..n]);
    }
    stream
}

fn main() {
    write("tcp_wire", "syn4", &tcp(false, true, b""));
    write(
        "tcp_wire",
        "data4",
        &tcp(false, false, b"an FPDU would be here"),
    );
    write("tcp_wire", "data6", &tcp(true, false, b"v6 payload"));
    // TCP option areas: the options of a SYN and of a data segment (after the 20-octet header).
    write("tcp_options", "syn", &tcp(false, true, b"")[40..]);
    write("tcp_options", "data", &tcp(false, false, b"")[40..]);
    // A data segment annotated with the TCP RDMA option (draft section 4, segment 1).
    let annotated = RdmaOption::Transfer(RdmaAnnotation {
        aligned: true,
        unsolicited: false,
        rid: 0x1A2B_3C4D,
        buffer_offset: 0,
        data_offset: 100,
        data_len: 900,
        total: Some(4000),
    });
    write(
        "tcp_wire",
        "data4-rdma",
        &tcp_with(false, false, &[0xAB; 1000], Some(annotated)),
    );

    let frame = |kind, revision, enhanced, pd: &'static [u8]| {
        mpa::startup_frame::Repr {
            kind,
            markers: true,
            crc: true,
            reject: false,
            revision,
            enhanced,
            private_data: pd,
        }
        .to_vec()
    };
    use mpa::startup_frame::FrameKind::{Reply, Request};
    let req = frame(Request, 1, None, b"private");
    write("mpa_startup", "request", &req);
    // RFC 6581 §7.1: Rev 2 frames with IRD/ORD and a peer-to-peer offer / choice.
    let offer = mpa::enhanced::EnhancedData {
        ird: 16,
        ord: 8,
        p2p: true,
        rtr: mpa::RtrTypes::ALL,
    };
    let req2 = frame(Request, 2, Some(offer), b"private");
    write("mpa_startup", "request-rev2", &req2);
    let choice = mpa::enhanced::EnhancedData {
        rtr: mpa::RtrTypes::only(mpa::RtrType::Read),
        ..offer
    };
    let rep2 = frame(Reply, 2, Some(choice), b"welcome");
    write("mpa_startup", "reply-rev2", &rep2);
    // The state-machine part reads: accept and P2P bits, revision, limit (2), markers, crc,
    // IRD (2), ORD (2), accept, chunk, stream. Accept bits 0b10_111_110: Rev 1 and 2, offer
    // every RTR type, take Send and Read.
    let cfg = StartupConfig::default();
    let state_machine = |first: &[u8]| {
        let mut sm = vec![
            0b1011_1110,
            cfg.revision,
            0x02,
            0x00,
            1,
            1,
            0,
            16,
            0,
            16,
            1,
            7,
        ];
        sm.extend_from_slice(first);
        sm.extend_from_slice(&fpdus(
            FramingConfig {
                markers: true,
                crc: true,
            },
            0,
            &[b"first"],
        ));
        sm
    };
    write("mpa_startup", "responder", &state_machine(&req));
    write("mpa_startup", "responder-rev2", &state_machine(&req2));
    write("mpa_startup", "initiator-rev2", &state_machine(&rep2));

    let ulpdus: [&[u8]; 3] = [b"ddp header and payload", &[0xAB; 600], b"x"];
    for (name, markers, crc) in [
        ("m1c1", true, true),
        ("m0c1", false, true),
        ("m1c0", true, false),
    ] {
        let cfg = FramingConfig { markers, crc };
        let offset = 508u32;
        let mut s = vec![u8::from(markers), u8::from(crc)];
        s.extend_from_slice(&offset.to_be_bytes());
        s.extend_from_slice(&100u16.to_be_bytes());
        s.extend_from_slice(&fpdus(cfg, offset, &ulpdus));
        write("mpa_stream", name, &s);
        let mut l = vec![u8::from(markers), u8::from(crc), 1];
        l.extend_from_slice(&offset.to_be_bytes());
        l.extend_from_slice(&fpdus(cfg, offset, &ulpdus));
        write("mpa_locate", name, &l);
    }

    let mut buf = [0u8; 2048];
    let read = StorageCall::Read(ReadArgs {
        offset: 4096,
        count: 1 << 20,
    });
    let chunks = CallChunks {
        read_result: Some(WriteChunk::new(vec![Segment {
            handle: 0x42,
            length: 1 << 20,
            offset: 0x7000_0000,
        }])),
        ..Default::default()
    };
    let n = encode_call(
        &mut buf,
        32,
        &call_header(7, StorageProc::Read),
        &read,
        &chunks,
    )
    .unwrap();
    write("rpcrdma_header", "read_call", &buf[..n]);
    write("store_call", "read_call", &buf[..n]);
    let write_call = StorageCall::Write(WriteArgs {
        offset: 0,
        stable: true,
        data: Payload::Inline(b"inline write data"),
    });
    let n = encode_call(
        &mut buf,
        32,
        &call_header(8, StorageProc::Write),
        &write_call,
        &CallChunks::default(),
    )
    .unwrap();
    write("rpcrdma_header", "write_call", &buf[..n]);
    write("store_call", "write_call", &buf[..n]);

    let reply = StorageReply::Read(Ok(ReadOk {
        eof: false,
        data: Payload::Inline(b"inline read data"),
    }));
    let n = encode_reply(
        &mut buf[1..],
        32,
        &ChunkLists::default(),
        &ReplyHeader::success(7),
        Some(&reply),
    )
    .unwrap();
    buf[0] = StorageProc::Read as u8;
    write("rpcrdma_header", "read_reply", &buf[1..n + 1]);
    write("store_reply", "read_reply", &buf[..n + 1]);
    // DDP and RDMAP headers: the first octet picks the header (0 DDP, 1 Read Request, 2 Terminate).
    for (name, markers, crc) in [
        ("m0c0", false, false),
        ("m0c1", false, true),
        ("m1c1", true, true),
    ] {
        let stream = peer_stream(markers, crc);
        let mut q = vec![u8::from(markers), u8::from(crc), 0x02, 0x00];
        q.extend_from_slice(&stream);
        write("qp_stream", name, &q);
        // The same stream cut in 512-octet pieces, handed out of order first, then the FIN.
        let mut o = vec![u8::from(markers), u8::from(crc), 0x82, 0x00];
        o.extend_from_slice(&stream);
        write("qp_stream", &format!("{name}-ooo"), &o);
        if name == "m0c0" {
            // Without markers and CRC the stream is ULPDU_Length + ULPDU: headers follow the
            // 2-octet length of each FPDU.
            let mut h = vec![0u8];
            h.extend_from_slice(&stream[2..]);
            write("ddp_headers", "ddp_send", &h);
        }
    }
    // The endpoint pair: markers, then one op per step (0-2 deliver, 3 drop, 4 duplicate,
    // 5 reorder, 6 corrupt, 7 corrupt with checksums repaired, 8 inject, 9 time).
    let mut clean = vec![0u8];
    clean.extend(std::iter::repeat_n(0u8, 300));
    write("endpoint_pair", "clean", &clean);
    clean[0] = 1;
    write("endpoint_pair", "clean_markers", &clean);
    let mut rough = vec![1u8];
    for k in 0..120u8 {
        match k % 6 {
            0 => rough.push(3),
            1 => rough.push(5),
            2 => rough.push(4),
            3 => rough.extend_from_slice(&[9, 250]),
            _ => rough.push(0),
        }
    }
    write("endpoint_pair", "lossy", &rough);
    println!("seed corpus written under fuzz/corpus/");
}
