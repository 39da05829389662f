//! A connection's header template (eRPC's preallocated headers, TAS's per-flow templates): the
//! IP and TCP header of its segments with every field that never changes written once
//! (addresses, ports, version, TTL, protocol, data offset, the timestamp option's layout) and
//! the sums of those fields kept. A segment is written by copying the template and patching
//! what changes: the lengths, sequence and acknowledgment numbers, flags, window, timestamps
//! and the checksums. The template is the full path's own output ([`SegmentRepr::emit_with`])
//! with those fields zero, so a segment written from it has the octets the full path writes.

use crate::checksum::{self, Sum, TxChecksum};
use crate::isn::FourTuple;
use crate::rdma::option::EncodedOption;
use crate::seq::SeqNum;
use crate::wire::{
    field, Flags, SegmentRepr, TcpOptions, IPV4_HEADER_LEN, MAX_OPTIONS_LEN, TCP_HEADER_LEN,
};

/// The longest header a template holds: IPv6, TCP, timestamps.
const MAX_LEN: usize = 40 + TCP_HEADER_LEN + 12;

/// The timestamps option's octets (NOP NOP kind length, the two values).
const TS_LEN: usize = 12;
/// Where the timestamps' values sit in the options (after NOP NOP kind length).
const TSVAL: std::ops::Range<usize> = 4..8;
const TSECR: std::ops::Range<usize> = 8..12;

/// The header of one connection's segments that carry no option but timestamps (and options
/// written after them per segment).
#[derive(Clone, Debug)]
pub(crate) struct HeaderTemplate {
    /// IP and TCP header; lengths, numbers, flags, window, timestamps and checksums zero.
    bytes: [u8; MAX_LEN],
    /// IP header octets (20 or 40).
    ip_len: usize,
    /// IP and TCP header octets.
    len: usize,
    /// The timestamps option is in the header.
    ts: bool,
    /// IPv4: the sum of the header as it stands (total length and checksum zero).
    ip_sum: Sum,
    /// The pseudo header's sum with a TCP length of zero.
    pseudo: Sum,
    /// The sum of the TCP header as it stands with the data offset and flags zero too: a
    /// segment's header sum is this and the fields it patches in, not its octets summed again.
    tcp_sum: Sum,
}

/// The fields a segment patches into the template.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentFields {
    pub seq: SeqNum,
    pub ack: SeqNum,
    /// SYN / FIN / RST / PSH (ACK is always set).
    pub flags: Flags,
    pub window: u16,
    /// (TSval, TSecr): present exactly when the template has the option.
    pub timestamps: Option<(u32, u32)>,
}

impl HeaderTemplate {
    /// The template of `tuple`'s segments, with the timestamps option when `ts`; `None` for
    /// mixed address families (no such connection exists).
    pub fn new(tuple: FourTuple, ts: bool) -> Option<Self> {
        let repr = SegmentRepr {
            tuple,
            seq: SeqNum(0),
            ack: Some(SeqNum(0)),
            flags: Flags::default(),
            window: 0,
            options: TcpOptions {
                timestamps: ts.then_some((0, 0)),
                ..TcpOptions::default()
            },
        };
        let mut bytes = [0u8; MAX_LEN];
        let len = repr
            .emit_with(&mut bytes, 0, |_| {}, TxChecksum::Offloaded)
            .ok()?;
        let ip_len = repr.header_len() - TCP_HEADER_LEN - repr.options.encoded_len();
        let (src, dst) = (tuple.local.ip(), tuple.remote.ip());
        let pseudo = checksum::pseudo(src, dst, 0)?;
        let v4 = ip_len == IPV4_HEADER_LEN;
        if v4 {
            bytes[field::ipv4::TOTAL_LEN].fill(0);
            bytes[field::ipv4::CHECKSUM].fill(0);
        } else {
            bytes[field::ipv6::PAYLOAD_LEN].fill(0);
        }
        bytes[ip_len..][field::tcp::CHECKSUM].fill(0);
        let ip_sum = match bytes.first_chunk::<IPV4_HEADER_LEN>() {
            Some(h) if v4 => checksum::sum_ipv4_header(h),
            _ => 0,
        };
        let mut th = [0u8; TCP_HEADER_LEN + 12];
        let th = &mut th[..len - ip_len];
        th.copy_from_slice(&bytes[ip_len..len]);
        th[field::tcp::DATA_OFF] = 0;
        th[field::tcp::FLAGS] = 0;
        let tcp_sum = checksum::sum(th, 0);
        Some(HeaderTemplate {
            bytes,
            ip_len,
            len,
            ts,
            ip_sum,
            pseudo,
            tcp_sum,
        })
    }

