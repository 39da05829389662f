//! A first-in first-out ring of `Copy` items for the queues on every segment's and message's
//! path: TCP's send buffer chunks and sent segments, RDMAP's work completions.
#![forbid(unsafe_code)]

/// Items, oldest first, in slots whose number is zero or a power of two: a logical index
/// becomes a slot by one mask. Full, the ring doubles; it never shrinks but by
/// [`clear`](Self::clear) (a `VecDeque` keeps its capacity the same way).
///
/// A ring of its own rather than a `VecDeque` so that [`push_back`](Self::push_back) and
/// [`pop_front`](Self::pop_front), once or more per segment sent, inline into their callers
/// (the growth out of line, taken only when full).
#[derive(Clone, Debug)]
pub struct Ring<T> {
    /// The slots; their number is zero or a power of two.
    slots: Vec<T>,
    /// Slot of the oldest item.
    head: usize,
    /// Items held.
    len: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            slots: Vec::new(),
            head: 0,
            len: 0,
        }
    }
}

impl<T: Copy> Ring<T> {
    /// An empty ring without slots.
    pub fn new() -> Self {
        Self::default()
    }

    /// The slot of logical index `i` (any `i`: masked).
    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        self.head.wrapping_add(i) & self.slots.len().wrapping_sub(1)
    }

    /// Appends `item` after every item held.
    #[inline(always)]
    pub fn push_back(&mut self, item: T) {
        if self.len == self.slots.len() {
            self.grow(item);
        }
        let at = self.slot(self.len);
        self.slots[at] = item;
        self.len += 1;
    }

    /// Takes the oldest item.
    #[inline(always)]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.slots[self.head];
        self.head = self.slot(1);
        self.len -= 1;
        Some(item)
    }

    /// Drops the `n` oldest items (all when fewer are held).
    #[inline]
    pub fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len);
        if n == self.len {
            self.clear();
        } else {
            self.head = self.slot(n);
            self.len -= n;
        }
    }

    /// Drops every item, keeping the slots.
    #[inline]
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Item `i` (0: the oldest), if held.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i < self.len {
            Some(&self.slots[self.slot(i)])
        } else {
            None
        }
    }

    /// Item `i` (0: the oldest), if held, to change.
    #[inline(always)]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i < self.len {
            let at = self.slot(i);
            Some(&mut self.slots[at])
        } else {
            None
        }
    }

    /// The oldest item.
    #[inline(always)]
    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// The newest item.
    #[inline(always)]
    pub fn back(&self) -> Option<&T> {
        self.get(self.len.wrapping_sub(1))
    }

    /// The newest item, to change.
    #[inline(always)]
    pub fn back_mut(&mut self) -> Option<&mut T> {
        self.get_mut(self.len.wrapping_sub(1))
    }

    /// Items held.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item is held.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The items, oldest first, as two runs of slots: the first from the oldest item on, the
    /// second (empty unless the items wrap past the last slot) from slot 0.
    #[inline]
    pub fn as_slices(&self) -> (&[T], &[T]) {
        let wrapped = (self.head + self.len).saturating_sub(self.slots.len());
        let first = &self.slots[self.head..self.head + self.len - wrapped];
        (first, &self.slots[..wrapped])
    }

    /// The items, oldest first (`skip`, `nth` and `rev` as fast as a slice's).
    #[inline]
    pub fn iter(&self) -> std::iter::Chain<std::slice::Iter<'_, T>, std::slice::Iter<'_, T>> {
        let (a, b) = self.as_slices();
        a.iter().chain(b.iter())
    }

    /// The index of the newest item for which `pred` holds.
    #[inline]
    pub fn rposition(&self, pred: impl FnMut(&T) -> bool) -> Option<usize> {
        let k = self.iter().rev().position(pred)?;
        Some(self.len - 1 - k)
    }

    /// The number of leading items for which `pred` holds, the items ordered so that it holds
    /// for a prefix (as `slice::partition_point`).
    #[inline]
    pub fn partition_point(&self, mut pred: impl FnMut(&T) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(&self.slots[self.slot(mid)]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The slots held (zero or a power of two).
    #[inline(always)]
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// When no item is held, gives back the slots but `kept` (a burst's, in a queue that is
    /// drained often); otherwise does nothing.
    #[inline(always)]
    pub fn give_back_slots_over(&mut self, kept: usize) {
        if self.len == 0 && self.slots.len() > kept {
            self.shrink_to(kept);
        }
    }

    /// Hands every item to `to`, which must be empty, by trading slots with it: nothing is
    /// copied, and this ring is left empty with `to`'s former slots.
    #[inline(always)]
    pub fn hand_over_into_empty(&mut self, to: &mut Ring<T>) {
        debug_assert!(
            to.is_empty(),
            "hand_over_into_empty: the receiving ring holds items"
        );
        std::mem::swap(&mut self.slots, &mut to.slots);
        (to.head, to.len) = (self.head, self.len);
        (self.head, self.len) = (0, 0);
    }

    /// Truncates the slots of an empty ring to `kept` (a power of two or zero).
    #[cold]
    #[inline(never)]
    fn shrink_to(&mut self, kept: usize) {
        debug_assert!(self.len == 0 && (kept == 0 || kept.is_power_of_two()));
        self.head = 0;
        self.slots.truncate(kept);
        self.slots.shrink_to_fit();
    }

    /// Doubles the slots (at least 8), the oldest item moved to slot 0; new slots hold
    /// `filler` until written.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, filler: T) {
        self.slots.rotate_left(self.head);
        self.head = 0;
        let slots = (self.slots.len() * 2).max(8);
        self.slots.resize(slots, filler);
    }
}

