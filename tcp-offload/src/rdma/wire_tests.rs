//! The RDMA option inside whole segments: layout beside the other options, alignment, the
//! "ignored, never an error" cases and the first-option rule.

use proptest::prelude::*;

use super::option::{RdmaAnnotation, RdmaOption, RdmaOptionError};
use crate::isn::FourTuple;
use crate::seq::SeqNum;
use crate::wire::{self, Flags, SegmentRepr, TcpOptions, MAX_OPTIONS_LEN};

fn packet(options: TcpOptions, payload: &[u8]) -> Vec<u8> {
    let r = SegmentRepr {
        tuple: FourTuple {
            local: "198.18.0.1:4000".parse().unwrap(),
            remote: "198.18.0.2:5000".parse().unwrap(),
        },
        seq: SeqNum(1000),
        ack: Some(SeqNum(1)),
        flags: Flags::default(),
        window: 1000,
        options,
    };
    let mut buf = vec![0u8; r.buffer_len(payload.len())];
    let n = r
        .emit(&mut buf, payload.len(), |p| p.copy_from_slice(payload))
        .unwrap();
    buf.truncate(n);
    buf
}

fn seg1() -> RdmaOption {
    RdmaOption::Transfer(RdmaAnnotation {
        aligned: true,
        unsolicited: false,
        rid: 0x1A2B_3C4D,
        buffer_offset: 0,
        data_offset: 100,
        data_len: 900,
        total: Some(4000),
    })
}

/// TCPRDMA-12: NOP NOP timestamps, then the 20-octet option at option offset 12
/// (TCP header offset 32); 32 octets of options, data offset 13.
#[test]
fn tcprdma_12_option_after_timestamps_at_header_offset_32() {
    let o = TcpOptions {
        timestamps: Some((7, 8)),
        rdma: Some(seg1()),
        ..Default::default()
    };
    let p = packet(o, &[0xAB; 1000]);
    let tcp = &p[20..];
    assert_eq!(tcp[12] >> 4, 13);
    assert_eq!(&tcp[20..24], &[1, 1, 8, 10]);
    assert_eq!(tcp[32], 25);
    assert_eq!(
        &tcp[32..52],
        &[
            0x19, 0x14, 0x80, 0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0, 0, 0, 0, 0x00, 0x64, 0x03, 0x84, 0,
            0, 0x0f, 0xa0
        ]
    );
    let s = wire::parse(&p).unwrap();
    assert_eq!(s.options, o);
}

/// Offset in the TCP header `tcp` of its first RDMA option, walking the options as a receiver
/// does (END stops, NOP is one octet, every other option says its length).
fn rdma_offset(tcp: &[u8]) -> Option<usize> {
    let end = usize::from(tcp[12] >> 4) * 4;
    let mut at = 20;
    while at < end {
        match tcp[at] {
            0 => return None,
            1 => at += 1,
            25 => return Some(at),
            _ => at += usize::from(tcp[at + 1]).max(2),
        }
    }
    None
}

