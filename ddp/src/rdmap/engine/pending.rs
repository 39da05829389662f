//! Records waiting for in-order delivery, by stream position: a map whose smallest entry sits
//! in a slot beside a `BTreeMap` of the rest.
//!
//! In order, each ULPDU's record is inserted and delivered before the next arrives, so the
//! map holds one entry at a time; a `BTreeMap` alone allocates its root node for that entry
//! and frees it again when it is delivered, twice per round trip of a small message. The slot
//! takes that entry without touching the tree; only records placed out of order reach it.

use std::collections::BTreeMap;

/// An ordered map from stream position to record. Invariant: when `first` is empty, so is
/// `rest`; otherwise every key in `rest` is larger than `first`'s.
#[derive(Debug)]
pub(super) struct Pending<R> {
    first: Option<(u64, R)>,
    rest: BTreeMap<u64, R>,
}

impl<R> Default for Pending<R> {
    fn default() -> Self {
        Pending {
            first: None,
            rest: BTreeMap::new(),
        }
    }
}

impl<R> Pending<R> {
    /// Records `rec` at `pos`, replacing a record already there.
    pub(super) fn insert(&mut self, pos: u64, rec: R) {
        match self.first.take() {
            // Empty, or the same position: the new record is the first.
            None => self.first = Some((pos, rec)),
            Some((k, _)) if k == pos => self.first = Some((pos, rec)),
            Some((k, r)) if pos < k => {
                self.rest.insert(k, r);
                self.first = Some((pos, rec));
            }
            first => {
                self.first = first;
                self.rest.insert(pos, rec);
            }
        }
    }

    /// Takes the record with the smallest position if that is below `end`.
    pub(super) fn pop_before(&mut self, end: u64) -> Option<(u64, R)> {
        if self.first.as_ref().is_none_or(|(k, _)| *k >= end) {
            return None;
        }
        let popped = self.first.take();
        self.first = self.rest.pop_first();
        popped
    }

    /// Drops every record after `pos` (positions above it).
    pub(super) fn drop_after(&mut self, pos: u64) {
        if self.first.as_ref().is_some_and(|(k, _)| *k > pos) {
            self.clear();
        } else {
            let _ = self.rest.split_off(&(pos + 1));
        }
    }

    /// Whether a record before `end` satisfies `f`.
    pub(super) fn any_before(&self, end: u64, mut f: impl FnMut(&R) -> bool) -> bool {
        self.first
            .iter()
            .filter(|(k, _)| *k < end)
            .map(|(_, r)| r)
            .chain(self.rest.range(..end).map(|(_, r)| r))
            .any(&mut f)
    }

    /// Whether no record waits.
    pub(super) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Drops every record.
    pub(super) fn clear(&mut self) {
        self.first = None;
        self.rest.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64, u32),
        Pop(u64),
        DropAfter(u64),
        AnyBefore(u64, u32),
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..40, any::<u32>()).prop_map(|(p, r)| Op::Insert(p, r)),
            4 => (0u64..45).prop_map(Op::Pop),
            1 => (0u64..45).prop_map(Op::DropAfter),
            2 => (0u64..45, 0u32..4).prop_map(|(p, m)| Op::AnyBefore(p, m)),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Every operation agrees with a plain `BTreeMap` (the structure this replaces), in
        /// order and out of order.
        #[test]
        fn behaves_as_a_btreemap(ops in proptest::collection::vec(op(), 1..200)) {
            let mut p = Pending::default();
            let mut model = BTreeMap::new();
            for o in ops {
                match o {
                    Op::Insert(k, r) => {
                        p.insert(k, r);
                        model.insert(k, r);
                    }
                    Op::Pop(end) => {
                        let want = match model.first_key_value() {
                            Some((&k, _)) if k < end => model.pop_first(),
                            _ => None,
                        };
                        prop_assert_eq!(p.pop_before(end), want);
                    }
                    Op::DropAfter(k) => {
                        p.drop_after(k);
                        let _ = model.split_off(&(k + 1));
                    }
                    Op::AnyBefore(end, m) => {
                        let f = |r: &u32| r % 4 == m;
                        prop_assert_eq!(
                            p.any_before(end, f),
                            model.range(..end).any(|(_, r)| f(r))
                        );
                    }
                    Op::Clear => {
                        p.clear();
                        model.clear();
                    }
                }
                prop_assert_eq!(p.first.is_none(), model.is_empty());
            }
        }
    }

    #[test]
    fn in_order_use_never_touches_the_tree() {
        let mut p = Pending::default();
        for pos in 0..100u64 {
            p.insert(pos * 10, pos);
            assert!(p.rest.is_empty());
            assert_eq!(p.pop_before(pos * 10 + 1), Some((pos * 10, pos)));
        }
        assert_eq!(p.pop_before(u64::MAX), None);
    }
}
