//! Which received frames are ours: the one definition the XDP program (`bpf/xwarp_steer.bpf.c`,
//! the same table in `bpf/xwarp_maps.h`) and the endpoint share. `handle_frame` makes its first
//! decision with [`classify`]; `dataplane/tests/frame_agreement.rs` feeds one corpus of frames to
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
//! | 3 | EtherType other than IPv4 (ARP, IPv6, ...) | NotOurs | pass |
//! | 4 | IPv4 header: under 20 octets, version not 4, IHL under 5, total length under IHL x 4 or beyond the frame | Malformed | drop, `malformed` |
//! | 5 | destination address not one we own | NotOurs | pass |
//! | 6 | protocol not TCP | NotOurs | pass |
//! | 7 | a later fragment (fragment offset not 0) | NotOurs | pass |
//! | 8 | IP payload under 4 octets (no room for the ports) | Malformed | drop, `malformed` |
//! | 9 | TCP destination port not steered | NotOurs | pass |
//! | 10 | a first fragment (More Fragments set) | Fragment | drop, `fragments` |
//! | 11 | TCP header: IP payload under 20 octets, data offset under 5 or beyond the IP payload | Malformed | drop, `malformed` |
//! | 12 | everything else | Ours | redirect (no socket on the rx queue: pass, `steered_no_socket`) |
//!
//! Why these rules:
//! - **VLAN tags** (rule 2): the endpoint sends untagged frames only, so it could not answer a
//!   tagged flow; tagged traffic belongs to the kernel's VLAN devices (serve a VLAN by running
//!   the engine on its VLAN device). NICs that strip tags before XDP (rx VLAN offload) hand
//!   over untagged frames, whose address then decides (rule 5).
//! - **IPv6** (rule 3): the endpoint does not speak IPv6 yet (issue 12), so IPv6 is the
//!   kernel's, steered port or not, rather than redirected and then dropped. The program's
//!   map has slots for owned IPv6 addresses for when it does.
//! - **Fragments** (rules 7 and 10): the engine does not reassemble. Passing a first fragment
//!   to the kernel would be worse than dropping it: the kernel would reassemble the segment,
//!   find no socket for the engine's port and answer with a RST that kills the engine's flow.
//!   So a first fragment to a steered port is dropped and counted (`fragments`) and TCP
//!   retransmits (our own segments are sent with DF and fit the MTU; a peer that fragments
//!   shows up in the counter). A later fragment carries no ports, so it cannot be told apart
//!   from a kernel flow's: it passes, and without its first fragment the kernel's reassembly
//!   queue expires it.
//! - **Malformed** (rules 1, 4, 8, 11): drop and count. An IPv4 header is judged whatever its
//!   destination (the kernel drops the same headers); a TCP header only on a steered port of
//!   ours: the kernel's own ports are the kernel's business.
//! - Not part of the rule: the destination MAC (the NIC filters it; the endpoint then drops,
//!   counted, a frame for another MAC), the IPv4 and TCP checksums, the reserved flag and TCP
//!   options (checked by `tcp_offload::wire::parse` after this), the flow table.
//!
//! A frame shorter than 14 octets cannot be fed to `BPF_PROG_TEST_RUN` (the kernel refuses it),
//! so the agreement test checks rule 1 on this side only.

use std::net::{IpAddr, Ipv4Addr};

/// Octets of an untagged Ethernet header.
const ETHERNET_LEN: usize = 14;
/// EtherType of IPv4.
const ETHERTYPE_IPV4: u16 = 0x0800;
/// IPv4 protocol number of TCP.
const PROTO_TCP: u8 = 6;
/// Octets of an IPv4 header without options, and of a TCP header without options.
const MIN_HEADER_LEN: usize = 20;

/// Field offsets of the IPv4 header (RFC 791 §3.1) and the TCP header (RFC 9293 §3.1).
mod field {
    use core::ops::Range;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const IP_VER_IHL: usize = 0;
    pub const IP_TOTAL_LEN: Range<usize> = 2..4;
    pub const IP_FLAGS_FRAG: Range<usize> = 6..8;
    pub const IP_PROTOCOL: usize = 9;
    pub const IP_DST: Range<usize> = 16..20;
    /// More Fragments.
    pub const IP_MF: u16 = 0x2000;
    /// The fragment offset bits.
    pub const IP_FRAG_OFFSET: u16 = 0x1FFF;
    pub const TCP_DST_PORT: Range<usize> = 2..4;
    /// Data offset in the high nibble.
    pub const TCP_DATA_OFF: usize = 12;
}

/// What a received frame is to us (rules in the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameVerdict {
    /// IPv4/TCP to an owned address and a steered port, headers sound: the endpoint's.
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
/// `xwarp_addrs6` maps). IPv6 addresses may be listed but are not consulted yet: rule 3 leaves
/// all IPv6 to the kernel.
#[derive(Clone, Copy, Debug)]
pub struct OwnedAddrs<'a>(pub &'a [IpAddr]);

impl OwnedAddrs<'_> {
    /// True if `ip` is one of ours.
    pub fn owns_v4(&self, ip: Ipv4Addr) -> bool {
        self.0.contains(&IpAddr::V4(ip))
    }
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
    // 2, 3: a VLAN tag (0x8100, 0x88A8) is not IPv4 either.
    if ethertype != ETHERTYPE_IPV4 {
        return NotOurs;
    }
    let ip = &frame[ETHERNET_LEN..];
    // 4.
    if ip.len() < MIN_HEADER_LEN || ip[field::IP_VER_IHL] >> 4 != 4 {
        return Malformed;
    }
    let ihl = usize::from(ip[field::IP_VER_IHL] & 0x0F) * 4;
    let total = usize::from(be16(&ip[field::IP_TOTAL_LEN]));
    if ihl < MIN_HEADER_LEN || total < ihl || total > ip.len() {
        return Malformed;
    }
    // 5.
    let dst = Ipv4Addr::new(
        ip[field::IP_DST.start],
        ip[field::IP_DST.start + 1],
        ip[field::IP_DST.start + 2],
        ip[field::IP_DST.start + 3],
    );
    if !owned.owns_v4(dst) {
        return NotOurs;
    }
    // 6.
    if ip[field::IP_PROTOCOL] != PROTO_TCP {
        return NotOurs;
    }
    // 7.
    let frag = be16(&ip[field::IP_FLAGS_FRAG]);
    if frag & field::IP_FRAG_OFFSET != 0 {
        return NotOurs;
    }
    // 8.
    let tcp = &ip[ihl..total];
    let Some(port) = tcp.get(field::TCP_DST_PORT).map(be16) else {
        return Malformed;
    };
    // 9.
    if !steered(port) {
        return NotOurs;
    }
    // 10.
    if frag & field::IP_MF != 0 {
        return Fragment;
    }
    // 11.
    if tcp.len() < MIN_HEADER_LEN {
        return Malformed;
    }
    let data_off = usize::from(tcp[field::TCP_DATA_OFF] >> 4) * 4;
    if data_off < MIN_HEADER_LEN || data_off > tcp.len() {
        return Malformed;
    }
    // 12.
    Ours
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
        let own = [IpAddr::from(a.ip)];
        classify(frame, OwnedAddrs(&own), |p| p == a.steered)
    }

    /// Every row of the table, from the shared corpus (the XDP program gets the same one in
    /// `dataplane/tests/frame_agreement.rs`).
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
        let good = a.good_frame();
        for m in header_mutations(&good) {
            let v = classify_for(&a, &m);
            if good.starts_with(&m) {
                assert_eq!(v, FrameVerdict::Malformed, "cut at {}", m.len());
            }
        }
    }
}