/// TCPRDMA-12, seed 002 §3.1.8 ("The sender MUST align the RDMA option on a 4 octet boundary
/// relative to the TCP header"): for every combination of MSS, window scale, SACK-permitted
/// and timestamps, with and without each form of the option, the option starts on a 4-octet
/// boundary, the options fit in 40 octets and parse back to the same values. The combinations
/// over 40 octets (a run's form beside the SYN-only options, never sent together) are refused
/// by emit. Before, the negotiation form of SYN and SYN-ACK started at offset 46.
#[test]
fn tcprdma_12_every_option_combination_aligns_the_option() {
    let forms = [
        None,
        Some(RdmaOption::Negotiate),
        Some(RdmaOption::Aligned { aligned: true }),
        Some(RdmaOption::Transfer(RdmaAnnotation {
            total: None,
            ..match seg1() {
                RdmaOption::Transfer(t) => t,
                _ => unreachable!(),
            }
        })),
        Some(seg1()),
    ];
    let mut checked = 0;
    for bits in 0..16u8 {
        for rdma in forms {
            let syn_only = bits & 0b0111 != 0;
            let o = TcpOptions {
                mss: (bits & 1 != 0).then_some(1460),
                window_scale: (bits & 2 != 0).then_some(7),
                sack_permitted: bits & 4 != 0,
                timestamps: (bits & 8 != 0).then_some((0x0102_0304, 0x0506_0708)),
                rdma,
                ..Default::default()
            };
            let handshake = matches!(rdma, None | Some(RdmaOption::Negotiate));
            if o.encoded_len() > MAX_OPTIONS_LEN {
                assert!(syn_only && !handshake, "{o:?} is sent and does not fit");
                continue;
            }
            let p = packet(o, &[0x5A; 1000]);
            let tcp = &p[20..];
            assert!(usize::from(tcp[12] >> 4) * 4 <= 20 + MAX_OPTIONS_LEN);
            match rdma {
                Some(r) => {
                    let at = rdma_offset(tcp).expect("the option is there");
                    assert_eq!(at % 4, 0, "{o:?}: option at offset {at}");
                    assert_eq!(usize::from(tcp[at + 1]), r.len());
                }
                None => assert_eq!(rdma_offset(tcp), None),
            }
            assert_eq!(wire::parse(&p).unwrap().options, o, "parse(emit(x))");
            checked += 1;
        }
    }
    // Every handshake combination and every data-segment one (timestamps or not, any form).
    assert!(checked >= 16 * 2 + 2 * 3, "{checked}");
}

/// The SYN of a connection offering the option (MSS, window scale, SACK-permitted, timestamps)
/// carries it at TCP header offset 44, 4-aligned, two NOPs after it.
#[test]
fn tcprdma_12_syn_carries_the_offer_at_offset_44() {
    let o = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        sack_permitted: true,
        timestamps: Some((1, 0)),
        rdma: Some(RdmaOption::Negotiate),
        ..Default::default()
    };
    let p = packet(o, &[]);
    let tcp = &p[20..];
    assert_eq!(&tcp[44..48], &[25, 2, 1, 1]);
    assert_eq!(usize::from(tcp[12] >> 4) * 4, 48);
}

/// Replaces the option area of an emitted packet (same length) and repairs the checksum.
fn with_options(raw_opts: &[u8], payload_len: usize) -> Vec<u8> {
    assert_eq!(raw_opts.len() % 4, 0);
    let mut p = packet(TcpOptions::default(), &vec![0x5A; payload_len]);
    let tail = p.split_off(40);
    p.extend_from_slice(raw_opts);
    p.extend_from_slice(&tail);
    let total = p.len() as u16;
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[10..12].fill(0);
    let c = crate::checksum::field(&p[..20], 0);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[32] = (((20 + raw_opts.len()) / 4) as u8) << 4;
    p[36..38].fill(0);
    let pseudo = crate::checksum::pseudo(
        "198.18.0.1".parse().unwrap(),
        "198.18.0.2".parse().unwrap(),
        p.len() - 20,
    )
    .unwrap();
    let c = crate::checksum::field(&p[20..], pseudo);
    p[36..38].copy_from_slice(&c.to_be_bytes());
    p
}

/// TCPRDMA-01: a kind-25 option of length 6 is ignored (the segment still parses, nothing is
/// dropped, no error); TCPRDMA-12: a misaligned 16-octet option is ignored too.
#[test]
fn tcprdma_01_bad_length_and_misaligned_options_are_ignored_not_errors() {
    let p = with_options(&[25, 6, 0, 0, 0, 0, 1, 1], 10);
    let s = wire::parse(&p).unwrap();
    assert_eq!(s.options.rdma, None);
    assert_eq!(s.options.rdma_ignored, Some(RdmaOptionError::BadLength));
    assert_eq!(s.payload.len(), 10);
    let mut raw = vec![1, 1];
    raw.extend_from_slice(&[25, 16, 0x80, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4]);
    raw.extend_from_slice(&[1, 1]);
    let s_p = with_options(&raw, 10);
    let s = wire::parse(&s_p).unwrap();
    assert_eq!(s.options.rdma_ignored, Some(RdmaOptionError::Misaligned));
    assert_eq!(s.options.rdma, None);
}

