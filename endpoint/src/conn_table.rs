//! The endpoint's connections, in an indexed store: a connection's id names its slot, so a
//! look-up (a fired timer, a frame's flow, a post, a round) is an index and one compare, not a
//! hash and a probe.
//!
//! An id is the slot's index in its upper 32 bits and a sequence number in its lower 32: the
//! sequence counts the connections ever made (from 1, never 0), so the low half alone names a
//! connection as the ids of a plain counter did (the queue pair's stream is `id as u32`), and
//! an id whose slot has since been given to another connection finds nothing. A slot freed
//! is reused (the last freed first) and freed slots at the end are dropped, so the table
//! holds as many slots as its highest slot in use (at most the connection cap), and gives
//! their memory back as the slots at the end are freed. (The connections are held in place,
//! not boxed: a look-up reaches the connection without a pointer hop.)

/// The connections (or anything kept by id), each in a slot of its own.
pub(crate) struct ConnTable<T> {
    slots: Vec<Slot<T>>,
    /// Slots freed, the last freed last; an entry may be stale (its slot dropped from the
    /// end, or taken again since): `insert` skips those.
    free: Vec<u32>,
    /// Values held.
    len: usize,
    /// The sequence number of the next id (never 0).
    seq: u32,
}

struct Slot<T> {
    /// The id of the value held; 0 (no id's value) when empty.
    id: u64,
    value: Option<T>,
}

impl<T> Default for ConnTable<T> {
    fn default() -> Self {
        ConnTable {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            seq: 1,
        }
    }
}

impl<T> ConnTable<T> {
    /// Values held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The value of `id`, if it is still held.
    #[inline]
    pub fn get(&self, id: &u64) -> Option<&T> {
        let s = self.slots.get((*id >> 32) as usize)?;
        if s.id == *id {
            s.value.as_ref()
        } else {
            None
        }
    }

    /// The value of `id`, mutably, if it is still held.
    #[inline]
    pub fn get_mut(&mut self, id: &u64) -> Option<&mut T> {
        let s = self.slots.get_mut((*id >> 32) as usize)?;
        if s.id == *id {
            s.value.as_mut()
        } else {
            None
        }
    }

    /// The slot the next `insert` takes (a freed one, else a new one at the end).
    fn next_slot(&mut self) -> usize {
        while let Some(&i) = self.free.last() {
            if self
                .slots
                .get(i as usize)
                .is_some_and(|s| s.value.is_none())
            {
                return i as usize;
            }
            // Stale: dropped from the end, or taken again by a push since.
            self.free.pop();
        }
        self.slots.len()
    }

    /// The id the next `insert` gives (nothing is inserted or removed in between).
    pub fn next_id(&mut self) -> u64 {
        ((self.next_slot() as u64) << 32) | u64::from(self.seq)
    }

    /// Holds `value` under a new id, which it returns.
    pub fn insert(&mut self, value: T) -> u64 {
        let i = self.next_slot();
        let id = ((i as u64) << 32) | u64::from(self.seq);
        self.seq = self.seq.wrapping_add(1).max(1);
        let slot = Slot {
            id,
            value: Some(value),
        };
        if i == self.slots.len() {
            self.slots.push(slot);
        } else {
            self.free.pop();
            self.slots[i] = slot;
        }
        self.len += 1;
        id
    }

    /// Takes the value of `id` out; its slot is free for another id.
    pub fn remove(&mut self, id: &u64) -> Option<T> {
        let i = (*id >> 32) as usize;
        let s = self.slots.get_mut(i).filter(|s| s.id == *id)?;
        let value = s.value.take()?;
        s.id = 0;
        self.len -= 1;
        if i + 1 == self.slots.len() {
            // Free slots at the end are dropped (their free-list entries go stale).
            while self.slots.last().is_some_and(|s| s.value.is_none()) {
                self.slots.pop();
            }
            if self.slots.len() < self.slots.capacity() / 4 {
                self.slots.shrink_to(self.slots.len() * 2);
            }
        } else {
            self.free.push(i as u32);
        }
        if self.free.len() > 2 * self.slots.len() + 64 {
            // Mostly stale entries: keep only the slots still free.
            let slots = &self.slots;
            self.free
                .retain(|&f| slots.get(f as usize).is_some_and(|s| s.value.is_none()));
            self.free.shrink_to(self.free.len() * 2);
        }
        Some(value)
    }

