//! Segments emitted with the TCP checksum left to the device (`TxChecksum::Offloaded`): the
//! checksum field holds the pseudo header's folded sum, and finishing it the way a device does
//! for `CHECKSUM_PARTIAL` (sum from the TCP header to the end, field included, complemented,
//! stored in the field) gives exactly the segment emitted with the whole checksum. A
//! connection configured for it emits only such segments.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tcp_offload::Timestamp;

use proptest::prelude::*;
use tcp_offload::checksum;
use tcp_offload::wire::{self, Flags, SegmentRepr, TcpOptions};
use tcp_offload::{Config, Connection, FourTuple, IsnGenerator, SeqNum, TxChecksum};

/// What a device does with a `CHECKSUM_PARTIAL` packet whose TCP header starts at `l4`.
fn finish(packet: &mut [u8], l4: usize) {
    let sum = checksum::offloaded_field(&packet[l4..]);
    packet[l4 + 16..l4 + 18].copy_from_slice(&sum.to_be_bytes());
}

fn tuple(v6: bool, sport: u16, dport: u16) -> FourTuple {
    let (a, b): (IpAddr, IpAddr) = if v6 {
        (
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into(),
            Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).into(),
        )
    } else {
        (
            Ipv4Addr::new(198, 18, 0, 1).into(),
            Ipv4Addr::new(198, 18, 0, 2).into(),
        )
    };
    FourTuple {
        local: SocketAddr::new(a, sport),
        remote: SocketAddr::new(b, dport),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_finished_offloaded_segment_is_the_fully_checksummed_one(
        v6 in any::<bool>(),
        sport in any::<u16>(),
        dport in any::<u16>(),
        seq in any::<u32>(),
        ack in any::<u32>(),
        window in any::<u16>(),
        ts in proptest::option::of((any::<u32>(), any::<u32>())),
        payload in proptest::collection::vec(any::<u8>(), 0..1500),
    ) {
        let repr = SegmentRepr {
            tuple: tuple(v6, sport, dport),
            seq: SeqNum(seq),
            ack: Some(SeqNum(ack)),
            flags: Flags { psh: !payload.is_empty(), ..Flags::default() },
            window,
            options: TcpOptions { timestamps: ts, ..TcpOptions::default() },
        };
        let mut full = vec![0u8; repr.buffer_len(payload.len())];
        let mut partial = full.clone();
        let n = repr.emit(&mut full, payload.len(), |p| p.copy_from_slice(&payload)).unwrap();
        let m = repr
            .emit_with(&mut partial, payload.len(), |p| p.copy_from_slice(&payload), TxChecksum::Offloaded)
            .unwrap();
        prop_assert_eq!(n, m);
        let l4 = if v6 { 40 } else { 20 };
        finish(&mut partial, l4);
        prop_assert_eq!(&partial, &full);
        prop_assert!(wire::parse(&full).is_ok());
    }
}

/// A connection with `tx_checksum: Offloaded` emits its SYN with only the pseudo header's sum:
/// it does not verify as it is, and does once finished.
#[test]
fn a_connection_leaves_its_checksums_to_the_device_when_configured() {
    for cks in [TxChecksum::Full, TxChecksum::Offloaded] {
        let cfg = Config {
            tx_checksum: cks,
            ..Config::default()
        };
        let now = Timestamp::ZERO;
        let gen = IsnGenerator::new([7; 16], now);
        let mut c = Connection::connect(cfg, tuple(false, 40000, 18515), &gen, now)
            .expect("valid TCP settings");
        let mut buf = vec![0u8; 1600];
        let n = c.poll_transmit(now, &mut buf).expect("a SYN");
        let mut syn = buf[..n].to_vec();
        match cks {
            TxChecksum::Full => assert!(wire::parse(&syn).is_ok()),
            TxChecksum::Offloaded => {
                assert!(
                    wire::parse(&syn).is_err(),
                    "the checksum is left unfinished"
                );
                finish(&mut syn, 20);
                assert!(wire::parse(&syn).is_ok(), "and finishes to a valid one");
            }
        }
    }
}
