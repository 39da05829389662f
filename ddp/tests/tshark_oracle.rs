//! Wire oracle: Wireshark's iWARP dissectors (MPA, DDP/RDMAP) read what two of our queue pairs
//! send each other: the MPA Request and Reply, every FPDU (Good CRC32 when CRC is on), the
//! RDMAP opcodes we sent (Send, Send with Invalidate, Send with SE, Write, Read Request, Read
//! Response, Terminate), and the Terminate's layer/type/code and header-control bits, with no
//! malformed packet and no error-level expert info.
//!
//! Each `poll_transmit` output becomes one TCP segment of a synthetic capture (no network, no
//! root). Needs `tshark`: under `CI=true` a missing tshark fails; elsewhere the test skips.

use ddp::WorkRequest;
use ddp::{
    Access, LocalBuf, PdId, Qp, QpConfig, RegionSpec, RemoteBuf, SendOpts, Stag, StagTable,
    StreamId, VecMemory,
};
use std::time::Instant;
use testkit::synthetic::{ACK, PSH};
use testkit::{require_tool, Capture, Peer, TempPath, Tshark};

const CLIENT_PORT: u16 = 40000;
const SERVER_PORT: u16 = 20000;

struct End {
    qp: Qp,
    tags: StagTable,
    mem: VecMemory,
}

impl End {
    fn region(&mut self, len: usize, access: Access) -> (ddp::RegionHandle, Stag) {
        let spec = RegionSpec {
            base_to: 0,
            len: len as u64,
            access,
            pd: PdId(1),
            stream: None,
        };
        let (h, s) = self.tags.register(spec).unwrap();
        self.mem
            .insert(h, (0..len).map(|i| (i * 7) as u8).collect());
        (h, s)
    }
}

