//! One corpus of received frames for the rule of which frames are ours (`endpoint::classify`
//! and the XDP program, the table in `bpf/xwarp_maps.h`): a frame per row of the table and the
//! bytes around it, each with the verdict the table gives, and mutations of a good frame (every
//! header octet changed, every truncation) on which the two must only agree.

use crate::checksum::internet_checksum;

/// The verdict the table gives a corpus frame (`endpoint::FrameVerdict`'s names; testkit
/// cannot depend on the endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Redirected to the engine.
    Ours,
    /// Passed to the kernel.
    NotOurs,
    /// Dropped and counted as malformed.
    Malformed,
    /// A first fragment to a steered port: dropped and counted as a fragment.
    Fragment,
}

/// The addresses a corpus is built around.
#[derive(Debug, Clone, Copy)]
pub struct CorpusAddrs {
    /// Our MAC (destination of every frame but the one for another MAC).
    pub mac: [u8; 6],
    /// Our IPv4 address (owned).
    pub ip: [u8; 4],
    /// The sender's MAC.
    pub peer_mac: [u8; 6],
    /// The sender's IPv4 address.
    pub peer_ip: [u8; 4],
    /// An IPv4 address that is not ours.
    pub other_ip: [u8; 4],
    /// Our IPv6 address (owned).
    pub ip6: [u8; 16],
    /// The sender's IPv6 address.
    pub peer_ip6: [u8; 16],
    /// An IPv6 address that is not ours.
    pub other_ip6: [u8; 16],
    /// A steered TCP port.
    pub steered: u16,
    /// A port that is not steered.
    pub unsteered: u16,
}

impl Default for CorpusAddrs {
    /// 198.18.0.2 / 2001:db8::2 (us) and 198.18.0.1 / 2001:db8::1 (the peer), 198.18.0.99 /
    /// 2001:db8::99 not ours; ports 4791 (steered) and 22 (not).
    fn default() -> Self {
        CorpusAddrs {
            mac: [2, 0, 0, 0, 0, 2],
            ip: [198, 18, 0, 2],
            peer_mac: [2, 0, 0, 0, 0, 1],
            peer_ip: [198, 18, 0, 1],
            other_ip: [198, 18, 0, 99],
            ip6: v6(2),
            peer_ip6: v6(1),
            other_ip6: v6(0x99),
            steered: 4791,
            unsteered: 22,
        }
    }
}

/// A named frame and its verdict.
#[derive(Debug, Clone)]
pub struct CorpusFrame {
    /// What the frame is.
    pub name: String,
    /// The Ethernet frame (no FCS).
    pub bytes: Vec<u8>,
    /// Its verdict by the table.
    pub expect: Expect,
}

/// An IPv4 packet to build: the fields the rule looks at, everything else fixed. Checksums are
/// right unless a test breaks them afterwards.
#[derive(Debug, Clone)]
pub struct Ipv4Spec {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Protocol (6 TCP, 17 UDP, 1 ICMP).
    pub protocol: u8,
    /// The flags and fragment offset word (0x4000: DF).
    pub flags_frag: u16,
    /// IPv4 options (a multiple of 4 octets).
    pub options: Vec<u8>,
    /// The payload (a transport header and its data).
    pub payload: Vec<u8>,
}

