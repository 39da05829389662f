//! Raw Ethernet/IPv4/TCP frames, below any protocol: built with valid checksums to a port the
//! peer's XDP program steers, read back, turned around in place. What tests inject and the
//! bench's raw AF_XDP tools send; no TCP state.

use std::net::{IpAddr, Ipv4Addr};

use afxdp::netlink::Mac;
use afxdp::next_hop::NextHop;
use tcp_offload::checksum;

/// Ethernet + IPv4 + TCP header bytes of the frames built here (no options).
pub const HEADERS_LEN: usize = 14 + 20 + 20;
const ETHERTYPE_IPV4: u16 = 0x0800;
const TCP_PSH_ACK: u8 = 0x18;

/// One end of a raw exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEndpoint {
    /// Ethernet address.
    pub mac: Mac,
    /// IPv4 address.
    pub ip: Ipv4Addr,
    /// TCP port (steered on the receiving side).
    pub port: u16,
}

impl RawEndpoint {
    /// Both ends of an exchange with `remote_ip`, addressed from a resolved next hop (IPv4
    /// only: `None` when the hop's source address is IPv6).
    pub fn pair_from_hop(
        hop: &NextHop,
        local_port: u16,
        remote_ip: Ipv4Addr,
        remote_port: u16,
    ) -> Option<(RawEndpoint, RawEndpoint)> {
        let IpAddr::V4(local_ip) = hop.src_ip else {
            return None;
        };
        Some((
            RawEndpoint {
                mac: hop.src_mac,
                ip: local_ip,
                port: local_port,
            },
            RawEndpoint {
                mac: hop.dst_mac,
                ip: remote_ip,
                port: remote_port,
            },
        ))
    }
}

