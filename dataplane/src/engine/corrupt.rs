//! Bit flips for the fault injector: one bit of a frame's TCP payload, with the TCP checksum
//! left as it was (the receiver's checksum check must drop the frame) or mended to match
//! (RFC 1624's incremental update), so that only the MPA CRC can tell.

use std::ops::Range;

use tcp_offload::checksum;

/// Where the TCP segment starts in an Ethernet frame of TCP over IPv4 or IPv6 (TCP the first
/// next header), and where its payload lies (within the IP length); `None` when the frame is
/// not such a frame or carries no payload.
pub(super) fn tcp_payload(frame: &[u8]) -> Option<(usize, Range<usize>)> {
    let be16 = |at: usize| Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]));
    let (tcp, ip_end) = match be16(12)? {
        0x0800 => {
            let ihl = usize::from(frame.get(14)? & 0x0f) * 4;
            let ours = ihl >= 20 && *frame.get(23)? == 6;
            ours.then_some((14 + ihl, 14 + usize::from(be16(16)?)))?
        }
        0x86dd => (*frame.get(20)? == 6).then_some((54, 54 + usize::from(be16(18)?)))?,
        _ => return None,
    };
    let start = tcp + usize::from(frame.get(tcp + 12)? >> 4) * 4;
    let fits = start >= tcp + 20 && start < ip_end && ip_end <= frame.len();
    fits.then_some((tcp, start..ip_end))
}

/// Flips bit `bit % 8` of octet `at` of `payload` (as [`tcp_payload`] found it, in the segment
/// that starts at `tcp`); with `mend`, updates the TCP checksum to match.
pub(super) fn flip(
    frame: &mut [u8],
    tcp: usize,
    payload: &Range<usize>,
    at: usize,
    bit: u32,
    mend: bool,
) {
    // The checksum sums 16-bit words from the segment's start; an odd last octet is padded
    // with zero.
    let word_at = tcp + ((at - tcp) & !1);
    let word = |f: &[u8]| {
        let low = if word_at + 1 < payload.end {
            f[word_at + 1]
        } else {
            0
        };
        u16::from_be_bytes([f[word_at], low])
    };
    let old = word(frame);
    frame[at] ^= 1 << (bit % 8);
    if mend {
        let field = tcp + 16;
        let sum = u16::from_be_bytes([frame[field], frame[field + 1]]);
        let new = mended(sum, old, word(frame));
        frame[field..field + 2].copy_from_slice(&new.to_be_bytes());
    }
}

/// RFC 1624 eqn. 3: the checksum `hc` of data in which one word went from `old` to `new`,
/// HC' = ~(~HC + ~m + m'), summed and folded by the production checksum.
fn mended(hc: u16, old: u16, new: u16) -> u16 {
    !checksum::fold(checksum::word(!hc) + checksum::word(!old) + checksum::word(new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use testbed::tcp_frame::{build_tcp_frame, RawEndpoint};

    fn frame(payload_len: usize) -> Vec<u8> {
        let end = |last: u8, port| RawEndpoint {
            mac: [2, 0, 0, 0, 0, last],
            ip: std::net::Ipv4Addr::new(198, 18, 0, last),
            port,
        };
        let payload: Vec<u8> = (0..payload_len).map(|i| (i * 7) as u8).collect();
        let mut f = vec![0u8; 2048];
        let n = build_tcp_frame(&mut f, &end(1, 4000), &end(2, 5000), 9, &payload).unwrap();
        f.truncate(n);
        f
    }

    fn checksum_holds(f: &[u8]) -> bool {
        tcp_offload::wire::parse(&f[14..]).is_ok()
    }

    /// Every bit of odd and even payloads, at odd and even offsets: a stale checksum is
    /// caught, a mended one verifies (so the flip reaches MPA), and the payload differs.
    #[test]
    fn a_flipped_bit_fails_the_checksum_unless_mended() {
        for len in [1, 2, 7, 100] {
            let good = frame(len);
            assert!(checksum_holds(&good));
            let (tcp, payload) = tcp_payload(&good).expect("a TCP payload");
            assert_eq!((tcp, payload.len()), (34, len));
            for at in payload.clone() {
                for bit in 0..8 {
                    for mend in [false, true] {
                        let mut f = good.clone();
                        flip(&mut f, tcp, &payload, at, bit, mend);
                        assert_eq!(checksum_holds(&f), mend, "len {len} at {at} bit {bit}");
                        assert_ne!(f[payload.clone()], good[payload.clone()]);
                    }
                }
            }
        }
    }

    #[test]
    fn frames_without_payload_or_tcp_are_left_alone() {
        assert_eq!(tcp_payload(&frame(0)), None);
        let mut udp = frame(10);
        udp[23] = 17;
        assert_eq!(tcp_payload(&udp), None);
        assert_eq!(tcp_payload(&[0u8; 10]), None);
    }
}
