//! What the kernel hands back, checked before it becomes a token: a descriptor's address must
//! lie in this queue's UMEM, and its frame must be one the kernel holds through the ring that
//! pairs with the one it came back on (`crate::frame_books`); anything else is refused and counted
//! ([`XskRefused`]), never trusted. (The rings check the kernel's indices themselves.)

use super::{Holder, XskQueue, XskRefused};

impl XskQueue {
    /// The books' slot of the frame or strip position holding UMEM offset `addr`; `None`
    /// outside the UMEM.
    fn slot_of(&self, addr: u64) -> Option<usize> {
        if addr < self.aligned_end {
            return usize::try_from(addr / self.frame_size).ok();
        }
        let strip = self.strip.as_ref()?;
        let aligned_slots = usize::try_from(self.aligned_end / self.frame_size).ok()?;
        Some(aligned_slots + strip.position_containing(addr)?)
    }

    /// The frame at `addr` (one of ours) goes to the kernel through `ring`.
    pub(super) fn lend(&mut self, addr: u64, ring: Holder) {
        if let Some(slot) = self.slot_of(addr) {
            self.books.lend(slot, ring);
        }
    }

    /// The frames at the first `n` addresses of the fill scratch list went to the kernel
    /// through `ring`.
    pub(super) fn lend_addrs(&mut self, n: usize, ring: Holder) {
        for i in 0..n {
            let addr = self.addrs[i];
            self.lend(addr, ring);
        }
    }

    /// The kernel hands back the frame at `addr` on the ring that pairs with `ring`: true when
    /// `ring` lent it (it is ours again); otherwise refused and counted.
    pub(super) fn take_back(&mut self, addr: u64, ring: Holder) -> bool {
        let Some(slot) = self.slot_of(addr) else {
            self.refused.outside_umem += 1;
            return false;
        };
        if self.books.take_back(slot, ring) {
            return true;
        }
        self.refused.not_lent += 1;
        false
    }

    /// What this queue refused of what the kernel's side of its rings said (no system call).
    pub fn refused(&self) -> XskRefused {
        let s = &self.socket;
        XskRefused {
            ring_indices: s.fill.index_errors()
                + s.comp.index_errors()
                + s.rx.index_errors()
                + s.tx.index_errors(),
            ..self.refused
        }
    }
}
