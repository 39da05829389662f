//! AF_XDP TX metadata (`struct xsk_tx_metadata`, Documentation/networking/xsk-tx-metadata.rst):
//! the 16 bytes in front of a transmitted packet that ask the device, or the kernel in copy
//! mode, to finish a checksum. Only the layout and the TCP request are here; the queue writes
//! them ([`super::XskQueue`]).

/// Bytes of `struct xsk_tx_metadata` in front of a transmitted packet.
pub(crate) const TX_METADATA_LEN: u32 = 16;

/// Where the TCP checksum field lies in the TCP header.
const TCP_CHECKSUM_OFFSET: u16 = 16;

/// The metadata asking for the TCP checksum of `frame` (`XDP_TXMD_FLAGS_CHECKSUM`, from the
/// TCP header to the end, stored at its checksum field), when `frame` is an Ethernet frame of
/// TCP; `None` for anything else (see [`tcp_header_offset`]).
pub(crate) fn tcp_checksum_request(frame: &[u8]) -> Option<[u8; TX_METADATA_LEN as usize]> {
    let csum_start = u16::try_from(tcp_header_offset(frame)?).ok()?;
    let mut meta = [0u8; TX_METADATA_LEN as usize];
    // struct xsk_tx_metadata { __u64 flags; union { struct { __u16 csum_start;
    // __u16 csum_offset; } request; ... } }, in host byte order.
    meta[..8].copy_from_slice(&u64::from(libc::XDP_TXMD_FLAGS_CHECKSUM).to_ne_bytes());
    meta[8..10].copy_from_slice(&csum_start.to_ne_bytes());
    meta[10..12].copy_from_slice(&TCP_CHECKSUM_OFFSET.to_ne_bytes());
    Some(meta)
}

/// Offset of the TCP header in `frame` when it is an Ethernet frame of TCP over IPv4 (a whole
/// datagram, not a fragment) or IPv6 (TCP as the first next header) with room for the TCP
/// checksum field; `None` otherwise.
pub(crate) fn tcp_header_offset(frame: &[u8]) -> Option<usize> {
    const ETH: usize = 14;
    const TCP: u8 = 6;
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let start = match ethertype {
        0x0800 => {
            let ihl = usize::from(frame.get(ETH)? & 0x0f) * 4;
            let frag = u16::from_be_bytes([*frame.get(ETH + 6)?, *frame.get(ETH + 7)?]);
            let more_fragments = frag & 0x2000 != 0;
            let whole = frag & 0x1fff == 0 && !more_fragments;
            (ihl >= 20 && *frame.get(ETH + 9)? == TCP && whole).then_some(ETH + ihl)?
        }
        0x86dd => (*frame.get(ETH + 6)? == TCP).then_some(ETH + 40)?,
        _ => return None,
    };
    (start + usize::from(TCP_CHECKSUM_OFFSET) + 2 <= frame.len()).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame of `ethertype` with an IP header of `ip_len` bytes (byte 0 as
    /// given, protocol/next header `proto` where that family keeps it) and `l4` bytes after.
    fn frame(ethertype: u16, first: u8, ip_len: usize, proto: u8, l4: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + ip_len + l4];
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f[14] = first;
        if ethertype == 0x0800 {
            f[14 + 9] = proto;
        } else {
            f[14 + 6] = proto;
        }
        f
    }

    #[test]
    fn tcp_over_ipv4_and_ipv6_is_found_behind_its_ip_header() {
        assert_eq!(tcp_header_offset(&frame(0x0800, 0x45, 20, 6, 20)), Some(34));
        assert_eq!(tcp_header_offset(&frame(0x0800, 0x46, 24, 6, 20)), Some(38));
        assert_eq!(tcp_header_offset(&frame(0x86dd, 0x60, 40, 6, 20)), Some(54));
        // Just room for the checksum field (18 bytes of TCP header).
        assert_eq!(tcp_header_offset(&frame(0x0800, 0x45, 20, 6, 18)), Some(34));
    }

    #[test]
    fn other_frames_get_no_request() {
        // UDP, ICMPv6, ARP, a bad IHL, a header cut before the checksum field, an empty frame.
        assert_eq!(tcp_header_offset(&frame(0x0800, 0x45, 20, 17, 20)), None);
        assert_eq!(tcp_header_offset(&frame(0x86dd, 0x60, 40, 58, 20)), None);
        assert_eq!(tcp_header_offset(&frame(0x0806, 0x00, 28, 6, 0)), None);
        assert_eq!(tcp_header_offset(&frame(0x0800, 0x44, 20, 6, 20)), None);
        assert_eq!(tcp_header_offset(&frame(0x0800, 0x45, 20, 6, 17)), None);
        assert_eq!(tcp_header_offset(&[]), None);
        assert_eq!(tcp_checksum_request(&frame(0x0806, 0, 28, 6, 0)), None);
    }

    #[test]
    fn fragments_get_no_request() {
        // First fragment (MF set) and a later one (offset 185): the checksum covers the
        // whole datagram, which no one frame holds.
        let mut first = frame(0x0800, 0x45, 20, 6, 20);
        first[14 + 6] = 0x20;
        assert_eq!(tcp_header_offset(&first), None);
        let mut later = frame(0x0800, 0x45, 20, 6, 20);
        later[14 + 7] = 185;
        assert_eq!(tcp_header_offset(&later), None);
        // DF alone is a whole datagram.
        let mut df = frame(0x0800, 0x45, 20, 6, 20);
        df[14 + 6] = 0x40;
        assert_eq!(tcp_header_offset(&df), Some(34));
    }

    #[test]
    fn the_request_names_the_tcp_checksum_field() {
        let meta = tcp_checksum_request(&frame(0x86dd, 0x60, 40, 6, 20)).unwrap();
        let flags = u64::from_ne_bytes(meta[..8].try_into().unwrap());
        assert_eq!(flags, u64::from(libc::XDP_TXMD_FLAGS_CHECKSUM));
        assert_eq!(u16::from_ne_bytes([meta[8], meta[9]]), 54);
        assert_eq!(u16::from_ne_bytes([meta[10], meta[11]]), 16);
        assert_eq!(&meta[12..], &[0; 4]);
    }
}
