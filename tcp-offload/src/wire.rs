//! TCP/IP wire format: a checked view over IPv4+TCP and IPv6+TCP packets, parsed with
//! `etherparse`, and the emit side. IPv6 extension headers are not followed (such packets are
//! "not ours").
//!
//! Field offsets live in `etherparse`; this module owns the option rules: MSS (RFC 9293 §3.7.1),
//! window scale and timestamps (RFC 7323), SACK-permitted and SACK blocks (RFC 2018).

use std::net::{IpAddr, SocketAddr};

use etherparse::{
    IpNumber, Ipv4Header, Ipv4HeaderSlice, Ipv6Header, Ipv6HeaderSlice, TcpHeader, TcpHeaderSlice,
    TcpOptionElement, TcpOptionReadError, TcpOptionsIterator,
};

use crate::checksum;
use crate::isn::FourTuple;
use crate::seq::SeqNum;

/// IPv4 header length we emit (no IP options).
pub const IPV4_HEADER_LEN: usize = 20;
/// IPv6 header length (for when IPv6 follows).
pub const IPV6_HEADER_LEN: usize = 40;
/// TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;
/// Most octets of TCP options.
pub const MAX_OPTIONS_LEN: usize = 40;
/// Most SACK blocks in one segment.
pub const MAX_SACK_BLOCKS: usize = 4;

/// Why a packet was not turned into a [`Segment`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Not an IPv4 packet carrying TCP (not ours: pass).
    NotTcp,
    /// Mixed address families in one 4-tuple (not ours).
    Ipv6Unsupported,
    /// An IP fragment (we do not reassemble; drop).
    Fragment,
    /// Buffer shorter than the headers or the IP total length (malformed).
    Truncated,
    /// Bad IP header (version / IHL / total length / header checksum) (malformed).
    BadIpHeader,
    /// TCP data offset below 5 or past the end of the packet (malformed).
    BadDataOffset,
    /// A TCP option with a bad length (malformed).
    BadOption,
    /// TCP checksum mismatch (malformed).
    BadChecksum,
    /// Output buffer too small / payload too large (emit side).
    BufferTooSmall,
}

impl WireError {
    /// True for the "malformed: drop and count" class (not for "not ours").
    pub fn is_malformed(self) -> bool {
        !matches!(
            self,
            WireError::NotTcp | WireError::Ipv6Unsupported | WireError::BufferTooSmall
        )
    }
}

/// The TCP options of one segment, as far as we use them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    /// MSS option (SYN only).
    pub mss: Option<u16>,
    /// Window-scale shift (SYN only).
    pub window_scale: Option<u8>,
    /// SACK-permitted (SYN only).
    pub sack_permitted: bool,
    /// Timestamps: (TSval, TSecr).
    pub timestamps: Option<(u32, u32)>,
    /// SACK blocks (left, right), `sack_count` of them valid.
    pub sack: [(SeqNum, SeqNum); MAX_SACK_BLOCKS],
    /// Number of valid SACK blocks.
    pub sack_count: u8,
}

impl TcpOptions {
    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[(SeqNum, SeqNum)] {
        &self.sack[..usize::from(self.sack_count.min(MAX_SACK_BLOCKS as u8))]
    }

    /// Encoded length (padded to 4) in the layout we emit.
    pub fn encoded_len(&self) -> usize {
        let mut n = 0;
        if self.mss.is_some() {
            n += 4;
        }
        if self.window_scale.is_some() {
            n += 4; // NOP + 3
        }
        if self.sack_permitted {
            n += 4; // NOP NOP + 2 (or with TS: SACKOK + TS packed, same total)
        }
        if self.timestamps.is_some() {
            n += 12; // NOP NOP + 10
        }
        if self.sack_count > 0 {
            n += 4 + 8 * usize::from(self.sack_count); // NOP NOP + 2 + 8n
        }
        n
    }

    /// The option elements in emit order, without allocating.
    fn elements(&self) -> OptionElements {
        use TcpOptionElement::*;
        let mut out = OptionElements {
            els: core::array::from_fn(|_| Noop),
            len: 0,
        };
        if let Some(m) = self.mss {
            out.push(MaximumSegmentSize(m));
        }
        if let Some(w) = self.window_scale {
            out.push(Noop);
            out.push(WindowScale(w));
        }
        if self.sack_permitted {
            out.push(Noop);
            out.push(Noop);
            out.push(SelectiveAcknowledgementPermitted);
        }
        if let Some((v, e)) = self.timestamps {
            out.push(Noop);
            out.push(Noop);
            out.push(Timestamp(v, e));
        }
        let blocks = self.sack_blocks();
        if let Some((first, rest)) = blocks.split_first() {
            let mut more = [None; 3];
            for (m, b) in more.iter_mut().zip(rest) {
                *m = Some((b.0 .0, b.1 .0));
            }
            out.push(Noop);
            out.push(Noop);
            out.push(SelectiveAcknowledgement((first.0 .0, first.1 .0), more));
        }
        out
    }
}