    /// The values held, with their ids, in slot order.
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> {
        self.slots
            .iter()
            .filter_map(|s| s.value.as_ref().map(|v| (s.id, v)))
    }

    /// The values held, in slot order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(|s| s.value.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Against a hash map of ids (the store it replaces): any sequence of inserts and removes
    /// finds the same values under the same ids, an id never names a later value (however
    /// its slot is reused), ids are unique and never 0, their low halves count from 1 as a
    /// plain counter's ids, `next_id` foretells `insert`'s id, and freed slots are reused
    /// rather than the table growing.
    #[test]
    fn agrees_with_a_map_and_never_reuses_an_id() {
        use proptest::prelude::*;
        #[derive(Debug, Clone)]
        enum Op {
            Insert,
            Remove(usize),
            RemoveStale(usize),
        }
        let op = prop_oneof![
            3 => Just(Op::Insert),
            2 => (0usize..64).prop_map(Op::Remove),
            1 => (0usize..64).prop_map(Op::RemoveStale),
        ];
        proptest!(|(ops in proptest::collection::vec(op, 1..400))| {
            let mut t: ConnTable<u64> = ConnTable::default();
            let mut model: HashMap<u64, u64> = HashMap::new();
            let mut live: Vec<u64> = Vec::new();
            let mut gone: Vec<u64> = Vec::new();
            let mut made = 0u64;
            let mut most = 0usize;
            for op in ops {
                match op {
                    Op::Insert => {
                        made += 1;
                        let want = t.next_id();
                        let id = t.insert(made * 10);
                        prop_assert_eq!(id, want);
                        prop_assert_ne!(id, 0);
                        prop_assert_eq!(id & 0xffff_ffff, made, "the low half counts");
                        prop_assert!(!model.contains_key(&id) && !gone.contains(&id));
                        model.insert(id, made * 10);
                        live.push(id);
                    }
                    Op::Remove(k) if !live.is_empty() => {
                        let id = live.swap_remove(k % live.len());
                        prop_assert_eq!(t.remove(&id), model.remove(&id));
                        gone.push(id);
                    }
                    Op::RemoveStale(k) if !gone.is_empty() => {
                        let id = gone[k % gone.len()];
                        prop_assert_eq!(t.remove(&id), None);
                    }
                    _ => {}
                }
                most = most.max(model.len());
                prop_assert_eq!(t.len(), model.len());
                prop_assert!(t.slots.len() <= most, "freed slots are reused");
                for (id, v) in &model {
                    prop_assert_eq!(t.get(id), Some(v));
                }
                for id in &gone {
                    prop_assert_eq!(t.get(id), None);
                    prop_assert!(t.get_mut(id).is_none());
                }
                let mut held: Vec<(u64, u64)> = t.iter().map(|(id, v)| (id, *v)).collect();
                held.sort_unstable();
                let mut want: Vec<(u64, u64)> = model.iter().map(|(a, b)| (*a, *b)).collect();
                want.sort_unstable();
                prop_assert_eq!(held, want);
                prop_assert_eq!(t.values().count(), model.len());
            }
        });
    }

    /// Ids that are no slot's (past the end, or a placeholder) find nothing.
    #[test]
    fn foreign_ids_find_nothing() {
        let mut t: ConnTable<&str> = ConnTable::default();
        let id = t.insert("a");
        assert_eq!(id, 1, "the first id is a plain counter's");
        for other in [0, 2, u64::MAX, (1 << 32) | 1, id ^ (5 << 32)] {
            assert_eq!(t.get(&other), None);
            assert_eq!(t.get_mut(&other), None);
            assert_eq!(t.remove(&other), None);
        }
        assert_eq!(t.remove(&id), Some("a"));
        assert_eq!(t.len(), 0);
        assert_eq!(t.slots.len(), 0, "a free slot at the end is dropped");
    }

    /// A burst of connections gone gives its memory back.
    #[test]
    fn memory_follows_what_is_held() {
        let mut t: ConnTable<[u8; 64]> = ConnTable::default();
        let ids: Vec<u64> = (0..10_000).map(|_| t.insert([0; 64])).collect();
        for id in &ids[..9_990] {
            assert!(t.remove(id).is_some());
        }
        assert_eq!(t.len(), 10);
        assert!(t.free.len() <= 2 * t.slots.len() + 64);
        for id in &ids[9_990..] {
            assert!(t.remove(id).is_some());
        }
        assert_eq!(t.slots.len(), 0);
        assert!(t.slots.capacity() <= 64, "{}", t.slots.capacity());
    }
}
