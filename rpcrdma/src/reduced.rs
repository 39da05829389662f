//! The reduced XDR stream (§3.4, §3.6, §3.7): an RPC message whose DDP-eligible opaque data was
//! moved into chunks. The length word stays inline (RPCRDMA-12); data and roundup are elided
//! . Read positions count bytes of the *unreduced* message from its XID.
//! Under RDMA_MSGP, inline opaque data at least `thresh` long is preceded by pad bytes (§3.5).
//!
//! Only items the upper layer marks DDP-eligible go through [`ReducedReader::ddp_opaque`] /
//! [`ReducedWriter::inline_opaque`] / [`ReducedWriter::elided_opaque`]; every other field goes
//! through the plain XDR reader or writer ([`ReducedReader::xdr`], [`ReducedWriter::xdr`]).

use crate::chunk_list::ChunkLists;
use crate::error::HeaderError;
use crate::xdr::{padded_len, XdrError, XdrReader, XdrWriter};

/// Where the data of one DDP-eligible opaque is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Payload<'a> {
    /// In the message itself.
    Inline(&'a [u8]),
    /// In the read chunk at `position` (the receiver RDMA-Reads it, RPCRDMA-16).
    ReadChunk {
        /// Position of the chunk (unreduced offset of the data).
        position: u32,
        /// Data length (= the chunk's total length, RPCRDMA-13).
        len: u32,
    },
    /// Already placed by RDMA Write into write chunk `index` of the call (RPCRDMA-17, -19).
    WriteChunk {
        /// Index in the write list.
        index: u32,
        /// Data length (= the sum of the echoed segment lengths).
        len: u32,
    },
}

impl Payload<'_> {
    /// Length of the data.
    pub fn len(&self) -> u32 {
        match self {
            Payload::Inline(d) => d.len() as u32,
            Payload::ReadChunk { len, .. } | Payload::WriteChunk { len, .. } => *len,
        }
    }

    /// Whether the data is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// RDMA_MSGP padding parameters (§3.5, P-1, P-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Padding {
    /// `rdma_align`: a power of two, multiple of 4.
    pub align: u32,
    /// `rdma_thresh`: data of at least this many bytes is padded (P-1: `>=`).
    pub thresh: u32,
    /// Offset of the RPC message in the receive buffer: the transport header length (P-2).
    pub base: u32,
}

impl Padding {
    /// Pad bytes before inline data of length `len` whose length word ends at message offset
    /// `pos_after_len`: `(align - (base + pos) mod align) mod align` when `len >= thresh`.
    pub fn pad_before(&self, len: u32, pos_after_len: usize) -> usize {
        if len < self.thresh || self.align == 0 {
            return 0;
        }
        let align = self.align as usize;
        (align - (self.base as usize + pos_after_len) % align) % align
    }
}

/// Decodes a reduced message, resolving DDP-eligible opaques to inline data or chunks.
#[derive(Debug, Clone)]
pub struct ReducedReader<'a, 'c> {
    xdr: XdrReader<'a>,
    chunks: &'c ChunkLists,
    use_writes: bool,
    next_write: usize,
    elided: u64,
    reads_used: usize,
    padding: Option<Padding>,
}

impl<'a, 'c> ReducedReader<'a, 'c> {
    /// A reader for a call's message: DDP-eligible items come inline or from read chunks; the
    /// write list is the client's memory for results and is not consumed here.
    pub fn for_call(message: &'a [u8], chunks: &'c ChunkLists) -> Self {
        Self::new(message, chunks, false)
    }

    /// A reader for a reply's message: each DDP-eligible result consumes the next (echoed) write
    /// chunk while any is left (RPCRDMA-19), else comes from a read chunk or inline.
    pub fn for_reply(message: &'a [u8], chunks: &'c ChunkLists) -> Self {
        Self::new(message, chunks, true)
    }

    fn new(message: &'a [u8], chunks: &'c ChunkLists, use_writes: bool) -> Self {
        Self {
            xdr: XdrReader::new(message),
            chunks,
            use_writes,
            next_write: 0,
            elided: 0,
            reads_used: 0,
            padding: None,
        }
    }

    /// Skips RDMA_MSGP pad bytes before long inline data.
    pub fn with_padding(mut self, padding: Padding) -> Self {
        self.padding = Some(padding);
        self
    }