/// A fixed-size list of option elements (at most 14 for our layouts).
struct OptionElements {
    els: [TcpOptionElement; 14],
    len: usize,
}

impl OptionElements {
    fn push(&mut self, e: TcpOptionElement) {
        if let Some(slot) = self.els.get_mut(self.len) {
            *slot = e;
            self.len += 1;
        }
    }
    fn as_slice(&self) -> &[TcpOptionElement] {
        &self.els[..self.len]
    }
}

/// TCP control flags we act on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// SYN.
    pub syn: bool,
    /// ACK.
    pub ack: bool,
    /// FIN.
    pub fin: bool,
    /// RST.
    pub rst: bool,
    /// PSH.
    pub psh: bool,
}

/// A parsed, checksum-verified TCP segment borrowing its payload from the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    /// From the receiver's view: `local` = destination, `remote` = source.
    pub tuple: FourTuple,
    /// SEG.SEQ.
    pub seq: SeqNum,
    /// SEG.ACK (meaningful when `flags.ack`).
    pub ack: SeqNum,
    /// Control flags.
    pub flags: Flags,
    /// SEG.WND (unscaled).
    pub window: u16,
    /// Options.
    pub options: TcpOptions,
    /// The payload.
    pub payload: &'a [u8],
    /// Where the payload starts inside the packet (for zero-copy placement by the caller).
    pub payload_offset: usize,
}

impl Segment<'_> {
    /// SEG.LEN: payload plus one for SYN and one for FIN.
    pub fn seg_len(&self) -> u32 {
        self.payload.len() as u32 + u32::from(self.flags.syn) + u32::from(self.flags.fin)
    }
}

/// A checked view of an IPv4 packet carrying TCP (smoltcp `wire` style).
#[derive(Clone, Copy, Debug)]
pub struct Ipv4TcpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4TcpPacket<T> {
    /// Checks lengths, header fields, options and the checksums; any later accessor is then safe.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        parse_ipv4(buf.as_ref())?;
        Ok(Ipv4TcpPacket { buf })
    }
    /// The parsed segment (cannot fail after `new_checked`; returns the error again otherwise).
    pub fn segment(&self) -> Result<Segment<'_>, WireError> {
        parse_ipv4(self.buf.as_ref())
    }
    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }
}

/// Parses an IP packet (IPv4, or IPv6 without extension headers) carrying TCP, verifying the
/// checksums.
pub fn parse(packet: &[u8]) -> Result<Segment<'_>, WireError> {
    match packet.first().map(|b| b >> 4) {
        Some(4) => parse_ipv4(packet),
        Some(6) => parse_ipv6(packet),
        Some(_) => Err(WireError::BadIpHeader),
        None => Err(WireError::Truncated),
    }
}

/// [`parse`], counting malformed packets (and bad checksums among them).
pub fn parse_counted<'a>(
    packet: &'a [u8],
    malformed: &mut u64,
    bad_checksum: &mut u64,
) -> Result<Segment<'a>, WireError> {
    let r = parse(packet);
    if let Err(e) = r {
        if e.is_malformed() {
            *malformed += 1;
        }
        if e == WireError::BadChecksum {
            *bad_checksum += 1;
        }
    }
    r
}

/// Parses an IPv4 packet carrying TCP.
pub fn parse_ipv4(packet: &[u8]) -> Result<Segment<'_>, WireError> {
    let ip = Ipv4HeaderSlice::from_slice(packet).map_err(|e| {
        use etherparse::err::ipv4::HeaderSliceError as E;
        match e {
            E::Len(_) => WireError::Truncated,
            E::Content(_) => WireError::BadIpHeader,
        }
    })?;
    if ip.protocol() != IpNumber::TCP {
        return Err(WireError::NotTcp);
    }
    if ip.is_fragmenting_payload() {
        return Err(WireError::Fragment);
    }
    let ihl = usize::from(ip.ihl()) * 4;
    let total = usize::from(ip.total_len());
    if total < ihl {
        return Err(WireError::BadIpHeader);
    }
    if packet.len() < total {
        return Err(WireError::Truncated);
    }
    if ip.to_header().calc_header_checksum() != ip.header_checksum() {
        return Err(WireError::BadIpHeader);
    }
    let (src, dst) = (
        IpAddr::V4(ip.source_addr()),
        IpAddr::V4(ip.destination_addr()),
    );
    parse_tcp(&packet[ihl..total], ihl, src, dst)
}