/// Writes an Ethernet/IPv4/TCP frame (PSH|ACK, sequence `seq`) carrying `payload` into `buf`;
/// returns its length, or `None` when `buf` is too short or the payload too long for IPv4.
pub fn build_tcp_frame(
    buf: &mut [u8],
    src: &RawEndpoint,
    dst: &RawEndpoint,
    seq: u32,
    payload: &[u8],
) -> Option<usize> {
    let len = HEADERS_LEN + payload.len();
    let ip_len = u16::try_from(len - 14).ok()?;
    let frame = buf.get_mut(..len)?;
    // Ethernet
    frame[0..6].copy_from_slice(&dst.mac);
    frame[6..12].copy_from_slice(&src.mac);
    frame[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    // IPv4
    let ip = &mut frame[14..34];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    ip[8] = 64;
    ip[9] = 6; // TCP
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&src.ip.octets());
    ip[16..20].copy_from_slice(&dst.ip.octets());
    let ip_sum = checksum::field(ip, 0);
    ip[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    // TCP
    let tcp_len = 20 + payload.len();
    let tcp = &mut frame[34..];
    tcp[0..2].copy_from_slice(&src.port.to_be_bytes());
    tcp[2..4].copy_from_slice(&dst.port.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].fill(0); // ack number
    tcp[12] = 5 << 4;
    tcp[13] = TCP_PSH_ACK;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    tcp[16..20].fill(0); // checksum, urgent pointer
    tcp[20..].copy_from_slice(payload);
    let pseudo = checksum::pseudo_v4(src.ip, dst.ip, tcp_len);
    let tcp_sum = checksum::field(tcp, pseudo);
    tcp[16..18].copy_from_slice(&tcp_sum.to_be_bytes());
    Some(len)
}

/// Where the TCP header starts in a frame that begins with Ethernet, IPv4 (no VLAN tag) and a
/// whole TCP header (the frame may be the first of a chain, whose IP length runs past it).
pub fn tcp_start(head: &[u8]) -> Option<usize> {
    let ihl = usize::from(*head.get(14)? & 0x0F) * 4;
    let ours = head.len() >= 14 + ihl + 20
        && head[12..14] == ETHERTYPE_IPV4.to_be_bytes()
        && head[14] >> 4 == 4
        && ihl >= 20
        && head[23] == 6;
    ours.then_some(14 + ihl)
}

/// The TCP payload of an Ethernet/IPv4/TCP frame (no VLAN tag), if it is one.
pub fn tcp_payload(frame: &[u8]) -> Option<&[u8]> {
    let tcp = tcp_start(frame)?;
    let ip_len = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    let ip_end = 14usize.checked_add(ip_len).filter(|&e| e <= frame.len())?;
    let doff = usize::from(frame[tcp + 12] >> 4) * 4;
    let start = tcp + doff;
    if doff < 20 || start > ip_end {
        return None;
    }
    Some(&frame[start..ip_end])
}

/// Turns the headers of an Ethernet/IPv4/TCP frame around in place: swaps MACs, IP addresses
/// and ports (the checksums stay valid: a checksum does not depend on the order of the words
/// it sums). With `whole`, the frame must be a whole packet ([`tcp_payload`]); else it may be
/// the first frame of a chain ([`tcp_start`]). Returns false, leaving the frame alone, when it
/// is not such a frame.
pub fn turn_around(frame: &mut [u8], whole: bool) -> bool {
    let Some(tcp) = tcp_start(frame).filter(|_| !whole || tcp_payload(frame).is_some()) else {
        return false;
    };
    let (dst, rest) = frame.split_at_mut(6);
    dst.swap_with_slice(&mut rest[..6]);
    let (src_ip, dst_ip) = frame[26..34].split_at_mut(4);
    src_ip.swap_with_slice(dst_ip);
    let (sp, dp) = frame[tcp..tcp + 4].split_at_mut(2);
    sp.swap_with_slice(dp);
    true
}

/// Turns an Ethernet/IPv4/TCP frame around in place: swaps MACs, IP addresses and ports (the
/// checksums stay valid). Returns false, leaving the frame alone, when it is not such a frame.
pub fn swap_addresses(frame: &mut [u8]) -> bool {
    turn_around(frame, true)
}

/// Source and destination of an Ethernet/IPv4/TCP frame (checked by [`tcp_payload`] first).
pub fn ends_of(frame: &[u8]) -> Option<(RawEndpoint, RawEndpoint)> {
    tcp_payload(frame)?;
    let ihl = usize::from(frame[14] & 0x0F) * 4;
    let port = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    let ip = |at: usize| Ipv4Addr::new(frame[at], frame[at + 1], frame[at + 2], frame[at + 3]);
    let mac = |at: usize| -> Mac { frame[at..at + 6].try_into().unwrap_or_default() };
    Some((
        RawEndpoint {
            mac: mac(6),
            ip: ip(26),
            port: port(14 + ihl),
        },
        RawEndpoint {
            mac: mac(0),
            ip: ip(30),
            port: port(14 + ihl + 2),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::internet_checksum;

    /// The IPv4 pseudo header's bytes (RFC 9293 §3.1), for the independent checksum.
    fn pseudo_header(src: &RawEndpoint, dst: &RawEndpoint, tcp_len: usize) -> Vec<u8> {
        let mut v = [src.ip.octets(), dst.ip.octets()].concat();
        v.extend_from_slice(&[0, 6]);
        v.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        v
    }

    fn ends() -> (RawEndpoint, RawEndpoint) {
        (
            RawEndpoint {
                mac: [2, 0, 0, 0, 0, 1],
                ip: Ipv4Addr::new(198, 18, 0, 1),
                port: 40000,
            },
            RawEndpoint {
                mac: [2, 0, 0, 0, 0, 2],
                ip: Ipv4Addr::new(198, 18, 0, 2),
                port: 4791,
            },
        )
    }

    #[test]
    fn built_frame_has_valid_checksums_and_payload() {
        let (a, b) = ends();
        let mut buf = [0u8; 128];
        let len = build_tcp_frame(&mut buf, &a, &b, 7, b"hello, xwarp").unwrap();
        let f = &buf[..len];
        assert_eq!(len, HEADERS_LEN + 12);
        assert_eq!(
            internet_checksum(&[&f[14..34]]),
            0,
            "IPv4 header checksum verifies"
        );
        let pseudo = pseudo_header(&a, &b, len - 34);
        assert_eq!(
            internet_checksum(&[&pseudo, &f[34..]]),
            0,
            "TCP checksum verifies"
        );
        assert_eq!(tcp_payload(f), Some(&b"hello, xwarp"[..]));
    }

    #[test]
    fn odd_length_payload_checksum_verifies() {
        let (a, b) = ends();
        let mut buf = [0u8; 128];
        let len = build_tcp_frame(&mut buf, &a, &b, 1, b"abc").unwrap();
        let pseudo = pseudo_header(&a, &b, len - 34);
        assert_eq!(internet_checksum(&[&pseudo, &buf[34..len]]), 0);
    }

    #[test]
    fn swap_turns_the_frame_around_and_keeps_checksums() {
        let (a, b) = ends();
        let mut fwd = [0u8; 96];
        let mut back = [0u8; 96];
        let len = build_tcp_frame(&mut fwd, &a, &b, 3, b"ping").unwrap();
        build_tcp_frame(&mut back, &b, &a, 3, b"ping").unwrap();
        assert!(swap_addresses(&mut fwd[..len]));
        // The reply built from scratch and the swapped frame are the same bytes.
        assert_eq!(fwd[..len], back[..len]);
    }

    #[test]
    fn the_first_frame_of_a_chain_is_turned_around_without_its_length() {
        let (a, b) = ends();
        let mut fwd = [0u8; 96];
        let mut back = [0u8; 96];
        let len = build_tcp_frame(&mut fwd, &a, &b, 3, &[7; 40]).unwrap();
        build_tcp_frame(&mut back, &b, &a, 3, &[7; 40]).unwrap();
        // Cut after the TCP header: the IP length runs past the frame.
        let head = HEADERS_LEN + 4;
        assert!(!turn_around(&mut fwd[..head], true), "not a whole packet");
        assert!(turn_around(&mut fwd[..head], false));
        assert_eq!(fwd[..head], back[..head]);
        assert!(
            !turn_around(&mut fwd[..HEADERS_LEN - 1], false),
            "TCP header cut"
        );
        assert!(len > head);
    }

    #[test]
    fn ends_of_a_built_frame_are_its_sender_and_receiver() {
        let (a, b) = ends();
        let mut buf = [0u8; 96];
        let len = build_tcp_frame(&mut buf, &a, &b, 9, b"who").unwrap();
        assert_eq!(ends_of(&buf[..len]), Some((a, b)));
        assert_eq!(ends_of(&buf[..HEADERS_LEN - 1]), None, "TCP header cut");
    }

    #[test]
    fn too_small_buffer_is_refused() {
        let (a, b) = ends();
        let mut buf = [0u8; HEADERS_LEN + 3];
        assert_eq!(build_tcp_frame(&mut buf, &a, &b, 0, b"four"), None);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x = 0x1234_5678u32;
        for len in 0..200 {
            let mut buf: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            if len > 23 {
                buf[12] = 8;
                buf[13] = 0;
                buf[14] = 0x45;
                buf[23] = 6;
            }
            let _ = tcp_payload(&buf);
            let _ = swap_addresses(&mut buf);
        }
    }
}
