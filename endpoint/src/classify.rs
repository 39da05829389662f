//! Which received frames are ours: the one definition the XDP program (`bpf/xwarp_steer.bpf.c`,
//! the same table in `bpf/xwarp_maps.h`) and the endpoint share. `handle_frame` makes its first
//! decision with [`classify`]; `afxdp/tests/frame_agreement.rs` feeds one corpus of frames to
//! the loaded XDP program (`BPF_PROG_TEST_RUN`) and to [`classify`] and checks that they agree
//! frame by frame (redirect = [`Ours`](FrameVerdict::Ours), pass =
//! [`NotOurs`](FrameVerdict::NotOurs), drop = [`Malformed`](FrameVerdict::Malformed) or
//! [`Fragment`](FrameVerdict::Fragment), told apart by the program's counters).
//!
//! The rules, checked in this order; the first that matches decides:
//!
//! | # | the frame | verdict | XDP program |
//! |---|---|---|---|
//! | 1 | shorter than an Ethernet header (14 octets) | Malformed | drop, `malformed` |
//! | 2 | EtherType 802.1Q or 802.1ad: a VLAN tag (QinQ included) | NotOurs | pass |
//! | 3 | EtherType neither IPv4 nor IPv6 (ARP, ...) | NotOurs | pass |
//! | 4 | IPv4 header: under 20 octets, version not 4, IHL under 5, total length under IHL x 4 or beyond the frame | Malformed | drop, `malformed` |
//! | 5 | IPv6 header: under 40 octets, version not 6, 40 + payload length beyond the frame | Malformed | drop, `malformed` |
//! | 6 | destination address not one we own (IPv4 or IPv6) | NotOurs | pass |
//! | 7 | not TCP: IPv4 protocol not 6; IPv6 Next Header neither 6 (TCP) nor 44 (Fragment) | NotOurs | pass |
//! | 8 | IPv6 Fragment header: under 8 octets in the payload (Malformed); its Next Header not TCP (NotOurs) | Malformed / NotOurs | drop, `malformed` / pass |
//! | 9 | a later fragment (fragment offset not 0) | NotOurs | pass |
//! | 10 | TCP payload (after a Fragment header, if any) under 4 octets: no room for the ports | Malformed | drop, `malformed` |
//! | 11 | TCP destination port not steered | NotOurs | pass |
//! | 12 | a first fragment: IPv4 More Fragments set; any IPv6 Fragment header (offset 0) | Fragment | drop, `fragments` |
//! | 13 | TCP header: under 20 octets, data offset under 5 or beyond the TCP payload | Malformed | drop, `malformed` |
//! | 14 | everything else | Ours | redirect (no socket on the rx queue: pass, `steered_no_socket`) |
//!
//! Why these rules:
//! - **VLAN tags** (rule 2): the endpoint sends untagged frames only, so it could not answer a
//!   tagged flow; tagged traffic belongs to the kernel's VLAN devices (serve a VLAN by running
//!   the engine on its VLAN device). NICs that strip tags before XDP (rx VLAN offload) hand
//!   over untagged frames, whose address then decides (rule 6).
//! - **ARP and Neighbour Discovery** (rules 3 and 7): ARP and ICMPv6 (NDP's Neighbour
//!   Solicitations and Advertisements, RFC 4861) are the kernel's: it owns the same address,
//!   answers solicitations and keeps the neighbour table the device copies next hops from. The
//!   endpoint learns no next hop from them itself (`neighbours.rs`).
//! - **IPv6 extension headers** (rules 7 and 8): the endpoint parses TCP directly behind the
//!   fixed IPv6 header (what TCP stacks send); of the extension headers only Fragment is looked
//!   into, so that fragments to steered ports are treated as IPv4's are. Hop-by-Hop, Routing,
//!   Destination Options and the rest are not ours (the kernel decides about them).
//! - **Fragments** (rules 9 and 12): the engine does not reassemble. Passing a first fragment
//!   to the kernel would be worse than dropping it: the kernel would reassemble the segment,
//!   find no socket for the engine's port and answer with a RST that kills the engine's flow.
//!   So a first fragment to a steered port is dropped and counted (`fragments`) and TCP
//!   retransmits (our own segments are sent with DF over IPv4, never fragmented over IPv6, and
//!   fit the MTU; a peer that fragments shows up in the counter). A later fragment carries no
//!   ports, so it cannot be told apart from a kernel flow's: it passes, and without its first
//!   fragment the kernel's reassembly queue expires it. An IPv6 atomic fragment (offset 0, M
//!   clear, RFC 6946) counts as a first fragment: no TCP stack of ours sends one.
//! - **Malformed** (rules 1, 4, 5, 8, 10, 13): drop and count. An IP header is judged whatever
//!   its destination (the kernel drops the same headers); a TCP header only on a steered port
//!   of ours: the kernel's own ports are the kernel's business.
//! - Not part of the rule: the destination MAC (the NIC filters it; the endpoint then drops,
//!   counted, a frame for another MAC), the IPv4 and TCP checksums, the reserved flag and TCP
//!   options (checked by `tcp_offload::wire::parse` after this), the flow table.
//!
//! A frame shorter than 14 octets cannot be fed to `BPF_PROG_TEST_RUN` (the kernel refuses it),
//! so the agreement test checks rule 1 on this side only.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Octets of an untagged Ethernet header.
const ETHERNET_LEN: usize = 14;
/// EtherType of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
const ETHERTYPE_IPV6: u16 = 0x86DD;
/// IP protocol number (IPv6 Next Header) of TCP.
const PROTO_TCP: u8 = 6;
/// IPv6 Next Header of the Fragment header (RFC 8200 §4.5).
const NEXT_FRAGMENT: u8 = 44;
/// Octets of an IPv4 header without options, and of a TCP header without options.
const MIN_HEADER_LEN: usize = 20;
/// Octets of the fixed IPv6 header.
const IPV6_HEADER_LEN: usize = 40;
/// Octets of the IPv6 Fragment header.
const FRAGMENT_HEADER_LEN: usize = 8;