/// Parses an IPv6 packet carrying TCP directly (extension headers are not followed: not ours).
pub fn parse_ipv6(packet: &[u8]) -> Result<Segment<'_>, WireError> {
    let ip = Ipv6HeaderSlice::from_slice(packet).map_err(|e| {
        use etherparse::err::ipv6::HeaderSliceError as E;
        match e {
            E::Len(_) => WireError::Truncated,
            E::Content(_) => WireError::BadIpHeader,
        }
    })?;
    if ip.next_header() != IpNumber::TCP {
        return Err(WireError::NotTcp);
    }
    let total = IPV6_HEADER_LEN + usize::from(ip.payload_length());
    if packet.len() < total {
        return Err(WireError::Truncated);
    }
    let (src, dst) = (
        IpAddr::V6(ip.source_addr()),
        IpAddr::V6(ip.destination_addr()),
    );
    parse_tcp(&packet[IPV6_HEADER_LEN..total], IPV6_HEADER_LEN, src, dst)
}

/// The TCP part of [`parse_ipv4`] / [`parse_ipv6`]: `l4` starts `l4_offset` octets into the packet.
fn parse_tcp(
    l4: &[u8],
    l4_offset: usize,
    src: IpAddr,
    dst: IpAddr,
) -> Result<Segment<'_>, WireError> {
    let tcp = TcpHeaderSlice::from_slice(l4).map_err(|e| {
        use etherparse::err::tcp::HeaderSliceError as E;
        match e {
            E::Len(_) => {
                if l4.len() >= 13 && (l4[12] >> 4) >= 5 {
                    WireError::BadDataOffset
                } else {
                    WireError::Truncated
                }
            }
            E::Content(_) => WireError::BadDataOffset,
        }
    })?;
    let hlen = usize::from(tcp.data_offset()) * 4;
    let payload = &l4[hlen..];
    // Summing the whole segment, checksum field included, gives 0xFFFF when it is intact.
    let pseudo = checksum::pseudo(src, dst, l4.len()).ok_or(WireError::BadIpHeader)?;
    if checksum::fold(checksum::sum(l4, pseudo)) != 0xFFFF {
        return Err(WireError::BadChecksum);
    }
    let options = parse_options(tcp.options())?;
    let tuple = FourTuple {
        local: SocketAddr::new(dst, tcp.destination_port()),
        remote: SocketAddr::new(src, tcp.source_port()),
    };
    Ok(Segment {
        tuple,
        seq: SeqNum(tcp.sequence_number()),
        ack: SeqNum(tcp.acknowledgment_number()),
        flags: Flags {
            syn: tcp.syn(),
            ack: tcp.ack(),
            fin: tcp.fin(),
            rst: tcp.rst(),
            psh: tcp.psh(),
        },
        window: tcp.window_size(),
        options,
        payload,
        payload_offset: l4_offset + hlen,
    })
}

/// Parses TCP options; unknown kinds with a sane length are skipped (RFC 9293 §3.2).
pub fn parse_options(mut raw: &[u8]) -> Result<TcpOptions, WireError> {
    use TcpOptionElement::*;
    let mut o = TcpOptions::default();
    let mut it = TcpOptionsIterator::from_slice(raw);
    loop {
        let before = it.rest();
        let Some(el) = it.next() else { return Ok(o) };
        match el {
            Ok(Noop) => {}
            Ok(MaximumSegmentSize(m)) => o.mss = Some(m),
            Ok(WindowScale(w)) => o.window_scale = Some(w),
            Ok(SelectiveAcknowledgementPermitted) => o.sack_permitted = true,
            Ok(Timestamp(v, e)) => o.timestamps = Some((v, e)),
            Ok(SelectiveAcknowledgement(first, more)) => {
                o.sack[0] = (SeqNum(first.0), SeqNum(first.1));
                let mut n = 1;
                for b in more.iter().flatten() {
                    o.sack[n] = (SeqNum(b.0), SeqNum(b.1));
                    n += 1;
                }
                o.sack_count = n as u8;
            }
            Err(TcpOptionReadError::UnknownId(_)) => match before.get(1) {
                Some(&len) if len >= 2 && usize::from(len) <= before.len() => {
                    raw = &before[usize::from(len)..];
                    it = TcpOptionsIterator::from_slice(raw);
                }
                _ => return Err(WireError::BadOption),
            },
            Err(_) => return Err(WireError::BadOption),
        }
    }
}

