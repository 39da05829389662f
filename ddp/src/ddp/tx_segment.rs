//! One outgoing DDP segment as a descriptor: its header octets and where its payload lives.
//! The framer gathers `header + payload` straight into the transmit frame, and a TCP
//! retransmission rebuilds the same octets from the descriptor (no retransmit copy is kept).

use crate::ddp::memory::{Memory, RegionHandle};
use crate::ddp::untagged::UNTAGGED_HEADER_LEN;
use crate::rdmap::terminate::TERMINATE_HEADER_MAX_LEN;
use mpa::Spacing;

/// Where a segment's payload comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxPayload {
    /// `len` octets of a registered region at `offset`.
    Region {
        /// The region.
        region: RegionHandle,
        /// Offset from the region start.
        offset: u64,
        /// Octets.
        len: u32,
    },
    /// A small RDMAP header carried inline (Read Request, Terminate). Boxed: it is rare, and
    /// every segment (one per FPDU, kept until acknowledged) is the size of the largest variant.
    Inline {
        /// The octets (the first `len` are used).
        bytes: Box<[u8; TERMINATE_HEADER_MAX_LEN]>,
        /// Octets used.
        len: u8,
    },
}

/// A DDP segment ready to be framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxSegment {
    header: [u8; UNTAGGED_HEADER_LEN],
    header_len: u8,
    /// The payload.
    pub payload: TxPayload,
}

impl TxSegment {
    pub(crate) fn new(
        header: [u8; UNTAGGED_HEADER_LEN],
        header_len: usize,
        payload: TxPayload,
    ) -> TxSegment {
        TxSegment {
            header,
            header_len: header_len as u8,
            payload,
        }
    }

    /// The DDP header (with the RDMAP control byte): 14 or 18 octets.
    pub fn header(&self) -> &[u8] {
        &self.header[..usize::from(self.header_len)]
    }

    /// Payload octets.
    pub fn payload_len(&self) -> usize {
        match self.payload {
            TxPayload::Region { len, .. } => len as usize,
            TxPayload::Inline { len, .. } => usize::from(len),
        }
    }

    /// ULPDU octets: header plus payload.
    pub fn len(&self) -> usize {
        usize::from(self.header_len) + self.payload_len()
    }

    /// Never true: every segment has a header (DDP-40).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Write the whole ULPDU into the runs of `out` that `spacing` describes (the stretch
    /// of an FPDU the ULPDU takes, marker slots left as they are): the header, then the
    /// payload with one [`Memory::read_spaced`].
    #[inline(always)]
    pub fn write_spaced<M: Memory + ?Sized>(&self, mem: &M, spacing: Spacing, out: &mut [u8]) {
        let header = self.header();
        let (at, rest) = if header.len() <= spacing.first() {
            // The header ends before the first hole (the common case): one plain copy, of
            // the header array whole where the first run holds it (what lies past the header
            // is the payload's, written below).
            match out.first_chunk_mut::<UNTAGGED_HEADER_LEN>() {
                Some(h) if spacing.first() >= UNTAGGED_HEADER_LEN => *h = self.header,
                _ => self.copy_header(out),
            }
            let first = spacing.first();
            let rest = if spacing.is_contiguous() {
                spacing
            } else {
                Spacing::new(first - header.len())
            };
            (header.len(), rest)
        } else {
            spacing.copy_in(header, out);
            (spacing.span(header.len()), spacing.advance(header.len()))
        };
        let out = &mut out[at..];
        match &self.payload {
            TxPayload::Inline { bytes, len } => rest.copy_in(&bytes[..usize::from(*len)], out),
            TxPayload::Region { region, offset, .. } if self.payload_len() <= rest.first() => {
                mem.read(*region, *offset, &mut out[..self.payload_len()])
            }
            TxPayload::Region {
                region,
                offset,
                len,
            } => mem.read_spaced(*region, *offset, *len as usize, rest, out),
        }
    }

