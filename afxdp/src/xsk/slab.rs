//! Transmit slabs of a multi-buffer queue: contiguous frames a packet longer than a frame is
//! written into in place and sent as a chain (the books are [`crate::tx_slabs`]).

use super::{Frame, XskQueue, UMEM_HEADROOM, XDP_PKT_CONTD};

/// A transmit slab of one queue ([`XskQueue::alloc_slab`]): contiguous frames its holder may
/// write one packet into. Not `Copy`, like [`Frame`].
#[derive(Debug)]
pub struct Slab {
    index: u32,
    owner: u32,
}
impl XskQueue {
    /// Bytes a transmit slab holds (the largest packet [`XskQueue::slab_mut`] lends); 0 when
    /// the queue has no slabs.
    pub fn slab_capacity(&self) -> usize {
        self.slabs.as_ref().map_or(0, |s| {
            s.frames() as usize * self.frame_size as usize - UMEM_HEADROOM as usize
        })
    }

    /// Takes a free transmit slab (reclaiming completions when none is free): contiguous
    /// frames to write one long packet into ([`XskQueue::slab_mut`]) and send as a chain
    /// ([`XskQueue::send_slab`]). `None` without slabs or when all are with the kernel.
    pub fn alloc_slab(&mut self) -> Option<Slab> {
        let slabs = self.slabs.as_mut()?;
        let index = match slabs.take() {
            Some(i) => i,
            None => {
                self.reclaim();
                self.slabs.as_mut()?.take()?
            }
        };
        Some(Slab {
            index,
            owner: self.owner,
        })
    }

    /// The bytes of `slab`, writable: [`XskQueue::slab_capacity`] of them.
    pub fn slab_mut<'a>(&'a self, slab: &'a mut Slab) -> &'a mut [u8] {
        assert_eq!(slab.owner, self.owner, "a Slab used with another XskQueue");
        let slabs = self
            .slabs
            .as_ref()
            .expect("a Slab exists only on a queue with slabs");
        let at = slabs.offset(slab.index) + u64::from(UMEM_HEADROOM);
        // Safety: the slab's frames lie inside the UMEM (after the ordinary frames, see
        // `new`), never go to the fill ring, and are with the kernel only between
        // `send_slab` and their completions, when no Slab token for them exists; `&mut slab`
        // is the only token of this one.
        unsafe { self.umem.bytes_mut(at, self.slab_capacity()) }
    }

    /// Turns the first `len` bytes of `slab` into a chain of frames appended to `out`, ready
    /// for [`XskQueue::send`] (like [`XskQueue::scatter`], without the copy). An empty or
    /// overlong `len` gives the slab back and appends nothing; returns whether frames were
    /// appended.
    pub fn send_slab(&mut self, slab: Slab, len: usize, out: &mut Vec<Frame>) -> bool {
        assert_eq!(slab.owner, self.owner, "a Slab used with another XskQueue");
        let cap = self.slab_capacity();
        let Some(slabs) = self.slabs.as_mut() else {
            return false;
        };
        if len == 0 || len > cap {
            slabs.put_back(slab.index);
            return false;
        }
        let start = slabs.offset(slab.index);
        let first = (self.frame_size - u64::from(UMEM_HEADROOM)) as usize;
        let mut frames = 0u32;
        let mut done = 0usize;
        while done < len {
            let (addr, room) = if frames == 0 {
                (start + u64::from(UMEM_HEADROOM), first)
            } else {
                (
                    start + u64::from(frames) * self.frame_size,
                    self.frame_size as usize,
                )
            };
            let piece = room.min(len - done);
            done += piece;
            out.push(Frame {
                addr,
                len: piece as u32,
                options: if done < len { XDP_PKT_CONTD } else { 0 },
                owner: self.owner,
            });
            frames += 1;
        }
        slabs.sent(slab.index, frames);
        true
    }

    /// Gives an unused slab back.
    pub fn release_slab(&mut self, slab: Slab) {
        assert_eq!(slab.owner, self.owner, "a Slab used with another XskQueue");
        if let Some(s) = self.slabs.as_mut() {
            s.put_back(slab.index);
        }
    }
}