    /// The plain XDR reader, for fields that are never chunked.
    pub fn xdr(&mut self) -> &mut XdrReader<'a> {
        &mut self.xdr
    }

    /// Offset in the unreduced message of the next byte.
    pub fn unreduced_position(&self) -> u64 {
        self.xdr.position() as u64 + self.elided
    }

    /// Decodes a DDP-eligible `opaque<max>`: its length word, then the data from the next write
    /// chunk (replies), the read chunk at this position, or inline. A chunk whose length differs
    /// from the length word is [`HeaderError::LengthMismatch`] (RPCRDMA-13, RPCRDMA-19).
    pub fn ddp_opaque(&mut self, max: u32) -> Result<Payload<'a>, HeaderError> {
        let len = self.xdr.length(max)?;
        if self.use_writes {
            if let Some(chunk) = self.chunks.writes.get(self.next_write) {
                if chunk.total_len() != u64::from(len) {
                    return Err(HeaderError::LengthMismatch);
                }
                let index = self.next_write as u32;
                self.next_write += 1;
                self.elided += padded_len(len as usize) as u64;
                return Ok(Payload::WriteChunk { index, len });
            }
        }
        let pos = self.unreduced_position();
        if let Some(chunk) = u32::try_from(pos)
            .ok()
            .filter(|p| *p != 0)
            .and_then(|p| self.chunks.read_chunk_at(p))
        {
            if chunk.total_len() != u64::from(len) {
                return Err(HeaderError::LengthMismatch);
            }
            self.reads_used += 1;
            self.elided += padded_len(len as usize) as u64;
            return Ok(Payload::ReadChunk {
                position: chunk.position,
                len,
            });
        }
        if let Some(p) = self.padding {
            self.xdr.skip(p.pad_before(len, self.xdr.position()))?;
        }
        Ok(Payload::Inline(self.xdr.opaque_fixed(len as usize)?))
    }

    /// Ends decoding: every read chunk other than a position-0 one must have been consumed by
    /// an item, else [`HeaderError::ChunkNotUsed`]. Returns the bytes left in the message.
    pub fn finish(self) -> Result<&'a [u8], HeaderError> {
        let data_chunks = self
            .chunks
            .read_chunks()
            .filter(|c| c.position != 0)
            .count();
        if self.reads_used != data_chunks {
            return Err(HeaderError::ChunkNotUsed);
        }
        Ok(self.xdr.rest())
    }
}

/// Encodes a reduced message.
#[derive(Debug)]
pub struct ReducedWriter<'a> {
    xdr: XdrWriter<'a>,
    elided: u64,
    padding: Option<Padding>,
}