impl<T: Copy> std::ops::Index<usize> for Ring<T> {
    type Output = T;

    /// Item `i` (0: the oldest); panics when not held.
    #[inline(always)]
    fn index(&self, i: usize) -> &T {
        match self.get(i) {
            Some(item) => item,
            None => index_out_of_range(i, self.len),
        }
    }
}

impl<T: Copy> std::ops::IndexMut<usize> for Ring<T> {
    /// Item `i` (0: the oldest), to change; panics when not held.
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut T {
        let len = self.len;
        match self.get_mut(i) {
            Some(item) => item,
            None => index_out_of_range(i, len),
        }
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn index_out_of_range(i: usize, len: usize) -> ! {
    panic!("ring index {i} out of range for {len} items")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Every query of `ring` agrees with the `VecDeque` model.
    fn check(ring: &Ring<(u8, u64)>, model: &VecDeque<(u8, u64)>) {
        assert_eq!(ring.len(), model.len());
        assert_eq!(ring.is_empty(), model.is_empty());
        assert_eq!(ring.front(), model.front());
        assert_eq!(ring.back(), model.back());
        assert!(ring.iter().eq(model.iter()));
        assert!(ring.iter().rev().eq(model.iter().rev()));
        assert!(ring.iter().skip(1).eq(model.iter().skip(1)));
        for cut in [0, 1, 2] {
            assert_eq!(
                ring.rposition(|s| s.0 == cut),
                model.iter().rposition(|s| s.0 == cut)
            );
        }
        let (a, b) = ring.as_slices();
        assert!(a.iter().chain(b).eq(model.iter()));
        assert!(b.is_empty() || a.len() + b.len() == ring.len());
        for i in 0..model.len() + 2 {
            assert_eq!(ring.get(i), model.get(i));
        }
        assert!(ring.slots.is_empty() || ring.slots.len().is_power_of_two());
    }

    /// A ring held at a steady fill, one push and one pop a turn, wraps its head past the
    /// last slot many times without growing: every item comes out once, in order.
    #[test]
    fn ring_wraps_at_a_steady_fill() {
        let mut ring = Ring::new();
        for n in 0..5u64 {
            ring.push_back(n);
        }
        let slots = ring.slots.len();
        for n in 5..1_000u64 {
            ring.push_back(n);
            assert_eq!(ring.pop_front(), Some(n - 5));
            assert_eq!(ring[0], n - 4);
            assert_eq!(ring[4], n);
        }
        assert_eq!(
            ring.slots.len(),
            slots,
            "a steady fill does not grow the ring"
        );
        assert_eq!(ring.len(), 5);
    }

    /// Growth while the items wrap past the last slot keeps them in order.
    #[test]
    fn ring_grows_while_wrapped() {
        let mut ring = Ring::new();
        let mut model = VecDeque::new();
        for n in 0..6u64 {
            ring.push_back((0, n));
            model.push_back((0, n));
        }
        for _ in 0..5 {
            assert_eq!(ring.pop_front(), model.pop_front());
        }
        // Head at slot 5 of 8: the next pushes wrap, then fill the ring and grow it.
        for n in 6..40u64 {
            ring.push_back((1, n));
            model.push_back((1, n));
            check(&ring, &model);
        }
        assert!(ring.slots.len() >= 64);
    }

    /// Interleaved pushes, pops, drops from the front, changes in place and clears agree
    /// with a `VecDeque` at every step; `partition_point` finds the same split.
    #[test]
    fn ring_agrees_with_a_vec_deque() {
        let mut ring = Ring::new();
        let mut model = VecDeque::new();
        assert_eq!(ring.pop_front(), None);
        let mut next = 0u64;
        for round in 0..400u64 {
            match round % 11 {
                0..=5 => {
                    for _ in 0..(round % 7 + 1) {
                        ring.push_back(((next % 3) as u8, next));
                        model.push_back(((next % 3) as u8, next));
                        next += 1;
                    }
                }
                6 | 7 => {
                    for _ in 0..(round % 4) {
                        assert_eq!(ring.pop_front(), model.pop_front());
                    }
                }
                8 => {
                    let n = (round % 5) as usize;
                    ring.drop_front(n);
                    model.drain(..n.min(model.len()));
                }
                9 => {
                    if let (Some(r), Some(m)) = (ring.back_mut(), model.back_mut()) {
                        r.0 = 9;
                        m.0 = 9;
                    }
                    let i = (round as usize) % (model.len() + 1);
                    if i < model.len() {
                        ring[i].0 = 7;
                        model[i].0 = 7;
                    }
                }
                _ => {
                    if round % 77 == 10 {
                        ring.clear();
                        model.clear();
                    }
                }
            }
            check(&ring, &model);
            let cut = next.saturating_sub(round % 13);
            assert_eq!(
                ring.partition_point(|s| s.1 < cut),
                model.partition_point(|s| s.1 < cut)
            );
        }
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn index_past_the_items_panics() {
        let mut ring = Ring::new();
        ring.push_back(1u8);
        let _ = ring[1];
    }
}