    /// Writes a segment with `f`'s fields, the encoded RDMA option `rdma` after the template's
    /// options (a multiple of 4 octets: the full path's layout puts it there; with the sum of
    /// its octets, which the checksum adds instead of summing them) and
    /// `payload_len` octets of payload, which `fill` writes in place, into `buf`; returns the
    /// packet length, or `None` (nothing written, `fill` not called) when the packet does not
    /// fit `buf` or its length fields: what [`SegmentRepr::emit_with`] writes and refuses for
    /// the same segment.
    pub fn write(
        &self,
        buf: &mut [u8],
        f: &SegmentFields,
        rdma: Option<(&EncodedOption, Sum)>,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]),
        cks: TxChecksum,
    ) -> Option<usize> {
        let (olen, osum) = rdma.map_or((0, 0), |(o, sum)| (o.1, sum));
        let hlen = self.len + olen;
        let tcp_len = hlen - self.ip_len;
        let l4_len = tcp_len + payload_len;
        let total = hlen + payload_len;
        let v4 = self.ip_len == IPV4_HEADER_LEN;
        let limit = usize::from(u16::MAX) - if v4 { IPV4_HEADER_LEN } else { 0 };
        let fits = tcp_len <= TCP_HEADER_LEN + MAX_OPTIONS_LEN && olen.is_multiple_of(4);
        if !fits || l4_len > limit || buf.len() < total || f.timestamps.is_some() != self.ts {
            return None;
        }
        // The template whole (a fixed-size copy) where the buffer has room: what lies past
        // its header is overwritten below.
        match buf.first_chunk_mut::<MAX_LEN>() {
            Some(b) => *b = self.bytes,
            None => self.copy_header(buf),
        }
        if let Some(((o, n), _)) = rdma {
            // All 20 octets in three fixed-size copies where the buffer has room: what lies
            // past the option is overwritten below.
            match buf[self.len..].first_chunk_mut::<LEN_FULL>() {
                Some(b) => {
                    b[..8].copy_from_slice(&o[..8]);
                    b[8..16].copy_from_slice(&o[8..16]);
                    b[16..].copy_from_slice(&o[16..]);
                }
                None => buf[self.len..hlen].copy_from_slice(&o[..*n]),
            }
        }
        let (hdr, rest) = buf.split_at_mut(hlen);
        let (ip, th) = hdr.split_at_mut(self.ip_len);
        // The fixed TCP header as an array (a template's TCP header is never shorter): its
        // fields are written without a bounds check each.
        let (th, opts) = th.split_first_chunk_mut::<TCP_HEADER_LEN>()?;
        th[field::tcp::DATA_OFF] = ((tcp_len / 4) as u8) << 4;
        match ip.first_chunk_mut::<IPV4_HEADER_LEN>() {
            Some(ip) if v4 => {
                let total_len = (IPV4_HEADER_LEN + l4_len) as u16;
                ip[field::ipv4::TOTAL_LEN].copy_from_slice(&total_len.to_be_bytes());
                let sum = !checksum::fold(self.ip_sum + checksum::word(total_len));
                ip[field::ipv4::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
            }
            _ => ip[field::ipv6::PAYLOAD_LEN].copy_from_slice(&(l4_len as u16).to_be_bytes()),
        }
        th[field::tcp::SEQ].copy_from_slice(&f.seq.0.to_be_bytes());
        th[field::tcp::ACK].copy_from_slice(&f.ack.0.to_be_bytes());
        th[field::tcp::FLAGS] = f.flags.bits(true);
        th[field::tcp::WINDOW].copy_from_slice(&f.window.to_be_bytes());
        if let (Some((v, e)), Some(o)) = (f.timestamps, opts.first_chunk_mut::<TS_LEN>()) {
            o[TSVAL].copy_from_slice(&v.to_be_bytes());
            o[TSECR].copy_from_slice(&e.to_be_bytes());
        }
        let payload = &mut rest[..payload_len];
        fill(payload);
        let pseudo = self.pseudo + checksum::word(l4_len as u16);
        let sum = match cks {
            // A segment without payload (a pure ACK): its header's sum folded, no call to sum
            // zero octets (`field` of no data is that).
            TxChecksum::Full if payload_len == 0 => {
                !checksum::fold(self.header_sum(th, f, pseudo + osum))
            }
            TxChecksum::Full => checksum::field(payload, self.header_sum(th, f, pseudo + osum)),
            TxChecksum::Offloaded => checksum::fold(pseudo),
        };
        th[field::tcp::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
        Some(total)
    }

    /// The template's header into the front of `buf` (a buffer shorter than the longest
    /// template; apart, so that the common fixed-size copy stays a few moves).
    #[cold]
    #[inline(never)]
    fn copy_header(&self, buf: &mut [u8]) {
        buf[..self.len].copy_from_slice(&self.bytes[..self.len]);
    }

    /// The sum of TCP header `th` up to the end of the template's options (the template's
    /// header with `f`'s fields patched in) and `acc`, as `checksum::sum` gives it: the
    /// template's sum and the fields patched in, each a native-order word at an even offset.
    /// An RDMA option after the template's options is not in it: its kept sum is the caller's.
    #[inline]
    fn header_sum(&self, th: &[u8; TCP_HEADER_LEN], f: &SegmentFields, acc: Sum) -> Sum {
        let w32 = |v: u32| Sum::from(u32::from_ne_bytes(v.to_be_bytes()));
        let off_flags = [th[field::tcp::DATA_OFF], th[field::tcp::FLAGS]];
        let mut sum = acc
            + self.tcp_sum
            + w32(f.seq.0)
            + w32(f.ack.0)
            + Sum::from(u16::from_ne_bytes(off_flags))
            + checksum::word(f.window);
        if let Some((v, e)) = f.timestamps {
            sum += w32(v) + w32(e);
        }
        sum
    }
}

/// The longest encoded RDMA option.
const LEN_FULL: usize = crate::rdma::option::LEN_FULL as usize;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rdma::option::{RdmaAnnotation, RdmaOption};
    use proptest::prelude::*;

    /// A flow of ours, IPv4 or IPv6.
    pub(crate) fn tuple(v6: bool) -> FourTuple {
        if v6 {
            FourTuple {
                local: "[2001:db8::1]:4000".parse().unwrap(),
                remote: "[2001:db8::2]:40123".parse().unwrap(),
            }
        } else {
            FourTuple {
                local: "198.18.0.1:4000".parse().unwrap(),
                remote: "198.18.0.2:40123".parse().unwrap(),
            }
        }
    }

    proptest! {
        /// A segment written from the template (with the RDMA option after it, or not) is
        /// octet for octet what `SegmentRepr` emits for the same fields, IPv4 and IPv6, with
        /// and without timestamps, either checksum mode; and both refuse the same too-small
        /// buffers.
        #[test]
        fn template_writes_what_the_full_path_emits(
            v6 in any::<bool>(),
            ts in any::<bool>(),
            rdma in proptest::option::of((any::<u32>(), any::<u16>(), any::<bool>())),
            offloaded in any::<bool>(),
            seq in any::<u32>(),
            ack in any::<u32>(),
            fin in any::<bool>(),
            psh in any::<bool>(),
            window in any::<u16>(),
            tsv in any::<(u32, u32)>(),
            payload in prop::collection::vec(any::<u8>(), 0..1600),
            short in 0usize..3,
        ) {
            let tuple = tuple(v6);
            let cks = if offloaded { TxChecksum::Offloaded } else { TxChecksum::Full };
            let flags = Flags { fin, psh, ..Flags::default() };
            let timestamps = ts.then_some(tsv);
            let rdma = rdma.map(|(off, len, total)| match len % 3 {
                0 => RdmaOption::Aligned { aligned: true },
                _ => RdmaOption::Transfer(RdmaAnnotation {
                    aligned: total,
                    unsolicited: false,
                    rid: u64::from(off) << 3,
                    buffer_offset: off,
                    data_offset: 0,
                    data_len: len,
                    total: total.then_some(off),
                }),
            });
            let repr = SegmentRepr {
                tuple,
                seq: SeqNum(seq),
                ack: Some(SeqNum(ack)),
                flags,
                window,
                options: TcpOptions { timestamps, rdma, ..TcpOptions::default() },
            };
            let room = repr.buffer_len(payload.len()) - short;
            let mut want = vec![0u8; room];
            let w = repr.emit_with(&mut want, payload.len(), |p| p.copy_from_slice(&payload), cks);
            let t = HeaderTemplate::new(tuple, ts).unwrap();
            let f = SegmentFields { seq: SeqNum(seq), ack: SeqNum(ack), flags, window, timestamps };
            let encoded = rdma.map(|r| r.encoded());
            let sum = |e: &EncodedOption| checksum::sum(&e.0[..e.1], 0);
            let mut got = vec![0u8; room];
            let fill = |p: &mut [u8]| p.copy_from_slice(&payload);
            let g = t.write(&mut got, &f, encoded.as_ref().map(|e| (e, sum(e))), payload.len(), fill, cks);
            prop_assert_eq!(w.ok(), g);
            prop_assert_eq!(want, got);
        }
    }
}
