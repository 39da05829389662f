//! One outgoing DDP segment as a descriptor: its header octets and where its payload lives.
//! The framer gathers `header + payload` straight into the transmit frame, and a TCP
//! retransmission rebuilds the same octets from the descriptor (no retransmit copy is kept).

use crate::ddp::memory::{Memory, RegionHandle};
use crate::ddp::untagged::UNTAGGED_HEADER_LEN;
use crate::rdmap::terminate::TERMINATE_HEADER_MAX_LEN;
use mpa::Spacing;

/// Where a segment's payload comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// A small RDMAP header carried inline (Read Request, Terminate).
    Inline {
        /// The octets (the first `len` are used).
        bytes: [u8; TERMINATE_HEADER_MAX_LEN],
        /// Octets used.
        len: u8,
    },
}

/// A DDP segment ready to be framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    pub fn write_spaced<M: Memory + ?Sized>(&self, mem: &M, spacing: Spacing, out: &mut [u8]) {
        let header = self.header();
        spacing.copy_in(header, out);
        let at = spacing.span(header.len());
        let rest = spacing.advance(header.len());
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

    /// Write the whole ULPDU into the front of `out` (at least `len()` octets); returns `len()`.
    pub fn write_ulpdu<M: Memory + ?Sized>(&self, mem: &M, out: &mut [u8]) -> usize {
        self.write_spaced(mem, Spacing::CONTIGUOUS, &mut out[..self.len()]);
        self.len()
    }
}
