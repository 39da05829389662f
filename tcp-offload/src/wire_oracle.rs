//! Test oracle for [`super`]: the former `etherparse`-based parse and emit, with checksums by the
//! plain RFC 1071 definition (`testkit::internet_checksum`). The direct byte code must agree with it on every input.

use std::net::{IpAddr, SocketAddr};

use etherparse::{
    IpNumber, Ipv4Header, Ipv4HeaderSlice, Ipv6Header, Ipv6HeaderSlice, TcpHeader, TcpHeaderSlice,
    TcpOptionElement, TcpOptionReadError, TcpOptionsIterator,
};

use testkit::internet_checksum;

use super::{Flags, SegmentRepr, TcpOptions, TcpSegment, WireError, IPV6_HEADER_LEN};
use crate::isn::FourTuple;
use crate::seq::SeqNum;

pub fn pseudo_bytes(src: IpAddr, dst: IpAddr, l4_len: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for a in [src, dst] {
        match a {
            IpAddr::V4(a) => v.extend_from_slice(&a.octets()),
            IpAddr::V6(a) => v.extend_from_slice(&a.octets()),
        }
    }
    v.extend_from_slice(&[0, 6]);
    v.extend_from_slice(&(l4_len as u16).to_be_bytes());
    v
}

fn elements(o: &TcpOptions) -> Vec<TcpOptionElement> {
    use TcpOptionElement::*;
    let mut out = Vec::new();
    if let Some(m) = o.mss {
        out.push(MaximumSegmentSize(m));
    }
    if let Some(w) = o.window_scale {
        out.extend([Noop, WindowScale(w)]);
    }
    if o.sack_permitted {
        out.extend([Noop, Noop, SelectiveAcknowledgementPermitted]);
    }
    if let Some((v, e)) = o.timestamps {
        out.extend([Noop, Noop, Timestamp(v, e)]);
    }
    if let Some((first, rest)) = o.sack_blocks().split_first() {
        let mut more = [None; 3];
        for (m, b) in more.iter_mut().zip(rest) {
            *m = Some((b.0 .0, b.1 .0));
        }
        out.extend([
            Noop,
            Noop,
            SelectiveAcknowledgement((first.0 .0, first.1 .0), more),
        ]);
    }
    out
}

/// The packet `repr` with `payload`, built by `etherparse`.
pub fn emit(repr: &SegmentRepr, payload: &[u8]) -> Result<Vec<u8>, WireError> {
    let (src, dst) = (repr.tuple.local, repr.tuple.remote);
    let mut tcp = TcpHeader::new(src.port(), dst.port(), repr.seq.0, repr.window);
    tcp.syn = repr.flags.syn;
    tcp.fin = repr.flags.fin;
    tcp.rst = repr.flags.rst;
    tcp.psh = repr.flags.psh;
    if let Some(a) = repr.ack {
        tcp.ack = true;
        tcp.acknowledgment_number = a.0;
    }
    tcp.set_options(&elements(&repr.options))
        .map_err(|_| WireError::BufferTooSmall)?;
    let l4_len = tcp.header_len() + payload.len();
    if l4_len > usize::from(u16::MAX) {
        return Err(WireError::BufferTooSmall);
    }
    let mut out = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut ip = Ipv4Header::new(l4_len as u16, 64, IpNumber::TCP, s.octets(), d.octets())
                .map_err(|_| WireError::BufferTooSmall)?;
            ip.header_checksum = ip.calc_header_checksum();
            ip.to_bytes().to_vec()
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => Ipv6Header {
            traffic_class: 0,
            flow_label: Default::default(),
            payload_length: l4_len as u16,
            next_header: IpNumber::TCP,
            hop_limit: 64,
            source: s.octets(),
            destination: d.octets(),
        }
        .to_bytes()
        .to_vec(),
        _ => return Err(WireError::MixedAddressFamilies),
    };
    tcp.checksum = 0;
    let th = tcp.to_bytes();
    let ps = pseudo_bytes(src.ip(), dst.ip(), l4_len);
    tcp.checksum = internet_checksum(&[&ps, &th, payload]);
    out.extend_from_slice(&tcp.to_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// The former `parse`.
pub fn parse(packet: &[u8]) -> Result<TcpSegment<'_>, WireError> {
    match packet.first().map(|b| b >> 4) {
        Some(4) => parse_ipv4(packet),
        Some(6) => parse_ipv6(packet),
        Some(_) => Err(WireError::BadIpHeader),
        None => Err(WireError::Truncated),
    }
}

fn parse_ipv4(packet: &[u8]) -> Result<TcpSegment<'_>, WireError> {
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
    // The checksum covers the header's octets as received. (etherparse's own recomputation
    // goes through its `Ipv4Header`, which has no field for the reserved flag bit and so drops
    // it: a header with that bit flipped and its checksum left alone passed there.)
    let mut hdr = packet[..ihl].to_vec();
    hdr[10..12].fill(0);
    if internet_checksum(&[&hdr]) != ip.header_checksum() {
        return Err(WireError::BadIpHeader);
    }
    let (src, dst) = (
        IpAddr::V4(ip.source_addr()),
        IpAddr::V4(ip.destination_addr()),
    );
    parse_tcp(&packet[ihl..total], ihl, src, dst)
}

fn parse_ipv6(packet: &[u8]) -> Result<TcpSegment<'_>, WireError> {
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

fn parse_tcp(
    l4: &[u8],
    l4_offset: usize,
    src: IpAddr,
    dst: IpAddr,
) -> Result<TcpSegment<'_>, WireError> {
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
    if internet_checksum(&[&pseudo_bytes(src, dst, l4.len()), l4]) != 0 {
        return Err(WireError::BadChecksum);
    }
    let mut options = parse_options(tcp.options())?;
    super::check_rdma_run(&mut options, payload.len());
    Ok(TcpSegment {
        tuple: FourTuple {
            local: SocketAddr::new(dst, tcp.destination_port()),
            remote: SocketAddr::new(src, tcp.source_port()),
        },
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

/// The former `parse_options`.
pub fn parse_options(mut raw: &[u8]) -> Result<TcpOptions, WireError> {
    use TcpOptionElement::*;
    let mut o = TcpOptions::default();
    let full_len = raw.len();
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
                o.sack = Default::default();
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
                    // The RDMA option's body is decoded by the shared codec (its own golden
                    // vectors test it); the oracle checks the TLV walk around it.
                    if before[0] == crate::rdma::option::KIND {
                        let at = full_len - before.len();
                        super::note_rdma_option(&mut o, &before[..usize::from(len)], at);
                    }
                    raw = &before[usize::from(len)..];
                    it = TcpOptionsIterator::from_slice(raw);
                }
                _ => return Err(WireError::BadOption),
            },
            Err(_) => return Err(WireError::BadOption),
        }
    }
}
