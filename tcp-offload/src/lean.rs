//! A received segment in the form header prediction takes ([`LeanSegment`]): its ends, the
//! header fields TCP reads and the payload, read where they are. [`LeanSegment::parse`] takes
//! only the common layout (IPv4 without options, or IPv6 without extension headers; TCP with no
//! option, or timestamps as RFC 7323 Appendix A lays them out, optionally followed by a valid
//! TCP RDMA option whose run lies in the payload, then NOPs) and leaves the TCP checksum
//! for [`LeanSegment::checksum_ok`], so that a segment the fast path refuses is summed once, by
//! the full path ([`crate::wire::parse`]). Whatever it accepts, `wire::parse` accepts with the
//! same fields.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::checksum::{self, Sum};
use crate::isn::FourTuple;
use crate::rdma::option::{self as rdma_opt, RdmaAnnotation, RdmaOption};
use crate::seq::SeqNum;
use crate::wire::{field, Flags, TcpSegment, IPV4_HEADER_LEN, IPV6_HEADER_LEN, TCP_HEADER_LEN};

/// The header fields of a received segment that TCP reads once the segment is demultiplexed
/// (of the options, timestamps alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// SEG.SEQ.
    pub seq: SeqNum,
    /// SEG.ACK (meaningful when `flags.ack`).
    pub ack: SeqNum,
    /// Control flags.
    pub flags: Flags,
    /// SEG.WND (unscaled).
    pub window: u16,
    /// Timestamps: (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
}

impl TcpSegment<'_> {
    /// This segment's [`SegmentHeader`].
    pub fn header(&self) -> SegmentHeader {
        SegmentHeader {
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            timestamps: self.options.timestamps,
        }
    }

    /// This segment as a [`LeanSegment`] (its checksum verified already), when it carries no
    /// option but timestamps and a valid RDMA option.
    pub fn lean(&self) -> Option<LeanSegment<'_>> {
        let o = &self.options;
        let others = o.mss.is_some()
            || o.window_scale.is_some()
            || o.sack_permitted
            || o.sack_count > 0
            || o.rdma_ignored.is_some();
        (!others).then_some(LeanSegment {
            ends: SegmentEnds::Parsed(&self.tuple),
            header: self.header(),
            rdma: LeanRdma {
                raw: &[],
                decoded: o.rdma.as_ref(),
            },
            payload: self.payload,
            unverified: None,
            control: self.flags.bits(self.flags.ack) & CONTROL,
        })
    }
}

/// A lean segment's TCP RDMA option (valid, its run inside the payload), if any: as its octets
/// or decoded. (Two fields rather than an enum: a segment without one is written with
/// constants.)
#[derive(Clone, Copy, Debug)]
struct LeanRdma<'a> {
    /// Its octets (kind to length) where they lie, 12 octets into the option area; empty when
    /// there is none or it is decoded.
    raw: &'a [u8],
    /// Decoded (by the full parse).
    decoded: Option<&'a RdmaOption>,
}

impl<'a> LeanRdma<'a> {
    const NONE: Self = LeanRdma {
        raw: &[],
        decoded: None,
    };

    fn raw(raw: &'a [u8]) -> Self {
        LeanRdma { raw, decoded: None }
    }
}

/// A segment's four-tuple as its headers spell it: the IP source and destination addresses
/// (4 octets each for IPv4, 16 for IPv6) and the TCP source and destination ports, all as
/// they lie on the wire. Two are equal exactly when the tuples they spell are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ends {
    /// The source then the destination address, padded with zeros after `addrs_len` octets.
    addrs: [u8; 32],
    /// 8 (IPv4) or 32 (IPv6).
    addrs_len: u8,
    /// The source then the destination port.
    ports: [u8; 4],
}

