//! The three chunk lists of RDMA_MSG, RDMA_NOMSG and RDMA_MSGP (§4.2): read list, write list,
//! reply chunk, always all three, in that order (RPCRDMA-27).

use crate::segment::{ReadSegment, Segment, WriteChunk};
use crate::xdr::{XdrError, XdrReader, XdrWriter};

/// Decode bounds (RPCRDMA-31: segment counts and list lengths bounded). The draft sets no maximum; these keep a hostile
/// header from making us allocate or loop without limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most read-list entries in one header.
    pub max_read_segments: u32,
    /// Most write chunks in one write list.
    pub max_write_chunks: u32,
    /// Most segments in one write chunk or in the reply chunk.
    pub max_chunk_segments: u32,
    /// Largest length a single segment may claim (local maximum I/O size).
    pub max_segment_len: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_read_segments: 64,
            max_write_chunks: 8,
            max_chunk_segments: 64,
            max_segment_len: 16 << 20,
        }
    }
}

/// The chunk lists of one transport header.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ChunkLists {
    /// Read list: segments the receiver pulls with RDMA Read, tagged with XDR positions.
    pub reads: Vec<ReadSegment>,
    /// Write list: one chunk per bulk result, filled by the server with RDMA Write.
    pub writes: Vec<WriteChunk>,
    /// Reply chunk: client memory for a whole long reply.
    pub reply: Option<WriteChunk>,
}

/// One read chunk: the consecutive read-list entries sharing a position (RPCRDMA-14, R-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadChunk<'a> {
    /// The shared position.
    pub position: u32,
    /// The entries, in list order; their data concatenates to the item.
    pub segments: &'a [ReadSegment],
}

impl ReadChunk<'_> {
    /// Bytes the chunk carries: the sum of its segment lengths.
    pub fn total_len(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| u64::from(s.target.length))
            .sum()
    }
}

impl ChunkLists {
    /// No chunks: three "absent" words.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Whether all three lists are empty.
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty() && self.reply.is_none()
    }

    /// Encoded size in bytes (XDR of draft §4.2: 24 per read entry, 8 + 16n per write
    /// chunk, 4 per terminator or absent marker).
    pub fn buffer_len(&self) -> usize {
        let reads = (4 + ReadSegment::LEN) * self.reads.len() + 4;
        let writes: usize = self
            .writes
            .iter()
            .map(|c| 4 + c.buffer_len())
            .sum::<usize>()
            + 4;
        let reply = 4 + self.reply.as_ref().map_or(0, WriteChunk::buffer_len);
        reads + writes + reply
    }

    /// Decodes the three lists, bounded by `limits` (structure only; see `chunk_rules` for the
    /// semantic rules).
    pub fn decode(r: &mut XdrReader<'_>, limits: &Limits) -> Result<Self, XdrError> {
        let reads = r.list(limits.max_read_segments, ReadSegment::decode)?;
        let writes = r.list(limits.max_write_chunks, |r| {
            WriteChunk::decode(r, limits.max_chunk_segments)
        })?;
        let reply = r.optional(|r| WriteChunk::decode(r, limits.max_chunk_segments))?;
        Ok(Self {
            reads,
            writes,
            reply,
        })
    }

    /// Encodes the three lists.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        w.list(&self.reads, |w, s| s.encode(w))?;
        w.list(&self.writes, |w, c| c.encode(w))?;
        w.optional(self.reply.as_ref(), |w, c| c.encode(w))
    }

    /// The read chunks: runs of consecutive entries with equal position, in list order.
    pub fn read_chunks(&self) -> impl Iterator<Item = ReadChunk<'_>> {
        let mut rest = &self.reads[..];
        std::iter::from_fn(move || {
            let first = rest.first()?;
            let n = rest
                .iter()
                .take_while(|s| s.position == first.position)
                .count();
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            Some(ReadChunk {
                position: first.position,
                segments: chunk,
            })
        })
    }

    /// The read chunk at `position`, if the list has one.
    pub fn read_chunk_at(&self, position: u32) -> Option<ReadChunk<'_>> {
        self.read_chunks().find(|c| c.position == position)
    }

    /// Every segment the header advertises, in wire order.
    pub fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.reads
            .iter()
            .map(|s| &s.target)
            .chain(self.writes.iter().flat_map(|c| c.segments.iter()))
            .chain(self.reply.iter().flat_map(|c| c.segments.iter()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::encode_to_vec;

    fn rs(position: u32, handle: u32, length: u32) -> ReadSegment {
        ReadSegment {
            position,
            target: Segment {
                handle,
                length,
                offset: u64::from(handle) << 12,
            },
        }
    }

    #[test]
    fn empty_lists_are_three_zero_words() {
        let v = encode_to_vec(64, |w| ChunkLists::empty().encode(w)).unwrap();
        assert_eq!(v, [0u8; 12]);
        assert_eq!(ChunkLists::empty().buffer_len(), 12);
    }

    #[test]
    fn rpcrdma_14_entries_sharing_a_position_form_one_chunk() {
        let lists = ChunkLists {
            reads: vec![rs(52, 1, 4096), rs(52, 2, 4096), rs(8300, 3, 100)],
            ..Default::default()
        };
        let chunks: Vec<_> = lists.read_chunks().collect();
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].position, 52);
        assert_eq!(chunks[0].total_len(), 8192);
        assert_eq!(chunks[0].segments, &lists.reads[..2]);
        assert_eq!(chunks[1].total_len(), 100);
        assert_eq!(
            lists.read_chunk_at(8300).unwrap().segments[0].target.handle,
            3
        );
        assert!(lists.read_chunk_at(56).is_none());
    }

    #[test]
    fn buffer_len_matches_encoding() {
        let lists = ChunkLists {
            reads: vec![rs(0, 1, 10)],
            writes: vec![
                WriteChunk::new(vec![Segment::default(); 3]),
                WriteChunk::default(),
            ],
            reply: Some(WriteChunk::new(vec![Segment::default()])),
        };
        let v = encode_to_vec(1024, |w| lists.encode(w)).unwrap();
        assert_eq!(v.len(), lists.buffer_len());
        let back = ChunkLists::decode(&mut XdrReader::new(&v), &Limits::default()).unwrap();
        assert_eq!(back, lists);
    }

    #[test]
    fn rpcrdma_31_list_lengths_are_bounded_on_decode() {
        let lists = ChunkLists {
            reads: vec![rs(4, 1, 1); 3],
            ..Default::default()
        };
        let v = encode_to_vec(1024, |w| lists.encode(w)).unwrap();
        let tight = Limits {
            max_read_segments: 2,
            ..Limits::default()
        };
        assert_eq!(
            ChunkLists::decode(&mut XdrReader::new(&v), &tight),
            Err(XdrError::TooLong)
        );
    }
}