/// The header fields of a segment to emit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRepr {
    /// `local` is the source.
    pub tuple: FourTuple,
    /// SEG.SEQ.
    pub seq: SeqNum,
    /// SEG.ACK, if the ACK flag is set.
    pub ack: Option<SeqNum>,
    /// SYN / FIN / RST / PSH (ACK comes from `ack`).
    pub flags: Flags,
    /// SEG.WND (already scaled down).
    pub window: u16,
    /// Options.
    pub options: TcpOptions,
}

impl SegmentRepr {
    /// IP + TCP header length of this segment.
    pub fn header_len(&self) -> usize {
        let ip = match self.tuple.local {
            SocketAddr::V4(_) => IPV4_HEADER_LEN,
            SocketAddr::V6(_) => IPV6_HEADER_LEN,
        };
        ip + TCP_HEADER_LEN + self.options.encoded_len()
    }

    /// Total packet length with `payload_len` octets of payload.
    pub fn buffer_len(&self, payload_len: usize) -> usize {
        self.header_len() + payload_len
    }

    /// Emits the packet into `buf`: `fill` writes the `payload_len` payload octets in place (so
    /// record bytes can be rebuilt straight into the frame). Returns the packet length.
    pub fn emit(
        &self,
        buf: &mut [u8],
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<usize, WireError> {
        let (src, dst) = (self.tuple.local, self.tuple.remote);
        let mut tcp = TcpHeader::new(src.port(), dst.port(), self.seq.0, self.window);
        tcp.syn = self.flags.syn;
        tcp.fin = self.flags.fin;
        tcp.rst = self.flags.rst;
        tcp.psh = self.flags.psh;
        if let Some(a) = self.ack {
            tcp.ack = true;
            tcp.acknowledgment_number = a.0;
        }
        let els = self.options.elements();
        tcp.set_options(els.as_slice())
            .map_err(|_| WireError::BufferTooSmall)?;
        let tcp_len = tcp.header_len();
        let ip_len = match src {
            SocketAddr::V4(_) => IPV4_HEADER_LEN,
            SocketAddr::V6(_) => IPV6_HEADER_LEN,
        };
        let total = ip_len + tcp_len + payload_len;
        if tcp_len + payload_len > usize::from(u16::MAX)
            || total > usize::from(u16::MAX) + ip_len
            || buf.len() < total
        {
            return Err(WireError::BufferTooSmall);
        }
        let (hdrs, rest) = buf.split_at_mut(ip_len + tcp_len);
        let payload = &mut rest[..payload_len];
        fill(payload);
        let l4_len = (tcp_len + payload_len) as u16;
        match (src.ip(), dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let mut ip = Ipv4Header::new(l4_len, 64, IpNumber::TCP, s.octets(), d.octets())
                    .map_err(|_| WireError::BufferTooSmall)?;
                ip.header_checksum = ip.calc_header_checksum();
                hdrs[..ip_len].copy_from_slice(&ip.to_bytes());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let ip = Ipv6Header {
                    traffic_class: 0,
                    flow_label: Default::default(),
                    payload_length: l4_len,
                    next_header: IpNumber::TCP,
                    hop_limit: 64,
                    source: s.octets(),
                    destination: d.octets(),
                };
                hdrs[..ip_len].copy_from_slice(&ip.to_bytes());
            }
            _ => return Err(WireError::Ipv6Unsupported),
        }
        tcp.checksum = 0;
        let th = &mut hdrs[ip_len..];
        th.copy_from_slice(&tcp.to_bytes());
        let pseudo = checksum::pseudo(src.ip(), dst.ip(), usize::from(l4_len))
            .ok_or(WireError::Ipv6Unsupported)?;
        let sum = !checksum::fold(checksum::sum(payload, checksum::sum(th, pseudo)));
        th[16..18].copy_from_slice(&sum.to_be_bytes());
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn tuple() -> FourTuple {
        FourTuple {
            local: "198.18.0.1:4000".parse().unwrap(),
            remote: "198.18.0.2:5000".parse().unwrap(),
        }
    }

    fn sample(options: TcpOptions, payload: &[u8]) -> Vec<u8> {
        let r = SegmentRepr {
            tuple: tuple(),
            seq: SeqNum(0xFFFF_FFF0),
            ack: Some(SeqNum(77)),
            flags: Flags {
                syn: false,
                ack: true,
                fin: true,
                rst: false,
                psh: true,
            },
            window: 4096,
            options,
        };
        let mut buf = vec![0u8; r.buffer_len(payload.len())];
        let n = r
            .emit(&mut buf, payload.len(), |p| p.copy_from_slice(payload))
            .unwrap();
        assert_eq!(n, buf.len());
        buf
    }

    #[test]
    fn emit_parse_roundtrip_with_all_options() {
        let mut o = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some((1, 2)),
            ..Default::default()
        };
        let p = sample(o, b"hello");
        let s = parse(&p).unwrap();
        assert_eq!(s.options, o);
        assert_eq!(s.payload, b"hello");
        assert_eq!(s.seq, SeqNum(0xFFFF_FFF0));
        assert_eq!(s.ack, SeqNum(77));
        assert!(s.flags.fin && s.flags.ack && s.flags.psh && !s.flags.syn);
        assert_eq!(s.tuple.local, tuple().remote);
        assert_eq!(&p[s.payload_offset..], b"hello");
        o = TcpOptions {
            timestamps: Some((5, 6)),
            ..Default::default()
        };
        o.sack[0] = (SeqNum(10), SeqNum(20));
        o.sack[1] = (SeqNum(30), SeqNum(40));
        o.sack[2] = (SeqNum(50), SeqNum(60));
        o.sack_count = 3;
        let p = sample(o, b"");
        assert_eq!(parse(&p).unwrap().options, o);
        assert_eq!(p.len(), 20 + 20 + o.encoded_len());
    }

