//! `endpoint::flow_of` against etherparse (the oracle): for any IPv4 or IPv6 TCP frame
//! etherparse builds, the flow read is its (source, destination) ends; a frame cut anywhere
//! before the ports end gives `None`, never a panic; and the owner both ends compute for it is
//! the same lane (`Lane::of` is symmetric), the property the multi-queue hand-off rests on.

use std::net::{IpAddr, SocketAddr};

use endpoint::{flow_of, Lane};
use etherparse::PacketBuilder;
use proptest::prelude::*;

/// A TCP frame from `src` to `dst` (one family) with `payload`, built by etherparse.
fn frame(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let ip = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), 64),
        (IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), 64),
        _ => unreachable!("one family"),
    };
    let b = ip.tcp(src.port(), dst.port(), 1, 65535);
    let mut out = Vec::with_capacity(b.size(payload.len()));
    b.write(&mut out, payload)
        .expect("etherparse writes the frame");
    out
}

/// Two ends of one family: `A` is `[u8; 4]` (IPv4) or `[u8; 16]` (IPv6).
fn ends_of<A>() -> impl Strategy<Value = (SocketAddr, SocketAddr)>
where
    A: Arbitrary + Into<IpAddr> + 'static,
{
    (any::<A>(), any::<u16>(), any::<A>(), any::<u16>())
        .prop_map(|(a, p, b, q)| (SocketAddr::new(a.into(), p), SocketAddr::new(b.into(), q)))
}

fn ends() -> impl Strategy<Value = (SocketAddr, SocketAddr)> {
    prop_oneof![ends_of::<[u8; 4]>(), ends_of::<[u8; 16]>()]
}

/// Random bytes; two thirds of them (when long enough) made to look like IPv4 or IPv6 carrying
/// TCP in the fields flow_of checks first, with a random IHL and random lengths.
fn arbitrary_frames() -> impl Strategy<Value = Vec<u8>> {
    (0u8..3, proptest::collection::vec(any::<u8>(), 0..128)).prop_map(|(kind, mut b)| {
        if b.len() >= 55 {
            match kind {
                0 => {
                    b[12..14].copy_from_slice(&[0x08, 0x00]);
                    b[14] = 0x40 | (b[14] & 0x0f);
                    b[23] = 6;
                }
                1 => {
                    b[12..14].copy_from_slice(&[0x86, 0xdd]);
                    b[14] = 0x60 | (b[14] & 0x0f);
                    b[20] = 6;
                }
                _ => {}
            }
        }
        b
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn flow_of_reads_what_etherparse_wrote(
        (src, dst) in ends(),
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        lanes in 1u16..9,
    ) {
        let f = frame(src, dst, &payload);
        prop_assert_eq!(flow_of(&f), Some((src, dst)));
        // The ports end 4 octets into the TCP header: any shorter cut reads nothing.
        let ports_end = 14 + if src.is_ipv4() { 20 } else { 40 } + 4;
        for cut in 0..ports_end {
            prop_assert_eq!(flow_of(&f[..cut]), None, "cut at {}", cut);
        }
        prop_assert_eq!(Lane::of(src, dst, lanes), Lane::of(dst, src, lanes));
        prop_assert!(Lane::of(src, dst, lanes) < lanes);
    }

    #[test]
    fn arbitrary_bytes_read_as_a_flow_only_when_ip_carrying_tcp(bytes in arbitrary_frames()) {
        if let Some((s, d)) = flow_of(&bytes) {
            let (ethertype, ip) = (&bytes[12..14], &bytes[14..]);
            match ethertype {
                [0x08, 0x00] => prop_assert!(ip[0] >> 4 == 4 && ip[9] == 6 && s.is_ipv4()),
                [0x86, 0xdd] => prop_assert!(ip[0] >> 4 == 6 && ip[6] == 6 && s.is_ipv6()),
                other => prop_assert!(false, "read a flow from EtherType {:?}", other),
            }
            prop_assert_eq!(s.is_ipv4(), d.is_ipv4());
        }
    }
}
