//! Values kept per slot of an STag table, found from a region handle in one step (its slot
//! index, then its generation): what a [`crate::Memory`] keeps per region. It is looked up for
//! every FPDU sent or placed, and for every piece between MPA markers, so the fast path does
//! no hash lookup per FPDU.

use crate::ddp::memory::RegionHandle;

/// At most one value per table slot, for one generation of the slot. Grows to the highest
/// slot in use and shrinks back when the highest ones go (the table bounds the slots).
#[derive(Debug, Clone)]
pub struct RegionSlots<T> {
    slots: Vec<Option<(u32, T)>>,
}

impl<T> Default for RegionSlots<T> {
    fn default() -> Self {
        RegionSlots { slots: Vec::new() }
    }
}

impl<T> RegionSlots<T> {
    /// The value of `h`: `None` for a slot that holds none, or one of another generation (a
    /// stale handle).
    pub fn get(&self, h: RegionHandle) -> Option<&T> {
        match self.slots.get(h.index() as usize)? {
            Some((g, v)) if *g == h.generation() => Some(v),
            _ => None,
        }
    }

    /// The value of `h`, writable (`None` as for [`RegionSlots::get`]).
    pub fn get_mut(&mut self, h: RegionHandle) -> Option<&mut T> {
        match self.slots.get_mut(h.index() as usize)? {
            Some((g, v)) if *g == h.generation() => Some(v),
            _ => None,
        }
    }

    /// Keeps `v` for `h`, in place of whatever its slot held.
    pub fn insert(&mut self, h: RegionHandle, v: T) {
        let i = h.index() as usize;
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some((h.generation(), v));
    }

    /// Takes the value of `h` out (none for a stale handle).
    pub fn remove(&mut self, h: RegionHandle) -> Option<T> {
        self.get(h)?;
        let v = self.slots[h.index() as usize].take().map(|(_, v)| v);
        self.trim();
        v
    }

    /// Keeps only the values for which `keep(handle, value)` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(RegionHandle, &mut T) -> bool) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if let Some((g, v)) = slot {
                if !keep(RegionHandle::new(i as u32, *g), v) {
                    *slot = None;
                }
            }
        }
        self.trim();
    }

    /// Drops empty slots at the end.
    fn trim(&mut self) {
        while matches!(self.slots.last(), Some(None)) {
            self.slots.pop();
        }
    }

    /// Slots held (empty ones below the highest in use included).
    #[cfg(test)]
    fn capacity_used(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(index: u32, generation: u32) -> RegionHandle {
        RegionHandle::new(index, generation)
    }

    #[test]
    fn a_handle_finds_its_value_and_a_stale_one_finds_none() {
        let mut s = RegionSlots::default();
        s.insert(h(3, 1), "a");
        s.insert(h(0, 7), "b");
        assert_eq!(s.get(h(3, 1)), Some(&"a"));
        assert_eq!(s.get(h(0, 7)), Some(&"b"));
        // Another generation of the slot, an empty slot, a slot past the end.
        assert_eq!(s.get(h(3, 2)), None);
        assert_eq!(s.get_mut(h(3, 2)), None);
        *s.get_mut(h(3, 1)).unwrap() = "A";
        assert_eq!(s.get(h(3, 1)), Some(&"A"));
        assert_eq!(s.get(h(1, 0)), None);
        assert_eq!(s.get(h(99, 1)), None);
        // A stale handle removes nothing.
        assert_eq!(s.remove(h(3, 0)), None);
        assert_eq!(s.get(h(3, 1)), Some(&"A"));
        // The slot reused under a new generation.
        assert_eq!(s.remove(h(3, 1)), Some("A"));
        s.insert(h(3, 2), "c");
        assert_eq!((s.get(h(3, 1)), s.get(h(3, 2))), (None, Some(&"c")));
    }

    #[test]
    fn slots_shrink_back_when_the_highest_go() {
        let mut s = RegionSlots::default();
        for i in 0..100 {
            s.insert(h(i, 1), i);
        }
        assert_eq!(s.capacity_used(), 100);
        s.retain(|hd, v| hd.index() < 10 && *v == hd.index());
        assert_eq!(s.capacity_used(), 10);
        assert_eq!(s.get(h(9, 1)), Some(&9));
        assert_eq!(s.remove(h(9, 1)), Some(9));
        assert_eq!(s.capacity_used(), 9);
        s.retain(|_, _| false);
        assert_eq!(s.capacity_used(), 0);
    }
}
