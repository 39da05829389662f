//! The Internet checksum (RFC 1071).

/// The one's-complement of the one's-complement sum of the 16-bit big-endian words of `chunks`
/// taken as one byte string. Each chunk is padded on its own: an odd-length chunk gets a zero
/// byte after it, so callers pass even-length chunks except perhaps the last. Over a header
/// whose checksum field holds the right value the result is 0.
pub fn internet_checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum = 0u64;
    for c in chunks {
        for pair in c.chunks(2) {
            sum += u64::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::internet_checksum;

    /// A captured IPv4 header (192.168.0.1 -> 192.168.0.199, UDP, TTL 64, length 0x73) with its
    /// checksum field zeroed; its real checksum is 0xb861.
    const IPV4_HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn known_ipv4_header_checksum() {
        assert_eq!(internet_checksum(&[&IPV4_HEADER]), 0xb861);
    }

    #[test]
    fn header_with_its_checksum_sums_to_zero() {
        let mut h = IPV4_HEADER;
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(internet_checksum(&[&h]), 0);
    }

    #[test]
    fn split_into_even_chunks_is_the_same_sum() {
        let whole = internet_checksum(&[&IPV4_HEADER]);
        let (a, b) = IPV4_HEADER.split_at(8);
        assert_eq!(internet_checksum(&[a, b]), whole);
    }

    #[test]
    fn odd_tail_is_padded_with_zero() {
        assert_eq!(
            internet_checksum(&[&[0x12, 0x34, 0x56]]),
            internet_checksum(&[&[0x12, 0x34, 0x56, 0x00]])
        );
        assert_eq!(internet_checksum(&[&[0x12, 0x34, 0x56]]), !0x6834);
    }

    #[test]
    fn carries_fold_back_in() {
        // 0xffff + 0x0001 = 0x1_0000 -> 0x0001; complement 0xfffe.
        assert_eq!(internet_checksum(&[&[0xff, 0xff, 0x00, 0x01]]), 0xfffe);
        assert_eq!(internet_checksum(&[]), 0xffff);
    }
}
