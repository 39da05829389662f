//! The Internet checksum (RFC 1071) for TCP over IPv4 and IPv6, summed 32 bits at a time.
//!
//! The ones'-complement sum of 16-bit words equals the folded sum of 32-bit words (2^16 ≡ 1 mod
//! 2^16 - 1), so the data is summed in big-endian u32 words into a u64 and folded once.

use std::net::IpAddr;

/// Adds `data` (starting at an even offset of the checksummed stream) to `acc`.
pub(crate) fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut i = 0;
    if rest.len() >= 2 {
        acc += u64::from(u16::from_be_bytes([rest[0], rest[1]]));
        i = 2;
    }
    if let Some(&b) = rest.get(i) {
        acc += u64::from(b) << 8;
    }
    acc
}

/// Folds a sum to 16 bits (ones' complement addition of the carries).
pub(crate) fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

/// The sum of the TCP pseudo header (RFC 9293 §3.1; RFC 8200 §8.1 for IPv6); `None` for mixed
/// address families.
pub(crate) fn pseudo(src: IpAddr, dst: IpAddr, l4_len: usize) -> Option<u64> {
    const TCP: u64 = 6;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            Some(sum(&d.octets(), sum(&s.octets(), 0)) + TCP + l4_len as u64)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            Some(sum(&d.octets(), sum(&s.octets(), 0)) + TCP + l4_len as u64)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071 §3 worked example: words 0001 f203 f4f5 f6f7 sum to ddf2.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
        // Odd length: the last octet is the high half of a word.
        assert_eq!(fold(sum(&[0x12, 0x34, 0x56], 0)), 0x1234 + 0x5600);
    }
}
