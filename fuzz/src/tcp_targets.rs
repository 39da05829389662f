//! IPv4/IPv6 + TCP headers and TCP options (`tcp_offload::wire`).

use tcp_offload::isn::FourTuple;
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
            assert_eq!(again.options, seg.options);
            assert_eq!(again.payload, seg.payload);
        }
        // Every option we understand at once does not fit our layout's 40 octets.
        Err(WireError::BufferTooSmall) => assert!(seg.options.encoded_len() > 40),
        Err(e) => panic!("emit of a parsed segment failed: {e:?}"),
    }
}

/// Arbitrary octets as a TCP option area: parsing never panics, and what it accepts, emitted
/// in a segment of ours, parses to the same options.
pub fn tcp_options(data: &[u8]) {
    let Ok(options) = wire::parse_options(data) else {
        return;
    };
    if options.encoded_len() > 40 {
        return;
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
        options,
    };
    let mut buf = vec![0u8; repr.buffer_len(0)];
    let n = repr
        .emit(&mut buf, 0, |_| {})
        .expect("options within 40 octets emit");
    assert_eq!(wire::parse(&buf[..n]).map(|s| s.options), Ok(options));
}