/// TCPRDMA-04/05: a run past the payload end is ignored (the segment and its payload stay).
#[test]
fn tcprdma_05_description_past_the_segment_end_is_ignored() {
    let o = TcpOptions {
        rdma: Some(seg1()), // DO 100 + DL 900 = 1000
        ..Default::default()
    };
    let ok_p = packet(o, &[1; 1000]);
    let s_ok = wire::parse(&ok_p).unwrap();
    assert_eq!(s_ok.options.rdma, Some(seg1()));
    let p = packet(o, &[1; 999]);
    let s = wire::parse(&p).unwrap();
    assert_eq!(s.options.rdma, None);
    assert_eq!(
        s.options.rdma_ignored,
        Some(RdmaOptionError::PastSegmentEnd)
    );
    assert_eq!(s.payload.len(), 999);
}

/// TCPRDMA-15: only the first RDMA option counts; a second (even a valid one) is skipped, and
/// a malformed first one is not replaced by a later one.
#[test]
fn tcprdma_15_only_the_first_rdma_option_counts() {
    let mut raw = vec![25, 4, 0x80, 0];
    raw.extend_from_slice(&seg1().to_bytes());
    let s_p = with_options(&raw, 1000);
    let s = wire::parse(&s_p).unwrap();
    assert_eq!(s.options.rdma, Some(RdmaOption::Aligned { aligned: true }));
    let mut raw = vec![25, 6, 0, 0, 0, 0, 1, 1];
    raw.extend_from_slice(&seg1().to_bytes());
    let s_p = with_options(&raw, 1000);
    let s = wire::parse(&s_p).unwrap();
    assert_eq!(s.options.rdma, None);
    assert_eq!(s.options.rdma_ignored, Some(RdmaOptionError::BadLength));
}

proptest! {
    /// TCPRDMA-12: with every mix of MSS, window scale, SACK-permitted, timestamps and SACK
    /// blocks that fits, the RDMA option (every form) starts 4-aligned relative to the TCP
    /// header and the segment parses back to the same options.
    #[test]
    fn tcprdma_12_aligned_with_every_option_mix(
        mss in proptest::option::of(any::<u16>()),
        ws in proptest::option::of(0u8..15),
        sp in any::<bool>(),
        ts in proptest::option::of(any::<(u32, u32)>()),
        blocks in 0u8..4,
        r in super::option::proptests::rdma_option(),
    ) {
        let mut o = TcpOptions { mss, window_scale: ws, sack_permitted: sp, timestamps: ts, rdma: Some(r), ..Default::default() };
        for k in 0..usize::from(blocks) {
            o.sack[k] = (SeqNum(k as u32), SeqNum(k as u32 + 9));
        }
        o.sack_count = blocks;
        prop_assume!(o.encoded_len() <= MAX_OPTIONS_LEN);
        let payload_len = match r { RdmaOption::Transfer(t) => usize::from(t.data_offset) + usize::from(t.data_len), _ => 3 };
        prop_assume!(payload_len < 9000);
        let p = packet(o, &vec![7u8; payload_len]);
        let tcp = &p[20..];
        let at = rdma_offset(tcp).expect("the option is there");
        prop_assert_eq!(at % 4, 0);
        prop_assert_eq!(usize::from(tcp[at + 1]), r.len());
        prop_assert_eq!(wire::parse(&p).unwrap().options, o);
    }
}