impl Ends {
    /// `tuple`'s ends (from the receiver's view: the source is `remote`).
    pub fn of(tuple: &FourTuple) -> Self {
        let mut addrs = [0u8; 32];
        let addrs_len = match (tuple.remote.ip(), tuple.local.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                addrs[..4].copy_from_slice(&s.octets());
                addrs[4..8].copy_from_slice(&d.octets());
                8
            }
            (s, d) => {
                addrs[..16].copy_from_slice(&ipv6_octets(s));
                addrs[16..].copy_from_slice(&ipv6_octets(d));
                32
            }
        };
        let [s0, s1] = tuple.remote.port().to_be_bytes();
        let [d0, d1] = tuple.local.port().to_be_bytes();
        Ends {
            addrs,
            addrs_len,
            ports: [s0, s1, d0, d1],
        }
    }

    /// Whether `seg`'s four-tuple is the one these ends spell: its octets compared as they
    /// lie, no tuple built.
    #[inline(always)]
    pub fn matches(&self, seg: &LeanSegment<'_>) -> bool {
        match seg.ends {
            SegmentEnds::Wire { addrs, ports } if addrs.len() == 8 => {
                ports == self.ports
                    && self.addrs_len == 8
                    && addrs.first_chunk::<8>() == self.addrs.first_chunk::<8>()
            }
            SegmentEnds::Wire { addrs, ports } => {
                ports == self.ports && addrs == &self.addrs[..usize::from(self.addrs_len)]
            }
            SegmentEnds::Parsed(t) => *self == Self::of(t),
        }
    }
}

/// An address's IPv6 octets (an IPv4 one mapped: only a tuple of two IPv6 addresses is spelt
/// with them, and one of each IP version is no segment's).
fn ipv6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
        IpAddr::V6(v) => v.octets(),
    }
}