/// Move everything both ways, one TCP segment per `poll_transmit` output, until quiet.
/// Returns the number of FPDUs each way.
fn pump(ends: &mut [End; 2], cap: &mut Capture, fpdus: &mut usize) {
    let mut buf = vec![0u8; 70_000];
    loop {
        let mut moved = false;
        for from in 0..2 {
            loop {
                let (a, b) = ends.split_at_mut(1);
                let (src, dst) = if from == 0 {
                    (&mut a[0], &mut b[0])
                } else {
                    (&mut b[0], &mut a[0])
                };
                let established =
                    src.qp.is_established() && src.qp.tx_offset() >= src.qp.tx_seq_start();
                let Some(n) = src.qp.poll_transmit(&src.tags, &src.mem, &mut buf) else {
                    break;
                };
                if established {
                    *fpdus += 1;
                }
                let peer = if from == 0 {
                    Peer::Client
                } else {
                    Peer::Server
                };
                cap.segment(peer, PSH | ACK, &buf[..n]);
                src.qp.on_acked(src.qp.tx_offset());
                dst.qp
                    .handle_rx_bytes(&mut dst.tags, &mut dst.mem, Instant::now(), &buf[..n]);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
}

fn run(markers: bool, crc: bool) {
    let now = Instant::now();
    let cfg = |stream| {
        let mut c = QpConfig::default();
        c.engine.stream = StreamId(stream);
        c.engine.pd = PdId(1);
        c.startup.want_markers = markers;
        c.startup.want_crc = crc;
        c
    };
    let mut ends = [
        End {
            qp: Qp::new_initiator(cfg(1), now).unwrap(),
            tags: StagTable::new(1),
            mem: VecMemory::new(),
        },
        End {
            qp: Qp::new_responder(cfg(2), now),
            tags: StagTable::new(2),
            mem: VecMemory::new(),
        },
    ];
    let mut cap = Capture::new(CLIENT_PORT, SERVER_PORT);
    cap.handshake();
    let mut fpdus = 0;
    let (csrc, _) = ends[0].region(6000, Access::LOCAL_WRITE);
    let (cread, _) = ends[0].region(3000, Access::LOCAL_WRITE);
    let (srecv, _) = ends[1].region(20_000, Access::LOCAL_WRITE);
    let (_, swin) = ends[1].region(6000, Access::REMOTE_WRITE | Access::REMOTE_READ);
    let (_, sinv) = ends[1].region(16, Access::REMOTE_WRITE);
    for i in 0..3 {
        let buf = LocalBuf {
            region: srecv,
            offset: 6000 * i,
            len: 6000,
        };
        ends[1]
            .qp
            .post(&ends[1].tags, WorkRequest::recv(i, buf))
            .unwrap();
    }
    let c = &mut ends[0];
    let b = |len| LocalBuf {
        region: csrc,
        offset: 0,
        len,
    };
    c.qp.post(&c.tags, WorkRequest::send(1, b(100), SendOpts::default()))
        .unwrap();
    c.qp.post(
        &c.tags,
        WorkRequest::send(
            2,
            b(5000),
            SendOpts {
                solicited: false,
                invalidate: Some(sinv),
            },
        ),
    )
    .unwrap();
    c.qp.post(
        &c.tags,
        WorkRequest::send(
            3,
            b(10),
            SendOpts {
                solicited: true,
                invalidate: None,
            },
        ),
    )
    .unwrap();
    c.qp.post(
        &c.tags,
        WorkRequest::write(4, b(3000), RemoteBuf { stag: swin, to: 0 }),
    )
    .unwrap();
    let rd = LocalBuf {
        region: cread,
        offset: 0,
        len: 3000,
    };
    c.qp.post(
        &c.tags,
        WorkRequest::read(5, rd, RemoteBuf { stag: swin, to: 0 }),
    )
    .unwrap();
    pump(&mut ends, &mut cap, &mut fpdus);
    assert!(!ends[1].qp.is_error() && !ends[0].qp.is_error());
    // Last: a Write to a forged STag, answered by a Terminate (DDP 0x1/0x00, M and D set).
    let c = &mut ends[0];
    c.qp.post(
        &c.tags,
        WorkRequest::write(
            6,
            b(8),
            RemoteBuf {
                stag: Stag(swin.0 ^ 0x80),
                to: 0,
            },
        ),
    )
    .unwrap();
    pump(&mut ends, &mut cap, &mut fpdus);
    assert!(
        ends[1].qp.is_error() && ends[0].qp.is_error(),
        "the Terminate went through"
    );

    let file = TempPath::new(&format!("ddp-oracle-{markers}-{crc}.pcap"));
    std::fs::write(file.path(), cap.pcap()).unwrap();
    let tshark = Tshark::read(file.path());
    let mpa = tshark.fields("iwarp_mpa.key.req || iwarp_mpa.key.rep", &["frame.number"]);
    assert_eq!(mpa.len(), 2, "MPA Request and Reply decoded");
    let ops = tshark.fields("iwarp_rdma", &["iwarp_rdma.opcode"]);
    let count = |op: &str| ops.iter().filter(|o| o.as_str() == op).count();
    assert_eq!(
        ops.len(),
        fpdus,
        "every FPDU dissected as DDP/RDMAP: {ops:?}"
    );
    for (op, name) in [
        ("0x00", "Write"),
        ("0x01", "Read Request"),
        ("0x02", "Read Response"),
        ("0x03", "Send"),
        ("0x04", "Send with Invalidate"),
        ("0x05", "Send with SE"),
        ("0x07", "Terminate"),
    ] {
        assert!(count(op) > 0, "{name} seen: {ops:?}");
    }
    assert_eq!(
        count("0x01") + count("0x05") + count("0x07") + count("0x03"),
        4,
        "single-segment messages"
    );
    if crc {
        let text = tshark.verbose("iwarp_mpa.crc_check");
        assert_eq!(
            text.matches("Good CRC32").count(),
            fpdus,
            "every FPDU has a good CRC"
        );
        assert_eq!(text.matches("Bad CRC32").count(), 0);
    }
    if markers {
        assert!(
            !tshark
                .fields("iwarp_mpa.marker_fpduptr", &["frame.number"])
                .is_empty(),
            "markers decoded"
        );
    }
    let term = tshark.fields(
        "iwarp_rdma.opcode == 7",
        &[
            "iwarp_rdma.term_layer",
            "iwarp_rdma.term_etype_ddp",
            "iwarp_rdma.term_errcode_ddp_tagged",
            "iwarp_rdma.term_hdrct_m",
            "iwarp_rdma.hdrct_d",
            "iwarp_rdma.term_ddp_h",
        ],
    );
    assert_eq!(term.len(), 1);
    let f: Vec<&str> = term[0].split('\t').collect();
    assert_eq!(f[0], "0x01", "layer DDP: {term:?}");
    assert_eq!(f[1], "0x01", "tagged buffer error");
    assert_eq!(f[2], "0x00", "invalid STag");
    assert!(f[3] == "True" || f[3] == "1", "M set: {term:?}");
    assert!(f[4] == "True" || f[4] == "1", "D set: {term:?}");
    assert!(
        f[5].starts_with("c140"),
        "the offending tagged Write header copied: {term:?}"
    );
    let bad = tshark.fields(
        "_ws.malformed || _ws.expert.severity >= 8388608",
        &["frame.number"],
    );
    assert!(
        bad.is_empty(),
        "malformed or error-level expert info in frames {bad:?}"
    );
}

#[test]
fn tshark_reads_our_fpdus_markers_off() {
    if require_tool("tshark_reads_our_fpdus_markers_off", "tshark") {
        run(false, true);
        run(false, false);
    }
}

#[test]
fn tshark_reads_our_fpdus_markers_on() {
    if require_tool("tshark_reads_our_fpdus_markers_on", "tshark") {
        run(true, true);
        run(true, false);
    }
}
