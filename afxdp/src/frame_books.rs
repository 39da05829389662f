//! Who holds each frame of a queue's UMEM: we do (a token, the free pool, a slab being
//! written, a strip position not posted), or the kernel, lent through the fill ring or the tx
//! ring. The kernel hands a frame back through the ring that pairs with the one it was lent
//! through (rx for fill, completion for tx); a frame it hands back that it does not hold (a
//! second time, or through the wrong ring) would become a second token for memory someone
//! already holds, so it is refused (the queue counts it). One load and one store per frame.

/// Who holds a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holder {
    /// User space: the queue or a token holder.
    Us,
    /// The kernel, through the fill ring (comes back on the rx ring).
    FillRing,
    /// The kernel, through the tx ring (comes back on the completion ring).
    TxRing,
}

/// One holder per slot (a frame, or a receive strip position: the queue maps addresses).
#[derive(Debug)]
pub(crate) struct FrameBooks {
    holders: Vec<Holder>,
}

impl FrameBooks {
    /// `slots` slots, all ours.
    pub(crate) fn new(slots: usize) -> Self {
        FrameBooks {
            holders: vec![Holder::Us; slots],
        }
    }

    /// Slot `slot`, ours, goes to the kernel through `ring`.
    pub(crate) fn lend(&mut self, slot: usize, ring: Holder) {
        if let Some(h) = self.holders.get_mut(slot) {
            debug_assert_eq!(*h, Holder::Us, "a frame lent while the kernel holds it");
            *h = ring;
        }
    }

    /// The kernel hands slot `slot` back from `ring`: true, and it is ours again, when `ring`
    /// held it; false (nothing changes) when it did not.
    pub(crate) fn take_back(&mut self, slot: usize, ring: Holder) -> bool {
        match self.holders.get_mut(slot) {
            Some(h) if *h == ring => {
                *h = Holder::Us;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_comes_back_once_and_only_from_the_ring_it_went_to() {
        let mut b = FrameBooks::new(3);
        b.lend(0, Holder::FillRing);
        b.lend(1, Holder::TxRing);
        assert!(!b.take_back(0, Holder::TxRing), "the wrong ring");
        assert!(b.take_back(0, Holder::FillRing));
        assert!(!b.take_back(0, Holder::FillRing), "a second time");
        assert!(!b.take_back(2, Holder::FillRing), "never lent");
        assert!(!b.take_back(3, Holder::FillRing), "no such slot");
        assert!(b.take_back(1, Holder::TxRing));
    }
}
