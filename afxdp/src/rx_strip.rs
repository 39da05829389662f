//! A receive strip: the part of a multi-buffer socket's UMEM that the fill ring draws from,
//! laid out so that the frames of a received chain sit end to end.
//!
//! The kernel writes each buffer of a received packet `XDP_PACKET_HEADROOM` (256) octets past
//! the address the fill ring gave it, and fills every buffer but the last to the receive frame
//! size (chunk size minus that headroom). In unaligned-chunk mode
//! (`XDP_UMEM_UNALIGNED_CHUNK_FLAG`) a fill address may be any offset, so the strip hands out
//! addresses that advance by exactly the receive frame size: position `i` is the chunk at
//! `start + i * stride`, its data at `start + i * stride + 256`, and the data of position
//! `i + 1` begins where a full position `i` ends. The kernel takes fill entries in order, so a
//! chain lands on consecutive positions and is one run of the UMEM: the endpoint reads it in
//! place instead of from a gathered copy. Only a chain across the strip's end (position
//! `count - 1` to 0), or one the kernel built from a recycled buffer, is not a run; those are
//! gathered as before.
//!
//! Chunks overlap: position `i`'s chunk ends where position `i + 1`'s data begins, over the
//! next position's headroom. The kernel writes only data there, never headroom, as long as the
//! XDP program sets no metadata (`bpf_xdp_adjust_meta`, which the kernel would copy in front of
//! the data); the steering program sets none.
//!
//! This module keeps the books: which positions are free, and the next one to post. Positions
//! come back in about the order they were posted (frames are released in the order they
//! arrived); the fill ring only ever gets them in strip order, and posting waits at a position
//! still held.

/// The strip's books.
#[derive(Debug)]
pub(crate) struct RxStrip {
    /// UMEM offset of position 0's chunk.
    start: u64,
    /// Octets from one position to the next: the receive frame size.
    stride: u64,
    /// Octets before a position's data (the kernel's headroom).
    headroom: u64,
    /// Per position: free (not posted to the fill ring, not held by us).
    free: Vec<bool>,
    /// The position posted next.
    next: usize,
}

impl RxStrip {
    /// `count` positions from UMEM offset `start` on, for chunks of `chunk` octets with
    /// `headroom` octets before the data (`stride = chunk - headroom`).
    pub(crate) fn new(start: u64, chunk: u64, headroom: u64, count: usize) -> Self {
        RxStrip {
            start,
            stride: chunk - headroom,
            headroom,
            free: vec![true; count],
            next: 0,
        }
    }

    /// Bytes of UMEM the strip takes: the last position's whole chunk included.
    pub(crate) fn len(&self) -> u64 {
        self.free.len() as u64 * self.stride + self.headroom
    }

    /// Octets of data one position holds (the receive frame size).
    pub(crate) fn stride(&self) -> u64 {
        self.stride
    }

    /// The position whose data starts at `addr`, if `addr` is one of the strip's.
    pub(crate) fn position_of(&self, addr: u64) -> Option<usize> {
        let rel = addr.checked_sub(self.start + self.headroom)?;
        let i = usize::try_from(rel / self.stride).ok()?;
        (rel % self.stride == 0 && i < self.free.len()).then_some(i)
    }