    #[test]
    fn ipv6_emit_parse_roundtrip() {
        let tuple = FourTuple {
            local: "[2001:db8::1]:4000".parse().unwrap(),
            remote: "[2001:db8::2]:5000".parse().unwrap(),
        };
        let r = SegmentRepr {
            tuple,
            seq: SeqNum(7),
            ack: Some(SeqNum(9)),
            flags: Flags {
                psh: true,
                ..Default::default()
            },
            window: 1000,
            options: TcpOptions {
                timestamps: Some((3, 4)),
                ..Default::default()
            },
        };
        let mut buf = vec![0u8; r.buffer_len(5)];
        let n = r
            .emit(&mut buf, 5, |p| p.copy_from_slice(b"hello"))
            .unwrap();
        assert_eq!(n, 40 + 32 + 5);
        let s = parse(&buf).unwrap();
        assert_eq!((s.tuple.local, s.tuple.remote), (tuple.remote, tuple.local));
        assert_eq!(
            (s.seq, s.ack, s.payload, s.payload_offset),
            (SeqNum(7), SeqNum(9), &b"hello"[..], 72)
        );
        buf[n - 1] ^= 1;
        assert_eq!(parse(&buf).unwrap_err(), WireError::BadChecksum);
        assert_eq!(parse(&buf[..n - 1]).unwrap_err(), WireError::Truncated);
        buf[6] = 17; // next header UDP
        assert_eq!(parse(&buf).unwrap_err(), WireError::NotTcp);
    }

    #[test]
    fn header_lengths_are_word_aligned() {
        // Header alignment of the emitted headers: options always pad to a multiple of 4.
        for count in 0..=4u8 {
            let o = TcpOptions {
                sack_count: count,
                timestamps: (count < 4).then_some((1, 1)),
                ..Default::default()
            };
            assert_eq!(o.encoded_len() % 4, 0);
            if o.encoded_len() <= MAX_OPTIONS_LEN {
                let p = sample(o, b"abc");
                let s = parse(&p).unwrap();
                assert_eq!(s.payload_offset % 4, 0);
                assert_eq!(s.options.sack_count, count);
            }
        }
    }