/// Field offsets of the IPv4 header (RFC 791 §3.1), the IPv6 header and its Fragment header
/// (RFC 8200 §3, §4.5) and the TCP header (RFC 9293 §3.1).
mod field {
    use core::ops::Range;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const IP_VER_IHL: usize = 0;
    pub const IP_TOTAL_LEN: Range<usize> = 2..4;
    pub const IP_FLAGS_FRAG: Range<usize> = 6..8;
    pub const IP_PROTOCOL: usize = 9;
    pub const IP_SRC: Range<usize> = 12..16;
    pub const IP_DST: Range<usize> = 16..20;
    /// More Fragments.
    pub const IP_MF: u16 = 0x2000;
    /// The fragment offset bits.
    pub const IP_FRAG_OFFSET: u16 = 0x1FFF;
    pub const IP6_PAYLOAD_LEN: Range<usize> = 4..6;
    pub const IP6_NEXT_HEADER: usize = 6;
    pub const IP6_SRC: Range<usize> = 8..24;
    pub const IP6_DST: Range<usize> = 24..40;
    /// In the Fragment header: its Next Header, and the offset (high 13 bits) / M word.
    pub const FRAG6_NEXT_HEADER: usize = 0;
    pub const FRAG6_OFFSET_M: Range<usize> = 2..4;
    /// The fragment offset bits of that word (M is bit 0).
    pub const FRAG6_OFFSET: u16 = 0xFFF8;
    pub const TCP_SRC_PORT: Range<usize> = 0..2;
    pub const TCP_DST_PORT: Range<usize> = 2..4;
    /// Data offset in the high nibble.
    pub const TCP_DATA_OFF: usize = 12;
}

/// What a received frame is to us (rules in the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameVerdict {
    /// IPv4 or IPv6 TCP to an owned address and a steered port, headers sound: the endpoint's.
    Ours,
    /// The kernel's: anything else that is well formed (XDP passes it).
    NotOurs,
    /// Truncated or impossible headers: dropped and counted.
    Malformed,
    /// The first fragment of a TCP segment to an owned address and a steered port: dropped and
    /// counted, so that TCP retransmits (the engine does not reassemble).
    Fragment,
}

