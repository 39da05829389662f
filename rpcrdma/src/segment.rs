//! RDMA segments (`xdr_rdma_segment`, §4.2) and read-list entries (`xdr_read_chunk`).

use crate::xdr::{XdrError, XdrReader, XdrWriter};

/// One registered memory range the peer may reach with RDMA Read or Write.
/// RPCRDMA-02: the STag (`handle`) is 32 bits, the offset 64 bits; 16 bytes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Segment {
    /// STag of the registration.
    pub handle: u32,
    /// Length of the range in bytes.
    pub length: u32,
    /// Tagged offset (virtual address or offset) of the first byte.
    pub offset: u64,
}

impl Segment {
    /// Encoded size in bytes.
    pub const LEN: usize = 16;

    /// Decodes `handle, length, offset`.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self, XdrError> {
        Ok(Self {
            handle: r.u32()?,
            length: r.u32()?,
            offset: r.u64()?,
        })
    }

    /// Encodes `handle, length, offset`.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        w.u32(self.handle)?;
        w.u32(self.length)?;
        w.u64(self.offset)
    }
}

/// A read-list entry: a segment tagged with the XDR position of the data it carries (§3.4).
/// Consecutive entries with the same position form one read chunk (RPCRDMA-14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ReadSegment {
    /// Byte offset in the unreduced RPC message (from its XID) where the data belongs.
    pub position: u32,
    /// Where the data is in the sender's memory.
    pub target: Segment,
}

impl ReadSegment {
    /// Encoded size in bytes, without the list's "present" word.
    pub const LEN: usize = 4 + Segment::LEN;

    /// Decodes `position, segment`.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self, XdrError> {
        Ok(Self {
            position: r.u32()?,
            target: Segment::decode(r)?,
        })
    }

    /// Encodes `position, segment`.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        w.u32(self.position)?;
        self.target.encode(w)
    }
}

/// A write chunk (`xdr_write_chunk`): an array of segments that together receive one result, or
/// (as the reply chunk) one whole long reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct WriteChunk {
    /// The segments, filled in order.
    pub segments: Vec<Segment>,
}

impl WriteChunk {
    /// A chunk of these segments.
    pub fn new(segments: Vec<Segment>) -> Self {
        Self { segments }
    }

    /// Sum of the segment lengths (u64: cannot overflow for any count we accept).
    pub fn total_len(&self) -> u64 {
        self.segments.iter().map(|s| u64::from(s.length)).sum()
    }

    /// Encoded size in bytes: the count word and the segments.
    pub fn buffer_len(&self) -> usize {
        4 + Segment::LEN * self.segments.len()
    }

    /// Decodes a counted segment array of at most `max_segments` entries.
    pub fn decode(r: &mut XdrReader<'_>, max_segments: u32) -> Result<Self, XdrError> {
        Ok(Self {
            segments: r.array(max_segments, Segment::LEN, Segment::decode)?,
        })
    }

    /// Encodes the count word and the segments.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        w.array(&self.segments, |w, s| s.encode(w))
    }

    /// The chunk the server echoes after writing `written` bytes into it (RPCRDMA-18, W-1):
    /// handles, offsets and count unchanged, lengths rewritten by filling segments in order
    /// (unused segments get length 0, W-2). `None` if `written` exceeds the chunk (W-3).
    pub fn echo(&self, written: u64) -> Option<Self> {
        if written > self.total_len() {
            return None;
        }
        let mut left = written;
        let segments = self
            .segments
            .iter()
            .map(|s| {
                let used = left.min(u64::from(s.length));
                left -= used;
                Segment {
                    length: used as u32,
                    ..*s
                }
            })
            .collect();
        Some(Self { segments })
    }

    /// Whether `self` is a valid echo of the advertised chunk `call` (RPCRDMA-18, W-1): same count,
    /// same handles and offsets, no length above the advertised one, and filled in order (a
    /// segment may be partly used only if every later one is empty).
    pub fn is_echo_of(&self, call: &WriteChunk) -> bool {
        if self.segments.len() != call.segments.len() {
            return false;
        }
        let mut short_seen = false;
        for (r, c) in self.segments.iter().zip(&call.segments) {
            if r.handle != c.handle || r.offset != c.offset || r.length > c.length {
                return false;
            }
            if short_seen && r.length != 0 {
                return false;
            }
            short_seen |= r.length < c.length;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::encode_to_vec;

    fn seg(h: u32, l: u32, o: u64) -> Segment {
        Segment {
            handle: h,
            length: l,
            offset: o,
        }
    }

    #[test]
    fn rpcrdma_02_segment_is_16_bytes_with_32_bit_stag_and_64_bit_offset() {
        let s = seg(0xffff_fffe, 7, 0xfedc_ba98_7654_3210);
        let v = encode_to_vec(64, |w| s.encode(w)).unwrap();
        assert_eq!(v.len(), Segment::LEN);
        assert_eq!(&v[8..], &0xfedc_ba98_7654_3210u64.to_be_bytes());
        assert_eq!(Segment::decode(&mut XdrReader::new(&v)), Ok(s));
        assert_eq!(
            Segment::decode(&mut XdrReader::new(&v[..15])),
            Err(XdrError::Truncated)
        );
    }

    #[test]
    fn rpcrdma_18_echo_fills_segments_in_order_for_a_short_read() {
        // Spec 11.3: 6000 bytes into 2 x 4096 -> 4096, 1904.
        let call = WriteChunk::new(vec![
            seg(0x99aa_bbcc, 4096, 0x7f3a_d000_0000),
            seg(0x99aa_bbcc, 4096, 0x7f3a_d000_1000),
        ]);
        let echo = call.echo(6000).unwrap();
        assert_eq!(echo.segments[0], seg(0x99aa_bbcc, 4096, 0x7f3a_d000_0000));
        assert_eq!(echo.segments[1], seg(0x99aa_bbcc, 1904, 0x7f3a_d000_1000));
        assert_eq!(echo.total_len(), 6000);
        assert!(echo.is_echo_of(&call));
        // W-2: an unused chunk echoes with all lengths 0.
        let unused = call.echo(0).unwrap();
        assert!(unused.segments.iter().all(|s| s.length == 0));
        assert!(unused.is_echo_of(&call));
        // W-3: never more than advertised.
        assert_eq!(call.echo(8193), None);
    }

    #[test]
    fn rpcrdma_18_tampered_echo_is_rejected() {
        let call = WriteChunk::new(vec![seg(1, 100, 0), seg(2, 100, 100)]);
        let mut e = call.echo(150).unwrap();
        e.segments[1].handle = 3;
        assert!(!e.is_echo_of(&call), "changed handle");
        let e = WriteChunk::new(vec![seg(1, 50, 0), seg(2, 100, 100)]);
        assert!(
            !e.is_echo_of(&call),
            "hole: later segment used after a short one"
        );
        let e = WriteChunk::new(vec![seg(1, 100, 0)]);
        assert!(!e.is_echo_of(&call), "segment count changed");
        let e = WriteChunk::new(vec![seg(1, 100, 0), seg(2, 101, 100)]);
        assert!(!e.is_echo_of(&call), "longer than advertised");
    }
}