    #[test]
    fn malformed_headers_are_classified() {
        let good = sample(
            TcpOptions {
                timestamps: Some((1, 2)),
                ..Default::default()
            },
            b"xyzw",
        );
        // Truncation at every length.
        for n in 0..good.len() {
            let e = parse(&good[..n]).unwrap_err();
            assert!(e.is_malformed(), "len {n}: {e:?}");
        }
        // Bad data offset: below 5.
        let mut p = good.clone();
        p[20 + 12] = (4 << 4) | (p[32] & 0x0F);
        assert_eq!(parse(&p).unwrap_err(), WireError::BadDataOffset);
        // Data offset past the end of the packet.
        let mut p = good.clone();
        p[32] = 15 << 4;
        assert_eq!(parse(&p).unwrap_err(), WireError::BadDataOffset);
        // Bad option length (timestamp length 9 instead of 10): fix checksum so only the option is bad.
        let mut p = good.clone();
        p[40 + 3] = 9;
        assert_eq!(parse(&p).unwrap_err(), WireError::BadChecksum);
        assert_eq!(parse_options(&p[40..52]).unwrap_err(), WireError::BadOption);
        // Corrupted payload: checksum.
        let mut p = good.clone();
        *p.last_mut().unwrap() ^= 1;
        assert_eq!(parse(&p).unwrap_err(), WireError::BadChecksum);
        // Not TCP.
        let mut p = good;
        p[9] = 17;
        assert!(!parse(&p).unwrap_err().is_malformed() || parse(&p).is_err());
    }

    #[test]
    fn unknown_options_are_skipped_and_bad_lengths_rejected() {
        // kind 30 (MPTCP) len 4, then MSS.
        let raw = [30, 4, 0, 0, 2, 4, 5, 180];
        assert_eq!(parse_options(&raw).unwrap().mss, Some(1460));
        assert_eq!(
            parse_options(&[30, 1, 0, 0]).unwrap_err(),
            WireError::BadOption
        );
        assert_eq!(
            parse_options(&[30, 9, 0, 0]).unwrap_err(),
            WireError::BadOption
        );
        assert_eq!(parse_options(&[2, 4, 5]).unwrap_err(), WireError::BadOption);
        assert_eq!(
            parse_options(&[5, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap_err(),
            WireError::BadOption
        );
        assert_eq!(parse_options(&[0, 99, 99]).unwrap(), TcpOptions::default());
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn options() -> impl Strategy<Value = TcpOptions> {
        (
            proptest::option::of(any::<u16>()),
            proptest::option::of(0u8..15),
            any::<bool>(),
            proptest::option::of(any::<(u32, u32)>()),
            proptest::collection::vec(any::<(u32, u32)>(), 0..=3),
        )
            .prop_map(|(mss, ws, sp, ts, blocks)| {
                let mut o = TcpOptions {
                    mss,
                    window_scale: ws,
                    sack_permitted: sp,
                    timestamps: ts,
                    ..Default::default()
                };
                for (i, b) in blocks.iter().enumerate() {
                    o.sack[i] = (SeqNum(b.0), SeqNum(b.1));
                }
                o.sack_count = blocks.len() as u8;
                o
            })
            .prop_filter("fits 40 octets", |o| o.encoded_len() <= MAX_OPTIONS_LEN)
    }

    proptest! {
        /// parse(emit(x)) == x for every header we can emit.
        #[test]
        fn parse_emit_roundtrip(
            seq in any::<u32>(), ack in proptest::option::of(any::<u32>()), window in any::<u16>(),
            syn in any::<bool>(), fin in any::<bool>(), rst in any::<bool>(), psh in any::<bool>(),
            o in options(), payload in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let repr = SegmentRepr {
                tuple: tests::tuple(),
                seq: SeqNum(seq),
                ack: ack.map(SeqNum),
                flags: Flags { syn, fin, rst, psh, ack: false },
                window,
                options: o,
            };
            let mut buf = vec![0u8; repr.buffer_len(payload.len())];
            let n = repr.emit(&mut buf, payload.len(), |p| p.copy_from_slice(&payload)).unwrap();
            prop_assert_eq!(n, buf.len());
            let s = parse(&buf).unwrap();
            prop_assert_eq!(s.seq, repr.seq);
            prop_assert_eq!(s.flags.ack, ack.is_some());
            if let Some(a) = ack { prop_assert_eq!(s.ack, SeqNum(a)); }
            prop_assert_eq!((s.flags.syn, s.flags.fin, s.flags.rst, s.flags.psh), (syn, fin, rst, psh));
            prop_assert_eq!(s.window, window);
            prop_assert_eq!(s.options, o);
            prop_assert_eq!(s.payload, &payload[..]);
            prop_assert_eq!(s.tuple.local, repr.tuple.remote);
        }
    }
}