/// The destination addresses an endpoint owns (in the XDP program: the `xwarp_addrs4` and
/// `xwarp_addrs6` maps).
#[derive(Clone, Copy, Debug)]
pub struct OwnedAddrs<'a>(pub &'a [IpAddr]);

impl OwnedAddrs<'_> {
    /// True if `ip` is one of ours.
    pub fn owns(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip)
    }
}

/// Where the TCP header of an IP packet to us starts, and whether it is a fragment.
enum Transport<'a> {
    /// The IP payload (TCP header and data), whether it is a first fragment, and the packet's
    /// source and destination addresses.
    Tcp {
        l4: &'a [u8],
        first_fragment: bool,
        src: IpAddr,
        dst: IpAddr,
    },
    /// A rule decided before the TCP header.
    Decided(FrameVerdict),
}

/// Classifies one received Ethernet frame (no FCS) by the rules of the module documentation.
/// `steered` says whether a TCP destination port is steered to us (listening ports and the
/// active-open range). Never panics.
pub fn classify(
    frame: &[u8],
    owned: OwnedAddrs<'_>,
    steered: impl Fn(u16) -> bool,
) -> FrameVerdict {
    use FrameVerdict::*;
    // 1.
    let Some(ethertype) = frame.get(field::ETHERTYPE).map(be16) else {
        return Malformed;
    };
    // 2, 3: a VLAN tag (0x8100, 0x88A8) is neither IPv4 nor IPv6.
    let (tcp, first_fragment) = match ip_transport(frame, ethertype, |ip| owned.owns(ip)) {
        Transport::Tcp {
            l4, first_fragment, ..
        } => (l4, first_fragment),
        Transport::Decided(v) => return v,
    };
    // 10.
    let Some(port) = tcp.get(field::TCP_DST_PORT).map(be16) else {
        return Malformed;
    };
    // 11.
    if !steered(port) {
        return NotOurs;
    }
    // 12.
    if first_fragment {
        return Fragment;
    }
    // 13.
    if tcp.len() < MIN_HEADER_LEN {
        return Malformed;
    }
    let data_off = usize::from(tcp[field::TCP_DATA_OFF] >> 4) * 4;
    if data_off < MIN_HEADER_LEN || data_off > tcp.len() {
        return Malformed;
    }
    // 14.
    Ours
}

/// The (source, destination) ends of a TCP segment in an Ethernet frame whose headers pass
/// rules 1 to 10 with every address taken as ours (a first fragment included): a multi-queue
/// host hands the frame to the lane that owns that flow ([`crate::Lane`]). `None` for any
/// other frame (it stays where it arrived and is classified there). Never panics.
pub fn flow_of(frame: &[u8]) -> Option<(SocketAddr, SocketAddr)> {
    let ethertype = frame.get(field::ETHERTYPE).map(be16)?;
    let Transport::Tcp { l4, src, dst, .. } = ip_transport(frame, ethertype, |_| true) else {
        return None;
    };
    let port = |at| l4.get(at).map(be16);
    Some((
        SocketAddr::new(src, port(field::TCP_SRC_PORT)?),
        SocketAddr::new(dst, port(field::TCP_DST_PORT)?),
    ))
}

/// Rules 2 to 9 for the IP packet behind the Ethernet header of `frame` (EtherType
/// `ethertype`), with `owns` deciding rule 6.
fn ip_transport(frame: &[u8], ethertype: u16, owns: impl Fn(IpAddr) -> bool) -> Transport<'_> {
    let ip = &frame[ETHERNET_LEN..];
    match ethertype {
        ETHERTYPE_IPV4 => ipv4(ip, owns),
        ETHERTYPE_IPV6 => ipv6(ip, owns),
        _ => Transport::Decided(FrameVerdict::NotOurs),
    }
}

