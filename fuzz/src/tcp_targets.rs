//! IPv4/IPv6 + TCP headers and TCP options (`tcp_offload::wire`).

use tcp_offload::isn::FourTuple;
use tcp_offload::rdma::{RdmaOption, RdmaOptionError};
use tcp_offload::wire::{self, SegmentRepr, WireError};

/// Arbitrary octets as an IP packet: parsing never panics, and an accepted segment re-emits
/// (our header layout) into a packet that parses to the same segment.
pub fn tcp_wire(data: &[u8]) {
    let Ok(seg) = wire::parse(data) else {
        return;
    };
    assert!(seg.payload_offset + seg.payload.len() <= data.len());
    assert_eq!(
        &data[seg.payload_offset..][..seg.payload.len()],
        seg.payload
    );
    let repr = SegmentRepr {
        // The parsed tuple is the receiver's view; the emitter writes the sender's.
        tuple: FourTuple {
            local: seg.tuple.remote,
            remote: seg.tuple.local,
        },
        seq: seg.seq,
        ack: seg.flags.ack.then_some(seg.ack),
        flags: seg.flags,
        window: seg.window,
        options: seg.options,
    };
    let mut buf = vec![0u8; repr.buffer_len(seg.payload.len())];
    match repr.emit(&mut buf, seg.payload.len(), |p| {
        p.copy_from_slice(seg.payload)
    }) {
        Ok(n) => {
            let again = wire::parse(&buf[..n]).expect("what we emit parses");
            assert_eq!(again.tuple, seg.tuple);
            assert_eq!(again.seq, seg.seq);
            assert_eq!(again.flags, seg.flags);
            if seg.flags.ack {
                assert_eq!(again.ack, seg.ack);
            }
            assert_eq!(again.window, seg.window);
            // An ignored RDMA option is not emitted again (TCPRDMA-01/05: ignored, counted).
            let mut want = seg.options;
            want.rdma_ignored = None;
            assert_eq!(again.options, want);
            assert_eq!(again.payload, seg.payload);
        }
        // Every option we understand at once does not fit our layout's 40 octets.
        Err(WireError::BufferTooSmall) => assert!(seg.options.encoded_len() > 40),
        Err(e) => panic!("emit of a parsed segment failed: {e:?}"),
    }
}

/// Arbitrary octets as a TCP option area: parsing never panics, and what it accepts, emitted
/// in a segment of ours, parses to the same options. An RDMA option (kind 25) is emitted with a
/// payload as long as the run it describes (up to 1400 octets); a run reaching past that, and
/// an RDMA option ignored at parse time, are ignored again (TCPRDMA-01/04/05), never an error.
pub fn tcp_options(data: &[u8]) {
    let Ok(options) = wire::parse_options(data) else {
        return;
    };
    if options.encoded_len() > 40 {
        return;
    }
    let mut emitted = options;
    emitted.rdma_ignored = None;
    let (payload_len, mut want) = match options.rdma {
        Some(RdmaOption::Transfer(t)) => {
            let len = (usize::from(t.data_offset) + usize::from(t.data_len)).min(1400);
            let mut want = emitted;
            if !t.fits_payload(len) {
                want.rdma = None;
                want.rdma_ignored = Some(RdmaOptionError::PastSegmentEnd);
            }
            (len, want)
        }
        _ => (0, emitted),
    };
    if options.rdma.is_some() {
        // Our layout puts it 4-aligned: any alignment error is gone.
        want.rdma_ignored = want
            .rdma_ignored
            .filter(|e| *e == RdmaOptionError::PastSegmentEnd);
    }
    let repr = SegmentRepr {
        tuple: FourTuple {
            local: "198.18.0.1:4000".parse().expect("address"),
            remote: "198.18.0.2:5000".parse().expect("address"),
        },
        seq: tcp_offload::SeqNum(1),
        ack: None,
        flags: wire::Flags::default(),
        window: 0,
        options: emitted,
    };
    let mut buf = vec![0u8; repr.buffer_len(payload_len)];
    let n = repr
        .emit(&mut buf, payload_len, |p| p.fill(0x5A))
        .expect("options within 40 octets emit");
    assert_eq!(wire::parse(&buf[..n]).map(|s| s.options), Ok(want));
}

#[cfg(test)]
mod tests {
    /// Option areas built around RDMA options of every length, at every alignment, with the
    /// other options around them (a deterministic sweep, beside the corpus replay).
    #[test]
    fn rdma_option_areas_hold_the_target_invariants() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut seen_rdma = 0;
        for _ in 0..20_000 {
            let mut area = Vec::new();
            for _ in 0..next() % 4 {
                match next() % 5 {
                    0 => area.push(1),
                    1 => area.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]),
                    2 => area.extend_from_slice(&[2, 4, 5, 180]),
                    _ => {
                        let len = [2u8, 4, 16, 20, 3, 6, 17][(next() % 7) as usize];
                        area.push(25);
                        area.push(len);
                        area.extend((2..len).map(|_| next() as u8));
                    }
                }
            }
            area.truncate(40);
            if tcp_offload::wire::parse_options(&area).is_ok_and(|o| o.rdma.is_some()) {
                seen_rdma += 1;
            }
            super::tcp_options(&area);
        }
        assert!(
            seen_rdma > 1000,
            "the sweep reaches decoded RDMA options: {seen_rdma}"
        );
    }
}