    /// Whether `addr` lies in the strip.
    pub(crate) fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr < self.start + self.len()
    }

    /// How many positions the strip has.
    pub(crate) fn positions(&self) -> usize {
        self.free.len()
    }

    /// The position whose chunk holds `addr` (the last chunk starting at or before it; the
    /// kernel's data always starts in that chunk, wherever a program moved it), if `addr` is
    /// the strip's.
    pub(crate) fn position_containing(&self, addr: u64) -> Option<usize> {
        if !self.contains(addr) {
            return None;
        }
        let i = usize::try_from((addr - self.start) / self.stride).ok()?;
        Some(i.min(self.free.len() - 1))
    }

    /// The end of the chunk that holds `addr` (where a frame's data must stop), if `addr` is
    /// the strip's.
    pub(crate) fn chunk_end(&self, addr: u64) -> Option<u64> {
        let i = self.position_containing(addr)? as u64;
        Some(self.start + (i + 1) * self.stride + self.headroom)
    }

    /// Appends to `out` the chunk addresses of up to `max` positions to post, in strip order,
    /// stopping at the first one still held. Returns how many.
    pub(crate) fn take_for_fill(&mut self, max: usize, out: &mut Vec<u64>) -> usize {
        let mut n = 0;
        while n < max && self.free[self.next] {
            self.free[self.next] = false;
            out.push(self.start + self.next as u64 * self.stride);
            self.next = (self.next + 1) % self.free.len();
            n += 1;
        }
        n
    }

    /// Posts taken by [`RxStrip::take_for_fill`] that the fill ring did not accept, the last
    /// `n` of them: they are free again and posted next.
    pub(crate) fn untake(&mut self, n: usize) {
        let count = self.free.len();
        for _ in 0..n {
            self.next = (self.next + count - 1) % count;
            self.free[self.next] = true;
        }
    }

    /// The frame whose data is at `addr` is back from the application.
    pub(crate) fn back(&mut self, addr: u64) {
        if let Some(i) = self.position_containing(addr) {
            self.free[i] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: u64 = 4096;
    const HEAD: u64 = 256;

    #[test]
    fn positions_advance_by_the_receive_frame_size() {
        let mut s = RxStrip::new(8192, CHUNK, HEAD, 4);
        assert_eq!(s.stride(), 3840);
        assert_eq!(s.len(), 4 * 3840 + 256);
        let mut out = Vec::new();
        assert_eq!(s.take_for_fill(10, &mut out), 4);
        assert_eq!(out, [8192, 8192 + 3840, 8192 + 7680, 8192 + 11520]);
        // Data of a full position ends where the next one's begins.
        assert_eq!(out[0] + HEAD + s.stride(), out[1] + HEAD);
        assert_eq!(s.position_of(8192 + HEAD + 3840), Some(1));
        assert_eq!(s.position_of(8192 + HEAD + 3841), None);
        assert_eq!(s.position_of(8192 + HEAD + 4 * 3840), None);
        assert_eq!(s.position_of(HEAD), None);
        assert!(s.contains(8192) && !s.contains(8192 + s.len()) && !s.contains(8191));
        // A frame's data stops at its chunk's end, also when it starts off the usual place.
        assert_eq!(s.chunk_end(8192 + HEAD), Some(8192 + CHUNK));
        assert_eq!(
            s.chunk_end(8192 + 3840 + HEAD + 100),
            Some(8192 + 3840 + CHUNK)
        );
        assert_eq!(s.chunk_end(8192 + 3840 + 10), Some(8192 + 3840 + CHUNK));
        assert_eq!(s.chunk_end(8192 + s.len() - 1), Some(8192 + s.len()));
        assert_eq!(s.chunk_end(8191), None);
    }

    #[test]
    fn a_frame_back_from_off_its_usual_start_frees_its_position() {
        let mut s = RxStrip::new(0, CHUNK, HEAD, 2);
        let mut out = Vec::new();
        assert_eq!(s.take_for_fill(2, &mut out), 2);
        // Data moved into the headroom, or further in: still position 0 and 1.
        s.back(10);
        s.back(3840 + HEAD + 500);
        out.clear();
        assert_eq!(s.take_for_fill(2, &mut out), 2);
        assert_eq!(out, [0, 3840]);
    }

    #[test]
    fn posting_waits_at_a_held_position_and_wraps() {
        let mut s = RxStrip::new(0, CHUNK, HEAD, 4);
        let mut out = Vec::new();
        s.take_for_fill(4, &mut out);
        // Positions 2 and 0 come back; posting resumes at 0 only.
        s.back(2 * 3840 + HEAD);
        s.back(HEAD);
        out.clear();
        assert_eq!(s.take_for_fill(4, &mut out), 1);
        assert_eq!(out, [0]);
        // Position 1 back: 1 and 2 follow in order.
        s.back(3840 + HEAD);
        out.clear();
        assert_eq!(s.take_for_fill(4, &mut out), 2);
        assert_eq!(out, [3840, 7680]);
        // A post the ring refused is posted again next.
        s.untake(1);
        out.clear();
        assert_eq!(s.take_for_fill(4, &mut out), 1);
        assert_eq!(out, [7680]);
    }
}