/// Rules 4, 6, 7 and 9 for an IPv4 packet.
fn ipv4(ip: &[u8], owns: impl Fn(IpAddr) -> bool) -> Transport<'_> {
    use FrameVerdict::*;
    use Transport::Decided;
    // 4.
    if ip.len() < MIN_HEADER_LEN || ip[field::IP_VER_IHL] >> 4 != 4 {
        return Decided(Malformed);
    }
    let ihl = usize::from(ip[field::IP_VER_IHL] & 0x0F) * 4;
    let total = usize::from(be16(&ip[field::IP_TOTAL_LEN]));
    if ihl < MIN_HEADER_LEN || total < ihl || total > ip.len() {
        return Decided(Malformed);
    }
    // 6.
    let addr = |at: core::ops::Range<usize>| {
        let mut a = [0u8; 4];
        a.copy_from_slice(&ip[at]);
        IpAddr::from(Ipv4Addr::from(a))
    };
    let dst = addr(field::IP_DST);
    if !owns(dst) {
        return Decided(NotOurs);
    }
    // 7.
    if ip[field::IP_PROTOCOL] != PROTO_TCP {
        return Decided(NotOurs);
    }
    // 9.
    let frag = be16(&ip[field::IP_FLAGS_FRAG]);
    if frag & field::IP_FRAG_OFFSET != 0 {
        return Decided(NotOurs);
    }
    Transport::Tcp {
        l4: &ip[ihl..total],
        first_fragment: frag & field::IP_MF != 0,
        src: addr(field::IP_SRC),
        dst,
    }
}

