//! Out-of-order commit and close edge cases of our TCP over the simulated link (MPA-12..15,
//! RFC 9293 §3.6), with targeted faults the random link does not produce on its own.

mod common;

use common::ours::{Mode, OursOptions, OursTransport, Passive};
use common::wrap::{Hooks, Wrapped};
use common::{link_case, par_seeds, run_bulk, stream_seed, SimRole};
use etherparse::{SlicedPacket, TransportSlice};
use netsim::{
    BulkConfig, ClosePolicy, Pattern, RecordPlan, SegmentAudit, SimConfig, SimSide, SimTime,
    SimTransport,
};

const KIB: u64 = 1024;

/// Ones' complement sum of 16-bit words.
/// Flips every payload octet of an IPv4/TCP packet and fixes the TCP checksum, so the copy is
/// a valid segment carrying different data for the same sequence numbers.
fn mutated(packet: &[u8]) -> Option<Vec<u8>> {
    let ihl = usize::from(packet.first()? & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([*packet.get(2)?, *packet.get(3)?]));
    let tcp_hdr = usize::from(packet.get(ihl + 12)? >> 4) * 4;
    if total > packet.len() || ihl + tcp_hdr >= total {
        return None;
    }
    let mut p = packet[..total].to_vec();
    for b in &mut p[ihl + tcp_hdr..] {
        *b ^= 0xff;
    }
    p[ihl + 16] = 0;
    p[ihl + 17] = 0;
    let tcp_len = (total - ihl) as u16;
    let pseudo = [&[0, 6][..], &tcp_len.to_be_bytes()].concat();
    let sum = testkit::internet_checksum(&[&p[12..20], &pseudo, &p[ihl..]]);
    p[ihl + 16..ihl + 18].copy_from_slice(&sum.to_be_bytes());
    Some(p)
}

fn payload_len(packet: &[u8]) -> usize {
    match SlicedPacket::from_ip(packet).map(|s| s.transport) {
        Ok(Some(TransportSlice::Tcp(t))) => t.payload().len(),
        _ => 0,
    }
}

/// Targeted receive-side faults for our TCP.
struct Tamper {
    /// Drop this many of the first data segments that arrive (forces a gap early).
    drop_data: u32,
    /// After every data segment the TCP accepted as entirely new, feed it a valid duplicate
    /// with every octet changed.
    mutate_duplicates: bool,
    injected: u64,
}

fn bytes_received(t: &OursTransport) -> u64 {
    t.connection().map_or(0, |c| c.counters().bytes_received)
}

impl Hooks<OursTransport> for Tamper {
    fn packet(&mut self, inner: &mut OursTransport, now: SimTime, p: &[u8]) {
        let len = payload_len(p);
        if len > 0 && self.drop_data > 0 {
            self.drop_data -= 1;
            return;
        }
        let before = bytes_received(inner);
        inner.handle_packet(now, p);
        if self.mutate_duplicates && len > 0 && bytes_received(inner) - before == len as u64 {
            if let Some(m) = mutated(p) {
                self.injected += 1;
                inner.handle_packet(now, &m);
            }
        }
    }
}

struct Setup {
    mode: Mode,
    link: &'static str,
    a_len: u64,
    b_len: u64,
    close: (ClosePolicy, ClosePolicy),
    drop_data: u32,
    mutate: bool,
    early_record_mode: bool,
    /// Largest ULPDU of the records (1442 = MULPDU for EMSS 1448 without markers).
    mulpdu: usize,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            mode: Mode::OwnedRecords,
            link: "clean",
            a_len: 64 * KIB,
            b_len: 64 * KIB,
            close: (ClosePolicy::AfterReceiving, ClosePolicy::AfterPeerClose),
            drop_data: 0,
            mutate: false,
            early_record_mode: false,
            mulpdu: 1442,
        }
    }
}

/// Ours (client, A) to ours (server, B, tampered).
type Run = (
    common::Outcome,
    OursTransport,
    Wrapped<OursTransport, Tamper>,
);