impl<'a> ReducedWriter<'a> {
    /// A writer at the start of `buf` (the first byte of the RPC message).
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self {
            xdr: XdrWriter::new(buf),
            elided: 0,
            padding: None,
        }
    }

    /// Inserts RDMA_MSGP pad bytes before long inline data.
    pub fn with_padding(mut self, padding: Padding) -> Self {
        self.padding = Some(padding);
        self
    }

    /// The plain XDR writer, for fields that are never chunked.
    pub fn xdr(&mut self) -> &mut XdrWriter<'a> {
        &mut self.xdr
    }

    /// Offset in the unreduced message of the next byte.
    pub fn unreduced_position(&self) -> u64 {
        self.xdr.position() as u64 + self.elided
    }

    /// Bytes written so far (the reduced message length).
    pub fn position(&self) -> usize {
        self.xdr.position()
    }

    /// A DDP-eligible opaque sent inline (padded under RDMA_MSGP).
    pub fn inline_opaque(&mut self, data: &[u8]) -> Result<(), XdrError> {
        let len = u32::try_from(data.len()).map_err(|_| XdrError::TooLong)?;
        self.xdr.u32(len)?;
        if let Some(p) = self.padding {
            self.xdr.zeros(p.pad_before(len, self.xdr.position()))?;
        }
        self.xdr.opaque_fixed(data)
    }

    /// A DDP-eligible opaque of `len` bytes moved to a chunk: writes only the length word and
    /// returns the read-chunk position of the data (unused for write chunks).
    pub fn elided_opaque(&mut self, len: u32) -> Result<u32, XdrError> {
        self.xdr.u32(len)?;
        let pos = u32::try_from(self.unreduced_position()).map_err(|_| XdrError::TooLong)?;
        self.elided += padded_len(len as usize) as u64;
        Ok(pos)
    }

    /// A DDP-eligible opaque per `payload`; returns the position for a read chunk.
    pub fn ddp_opaque(&mut self, payload: &Payload<'_>) -> Result<Option<u32>, XdrError> {
        match payload {
            Payload::Inline(d) => self.inline_opaque(d).map(|()| None),
            Payload::ReadChunk { len, .. } => self.elided_opaque(*len).map(Some),
            Payload::WriteChunk { len, .. } => self.elided_opaque(*len).map(|_| None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::{ReadSegment, Segment, WriteChunk};

    fn rs(position: u32, length: u32) -> ReadSegment {
        ReadSegment {
            position,
            target: Segment {
                handle: 1,
                length,
                offset: 0,
            },
        }
    }

    #[test]
    fn rpcrdma_12_elided_item_keeps_its_length_word_and_drops_data() {
        let mut buf = [0u8; 64];
        let mut w = ReducedWriter::new(&mut buf);
        w.xdr().zeros(48).unwrap();
        assert_eq!(w.elided_opaque(8192), Ok(52));
        w.xdr().u64(0x2000).unwrap();
        // A second elided item: its position is in the unreduced stream.
        assert_eq!(w.elided_opaque(10), Ok(52 + 8192 + 12));
        assert_eq!(w.position(), 48 + 4 + 8 + 4);
        assert_eq!(&buf[48..52], &8192u32.to_be_bytes());
    }

    #[test]
    fn rpcrdma_13_16_read_chunk_resolved_at_its_position_and_checked() {
        let mut buf = [0u8; 64];
        let mut w = ReducedWriter::new(&mut buf);
        w.xdr().u64(7).unwrap();
        let pos = w.elided_opaque(100).unwrap();
        w.xdr().u32(0xabcd).unwrap();
        let n = w.position();
        let lists = ChunkLists {
            reads: vec![rs(pos, 60), rs(pos, 40)],
            ..Default::default()
        };
        let mut r = ReducedReader::for_call(&buf[..n], &lists);
        assert_eq!(r.xdr().u64(), Ok(7));
        assert_eq!(
            r.ddp_opaque(1 << 20),
            Ok(Payload::ReadChunk {
                position: 12,
                len: 100
            })
        );
        assert_eq!(r.xdr().u32(), Ok(0xabcd));
        assert_eq!(r.finish(), Ok(&[][..]));

        // Tampered segment length: the sum no longer equals the inline length word.
        let bad = ChunkLists {
            reads: vec![rs(pos, 60), rs(pos, 41)],
            ..Default::default()
        };
        let mut r = ReducedReader::for_call(&buf[..n], &bad);
        r.xdr().u64().unwrap();
        assert_eq!(r.ddp_opaque(1 << 20), Err(HeaderError::LengthMismatch));
    }

    #[test]
    fn read_chunk_not_matching_any_item_is_refused() {
        let mut buf = [0u8; 64];
        let mut w = ReducedWriter::new(&mut buf);
        w.inline_opaque(b"abc").unwrap();
        let n = w.position();
        let lists = ChunkLists {
            reads: vec![rs(40, 4)],
            ..Default::default()
        };
        let mut r = ReducedReader::for_call(&buf[..n], &lists);
        assert_eq!(r.ddp_opaque(16), Ok(Payload::Inline(b"abc")));
        assert_eq!(r.finish(), Err(HeaderError::ChunkNotUsed));
    }

    #[test]
    fn rpcrdma_19_each_result_consumes_one_whole_write_chunk() {
        let mut buf = [0u8; 64];
        let mut w = ReducedWriter::new(&mut buf);
        w.xdr().u32(0).unwrap();
        w.elided_opaque(6000).unwrap();
        w.elided_opaque(300).unwrap();
        w.inline_opaque(b"tail").unwrap();
        let n = w.position();
        let seg = |l| Segment {
            handle: 9,
            length: l,
            offset: 0,
        };
        let lists = ChunkLists {
            writes: vec![
                WriteChunk::new(vec![seg(4096), seg(1904)]),
                WriteChunk::new(vec![seg(300)]),
            ],
            ..Default::default()
        };
        let mut r = ReducedReader::for_reply(&buf[..n], &lists);
        r.xdr().u32().unwrap();
        assert_eq!(
            r.ddp_opaque(u32::MAX),
            Ok(Payload::WriteChunk {
                index: 0,
                len: 6000
            })
        );
        assert_eq!(
            r.ddp_opaque(u32::MAX),
            Ok(Payload::WriteChunk { index: 1, len: 300 })
        );
        // Write list exhausted: the next result is inline.
        assert_eq!(r.ddp_opaque(u32::MAX), Ok(Payload::Inline(b"tail")));
        assert!(r.finish().is_ok());

        // Echoed lengths summing to something else than the length word.
        let short = ChunkLists {
            writes: vec![WriteChunk::new(vec![seg(4096), seg(1000)])],
            ..Default::default()
        };
        let mut r = ReducedReader::for_reply(&buf[..n], &short);
        r.xdr().u32().unwrap();
        assert_eq!(r.ddp_opaque(u32::MAX), Err(HeaderError::LengthMismatch));
    }

    #[test]
    fn rpcrdma_15_msgp_pads_data_at_or_above_threshold_to_alignment() {
        // align 4096, thresh 1024, transport header of 36 bytes before the message.
        let p = Padding {
            align: 4096,
            thresh: 1024,
            base: 36,
        };
        for len in [1020usize, 1024, 5000] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut buf = vec![0u8; 16384];
            let mut w = ReducedWriter::new(&mut buf).with_padding(p);
            w.xdr().u64(1).unwrap();
            w.inline_opaque(&data).unwrap();
            w.xdr().u32(0x5a5a_5a5a).unwrap();
            let n = w.position();
            // Where did the data land, counted from the start of the receive buffer?
            let start = 36 + 12 + p.pad_before(len as u32, 12);
            let aligned = start.is_multiple_of(4096);
            assert_eq!(aligned, len >= 1024, "len {len}: data at {start}");
            assert_eq!(&buf[start - 36..start - 36 + len], &data[..]);
            let lists = ChunkLists::default();
            let mut r = ReducedReader::for_call(&buf[..n], &lists).with_padding(p);
            assert_eq!(r.xdr().u64(), Ok(1));
            assert_eq!(r.ddp_opaque(1 << 20), Ok(Payload::Inline(&data[..])));
            assert_eq!(r.xdr().u32(), Ok(0x5a5a_5a5a));
        }
    }
}