impl Ipv4Spec {
    /// The IPv4 packet: header with its checksum, then the payload.
    pub fn packet(&self) -> Vec<u8> {
        let ihl = 20 + self.options.len();
        let total = (ihl + self.payload.len()) as u16;
        let mut ip = vec![0x40 | (ihl / 4) as u8, 0];
        ip.extend_from_slice(&total.to_be_bytes());
        ip.extend_from_slice(&[0x12, 0x34]);
        ip.extend_from_slice(&self.flags_frag.to_be_bytes());
        ip.extend_from_slice(&[64, self.protocol, 0, 0]);
        ip.extend_from_slice(&self.src);
        ip.extend_from_slice(&self.dst);
        ip.extend_from_slice(&self.options);
        let c = internet_checksum(&[&ip]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        ip.extend_from_slice(&self.payload);
        ip
    }
}

/// 2001:db8::`last`.
fn v6(last: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = last;
    a
}

/// An IPv6 packet to build (RFC 8200 §3): the fixed header, then `payload` (extension headers,
/// a transport header and its data) whose first header is `next_header`.
#[derive(Debug, Clone)]
pub struct Ipv6Spec {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Next Header (6 TCP, 17 UDP, 58 ICMPv6, 44 Fragment, 0 Hop-by-Hop, 60 Destination
    /// Options).
    pub next_header: u8,
    /// What follows the fixed header.
    pub payload: Vec<u8>,
}

impl Ipv6Spec {
    /// The IPv6 packet.
    pub fn packet(&self) -> Vec<u8> {
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&(self.payload.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[self.next_header, 64]);
        ip.extend_from_slice(&self.src);
        ip.extend_from_slice(&self.dst);
        ip.extend_from_slice(&self.payload);
        ip
    }
}

/// An IPv6 Fragment header (RFC 8200 §4.5) for `next_header`, at `offset` (8-octet units),
/// More Fragments `more`.
pub fn ipv6_fragment_header(next_header: u8, offset: u16, more: bool) -> [u8; 8] {
    let om = (offset << 3) | u16::from(more);
    let o = om.to_be_bytes();
    [next_header, 0, o[0], o[1], 0, 0, 0x12, 0x34]
}

/// A TCP header (ACK|PSH, data offset from `options`) with its checksum over `src`/`dst`,
/// then `data`.
pub fn tcp_segment(
    src: [u8; 4],
    dst: [u8; 4],
    ports: (u16, u16),
    options: &[u8],
    data: &[u8],
) -> Vec<u8> {
    tcp_over(&[&src[..], &dst[..]].concat(), ports, options, data)
}

/// [`tcp_segment`] with its checksum over the IPv6 addresses `src`/`dst` (RFC 8200 §8.1).
pub fn tcp_segment_v6(
    src: [u8; 16],
    dst: [u8; 16],
    ports: (u16, u16),
    options: &[u8],
    data: &[u8],
) -> Vec<u8> {
    tcp_over(&[&src[..], &dst[..]].concat(), ports, options, data)
}

/// The TCP segment, its checksum over the pseudo header of `addrs` (source then destination;
/// the IPv6 pseudo header's 32-bit length and zero-padded Next Header sum the same as IPv4's
/// 16-bit fields for segments under 64 KiB).
fn tcp_over(addrs: &[u8], ports: (u16, u16), options: &[u8], data: &[u8]) -> Vec<u8> {
    let off = (20 + options.len()) / 4;
    let mut tcp = Vec::new();
    tcp.extend_from_slice(&ports.0.to_be_bytes());
    tcp.extend_from_slice(&ports.1.to_be_bytes());
    tcp.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    tcp.extend_from_slice(&[(off as u8) << 4, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend_from_slice(options);
    tcp.extend_from_slice(data);
    let len = (tcp.len() as u16).to_be_bytes();
    let pseudo = [addrs, &[0, 6], &len[..]].concat();
    let c = internet_checksum(&[&pseudo, &tcp]);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    tcp
}

/// An Ethernet II frame.
pub fn ethernet(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    [&dst[..], &src[..], &ethertype.to_be_bytes()[..], payload].concat()
}

/// `frame` with a VLAN tag (TPID `tpid`, VLAN 5) inserted after the MAC addresses.
pub fn vlan_tagged(frame: &[u8], tpid: u16) -> Vec<u8> {
    let tag = [&tpid.to_be_bytes()[..], &[0x00, 0x05]].concat();
    [&frame[..12], &tag[..], &frame[12..]].concat()
}

impl CorpusAddrs {
    fn ipv4(&self, dst: [u8; 4], protocol: u8, payload: Vec<u8>) -> Ipv4Spec {
        Ipv4Spec {
            src: self.peer_ip,
            dst,
            protocol,
            flags_frag: 0x4000,
            options: Vec::new(),
            payload,
        }
    }

    fn tcp_to(&self, dst: [u8; 4], port: u16, data: &[u8]) -> Ipv4Spec {
        let seg = tcp_segment(self.peer_ip, dst, (40000, port), &[], data);
        self.ipv4(dst, 6, seg)
    }

    fn eth(&self, ethertype: u16, payload: &[u8]) -> Vec<u8> {
        ethernet(self.mac, self.peer_mac, ethertype, payload)
    }

    fn frame(&self, ip: &Ipv4Spec) -> Vec<u8> {
        self.eth(0x0800, &ip.packet())
    }

    /// A good TCP segment to us on the steered port: the base of the mutations.
    pub fn good_frame(&self) -> Vec<u8> {
        self.frame(&self.tcp_to(self.ip, self.steered, b"hello, iWARP"))
    }

    fn ipv6(&self, dst: [u8; 16], next_header: u8, payload: Vec<u8>) -> Ipv6Spec {
        Ipv6Spec {
            src: self.peer_ip6,
            dst,
            next_header,
            payload,
        }
    }

    fn tcp6(&self, dst: [u8; 16], port: u16, data: &[u8]) -> Vec<u8> {
        tcp_segment_v6(self.peer_ip6, dst, (40000, port), &[], data)
    }

    fn frame6(&self, ip: &Ipv6Spec) -> Vec<u8> {
        self.eth(0x86DD, &ip.packet())
    }

    /// A good IPv6 TCP segment to us on the steered port.
    pub fn good_frame6(&self) -> Vec<u8> {
        self.frame6(&self.ipv6(
            self.ip6,
            6,
            self.tcp6(self.ip6, self.steered, b"hello, iWARP"),
        ))
    }
}

/// The corpus: every row of the table, each bound crossed from both sides.
pub fn frame_corpus(a: &CorpusAddrs) -> Vec<CorpusFrame> {
    use Expect::*;
    let mut c: Vec<CorpusFrame> = Vec::new();
    let mut add = |name: &str, bytes: Vec<u8>, expect: Expect| {
        c.push(CorpusFrame {
            name: name.to_owned(),
            bytes,
            expect,
        })
    };
    let (us, other) = (a.ip, a.other_ip);
    let good = a.good_frame();
    let ip_at = 14;
    let tcp_at = 14 + 20;
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    // `s` with the flags/fragment word `flags_frag`, as a frame.
    let frag = |mut s: Ipv4Spec, flags_frag: u16| {
        s.flags_frag = flags_frag;
        a.frame(&s)
    };
    // A TCP "segment" to us of the ports alone.
    let ports_only = |port: u16| {
        let ports = [&40000u16.to_be_bytes()[..], &port.to_be_bytes()[..]].concat();
        a.ipv4(us, 6, ports)
    };

    // 12: ours.
    add("TCP to us, steered port", good.clone(), Ours);
    add(
        "TCP SYN to us, steered port, no payload",
        a.frame(&a.tcp_to(us, a.steered, b"")),
        Ours,
    );
    let opts = [2, 4, 0x05, 0xb4, 1, 1, 4, 2, 1, 3, 3, 7];
    let mut ip = a.ipv4(
        us,
        6,
        tcp_segment(a.peer_ip, us, (40000, a.steered), &opts, b"x"),
    );
    add("TCP with options (data offset 8)", a.frame(&ip), Ours);
    ip.options = vec![1, 1, 1, 0]; // NOP NOP NOP EOL
    add("IPv4 with options (IHL 6)", a.frame(&ip), Ours);
    let mut no_df = a.tcp_to(us, a.steered, b"x");
    no_df.flags_frag = 0;
    add("TCP without DF", a.frame(&no_df), Ours);
    let mut padded = a.frame(&a.tcp_to(us, a.steered, b""));
    padded.resize(60, 0);
    add(
        "SYN padded to 60 octets (total length < frame)",
        padded,
        Ours,
    );
    // Not part of the rule: later checks.
    add(
        "bad IPv4 header checksum",
        with(&|b| b[ip_at + 10] ^= 0xff),
        Ours,
    );
    add("bad TCP checksum", with(&|b| b[tcp_at + 16] ^= 0xff), Ours);
    add(
        "reserved IPv4 flag set",
        with(&|b| b[ip_at + 6] |= 0x80),
        Ours,
    );
    add(
        "another destination MAC",
        with(&|b| b[..6].copy_from_slice(&[2, 9, 9, 9, 9, 9])),
        Ours,
    );

    // 1.
    add("empty frame", Vec::new(), Malformed);
    add("13 octets", good[..13].to_vec(), Malformed);

    // 2.
    for (name, tpid) in [("802.1Q", 0x8100), ("802.1ad", 0x88A8)] {
        add(
            &format!("{name} tagged TCP to us, steered port"),
            vlan_tagged(&good, tpid),
            NotOurs,
        );
        add(
            &format!("{name} tag cut short"),
            vlan_tagged(&good, tpid)[..16].to_vec(),
            NotOurs,
        );
    }
    add(
        "QinQ (802.1ad + 802.1Q) TCP to us, steered port",
        vlan_tagged(&vlan_tagged(&good, 0x8100), 0x88A8),
        NotOurs,
    );

    // 3.
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend_from_slice(&a.peer_mac);
    arp.extend_from_slice(&a.peer_ip);
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&us);
    add(
        "ARP request for us",
        ethernet([0xff; 6], a.peer_mac, 0x0806, &arp),
        NotOurs,
    );
    add("ARP cut short", a.eth(0x0806, &[0, 1]), NotOurs);
    add("Ethernet header only (ARP)", a.eth(0x0806, &[]), NotOurs);
    add(
        "802.1Q tagged IPv6/TCP",
        vlan_tagged(&a.good_frame6(), 0x8100),
        NotOurs,
    );

    // 4.
    add("EtherType IPv4, no payload", a.eth(0x0800, &[]), Malformed);
    add(
        "IPv4 header cut at 19 octets",
        good[..14 + 19].to_vec(),
        Malformed,
    );
    add("IPv4 version 6", with(&|b| b[ip_at] = 0x65), Malformed);
    add("IPv4 version 0", with(&|b| b[ip_at] = 0x05), Malformed);
    add("IHL 4", with(&|b| b[ip_at] = 0x44), Malformed);
    add("IHL 0", with(&|b| b[ip_at] = 0x40), Malformed);
    add(
        "IHL 15 (beyond the total length)",
        with(&|b| b[ip_at] = 0x4f),
        Malformed,
    );
    let total =
        |n: u16| move |b: &mut Vec<u8>| b[ip_at + 2..ip_at + 4].copy_from_slice(&n.to_be_bytes());
    let frame_ip_len = (good.len() - 14) as u16;
    add(
        "total length one beyond the frame",
        with(&total(frame_ip_len + 1)),
        Malformed,
    );
    add("total length 65535", with(&total(0xffff)), Malformed);
    add("total length 19 (< IHL)", with(&total(19)), Malformed);
    add("total length 0", with(&total(0)), Malformed);
    add(
        "total length 20 (exactly the header: no ports)",
        with(&total(20)),
        Malformed,
    );
    add(
        "bad IPv4 header to another address",
        a.frame(&a.tcp_to(other, a.steered, b"x"))
            .into_iter()
            .enumerate()
            .map(|(i, x)| if i == ip_at { 0x43 } else { x })
            .collect(),
        Malformed,
    );
    add(
        "IPv4 total length beyond the frame, UDP",
        {
            let mut f = a.frame(&a.ipv4(us, 17, vec![0; 12]));
            f[ip_at + 3] = 0xff;
            f
        },
        Malformed,
    );

    // 5.
    add(
        "TCP to another address, steered port",
        a.frame(&a.tcp_to(other, a.steered, b"x")),
        NotOurs,
    );
    add(
        "TCP to the broadcast address, steered port",
        a.frame(&a.tcp_to([255; 4], a.steered, b"x")),
        NotOurs,
    );
    add(
        "TCP to 0.0.0.0, steered port",
        a.frame(&a.tcp_to([0; 4], a.steered, b"x")),
        NotOurs,
    );
    add(
        "TCP to the sender's own address",
        a.frame(&a.tcp_to(a.peer_ip, a.steered, b"x")),
        NotOurs,
    );
    add(
        "first fragment to another address",
        frag(a.tcp_to(other, a.steered, b"x"), 0x2000),
        NotOurs,
    );
    add(
        "TCP header cut short to another address",
        a.frame(&a.ipv4(other, 6, vec![0x9c, 0x40, 0x12, 0xb7, 0, 0])),
        NotOurs,
    );

    // 6.
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1, 1, 2, 3, 4];
    let ck = internet_checksum(&[&icmp]);
    icmp[2..4].copy_from_slice(&ck.to_be_bytes());
    add("ICMP echo to us", a.frame(&a.ipv4(us, 1, icmp)), NotOurs);
    let mut udp = vec![0x9c, 0x40];
    udp.extend_from_slice(&a.steered.to_be_bytes());
    udp.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
    add(
        "UDP to us, steered port number",
        a.frame(&a.ipv4(us, 17, udp)),
        NotOurs,
    );
    add(
        "UDP to us, 2-octet payload",
        a.frame(&a.ipv4(us, 17, vec![0, 1])),
        NotOurs,
    );
    add(
        "protocol 0 (hop-by-hop) to us",
        a.frame(&a.ipv4(us, 0, vec![0; 8])),
        NotOurs,
    );

    // 7.
    let later = |flags_frag: u16, payload: Vec<u8>| frag(a.ipv4(us, 6, payload), flags_frag);
    add(
        "later fragment (offset 8, MF set)",
        later(0x2001, vec![0xAB; 16]),
        NotOurs,
    );
    add(
        "last fragment (offset 185, MF clear)",
        later(185, vec![0xAB; 16]),
        NotOurs,
    );
    add(
        "later fragment with no payload",
        later(0x2000 | 0x1fff, Vec::new()),
        NotOurs,
    );
    add(
        "later fragment whose payload looks like TCP to the steered port",
        later(1, tcp_segment(a.peer_ip, us, (40000, a.steered), &[], b"x")),
        NotOurs,
    );

    // 8.
    add(
        "TCP to us, 3-octet IP payload",
        a.frame(&a.ipv4(us, 6, vec![0x9c, 0x40, 0x12])),
        Malformed,
    );
    add(
        "TCP to us, no IP payload",
        a.frame(&a.ipv4(us, 6, Vec::new())),
        Malformed,
    );
    add(
        "tiny first fragment (2 octets)",
        frag(a.ipv4(us, 6, vec![0x9c, 0x40]), 0x2000),
        Malformed,
    );

    // 9.
    add(
        "TCP to us, unsteered port",
        a.frame(&a.tcp_to(us, a.unsteered, b"x")),
        NotOurs,
    );
    add(
        "first fragment to an unsteered port",
        frag(a.tcp_to(us, a.unsteered, b"x"), 0x2000),
        NotOurs,
    );
    add(
        "TCP header cut short (4 octets), unsteered port",
        a.frame(&ports_only(a.unsteered)),
        NotOurs,
    );
    let bad_off = |port: u16, off: u8| {
        let mut f = a.frame(&a.tcp_to(us, port, b"x"));
        f[tcp_at + 12] = off << 4;
        f
    };
    add(
        "data offset 4, unsteered port",
        bad_off(a.unsteered, 4),
        NotOurs,
    );

    // 10.
    let first = a.tcp_to(us, a.steered, &[0xAB; 16]);
    add(
        "first fragment (MF set), steered port",
        frag(first.clone(), 0x2000),
        Fragment,
    );
    add(
        "first fragment with DF and MF",
        frag(first, 0x6000),
        Fragment,
    );
    add(
        "first fragment of 4 octets (only the ports), steered port",
        frag(ports_only(a.steered), 0x2000),
        Fragment,
    );

    // 11.
    add(
        "TCP header cut short (4 octets), steered port",
        a.frame(&ports_only(a.steered)),
        Malformed,
    );
    add(
        "TCP header of 19 octets, steered port",
        a.frame(&a.ipv4(
            us,
            6,
            tcp_segment(a.peer_ip, us, (40000, a.steered), &[], b"")[..19].to_vec(),
        )),
        Malformed,
    );
    for (name, off) in [
        ("data offset 4, steered port", 4),
        ("data offset 0, steered port", 0),
        ("data offset 15 (beyond the segment), steered port", 15),
        ("data offset 6 (24 octets): 21 in the segment", 6),
    ] {
        add(name, bad_off(a.steered, off), Malformed);
    }
    let mut pad = a.frame(&a.tcp_to(us, a.steered, b""));
    pad[tcp_at + 12] = 6 << 4;
    pad.resize(pad.len() + 8, 0xEE);
    add(
        "data offset beyond the IP total length, inside the frame's padding",
        pad,
        Malformed,
    );
    add(
        "data offset 5, the segment cut by the total length",
        with(&total(20 + 19)),
        Malformed,
    );
    c.extend(ipv6_corpus(a));
    c
}

/// The IPv6 rows (rules 5 to 14 over IPv6).
fn ipv6_corpus(a: &CorpusAddrs) -> Vec<CorpusFrame> {
    use Expect::*;
    let mut c: Vec<CorpusFrame> = Vec::new();
    let mut add = |name: &str, bytes: Vec<u8>, expect: Expect| {
        c.push(CorpusFrame {
            name: format!("IPv6: {name}"),
            bytes,
            expect,
        })
    };
    let (us, other) = (a.ip6, a.other_ip6);
    let good = a.good_frame6();
    let ip_at = 14;
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    let plen =
        |n: u16| move |b: &mut Vec<u8>| b[ip_at + 4..ip_at + 6].copy_from_slice(&n.to_be_bytes());
    let tcp6 = |dst, port, data: &[u8]| a.frame6(&a.ipv6(dst, 6, a.tcp6(dst, port, data)));
    // A Fragment header for `next`, then `rest`, to us.
    let fragment = |next: u8, offset: u16, more: bool, rest: &[u8]| {
        let p = [&ipv6_fragment_header(next, offset, more)[..], rest].concat();
        a.frame6(&a.ipv6(us, 44, p))
    };
    let seg = a.tcp6(us, a.steered, &[0xAB; 16]);
    let ports = |port: u16| [&40000u16.to_be_bytes()[..], &port.to_be_bytes()[..]].concat();
    // An extension header of 8 octets (Next Header TCP, length 0, PadN) then `seg`.
    let ext8 = |kind: u8| {
        let p = [&[6, 0, 1, 4, 0, 0, 0, 0][..], &seg[..]].concat();
        a.frame6(&a.ipv6(us, kind, p))
    };

    // 14: ours.
    add("TCP to us, steered port", good.clone(), Ours);
    add(
        "SYN to us, steered port, no payload",
        tcp6(us, a.steered, b""),
        Ours,
    );
    let mut padded = tcp6(us, a.steered, b"");
    padded.resize(padded.len() + 6, 0);
    add("payload length < frame (padding)", padded, Ours);
    add(
        "bad TCP checksum",
        with(&|b| b[ip_at + 40 + 16] ^= 0xff),
        Ours,
    );
    add(
        "traffic class and flow label set",
        with(&|b| b[ip_at..ip_at + 4].copy_from_slice(&[0x6f, 0xf1, 0x23, 0x45])),
        Ours,
    );

    // 3 (with the IPv4 rows): a VLAN tag; 4 and 5: the version against the EtherType.
    add(
        "an IPv4 packet under the IPv6 EtherType",
        a.eth(0x86DD, &a.tcp_to(a.ip, a.steered, b"x").packet()),
        Malformed,
    );
    add(
        "an IPv6 packet under the IPv4 EtherType",
        a.eth(0x0800, &a.ipv6(us, 6, seg.clone()).packet()),
        Malformed,
    );

    // 5.
    add("EtherType IPv6, no payload", a.eth(0x86DD, &[]), Malformed);
    add(
        "header cut at 39 octets",
        good[..14 + 39].to_vec(),
        Malformed,
    );
    add("version 0", with(&|b| b[ip_at] = 0x00), Malformed);
    let frame_plen = (good.len() - 14 - 40) as u16;
    add(
        "payload length one beyond the frame",
        with(&plen(frame_plen + 1)),
        Malformed,
    );
    add("payload length 65535", with(&plen(0xffff)), Malformed);
    add(
        "bad header to another address",
        {
            let mut f = tcp6(other, a.steered, b"x");
            f[ip_at + 5] = 0xff;
            f
        },
        Malformed,
    );

    // 6.
    add(
        "TCP to another address, steered port",
        tcp6(other, a.steered, b"x"),
        NotOurs,
    );
    add(
        "TCP to the peer's own address",
        tcp6(a.peer_ip6, a.steered, b"x"),
        NotOurs,
    );
    let mut all_nodes = [0u8; 16];
    all_nodes[0] = 0xff;
    all_nodes[1] = 0x02;
    all_nodes[15] = 1;
    add(
        "TCP to ff02::1, steered port",
        tcp6(all_nodes, a.steered, b"x"),
        NotOurs,
    );

    // 7.
    let mut solicited = [0u8; 16];
    solicited[..2].copy_from_slice(&[0xff, 0x02]);
    solicited[11..13].copy_from_slice(&[1, 0xff]);
    solicited[13..].copy_from_slice(&us[13..]);
    let ns = [
        &[135, 0, 0, 0, 0, 0, 0, 0][..],
        &us[..],
        &[1, 1],
        &a.peer_mac[..],
    ]
    .concat();
    add(
        "ICMPv6 Neighbour Solicitation for us",
        ethernet(
            [0x33, 0x33, 0xff, us[13], us[14], us[15]],
            a.peer_mac,
            0x86DD,
            &a.ipv6(solicited, 58, ns).packet(),
        ),
        NotOurs,
    );
    let na = [
        &[136, 0, 0, 0, 0x20, 0, 0, 0][..],
        &a.peer_ip6[..],
        &[2, 1],
        &a.peer_mac[..],
    ]
    .concat();
    add(
        "ICMPv6 unsolicited Neighbour Advertisement to us",
        a.frame6(&a.ipv6(us, 58, na)),
        NotOurs,
    );
    let mut udp = ports(a.steered);
    udp.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
    add(
        "UDP to us, steered port number",
        a.frame6(&a.ipv6(us, 17, udp)),
        NotOurs,
    );
    add(
        "Hop-by-Hop header before TCP, steered port",
        ext8(0),
        NotOurs,
    );
    add(
        "Destination Options header before TCP, steered port",
        ext8(60),
        NotOurs,
    );
    add(
        "No Next Header (59), empty",
        a.frame6(&a.ipv6(us, 59, Vec::new())),
        NotOurs,
    );

    // 8.
    add(
        "Fragment header cut at 7 octets",
        a.frame6(&a.ipv6(us, 44, ipv6_fragment_header(6, 0, true)[..7].to_vec())),
        Malformed,
    );
    add(
        "first fragment of UDP",
        fragment(17, 0, true, &ports(a.steered)),
        NotOurs,
    );

    // 9.
    add(
        "later fragment (offset 8, M set)",
        fragment(6, 1, true, &[0xAB; 16]),
        NotOurs,
    );
    add(
        "last fragment (offset 185, M clear)",
        fragment(6, 185, false, &[0xAB; 16]),
        NotOurs,
    );
    add(
        "later fragment whose payload looks like TCP to the steered port",
        fragment(6, 1, true, &seg),
        NotOurs,
    );
    add(
        "later fragment with no payload",
        fragment(6, 0x1fff, false, &[]),
        NotOurs,
    );

    // 10.
    add(
        "TCP to us, 3-octet payload",
        a.frame6(&a.ipv6(us, 6, vec![0x9c, 0x40, 0x12])),
        Malformed,
    );
    add(
        "TCP to us, no payload",
        a.frame6(&a.ipv6(us, 6, Vec::new())),
        Malformed,
    );
    add(
        "tiny first fragment (2 octets)",
        fragment(6, 0, true, &[0x9c, 0x40]),
        Malformed,
    );

    // 11.
    add(
        "TCP to us, unsteered port",
        tcp6(us, a.unsteered, b"x"),
        NotOurs,
    );
    add(
        "first fragment to an unsteered port",
        fragment(6, 0, true, &a.tcp6(us, a.unsteered, b"x")),
        NotOurs,
    );
    add(
        "TCP header cut short (4 octets), unsteered port",
        a.frame6(&a.ipv6(us, 6, ports(a.unsteered))),
        NotOurs,
    );

    // 12.
    add(
        "first fragment (M set), steered port",
        fragment(6, 0, true, &seg),
        Fragment,
    );
    add(
        "atomic fragment (offset 0, M clear), steered port",
        fragment(6, 0, false, &seg),
        Fragment,
    );
    add(
        "first fragment of 4 octets (only the ports), steered port",
        fragment(6, 0, true, &ports(a.steered)),
        Fragment,
    );

    // 13.
    add(
        "TCP header cut short (4 octets), steered port",
        a.frame6(&a.ipv6(us, 6, ports(a.steered))),
        Malformed,
    );
    add(
        "TCP header of 19 octets, steered port",
        a.frame6(&a.ipv6(us, 6, a.tcp6(us, a.steered, b"")[..19].to_vec())),
        Malformed,
    );
    for (name, off) in [
        ("data offset 4, steered port", 4),
        ("data offset 15 (beyond the segment), steered port", 15),
    ] {
        add(name, with(&|b| b[ip_at + 40 + 12] = off << 4), Malformed);
    }
    c
}

/// The bytes of the corpus frame called `name` (panics if there is none: a test's typo).
pub fn named<'a>(corpus: &'a [CorpusFrame], name: &str) -> &'a [u8] {
    corpus
        .iter()
        .find(|f| f.name == name)
        .map(|f| f.bytes.as_slice())
        .unwrap_or_else(|| panic!("no frame {name:?} in the corpus"))
}