fn run(seed: u64, s: &Setup) -> Result<Run, String> {
    let opts = OursOptions {
        mode: s.mode,
        passive: Passive::Connection,
        early_record_mode: s.early_record_mode,
        ..OursOptions::default()
    };
    let a = OursTransport::new(SimRole::Client, seed ^ 0x11, &opts).expect("valid TCP settings");
    let b = Wrapped {
        inner: OursTransport::new(SimRole::Server, seed ^ 0x22, &opts).expect("valid TCP settings"),
        hooks: Tamper {
            drop_data: s.drop_data,
            mutate_duplicates: s.mutate,
            injected: 0,
        },
    };
    let (sa, sb) = (stream_seed(seed, SimSide::A), stream_seed(seed, SimSide::B));
    let mut ca = BulkConfig::new(s.a_len, sa, s.b_len, sb).with_close(s.close.0);
    let mut cb = BulkConfig::new(s.b_len, sb, s.a_len, sa).with_close(s.close.1);
    let mut audits = [SegmentAudit::new(), SegmentAudit::new()];
    if s.mode != Mode::Bytes {
        let (pa, pb) = (
            RecordPlan::fpdus(sa, s.mulpdu, s.a_len),
            RecordPlan::fpdus(sb, s.mulpdu, s.b_len),
        );
        audits = [
            SegmentAudit::new().with_boundaries(pa.boundaries()),
            SegmentAudit::new().with_boundaries(pb.boundaries()),
        ];
        ca = ca.with_records(pa);
        cb = cb.with_records(pb);
    }
    let [aa, ab] = audits;
    let audits = [
        aa.with_pattern(Pattern::new(sa)),
        ab.with_pattern(Pattern::new(sb)),
    ];
    let link = link_case(s.link);
    run_bulk(
        seed,
        a,
        b,
        ca,
        cb,
        link.clone(),
        link,
        audits,
        SimConfig::default(),
    )
}

#[test]
fn a_gap_early_in_the_stream_lets_later_segments_be_handed_up_first_mpa_12_15() {
    // B loses the first data segment: everything after it is committed out of order and handed
    // up (with its offset and the in-order point) before the retransmission fills the gap.
    let s = Setup {
        drop_data: 1,
        a_len: 32 * KIB,
        b_len: 0,
        ..Setup::default()
    };
    let (o, _, b) = run(7, &s).unwrap();
    let v = o.verify[1];
    assert!(v.ooo_deliveries > 0, "no out-of-order delivery: {v:?}");
    assert!(b.inner.connection().unwrap().counters().ooo_committed > 0);
    assert_eq!(v.bytes, 32 * KIB, "every octet once");
}

#[test]
fn committed_data_never_changes_under_valid_duplicates_with_other_octets_mpa_13_14() {
    // After each segment B accepted as new, B is fed a valid duplicate (checksum fixed) whose
    // octets all differ. None of them may reach the application or replace held data, in record
    // mode (committed chunks) and in byte mode (out-of-order pieces held until the gap fills).
    for mode in [Mode::OwnedRecords, Mode::Bytes] {
        let seeds: Vec<u64> = (0..16).collect();
        let results = par_seeds(&seeds, common::threads(), |seed| {
            let s = Setup {
                mode,
                link: "reorder",
                mutate: true,
                ..Setup::default()
            };
            run(seed, &s).map(|(o, _, b)| (o.verify[1], b.hooks.injected))
        });
        let mut injected = 0;
        let mut ooo = 0;
        for r in results {
            let (v, n) = r.unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            injected += n;
            ooo += v.ooo_deliveries;
        }
        assert!(
            injected > 100,
            "{mode:?}: only {injected} mutated duplicates"
        );
        if mode == Mode::OwnedRecords {
            assert!(ooo > 0, "reordering produced no out-of-order commit");
        }
        eprintln!(
            "{mode:?}: {injected} mutated duplicates rejected, {ooo} out-of-order deliveries"
        );
    }
}