/// Rules 5 to 9 for an IPv6 packet.
fn ipv6(ip: &[u8], owns: impl Fn(IpAddr) -> bool) -> Transport<'_> {
    use FrameVerdict::*;
    use Transport::Decided;
    // 5.
    if ip.len() < IPV6_HEADER_LEN || ip[0] >> 4 != 6 {
        return Decided(Malformed);
    }
    let total = IPV6_HEADER_LEN + usize::from(be16(&ip[field::IP6_PAYLOAD_LEN]));
    if total > ip.len() {
        return Decided(Malformed);
    }
    // 6.
    let addr = |at: core::ops::Range<usize>| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&ip[at]);
        IpAddr::from(Ipv6Addr::from(a))
    };
    let (src, dst) = (addr(field::IP6_SRC), addr(field::IP6_DST));
    if !owns(dst) {
        return Decided(NotOurs);
    }
    let payload = &ip[IPV6_HEADER_LEN..total];
    match ip[field::IP6_NEXT_HEADER] {
        PROTO_TCP => Transport::Tcp {
            l4: payload,
            first_fragment: false,
            src,
            dst,
        },
        NEXT_FRAGMENT => {
            // 8.
            if payload.len() < FRAGMENT_HEADER_LEN {
                return Decided(Malformed);
            }
            if payload[field::FRAG6_NEXT_HEADER] != PROTO_TCP {
                return Decided(NotOurs);
            }
            // 9.
            if be16(&payload[field::FRAG6_OFFSET_M]) & field::FRAG6_OFFSET != 0 {
                return Decided(NotOurs);
            }
            Transport::Tcp {
                l4: &payload[FRAGMENT_HEADER_LEN..],
                first_fragment: true,
                src,
                dst,
            }
        }
        // 7.
        _ => Decided(NotOurs),
    }
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::frame_corpus::{frame_corpus, header_mutations, CorpusAddrs, Expect};

    fn verdict(e: Expect) -> FrameVerdict {
        match e {
            Expect::Ours => FrameVerdict::Ours,
            Expect::NotOurs => FrameVerdict::NotOurs,
            Expect::Malformed => FrameVerdict::Malformed,
            Expect::Fragment => FrameVerdict::Fragment,
        }
    }

    fn classify_for(a: &CorpusAddrs, frame: &[u8]) -> FrameVerdict {
        let own = [IpAddr::from(a.ip), IpAddr::from(a.ip6)];
        classify(frame, OwnedAddrs(&own), |p| p == a.steered)
    }

    /// `flow_of` on the shared corpus: every frame classify takes as ours has its ends read,
    /// from the peer to us on the steered port; frames that are not IP, or whose IP header is
    /// malformed before the ports, have none.
    #[test]
    fn flow_of_reads_the_ends_of_every_frame_that_is_ours() {
        let a = CorpusAddrs::default();
        let ours = [IpAddr::from(a.ip), IpAddr::from(a.ip6)];
        let peers = [IpAddr::from(a.peer_ip), IpAddr::from(a.peer_ip6)];
        let mut checked = 0;
        for f in frame_corpus(&a) {
            let ends = flow_of(&f.bytes);
            if f.expect == Expect::Ours {
                let (src, dst) = ends.unwrap_or_else(|| panic!("{}: no ends", f.name));
                assert!(
                    peers.contains(&src.ip()) && ours.contains(&dst.ip()),
                    "{}",
                    f.name
                );
                assert_eq!(dst.port(), a.steered, "{}", f.name);
                checked += 1;
            }
            let not_ip = !matches!(
                f.bytes.get(field::ETHERTYPE).map(be16),
                Some(ETHERTYPE_IPV4 | ETHERTYPE_IPV6)
            );
            if not_ip || f.bytes.len() < ETHERNET_LEN + MIN_HEADER_LEN {
                assert_eq!(ends, None, "{}", f.name);
            }
        }
        assert!(
            checked >= 2,
            "the corpus has IPv4 and IPv6 frames that are ours"
        );
        // A frame cut inside its IP header, or before the ports, has no ends.
        let f = frame_corpus(&a)
            .into_iter()
            .find(|f| f.expect == Expect::Ours)
            .unwrap();
        for cut in 0..ETHERNET_LEN + MIN_HEADER_LEN + 4 {
            assert_eq!(flow_of(&f.bytes[..cut]), None, "cut at {cut}");
        }
    }

    /// Every row of the table, from the shared corpus (the XDP program gets the same one in
    /// `afxdp/tests/frame_agreement.rs`).
    #[test]
    fn every_corpus_frame_gets_the_verdict_of_its_row() {
        let a = CorpusAddrs::default();
        let wrong: Vec<String> = frame_corpus(&a)
            .iter()
            .filter(|f| classify_for(&a, &f.bytes) != verdict(f.expect))
            .map(|f| {
                format!(
                    "{}: {:?}, want {:?}",
                    f.name,
                    classify_for(&a, &f.bytes),
                    f.expect
                )
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn owned_addresses_and_steered_ports_decide_together() {
        let a = CorpusAddrs::default();
        let f = a.good_frame();
        let steered = |p| p == a.steered;
        let mine = [IpAddr::from(a.ip)];
        let others = [IpAddr::from(a.other_ip), "2001:db8::2".parse().unwrap()];
        assert_eq!(classify(&f, OwnedAddrs(&mine), steered), FrameVerdict::Ours);
        assert_eq!(
            classify(&f, OwnedAddrs(&others), steered),
            FrameVerdict::NotOurs
        );
        assert_eq!(
            classify(&f, OwnedAddrs(&[]), steered),
            FrameVerdict::NotOurs
        );
        assert_eq!(
            classify(&f, OwnedAddrs(&mine), |_| false),
            FrameVerdict::NotOurs
        );
    }

    #[test]
    fn mutations_never_panic_and_truncations_of_a_good_frame_are_malformed() {
        let a = CorpusAddrs::default();
        for good in [a.good_frame(), a.good_frame6()] {
            for m in header_mutations(&good) {
                let v = classify_for(&a, &m);
                if good.starts_with(&m) {
                    assert_eq!(v, FrameVerdict::Malformed, "cut at {}", m.len());
                }
            }
        }
    }

    #[test]
    fn an_ipv6_frame_is_ours_only_for_an_owned_ipv6_address() {
        let a = CorpusAddrs::default();
        let f = a.good_frame6();
        let steered = |p| p == a.steered;
        let v4_only = [IpAddr::from(a.ip)];
        let v6 = [IpAddr::from(a.ip6)];
        assert_eq!(classify(&f, OwnedAddrs(&v6), steered), FrameVerdict::Ours);
        assert_eq!(
            classify(&f, OwnedAddrs(&v4_only), steered),
            FrameVerdict::NotOurs
        );
        assert_eq!(
            classify(&a.good_frame(), OwnedAddrs(&v6), steered),
            FrameVerdict::NotOurs
        );
    }
}