/// A lean segment's four-tuple.
#[derive(Clone, Copy, Debug)]
enum SegmentEnds<'a> {
    /// Read in place: the IP source then destination address (8 or 32 octets), the TCP source
    /// then destination port.
    Wire { addrs: &'a [u8], ports: [u8; 4] },
    /// From the full parse.
    Parsed(&'a FourTuple),
}

/// A received segment with no option but timestamps, read in place.
#[derive(Clone, Copy, Debug)]
pub struct LeanSegment<'a> {
    /// Its four-tuple as the headers spell it: see [`Self::tuple`] and [`Ends::matches`].
    ends: SegmentEnds<'a>,
    /// The header fields.
    pub header: SegmentHeader,
    /// The TCP RDMA option (valid, its run inside the payload): see [`Self::rdma`].
    rdma: LeanRdma<'a>,
    /// The payload.
    pub payload: &'a [u8],
    /// The TCP header and payload with the pseudo header's sum, while the checksum is not
    /// verified.
    unverified: Option<(&'a [u8], Sum)>,
    /// The flags octet's SYN, ACK, FIN and RST bits (`header.flags` as one octet).
    control: u8,
}

impl<'a> LeanSegment<'a> {
    /// Reads an IP packet in place when it has the common layout (see the module
    /// documentation) and sound IP and TCP headers (the IPv4 header checksum verified, the
    /// TCP checksum not yet); `None` for anything else, which `wire::parse` then judges.
    pub fn parse(packet: &'a [u8]) -> Option<Self> {
        match packet.first()? >> 4 {
            4 => Self::parse_ipv4(packet),
            6 => Self::parse_ipv6(packet),
            _ => None,
        }
    }

    fn parse_ipv4(packet: &'a [u8]) -> Option<Self> {
        use field::ipv4 as f;
        let hdr = packet.first_chunk::<IPV4_HEADER_LEN>()?;
        // Version 4 and no IP options; TCP; not a fragment.
        if hdr[f::VER_IHL] != 0x45 || hdr[f::PROTOCOL] != PROTO_TCP {
            return None;
        }
        if be16(hdr, f::FLAGS_FRAG.start) & (f::MF | f::FRAG_OFFSET) != 0 {
            return None;
        }
        let total = usize::from(be16(hdr, f::TOTAL_LEN.start));
        let sum = checksum::sum_ipv4_header(hdr);
        if total < IPV4_HEADER_LEN
            || total > packet.len()
            || checksum::fold(sum) != 0xFFFF
            || be16(hdr, f::CHECKSUM.start) == 0xFFFF
        {
            return None;
        }
        let src = Ipv4Addr::from(octets::<4>(hdr, f::SRC.start));
        let dst = Ipv4Addr::from(octets::<4>(hdr, f::DST.start));
        let l4 = &packet[IPV4_HEADER_LEN..total];
        let pseudo = checksum::pseudo_v4(src, dst, l4.len());
        Self::tcp(l4, &hdr[f::SRC.start..f::DST.end], pseudo)
    }

    fn parse_ipv6(packet: &'a [u8]) -> Option<Self> {
        use field::ipv6 as f;
        let hdr = packet.first_chunk::<IPV6_HEADER_LEN>()?;
        if hdr[f::NEXT_HEADER] != PROTO_TCP {
            return None;
        }
        let total = IPV6_HEADER_LEN + usize::from(be16(hdr, f::PAYLOAD_LEN.start));
        let l4 = packet.get(IPV6_HEADER_LEN..total)?;
        let src = IpAddr::V6(Ipv6Addr::from(octets::<16>(hdr, f::SRC.start)));
        let dst = IpAddr::V6(Ipv6Addr::from(octets::<16>(hdr, f::DST.start)));
        let pseudo = checksum::pseudo(src, dst, l4.len())?;
        Self::tcp(l4, &hdr[f::SRC.start..f::DST.end], pseudo)
    }

    /// The TCP header at the start of `l4`: no option, or timestamps with an RDMA option
    /// after them or not. `addrs`: the IP source then destination address.
    #[inline(always)]
    fn tcp(l4: &'a [u8], addrs: &'a [u8], pseudo: Sum) -> Option<Self> {
        Self::tcp_with::<false>(l4, addrs, pseudo)
    }

    /// [`Self::tcp`] for a segment whose options after the timestamps are not an RDMA option
    /// in the form our senders write ([`Self::rdma_after`]): out of line, so that the common
    /// path keeps its registers.
    #[cold]
    #[inline(never)]
    fn tcp_other_options(l4: &'a [u8], addrs: &'a [u8], pseudo: Sum) -> Option<Self> {
        Self::tcp_with::<true>(l4, addrs, pseudo)
    }

    /// [`Self::tcp`], the options after the timestamps read by [`Self::rdma_after_general`]
    /// when `ANY_LAYOUT`, else by [`Self::rdma_after`] with [`Self::tcp_other_options`]
    /// for what that does not take.
    #[inline(always)]
    fn tcp_with<const ANY_LAYOUT: bool>(
        l4: &'a [u8],
        addrs: &'a [u8],
        pseudo: Sum,
    ) -> Option<Self> {
        use field::{opt, tcp as f};
        let th = l4.first_chunk::<TCP_HEADER_LEN>()?;
        let hlen = usize::from(th[f::DATA_OFF] >> 4) * 4;
        let options = l4.get(TCP_HEADER_LEN..hlen)?;
        let payload = &l4[hlen..];
        let (timestamps, rdma) = match options {
            [] => (None, LeanRdma::NONE),
            [opt::NOP, opt::NOP, opt::TIMESTAMPS, 10, ts @ ..] if ts.len() == 8 => {
                (Some((be32(ts, 0), be32(ts, 4))), LeanRdma::NONE)
            }
            [opt::NOP, opt::NOP, opt::TIMESTAMPS, 10, ts @ ..] if ts.len() > 8 => {
                let rest = &ts[8..];
                let ts = Some((be32(ts, 0), be32(ts, 4)));
                let rdma = if ANY_LAYOUT {
                    Self::rdma_after_general(rest, payload.len())?
                } else {
                    match Self::rdma_after(rest, payload.len()) {
                        Some(r) => r,
                        None => return Self::tcp_other_options(l4, addrs, pseudo),
                    }
                };
                (ts, rdma)
            }
            _ => return None,
        };
        let bits = th[f::FLAGS];
        Some(LeanSegment {
            ends: SegmentEnds::Wire {
                addrs,
                ports: octets::<4>(th, f::SRC_PORT.start),
            },
            header: SegmentHeader {
                seq: SeqNum(be32(th, f::SEQ.start)),
                ack: SeqNum(be32(th, f::ACK.start)),
                flags: FLAGS_OF_BITS[usize::from(bits & FLAG_BITS)],
                window: be16(th, f::WINDOW.start),
                timestamps,
            },
            rdma,
            payload,
            unverified: Some((l4, pseudo)),
            control: bits & CONTROL,
        })
    }

    /// The options after the timestamps (12 octets into the option area) when they are an RDMA
    /// option with a run (what our senders write: alone, at 12, 4-aligned) inside a payload of
    /// `payload_len` octets; `None` for anything else, which [`Self::rdma_after_general`]
    /// judges.
    #[inline(always)]
    fn rdma_after(rest: &'a [u8], payload_len: usize) -> Option<LeanRdma<'a>> {
        // A form with a run alone after the timestamps (what our senders write), at 12:
        // 4-aligned. Its fields are read where they are when they are needed.
        if let [rdma_opt::KIND, len, _, _, _, _, _, _, _, _, _, _, o0, o1, l0, l1, ..] = *rest {
            if usize::from(len) == rest.len()
                && (len == rdma_opt::LEN_FULL || len == rdma_opt::LEN_NO_TOTAL)
            {
                // Data offset and data length, adjacent big-endian halves: one load.
                let run = u32::from_be_bytes([o0, o1, l0, l1]);
                let run_end = (run >> 16) as usize + (run & 0xFFFF) as usize;
                return (run_end <= payload_len).then_some(LeanRdma::raw(rest));
            }
        }
        None
    }

    /// The options after the timestamps (12 octets into the option area): nothing, or an RDMA
    /// option that decodes, with a run inside a payload of `payload_len` octets, then NOPs to
    /// the end; `None` for any other layout, which the full parse judges (it ignores and
    /// counts an RDMA option it cannot use).
    #[inline(never)]
    fn rdma_after_general(rest: &'a [u8], payload_len: usize) -> Option<LeanRdma<'a>> {
        let [kind, len, ..] = *rest else {
            return rest.is_empty().then_some(LeanRdma::NONE);
        };
        let len = usize::from(len);
        if kind != rdma_opt::KIND || len < 2 || rest.len() < len {
            return None;
        }
        let r = RdmaOption::parse(&rest[..len], 12).ok()?;
        let fits = match r {
            RdmaOption::Transfer(t) => t.fits_payload(payload_len),
            _ => true,
        };
        let nops = rest[len..].iter().all(|&b| b == field::opt::NOP);
        (fits && nops).then_some(LeanRdma::raw(&rest[..len]))
    }

    /// Its four-tuple, from the receiver's view: `local` = destination, `remote` = source.
    pub fn tuple(&self) -> FourTuple {
        match self.ends {
            SegmentEnds::Wire { addrs, ports } => {
                let (src, dst): (IpAddr, IpAddr) = match *addrs {
                    [s0, s1, s2, s3, d0, d1, d2, d3] => (
                        Ipv4Addr::new(s0, s1, s2, s3).into(),
                        Ipv4Addr::new(d0, d1, d2, d3).into(),
                    ),
                    _ => (
                        Ipv6Addr::from(octets::<16>(addrs, 0)).into(),
                        Ipv6Addr::from(octets::<16>(addrs, 16)).into(),
                    ),
                };
                FourTuple {
                    local: SocketAddr::new(dst, be16(&ports, 2)),
                    remote: SocketAddr::new(src, be16(&ports, 0)),
                }
            }
            SegmentEnds::Parsed(t) => *t,
        }
    }

    /// Its four-tuple as its headers spell it.
    pub fn ends(&self) -> Ends {
        match self.ends {
            SegmentEnds::Wire { addrs, ports } => {
                let mut a = [0u8; 32];
                a[..addrs.len()].copy_from_slice(addrs);
                Ends {
                    addrs: a,
                    addrs_len: addrs.len() as u8,
                    ports,
                }
            }
            SegmentEnds::Parsed(t) => Ends::of(t),
        }
    }

    /// The TCP RDMA option (valid, its run inside the payload).
    #[inline]
    pub fn rdma(&self) -> Option<RdmaOption> {
        let raw = self.rdma.raw;
        if raw.is_empty() {
            return self.rdma.decoded.copied();
        }
        match raw.first_chunk::<16>() {
            Some(fields) => {
                let total = raw.get(16..20).map(|t| be32(t, 0));
                Some(RdmaOption::Transfer(RdmaAnnotation::read(fields, total)))
            }
            // The A-only form (the parse accepted it at this offset).
            None => RdmaOption::parse(raw, 12).ok(),
        }
    }

    /// The option's octets (kind to length, a valid option with its run inside the payload)
    /// where they lie in the segment, when it was read in place; empty else.
    #[inline]
    pub(crate) fn rdma_octets(&self) -> &'a [u8] {
        self.rdma.raw
    }

    /// Whether the flags are ACK alone of SYN, ACK, FIN and RST (PSH and the others free).
    #[inline]
    pub(crate) fn ack_alone(&self) -> bool {
        self.control == field::tcp::ACK_FLAG
    }

    /// Whether the TCP checksum is right (summed here, once). A pure ACK with timestamps (32
    /// octets, the common segment without data) is summed as its eight 32-bit words, without
    /// a loop: the same sum modulo 2^16 - 1, so the same folded checksum.
    pub fn checksum_ok(&self) -> bool {
        self.unverified.is_none_or(|(l4, pseudo)| {
            let sum = match l4.first_chunk::<PURE_ACK_TS_LEN>() {
                Some(h) if l4.len() == PURE_ACK_TS_LEN => checksum::sum_words(h) + pseudo,
                _ => checksum::sum(l4, pseudo),
            };
            checksum::fold(sum) == 0xFFFF
        })
    }
}

/// The length of a TCP header with the timestamps option alone, and of a pure ACK with it.
const PURE_ACK_TS_LEN: usize = TCP_HEADER_LEN + 12;

/// The flag bits [`LeanSegment::ack_alone`] reads.
const CONTROL: u8 = field::tcp::SYN | field::tcp::ACK_FLAG | field::tcp::FIN | field::tcp::RST;

/// The flag bits [`Flags`] holds: FIN, SYN, RST, PSH and ACK, the low five.
const FLAG_BITS: u8 =
    field::tcp::FIN | field::tcp::SYN | field::tcp::RST | field::tcp::PSH | field::tcp::ACK_FLAG;
const _: () = assert!(FLAG_BITS == 0x1F);

/// [`Flags`] of each value of the flags octet's [`FLAG_BITS`] (a copy instead of five tests).
const FLAGS_OF_BITS: [Flags; 32] = {
    let mut t = [Flags::from_bits(0); 32];
    let mut b = 0;
    while b < 32 {
        t[b] = Flags::from_bits(b as u8);
        b += 1;
    }
    t
};

/// IP protocol number of TCP.
const PROTO_TCP: u8 = 6;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(octets(b, at))
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(octets(b, at))
}

fn octets<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut o = [0u8; N];
    o.copy_from_slice(&b[at..at + N]);
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::tests::tuple;
    use crate::wire::{self, SegmentRepr, TcpOptions};
    use proptest::prelude::*;

    fn packet(
        v6: bool,
        ts: Option<(u32, u32)>,
        rdma: Option<RdmaOption>,
        payload: &[u8],
    ) -> Vec<u8> {
        packet_of(tuple(v6), ts, rdma, payload)
    }

    fn packet_of(
        tuple: FourTuple,
        ts: Option<(u32, u32)>,
        rdma: Option<RdmaOption>,
        payload: &[u8],
    ) -> Vec<u8> {
        let r = SegmentRepr {
            tuple,
            seq: SeqNum(0x0102_0304),
            ack: Some(SeqNum(0xA0B0_C0D0)),
            flags: Flags {
                psh: true,
                ..Flags::default()
            },
            window: 513,
            options: TcpOptions {
                timestamps: ts,
                rdma,
                ..TcpOptions::default()
            },
        };
        let mut buf = vec![0u8; r.buffer_len(payload.len())];
        r.emit(&mut buf, payload.len(), |p| p.copy_from_slice(payload))
            .unwrap();
        buf
    }

    /// The table gives every flags octet's flags, its other bits ignored.
    #[test]
    fn flags_of_every_octet() {
        for bits in 0..=u8::MAX {
            assert_eq!(
                FLAGS_OF_BITS[usize::from(bits & FLAG_BITS)],
                Flags::from_bits(bits),
                "{bits:#x}"
            );
        }
    }

    /// Ends match a segment exactly when its tuple is theirs, read in place or parsed, IPv4
    /// and IPv6.
    #[test]
    fn ends_match_their_tuple_alone() {
        let samples = [
            ("198.18.0.1:5000", "198.18.0.2:6000"),
            ("198.18.0.2:5000", "198.18.0.1:6000"),
            ("198.18.0.1:6000", "198.18.0.2:5000"),
            ("198.18.0.1:5000", "198.18.0.2:6001"),
            ("198.18.0.1:5000", "198.19.0.2:6000"),
            ("[2001:db8::1]:5000", "[2001:db8::2]:6000"),
            ("[2001:db8::2]:5000", "[2001:db8::1]:6000"),
            ("[2001:db8::1]:5000", "[2001:db8::2]:6001"),
            ("[::ffff:198.18.0.1]:5000", "[::ffff:198.18.0.2]:6000"),
        ];
        let tuples: Vec<FourTuple> = samples
            .iter()
            .map(|(l, r)| FourTuple {
                local: l.parse().unwrap(),
                remote: r.parse().unwrap(),
            })
            .collect();
        for t in &tuples {
            let p = packet_of(*t, None, None, b"x");
            let lean = LeanSegment::parse(&p).unwrap();
            let full = wire::parse(&p).unwrap();
            // The receiver's view: the sender's ends swapped.
            let seen = full.tuple;
            assert_eq!((seen.local, seen.remote), (t.remote, t.local));
            assert_eq!(lean.tuple(), seen);
            assert_eq!(lean.ends(), Ends::of(&seen));
            for u in tuples.iter().chain([&seen]) {
                let e = Ends::of(u);
                assert_eq!(e.matches(&lean), *u == seen, "{u:?} {seen:?}");
                assert_eq!(
                    e.matches(&full.lean().unwrap()),
                    *u == seen,
                    "{u:?} {seen:?}"
                );
            }
        }
    }

    proptest! {
        /// A pure ACK with timestamps (its checksum summed without a loop), intact or flipped at
        /// one octet: the checksum verdict is the full parse's.
        #[test]
        fn pure_ack_checksum_agrees_with_the_full_parse(
            v6 in any::<bool>(),
            ts in any::<(u32, u32)>(),
            flip in proptest::option::of((any::<prop::sample::Index>(), 1u8..=255)),
        ) {
            let mut p = packet(v6, Some(ts), None, &[]);
            if let Some((i, x)) = flip {
                let i = i.index(p.len());
                p[i] ^= x;
            }
            if let Some(l) = LeanSegment::parse(&p) {
                prop_assert_eq!(l.unverified.map(|(l4, _)| l4.len()), Some(PURE_ACK_TS_LEN));
                match wire::parse(&p) {
                    Ok(_) => prop_assert!(l.checksum_ok()),
                    Err(e) => {
                        prop_assert_eq!(e, wire::WireError::BadChecksum);
                        prop_assert!(!l.checksum_ok());
                    }
                }
            } else {
                prop_assert!(flip.is_some());
            }
        }
    }

    proptest! {
        /// On any octets (well-formed segments, with or without an RDMA option of any form
        /// whose run fits the payload or not, flipped at one octet, padded, cut short, or
        /// noise) the lean reading either declines or agrees with `wire::parse` field for
        /// field, the RDMA option and its checksum verdict included; it never panics.
        #[test]
        fn agrees_with_the_full_parse(
            v6 in any::<bool>(),
            ts in proptest::option::of(any::<(u32, u32)>()),
            rdma in proptest::option::of(
                (0u8..4, any::<u64>(), any::<u32>(), any::<prop::sample::Index>(), 0usize..3, any::<bool>())
            ),
            payload in prop::collection::vec(any::<u8>(), 0..300),
            flip in proptest::option::of((any::<prop::sample::Index>(), 1u8..=255)),
            pad in 0usize..8,
            cut in 0usize..4,
        ) {
            // Runs that end one octet before the payload's end, at it or one past it.
            let rdma = rdma.map(|(form, rid, bo, off, end, a)| {
                let off = off.index(payload.len() + 1);
                let len = (payload.len() + end).saturating_sub(off + 1);
                (form, rid, bo, off as u16, len as u16, a)
            });
            let rdma = rdma.map(|(form, rid, bo, off, len, a)| match form {
                0 => RdmaOption::Aligned { aligned: a },
                _ => RdmaOption::Transfer(RdmaAnnotation {
                    aligned: a,
                    unsolicited: form == 2,
                    rid: rid % crate::rdma::option::RID_LIMIT,
                    buffer_offset: bo,
                    data_offset: off,
                    data_len: len,
                    total: (form == 3).then_some(bo ^ 0x5A5A),
                }),
            });
            let fits = match rdma {
                Some(RdmaOption::Transfer(t)) => t.fits_payload(payload.len()),
                _ => true,
            };
            let mut p = packet(v6, ts, rdma, &payload);
            if let Some((i, x)) = flip {
                let i = i.index(p.len());
                p[i] ^= x;
            }
            p.extend(std::iter::repeat_n(0u8, pad));
            p.truncate(p.len().saturating_sub(cut));
            let full = wire::parse(&p);
            if let Some(l) = LeanSegment::parse(&p) {
                match full {
                    Ok(s) => {
                        prop_assert!(l.checksum_ok());
                        prop_assert_eq!(l.tuple(), s.tuple);
                        let ends = Ends::of(&s.tuple);
                        prop_assert_eq!(l.ends(), ends);
                        prop_assert!(ends.matches(&l));
                        prop_assert!(s.lean().is_some_and(|x| x.ends() == ends && ends.matches(&x)));
                        prop_assert_eq!(l.header, s.header());
                        prop_assert_eq!(l.rdma(), s.options.rdma);
                        prop_assert_eq!(l.payload, s.payload);
                        let f = s.flags;
                        prop_assert_eq!(l.ack_alone(), f.ack && !f.syn && !f.fin && !f.rst);
                        prop_assert!(s.lean().is_some());
                    }
                    Err(e) => {
                        prop_assert_eq!(e, wire::WireError::BadChecksum);
                        prop_assert!(!l.checksum_ok());
                    }
                }
            }
            if flip.is_none() && cut == 0 && (rdma.is_none() || (ts.is_some() && fits)) {
                // A well-formed segment of the common layout is always read.
                prop_assert!(LeanSegment::parse(&p).is_some_and(|l| l.checksum_ok()));
            }
        }
    }
}