/// Regression (found by this simulation, fixed in tcp-offload): a FIN arriving in FIN-WAIT-1
/// while our own data was still queued moved the connection to CLOSING, where nothing was
/// transmitted and no timer armed: the rest of the data and our FIN were never sent and both
/// ends hung (A CLOSING, B FIN-WAIT-2). Both sides close right after queueing their data; A
/// queues more than its first flights carry.
#[test]
fn simultaneous_close_with_data_still_queued_completes_rfc9293_3_6() {
    for mode in [Mode::Bytes, Mode::OwnedRecords] {
        let s = Setup {
            mode,
            a_len: 256 * KIB,
            b_len: 0,
            close: (ClosePolicy::AfterSending, ClosePolicy::AfterSending),
            ..Setup::default()
        };
        let (o, _, _) = run(1, &s).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert_eq!(o.verify[1].bytes, 256 * KIB);
    }
}

/// Regression (found by this simulation, fixed in tcp-offload): `enter_record_mode` called
/// before the handshake switched the send side only; the SYN rebuilt the receive buffer in byte
/// mode, so received data never came out of `poll_recv` (the upper layer saw the in-order point
/// move with no data handed up).
#[test]
fn record_mode_entered_before_the_handshake_also_applies_to_receive() {
    let s = Setup {
        early_record_mode: true,
        a_len: 16 * KIB,
        b_len: 16 * KIB,
        ..Setup::default()
    };
    run(2, &s).unwrap();
}

#[test]
fn records_larger_than_the_emss_are_split_and_counted_mpa_5_3() {
    // ULPDUs up to twice MULPDU: FPDUs above the EMSS (1448) cannot start and end a segment;
    // the TCP must split them and count each split (MPA §5.3 exception), and nothing else may
    // be unaligned.
    for link in ["clean", "loss1"] {
        let s = Setup {
            link,
            mulpdu: 2 * 1442,
            a_len: 128 * KIB,
            b_len: 0,
            ..Setup::default()
        };
        let (o, a, _) = run(11, &s).unwrap();
        let k = a.connection().unwrap().counters();
        let audit = o.audit[0];
        assert!(
            audit.first_tx_unaligned > 0,
            "{link}: no record was larger than the EMSS?"
        );
        assert!(
            audit.first_tx_unaligned <= k.split_emss + k.split_window,
            "{link}: {} unaligned first transmissions, {} + {} counted",
            audit.first_tx_unaligned,
            k.split_emss,
            k.split_window
        );
        assert!(
            audit.retx_unaligned <= k.unaligned_retransmits + k.split_emss,
            "{link}: {audit:?} {k:?}"
        );
        assert_eq!(o.verify[1].bytes, 128 * KIB);
    }
}

#[test]
fn mutated_copy_is_a_valid_segment_with_other_octets() {
    let mut b = etherparse::PacketBuilder::ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
        .tcp(1, 2, 3, 4)
        .ack(5);
    b = b.psh();
    let mut p = Vec::new();
    b.write(&mut p, b"hello world").unwrap();
    let m = mutated(&p).unwrap();
    let s = SlicedPacket::from_ip(&m).unwrap();
    let (Some(etherparse::NetSlice::Ipv4(ip)), Some(TransportSlice::Tcp(t))) = (s.net, s.transport)
    else {
        panic!("not IPv4/TCP")
    };
    let want = t
        .calc_checksum_ipv4(ip.header().source(), ip.header().destination())
        .unwrap();
    assert_eq!(t.checksum(), want);
    assert_eq!(t.payload().len(), 11);
    assert!(t.payload().iter().zip(b"hello world").all(|(a, b)| a != b));
}

#[test]
fn open_and_close_with_nothing_to_send_through_the_listener() {
    let opts = OursOptions {
        passive: Passive::Listener,
        mode: Mode::Bytes,
        ..OursOptions::default()
    };
    for link in ["clean", "loss5"] {
        let a = OursTransport::new(SimRole::Client, 3, &opts).expect("valid TCP settings");
        let b = OursTransport::new(SimRole::Server, 4, &opts).expect("valid TCP settings");
        let ca = BulkConfig::new(0, 1, 0, 2);
        let cb = BulkConfig::new(0, 2, 0, 1);
        let (o, _, _) = run_bulk(
            3,
            a,
            b,
            ca,
            cb,
            link_case(link),
            link_case(link),
            Default::default(),
            SimConfig::default(),
        )
        .unwrap();
        assert_eq!(o.rst_before_close, [0, 0]);
        assert!(o.done.iter().all(Option::is_some));
    }
}