/// Mutations of `base` (an untagged IPv4/TCP frame with a 20-octet IPv4 header, or an IPv6/TCP
/// frame, a Fragment header allowed): every truncation from 14 octets up, and every octet of
/// the EtherType, the IP header(s) and the first 20 octets of the TCP header set to 0x00, 0xFF
/// and its value with each bit flipped.
pub fn header_mutations(base: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = (14..base.len()).map(|n| base[..n].to_vec()).collect();
    let ip_len = match (base.get(12..14), base.get(14 + 6)) {
        (Some([0x86, 0xDD]), Some(44)) => 48,
        (Some([0x86, 0xDD]), _) => 40,
        _ => 20,
    };
    for i in 12..(14 + ip_len + 20).min(base.len()) {
        let orig = base[i];
        let values = [0x00, 0xFF]
            .into_iter()
            .chain((0..8).map(|bit| orig ^ (1 << bit)));
        for v in values.filter(|&v| v != orig) {
            let mut f = base.to_vec();
            f[i] = v;
            out.push(f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_frame_has_valid_checksums_and_addresses() {
        let a = CorpusAddrs::default();
        let f = a.good_frame();
        let (ip, tcp) = (&f[14..34], &f[34..]);
        assert_eq!(internet_checksum(&[ip]), 0, "IPv4 header checksum");
        assert_eq!(&ip[16..20], &a.ip);
        let pseudo = [&ip[12..20], &[0, 6], &(tcp.len() as u16).to_be_bytes()[..]].concat();
        assert_eq!(internet_checksum(&[&pseudo, tcp]), 0, "TCP checksum");
        assert_eq!(u16::from_be_bytes([tcp[2], tcp[3]]), a.steered);
    }

    #[test]
    fn corpus_names_are_unique_and_every_verdict_occurs() {
        let c = frame_corpus(&CorpusAddrs::default());
        let mut names: Vec<&str> = c.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), c.len(), "duplicate names");
        for e in [
            Expect::Ours,
            Expect::NotOurs,
            Expect::Malformed,
            Expect::Fragment,
        ] {
            assert!(c.iter().any(|f| f.expect == e), "{e:?}");
        }
    }
}
