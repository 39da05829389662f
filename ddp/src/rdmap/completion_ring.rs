//! A first-in first-out queue for work completions on every message's path.

use fifo::Ring;

/// Items waiting, oldest first: a [`fifo::Ring`] (push and pop inline, doubling when full)
/// that, once drained, gives back the slots of a burst but [`KEPT_SLOTS`]. The engine keeps
/// its completions, each with its connection's key, in one, the endpoint those of all its
/// connections in another; [`move_into`](Self::move_into) hands the first's to the second.
#[derive(Debug)]
pub struct CompletionRing<T> {
    items: Ring<T>,
}

/// Slots a drained ring keeps; more are given back.
pub const KEPT_SLOTS: usize = 64;

/// A work completion with the key its queue pair's owner gave it
/// ([`Qp::set_completion_key`](crate::Qp::set_completion_key)).
pub type KeyedCompletion = (u64, crate::rdmap::completion::WorkCompletion);

impl<T> Default for CompletionRing<T> {
    fn default() -> Self {
        CompletionRing {
            items: Ring::default(),
        }
    }
}

impl<T: Copy> CompletionRing<T> {
    /// Appends `item` after every item held.
    #[inline(always)]
    pub fn push(&mut self, item: T) {
        self.items.push_back(item);
    }

    /// Takes the oldest item; when none is left, gives back the slots of a burst.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<T> {
        if self.items.is_empty() {
            self.items.give_back_slots_over(KEPT_SLOTS);
            return None;
        }
        self.items.pop_front()
    }

    /// Moves every item held, oldest first, after those of `to`, each as `f` makes it; then
    /// gives back the slots of a burst (as [`pop`](Self::pop) finding none would).
    #[inline(always)]
    pub fn drain_into<U: Copy>(&mut self, to: &mut CompletionRing<U>, f: impl Fn(T) -> U) {
        while let Some(item) = self.items.pop_front() {
            to.push(f(item));
        }
        self.items.give_back_slots_over(KEPT_SLOTS);
    }

    /// Moves every item held, oldest first, after those of `to`, as
    /// [`drain_into`](Self::drain_into) with each item as it is; into an empty `to` by
    /// trading slots with it (nothing copied), the slots of a burst then given back.
    #[inline(always)]
    pub fn move_into(&mut self, to: &mut CompletionRing<T>) {
        if !self.items.is_empty() {
            if !to.items.is_empty() {
                return self.append_to(to);
            }
            self.items.hand_over_into_empty(&mut to.items);
        }
        self.items.give_back_slots_over(KEPT_SLOTS);
    }

    /// [`move_into`](Self::move_into) of a ring into one that holds items: copied.
    #[inline(never)]
    fn append_to(&mut self, to: &mut CompletionRing<T>) {
        self.drain_into(to, |item| item);
    }

    /// Whether no item is held.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interleaved pushes and pops wander the head before each growth; bursts past the kept
    /// slots are drained now and then: every item comes out once, in order.
    #[test]
    fn ring_keeps_order_across_wrap_growth_and_shrink() {
        let mut ring = CompletionRing::default();
        assert_eq!(ring.pop(), None);
        let (mut next_in, mut next_out) = (0u64, 0u64);
        for round in 0..60u64 {
            let burst = if round % 10 == 9 { 300 } else { round % 7 + 1 };
            for _ in 0..burst {
                ring.push((next_in % 3, next_in));
                next_in += 1;
            }
            for _ in 0..(round % 5) {
                if let Some(item) = ring.pop() {
                    assert_eq!(item, (next_out % 3, next_out));
                    next_out += 1;
                }
            }
            assert_eq!(ring.len() as u64, next_in - next_out);
            if round % 10 == 9 {
                while let Some((_, n)) = ring.pop() {
                    assert_eq!(n, next_out);
                    next_out += 1;
                }
                assert!(
                    ring.items.slot_count() <= KEPT_SLOTS,
                    "a drained ring keeps few slots"
                );
            }
        }
        while let Some((_, n)) = ring.pop() {
            assert_eq!(n, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
        assert!(ring.is_empty());
    }

    /// A ring moved into an empty one hands over its items, in order, and takes the other's
    /// slots; into one that holds items, they follow them. Either way it is left empty with
    /// few slots, and takes items again.
    #[test]
    fn move_into_trades_slots_with_an_empty_ring_and_appends_otherwise() {
        let (mut from, mut to) = (CompletionRing::default(), CompletionRing::default());
        for n in 0..300u64 {
            to.push(n);
        }
        for n in 0..300u64 {
            assert_eq!(to.pop(), Some(n));
        }
        assert!(to.is_empty() && to.items.slot_count() > KEPT_SLOTS);
        for n in 0..5u64 {
            from.push(n);
        }
        assert_eq!(from.pop(), Some(0));
        from.move_into(&mut to);
        assert!(from.is_empty() && from.items.slot_count() <= KEPT_SLOTS);
        from.push(5);
        from.push(6);
        to.push(7);
        from.move_into(&mut to);
        assert!(from.is_empty());
        let got: Vec<u64> = std::iter::from_fn(|| to.pop()).collect();
        assert_eq!(got, [1, 2, 3, 4, 7, 5, 6]);
        from.move_into(&mut to);
        assert!(from.is_empty() && to.is_empty());
        for n in 0..100u64 {
            from.push(n);
        }
        from.move_into(&mut to);
        assert_eq!(to.len(), 100);
        assert!((0..100).all(|n| to.pop() == Some(n)));
    }

    /// A drained ring's items follow the other ring's, in order, and it keeps few slots.
    #[test]
    fn drain_into_appends_in_order_and_shrinks() {
        let (mut from, mut to) = (CompletionRing::default(), CompletionRing::default());
        to.push((9u8, 0u64));
        for n in 1..=300u64 {
            from.push(n);
            if n % 3 == 0 {
                assert_eq!(from.pop(), Some(n / 3));
            }
        }
        from.drain_into(&mut to, |n| (1, n));
        assert!(from.is_empty() && from.items.slot_count() <= KEPT_SLOTS);
        assert_eq!(to.pop(), Some((9, 0)));
        for n in 101..=300 {
            assert_eq!(to.pop(), Some((1, n)));
        }
        assert_eq!(to.pop(), None);
    }
}
