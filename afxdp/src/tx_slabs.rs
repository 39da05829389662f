//! Runs of contiguous UMEM frames ("slabs") in which a packet longer than a frame is written in
//! place and sent as a chain, instead of being written elsewhere and copied into frames.
//!
//! A slab of `frames` frames at `start` holds one packet from `start + headroom` on: the first
//! descriptor begins after the headroom, every later one at its frame's first byte, so the
//! packet's bytes are one contiguous run of the UMEM. (With TX metadata every descriptor needs
//! headroom for it, which breaks the run: such sockets use no slabs.) The slabs sit after the
//! queue's ordinary frames; this module only keeps their books: which are free, and how many
//! frames of each are still with the kernel.

/// The slab region's books.
#[derive(Debug)]
pub(crate) struct TxSlabs {
    /// UMEM offset of the first slab.
    start: u64,
    /// Bytes per frame.
    frame_size: u64,
    /// Frames per slab.
    frames: u32,
    /// Frames of each slab not yet back from the kernel (0: free or being written).
    out: Vec<u32>,
    free: Vec<u32>,
}

impl TxSlabs {
    /// `count` slabs of `frames` frames each from UMEM offset `start` on.
    pub(crate) fn new(start: u64, frame_size: u64, frames: u32, count: u32) -> Self {
        TxSlabs {
            start,
            frame_size,
            frames,
            out: vec![0; count as usize],
            free: (0..count).rev().collect(),
        }
    }

    /// Bytes of UMEM the slabs take.
    pub(crate) fn len(&self) -> u64 {
        self.out.len() as u64 * u64::from(self.frames) * self.frame_size
    }

    /// Frames per slab.
    pub(crate) fn frames(&self) -> u32 {
        self.frames
    }

    /// Takes a free slab; returns its index.
    pub(crate) fn take(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// The UMEM offset of slab `index`.
    pub(crate) fn offset(&self, index: u32) -> u64 {
        self.start + u64::from(index) * u64::from(self.frames) * self.frame_size
    }

    /// Slab `index` was handed to the kernel as `frames` descriptors.
    pub(crate) fn sent(&mut self, index: u32, frames: u32) {
        self.out[index as usize] = frames;
    }

    /// Slab `index` goes back unused.
    pub(crate) fn put_back(&mut self, index: u32) {
        debug_assert_eq!(self.out[index as usize], 0);
        self.free.push(index);
    }

    /// Whether UMEM offset `addr` lies in a slab.
    pub(crate) fn contains(&self, addr: u64) -> bool {
        addr >= self.start && addr - self.start < self.len()
    }

    /// One frame of a slab (`addr` inside it, see [`TxSlabs::contains`]) came back from the
    /// kernel or was released; the slab is free again once all of its frames are.
    pub(crate) fn frame_back(&mut self, addr: u64) {
        let index = ((addr - self.start) / (u64::from(self.frames) * self.frame_size)) as usize;
        let Some(out) = self.out.get_mut(index) else {
            return;
        };
        if *out > 0 {
            *out -= 1;
            if *out == 0 {
                self.free.push(index as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slab_is_free_again_after_all_of_its_frames() {
        let mut s = TxSlabs::new(1 << 20, 4096, 3, 2);
        assert_eq!(s.len(), 2 * 3 * 4096);
        let a = s.take().unwrap();
        let b = s.take().unwrap();
        assert_ne!(a, b);
        assert_eq!(s.take(), None);
        assert_eq!(s.offset(a), 1 << 20);
        assert_eq!(s.offset(b), (1 << 20) + 3 * 4096);
        s.sent(b, 2); // a packet of two frames used the first two
        s.frame_back(s.offset(b) + 256);
        assert_eq!(s.take(), None);
        s.frame_back(s.offset(b) + 4096);
        assert_eq!(s.take(), Some(b));
        s.put_back(a);
        assert_eq!(s.take(), Some(a));
        assert!(s.contains(s.offset(b) + 3 * 4096 - 1));
        assert!(!s.contains(s.offset(b) + 3 * 4096));
        assert!(!s.contains((1 << 20) - 1));
    }
}