    /// Write the whole ULPDU into `out`, one contiguous stretch of exactly `len()` octets
    /// (an FPDU without markers): the header, then the payload with one [`Memory::read`].
    /// The octets [`Self::write_spaced`] writes with [`Spacing::CONTIGUOUS`].
    #[inline(always)]
    pub fn write_contiguous<M: Memory + ?Sized>(&self, mem: &M, out: &mut [u8]) {
        debug_assert_eq!(out.len(), self.len(), "out must be the ULPDU's length");
        let n = usize::from(self.header_len);
        match out.first_chunk_mut::<UNTAGGED_HEADER_LEN>() {
            // The header array whole (a fixed-size copy) where the ULPDU is that long: what
            // lies past the header is the payload's, written below.
            Some(h) => *h = self.header,
            None => self.copy_header(out),
        }
        let body = &mut out[n..];
        match &self.payload {
            TxPayload::Region { region, offset, .. } => mem.read(*region, *offset, body),
            TxPayload::Inline { bytes, len } => {
                body.copy_from_slice(&bytes[..usize::from(*len)]);
            }
        }
    }

    /// The header into the front of `out` (a ULPDU shorter than the header array, or a first
    /// run that is; apart, so that the common fixed-size copy stays a few moves).
    #[cold]
    #[inline(never)]
    fn copy_header(&self, out: &mut [u8]) {
        out[..usize::from(self.header_len)].copy_from_slice(self.header());
    }

    /// Write the whole ULPDU into the front of `out` (at least `len()` octets); returns `len()`.
    pub fn write_ulpdu<M: Memory + ?Sized>(&self, mem: &M, out: &mut [u8]) -> usize {
        self.write_spaced(mem, Spacing::CONTIGUOUS, &mut out[..self.len()]);
        self.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::memory::VecMemory;
    use crate::ddp::tagged::TAGGED_HEADER_LEN;

    /// `write_spaced` (the header copied whole when it ends before the first hole) places
    /// every octet where the run iterator puts the ULPDU, for every hole phase around the
    /// header's end (header split by a hole, ending on one, before one) and contiguous, for
    /// a region payload and an inline one; the holes are left as they were.
    #[test]
    fn write_spaced_places_the_ulpdu_in_the_runs() {
        let h = RegionHandle::new(3, 0);
        let data: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8 + 1).collect();
        let mut mem = VecMemory::new();
        mem.insert(h, data.clone());
        let mut header = [0u8; UNTAGGED_HEADER_LEN];
        for (i, b) in header.iter_mut().enumerate() {
            *b = 0xa0 + i as u8;
        }
        let mut inline = [0u8; TERMINATE_HEADER_MAX_LEN];
        inline
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = 0x40 + i as u8);
        let payloads = [
            TxPayload::Region {
                region: h,
                offset: 5,
                len: 1400,
            },
            TxPayload::Region {
                region: h,
                offset: 0,
                len: 3,
            },
            TxPayload::Inline {
                bytes: Box::new(inline),
                len: TERMINATE_HEADER_MAX_LEN as u8,
            },
        ];
        let firsts = (0..=TAGGED_HEADER_LEN + 2).chain([100, 507, 508]);
        for payload in payloads {
            let seg = TxSegment::new(header, TAGGED_HEADER_LEN, payload);
            let mut ulpdu = vec![0u8; seg.len()];
            assert_eq!(seg.write_ulpdu(&mem, &mut ulpdu), seg.len());
            assert_eq!(&ulpdu[..TAGGED_HEADER_LEN], &header[..TAGGED_HEADER_LEN]);
            for sp in firsts
                .clone()
                .map(Spacing::new)
                .chain([Spacing::CONTIGUOUS])
            {
                let mut want = vec![0xeeu8; sp.span(seg.len()) + 3];
                for (at, r) in sp.runs(seg.len()) {
                    let n = r.len();
                    want[r].copy_from_slice(&ulpdu[at..at + n]);
                }
                let mut got = vec![0xeeu8; want.len()];
                seg.write_spaced(&mem, sp, &mut got[..sp.span(seg.len())]);
                assert_eq!(got, want, "{:?} first {}", seg.payload, sp.first());
            }
            let mut got = vec![0xeeu8; seg.len()];
            seg.write_contiguous(&mem, &mut got);
            assert_eq!(got, ulpdu, "{:?} contiguous", seg.payload);
        }
    }
}
