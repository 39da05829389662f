//! A hashed timer wheel: O(1) insertion and cancellation, expiry by walking the slots passed
//! since the last call. Each key has at most one entry: arming a key again moves it, so the
//! wheel holds one entry per armed key however often deadlines change (a connection re-arms
//! on every segment). Whoever arms a key keeps its [`Armed`] handle (the deadline and the
//! entry's index), so arming, moving and cancelling find the entry without a lookup by key.
//! An entry that fires is taken out of its slot and kept for its key (not freed): the key's
//! handle, marked [`Armed::fired`], re-arms that same entry (a link into a slot, no free-list
//! round trip), and only [`TimerWheel::cancel`] frees it.
//!
//! Beside the slots, a lane of deadlines that keys arm often and that fall due in about the
//! order they are armed (a connection's delayed ACK, a fixed delay after each segment it
//! receives): [`TimerWheel::queue`] appends one, in tick order, with nothing to move or free,
//! and [`TimerWheel::expire`] takes them off its front. Such a deadline, rounded to the tick
//! as the slots' are, fires at the same expiry as it would from a slot; one that its key no
//! longer wants (an ACK that went out with data) is the holder's to ignore when it fires.
//! Entries live in one table and each slot is a doubly linked list through
//! it, so memory follows the keys armed at once, not the slots ever used, and arming allocates
//! nothing once the table has grown. Deadlines further out than one turn stay in their slot
//! until their tick comes. A bitmap of the slots that hold entries lets expiry and
//! [`TimerWheel::next_fire`] skip empty slots 64 at a time, so a long jump of time costs
//! O(slots / 64 + entries fired), not O(slots).

use std::time::Duration;

use tcp_offload::time::nanos;
use tcp_offload::Timestamp;

/// No entry (end of a list).
const NIL: u32 = u32::MAX;

/// Where an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// On the free list.
    Free,
    /// In a slot's list: its key is armed.
    Linked,
    /// Fired, kept for its key's next arming (in no list).
    Kept,
}

/// A deadline of the queued lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Queued {
    tick: u64,
    key: u64,
    at: Timestamp,
}

/// The queued lane: deadlines in tick order, taken off the front. A vector and the index of
/// its first deadline not yet taken (the front is a load, taking it an increment): emptied
/// whenever it drains, its taken front dropped once it outgrows the rest (so its memory
/// follows the deadlines queued at once, as a ring's would).
#[derive(Debug, Default)]
struct Lane {
    items: Vec<Queued>,
    /// The first deadline not taken (`items.len()` only while `items` is empty).
    head: usize,
}

/// A taken front at least this long, and as long as the rest, is dropped.
const LANE_COMPACT_FROM: usize = 64;

impl Lane {
    fn len(&self) -> usize {
        self.items.len() - self.head
    }

    #[inline]
    fn front(&self) -> Option<&Queued> {
        self.items.get(self.head)
    }

    /// Takes the front (there is one).
    #[inline]
    fn pop_front(&mut self) {
        debug_assert!(self.head < self.items.len());
        self.head += 1;
        if self.head == self.items.len() {
            self.items.clear();
            self.head = 0;
        }
    }

    /// Adds `q` in tick order: at the back, as the deadlines of one delay come (the one test
    /// most take); after a shorter delay's or a clock set back, where it belongs (after those
    /// of its tick).
    #[inline]
    fn push(&mut self, q: Queued) {
        if self.head >= LANE_COMPACT_FROM && self.head * 2 >= self.items.len() {
            self.items.drain(..self.head);
            self.head = 0;
        }
        // (`items` holds no taken deadline once empty: its last is the back.)
        if self.items.last().is_none_or(|e| e.tick <= q.tick) {
            self.items.push(q);
        } else {
            let i = self.items[self.head..]
                .iter()
                .rposition(|e| e.tick <= q.tick)
                .map_or(0, |i| i + 1);
            self.items.insert(self.head + i, q);
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: u64,
    tick: u64,
    prev: u32,
    next: u32,
    place: Place,
}

/// A key's entry and the deadline it is armed for, kept by whoever armed it and passed back
/// to move, re-arm or cancel it. When the entry fires (its key is among those
/// [`TimerWheel::expire`] returns) it is kept for the key: the holder marks its handle
/// [`fired`](Armed::fired) and passes it to the next `insert` (which reuses the entry) or to
/// `cancel` (which frees it). A handle dropped without `cancel` leaves its entry kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Armed {
    /// The deadline the key is armed for; `Timestamp::MAX` once its entry fired (not armed:
    /// any deadline is earlier).
    pub at: Timestamp,
    entry: u32,
}

impl Armed {
    /// The handle after its entry fired: the entry is kept, the key is not armed.
    #[must_use]
    pub fn fired(self) -> Armed {
        Armed {
            at: Timestamp::from_nanos(u64::MAX),
            entry: self.entry,
        }
    }
}

/// The wheel.
#[derive(Debug)]
pub struct TimerWheel {
    base: Timestamp,
    /// The tick in nanoseconds (at least 1): tick numbers are 64-bit divisions, not 128-bit
    /// ones (`Duration::as_nanos`), which cost a library call each.
    tick_ns: u64,
    /// The last tick expired.
    now_tick: u64,
    /// When the tick after `now_tick` begins: `expire` before it has nothing to do (a compare
    /// instead of a 128-bit division on every endpoint round).
    next_tick_at: Timestamp,
    /// The first entry of each slot's list.
    heads: Vec<u32>,
    /// One bit per slot: set while the slot's list is not empty.
    occupied: Vec<u64>,
    /// One bit per word of `occupied`: set while that word is not zero (so a search skips
    /// 4,096 empty slots per word of this).
    summary: Vec<u64>,
    /// [`TimerWheel::next_fire`]'s answer until an entry is armed, moved or removed: an
    /// engine asks for it every round, the entries change far less often.
    next_fire_cache: std::cell::Cell<Option<Option<Timestamp>>>,
    entries: Vec<Entry>,
    /// Entries not in use.
    free: Vec<u32>,
    /// Entries linked into slots (keys armed).
    live: usize,
    /// No armed entry's tick is below this (`u64::MAX` when none was armed since the last
    /// scan): an expiry to a tick before it fires nothing and scans no slot.
    low: u64,
    /// An expiry to a tick before this fires nothing: the earlier of `low` and the queued
    /// lane's first tick (a bound, not the next firing: a cancelled entry leaves it early).
    /// [`TimerWheel::advance_quietly`] compares the tick of `now` against it.
    fire_tick: u64,
    /// The queued lane, in tick order.
    queued: Lane,
}

impl TimerWheel {
    /// `slots` slots (rounded up to a power of two, so that a tick's slot is a mask, not a
    /// division) of `tick` each, counting from `base`.
    pub fn new(base: Timestamp, tick: Duration, slots: usize) -> Self {
        let slots = slots.max(1).next_power_of_two();
        TimerWheel {
            base,
            tick_ns: nanos(tick).max(1),
            now_tick: 0,
            next_tick_at: base + tick.max(Duration::from_nanos(1)),
            heads: vec![NIL; slots],
            occupied: vec![0; slots.div_ceil(64)],
            summary: vec![0; slots.div_ceil(64).div_ceil(64)],
            next_fire_cache: std::cell::Cell::new(None),
            entries: Vec::new(),
            free: Vec::new(),
            live: 0,
            low: u64::MAX,
            fire_tick: u64::MAX,
            queued: Lane::default(),
        }
    }

    fn tick_of(&self, t: Timestamp) -> u64 {
        t.nanos_since(self.base) / self.tick_ns
    }

    fn tick_ceil(&self, t: Timestamp) -> u64 {
        t.nanos_since(self.base).div_ceil(self.tick_ns)
    }

    /// When tick `t` begins.
    fn at_tick(&self, t: u64) -> Timestamp {
        Timestamp::from_nanos(
            self.base
                .as_nanos()
                .saturating_add(t.saturating_mul(self.tick_ns)),
        )
    }

    /// Keys armed.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no key is armed.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn slot_of(&self, tick: u64) -> usize {
        // (`heads.len()` is a power of two.)
        (tick & (self.heads.len() as u64 - 1)) as usize
    }

    /// The entry `armed` names for `key` (armed or kept), if it is still that key's.
    fn entry_of(&self, key: u64, armed: Option<Armed>) -> Option<u32> {
        let i = armed?.entry;
        self.entries
            .get(i as usize)
            .is_some_and(|e| e.place != Place::Free && e.key == key)
            .then_some(i)
    }

    /// Arms `key` for `deadline` (rounded up to the next tick; a past deadline fires at the next
    /// expiry), replacing its earlier deadline if `armed`, its handle, says it had one, and
    /// reusing its entry kept since it fired; `armed` is then the new handle.
    pub fn insert(&mut self, key: u64, deadline: Timestamp, armed: &mut Option<Armed>) {
        let tick = self.tick_ceil(deadline).max(self.now_tick + 1);
        self.low = self.low.min(tick);
        self.fire_tick = self.fire_tick.min(tick);
        let slot = self.slot_of(tick);
        let head = self.heads[slot];
        let e = Entry {
            key,
            tick,
            prev: NIL,
            next: head,
            place: Place::Linked,
        };
        let i = match self.entry_of(key, *armed) {
            Some(i) => {
                if self.entries[i as usize].place == Place::Linked {
                    self.unlink(i);
                } else {
                    self.live += 1;
                }
                self.entries[i as usize] = e;
                i
            }
            None => {
                self.live += 1;
                match self.free.pop() {
                    Some(i) => {
                        self.entries[i as usize] = e;
                        i
                    }
                    None => {
                        self.entries.push(e);
                        (self.entries.len() - 1) as u32
                    }
                }
            }
        };
        // (`unlink` may have changed the head if the entry was first in this very slot.)
        let head = self.heads[slot];
        self.entries[i as usize].next = head;
        if head != NIL {
            self.entries[head as usize].prev = i;
        }
        self.heads[slot] = i;
        self.occupied[slot / 64] |= 1 << (slot % 64);
        self.summary[slot / 4096] |= 1 << ((slot / 64) % 64);
        self.next_fire_cache.set(None);
        *armed = Some(Armed {
            at: deadline,
            entry: i,
        });
    }

    /// Queues `deadline` for `key` in the queued lane (rounded up to the next tick as
    /// [`TimerWheel::insert`] does): it fires at the same expiry as a slot's entry of that
    /// deadline would, once, whatever else `key` has armed or queued.
    pub fn queue(&mut self, key: u64, deadline: Timestamp) {
        let tick = self.tick_ceil(deadline).max(self.now_tick + 1);
        let q = Queued {
            tick,
            key,
            at: deadline,
        };
        self.fire_tick = self.fire_tick.min(tick);
        self.queued.push(q);
        self.next_fire_cache.set(None);
    }

    /// Deadlines in the queued lane.
    pub fn queued_len(&self) -> usize {
        self.queued.len()
    }

    /// Disarms `key`, whose handle is `armed`, and frees its entry (armed or kept; nothing if
    /// it has none); `armed` is then `None`.
    pub fn cancel(&mut self, key: u64, armed: &mut Option<Armed>) {
        if let Some(i) = self.entry_of(key, armed.take()) {
            if self.entries[i as usize].place == Place::Linked {
                self.unlink(i);
                self.live -= 1;
            }
            self.release(i);
        }
    }

    /// Takes entry `i` out of its slot's list.
    fn unlink(&mut self, i: u32) {
        self.next_fire_cache.set(None);
        let Entry {
            tick, prev, next, ..
        } = self.entries[i as usize];
        if prev == NIL {
            let slot = self.slot_of(tick);
            self.heads[slot] = next;
            if next == NIL {
                self.occupied[slot / 64] &= !(1 << (slot % 64));
                if self.occupied[slot / 64] == 0 {
                    self.summary[slot / 4096] &= !(1 << ((slot / 64) % 64));
                }
            }
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }

    /// Returns entry `i` (in no list) to the free list; the table shrinks once every entry is
    /// free.
    fn release(&mut self, i: u32) {
        self.entries[i as usize].place = Place::Free;
        self.free.push(i);
        if self.free.len() == self.entries.len() {
            self.free.clear();
            self.entries.clear();
            if self.entries.capacity() > 64 {
                // A burst of timers is gone: give its memory back.
                self.entries.shrink_to_fit();
                self.free.shrink_to_fit();
            }
        }
    }

    /// The first occupied slot at or after `slot` going round the wheel, as a distance from
    /// `slot` (0 = `slot` itself), if one lies within `within` slots.
    fn next_occupied(&self, slot: usize, within: u64) -> Option<u64> {
        let n = self.heads.len();
        let (mut dist, mut s) = (0u64, slot);
        while dist < within {
            // (Bits past the last slot are never set.)
            let word = self.occupied[s / 64] >> (s % 64);
            if word != 0 {
                let d = dist + u64::from(word.trailing_zeros());
                return (d < within).then_some(d);
            }
            // Nothing from `s` to the end of its word: on to the next word that has a bit,
            // or round to slot 0 when none is left before the end.
            let next_word = s / 64 + 1;
            let to = self.next_nonzero_word(next_word).map_or(n, |w| w * 64);
            dist += (to - s) as u64;
            s = to & (n - 1);
        }
        None
    }

    /// The first word of `occupied` at or after `w` that is not zero.
    fn next_nonzero_word(&self, w: usize) -> Option<usize> {
        let mut i = w / 64;
        let mut bits = self.summary.get(i)? & (!0u64 << (w % 64));
        loop {
            if bits != 0 {
                return Some(i * 64 + bits.trailing_zeros() as usize);
            }
            i += 1;
            bits = *self.summary.get(i)?;
        }
    }

    /// Whether [`TimerWheel::expire`] at `now` has a tick to move past (else it does nothing).
    pub fn is_due(&self, now: Timestamp) -> bool {
        now >= self.next_tick_at
    }

    /// When nothing armed or queued falls due by `now`, moves time to `now` as
    /// [`TimerWheel::expire`] would (it would fire nothing) and returns true; else returns
    /// false and leaves the expiry to `expire`. A compare when no tick has passed; a division
    /// and a compare more when one has.
    #[inline]
    pub fn advance_quietly(&mut self, now: Timestamp) -> bool {
        self.advance(now).is_none()
    }

    /// [`TimerWheel::advance_quietly`], declining with the tick of `now`: `None` when time
    /// moved quietly, else the tick to give [`TimerWheel::expire_to`] (what `expire` at `now`
    /// does, without finding the tick again).
    #[inline]
    pub fn advance(&mut self, now: Timestamp) -> Option<u64> {
        if now < self.next_tick_at {
            return None;
        }
        let target = self.tick_of(now);
        if target >= self.fire_tick {
            return Some(target);
        }
        // (`expire` too leaves the tick where it is if `next_tick_at` saturated.)
        if target > self.now_tick {
            self.now_tick = target;
            self.next_tick_at = self.at_tick(target + 1);
        }
        None
    }

    /// Moves time to `now` and appends the keys whose deadline tick has passed to `out`, and
    /// the keys and deadlines of the queued lane that fell due to `queued`.
    pub fn expire(
        &mut self,
        now: Timestamp,
        out: &mut Vec<u64>,
        queued: &mut Vec<(u64, Timestamp)>,
    ) {
        if self.is_due(now) {
            self.expire_to(self.tick_of(now), out, queued);
        }
    }

    /// [`TimerWheel::expire`] at a time of tick `target` that [`TimerWheel::advance`] declined
    /// (one at or after the next tick begins).
    pub fn expire_to(
        &mut self,
        target: u64,
        out: &mut Vec<u64>,
        queued: &mut Vec<(u64, Timestamp)>,
    ) {
        if target <= self.now_tick {
            return;
        }
        // The first queued tick left (after those due).
        let mut queued_tick = u64::MAX;
        while let Some(&q) = self.queued.front() {
            if q.tick > target {
                queued_tick = q.tick;
                break;
            }
            queued.push((q.key, q.at));
            self.queued.pop_front();
            self.next_fire_cache.set(None);
        }
        if target < self.low {
            // Nothing armed is due yet.
            self.now_tick = target;
            self.next_tick_at = self.at_tick(target + 1);
            self.fire_tick = self.low.min(queued_tick);
            return;
        }
        let n = self.heads.len() as u64;
        let steps = (target - self.now_tick).min(n);
        // Visit the occupied slots among the `steps` after `now_tick`.
        let mut step = 1;
        while step <= steps {
            let Some(d) = self.next_occupied(self.slot_of(self.now_tick + step), steps - step + 1)
            else {
                break;
            };
            step += d;
            self.fire_slot(self.slot_of(self.now_tick + step), target, out);
            if self.live == 0 {
                // Everything armed fired: no slot left to look at.
                break;
            }
            step += 1;
        }
        self.next_fire_cache.set(None);
        self.now_tick = target;
        self.next_tick_at = self.at_tick(target + 1);
        self.low = self.first_tick_bound();
        self.fire_tick = self.low.min(queued_tick);
    }

    /// Fires the entries of `slot` whose tick is at most `target` (their keys appended to `out`
    /// in list order, the entries kept for them) in one walk: the entries left (a turn or
    /// more out) are relinked in their order and the slot's bits are updated once, not per
    /// entry fired.
    fn fire_slot(&mut self, slot: usize, target: u64, out: &mut Vec<u64>) {
        let (mut head, mut tail) = (NIL, NIL);
        let mut i = self.heads[slot];
        while i != NIL {
            let e = self.entries[i as usize];
            if e.tick <= target {
                out.push(e.key);
                self.entries[i as usize].place = Place::Kept;
                self.live -= 1;
            } else {
                self.entries[i as usize].prev = tail;
                match tail {
                    NIL => head = i,
                    t => self.entries[t as usize].next = i,
                }
                tail = i;
            }
            i = e.next;
        }
        if tail != NIL {
            self.entries[tail as usize].next = NIL;
        }
        self.heads[slot] = head;
        if head == NIL {
            self.occupied[slot / 64] &= !(1 << (slot % 64));
            if self.occupied[slot / 64] == 0 {
                self.summary[slot / 4096] &= !(1 << ((slot / 64) % 64));
            }
        }
    }

    /// A bound no armed entry's tick is below, after an expiry: the tick of the first occupied
    /// slot within a turn of `now_tick` (an entry in a slot `d` slots on has a tick of at least
    /// `now_tick + d`, however many turns out), `u64::MAX` when no slot is occupied.
    fn first_tick_bound(&self) -> u64 {
        if self.live == 0 {
            return u64::MAX;
        }
        let n = self.heads.len() as u64;
        self.next_occupied(self.slot_of(self.now_tick + 1), n)
            .map_or(u64::MAX, |d| self.now_tick + 1 + d)
    }

    /// When the next `expire` would fire something: the end of the earliest armed or queued
    /// tick, or `None` when nothing is. O(slots / 64 + entries of the slots looked at); the
    /// entries more than one turn out are all looked at only when nothing is armed nearer.
    pub fn next_fire(&self) -> Option<Timestamp> {
        if let Some(cached) = self.next_fire_cache.get() {
            return cached;
        }
        let t = self.find_next_fire();
        self.next_fire_cache.set(Some(t));
        t
    }

    fn find_next_fire(&self) -> Option<Timestamp> {
        let queued = self.queued.front().map(|q| self.at_tick(q.tick));
        match (self.find_next_slot_fire(), queued) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn find_next_slot_fire(&self) -> Option<Timestamp> {
        if self.live == 0 {
            return None;
        }
        let n = self.heads.len() as u64;
        // Entries due within one turn sit in the first occupied slot that holds one.
        let mut step = 1;
        while step <= n {
            let Some(d) = self.next_occupied(self.slot_of(self.now_tick + step), n - step + 1)
            else {
                break;
            };
            step += d;
            let due = self.now_tick + step;
            let mut i = self.heads[self.slot_of(due)];
            while i != NIL {
                let e = &self.entries[i as usize];
                if e.tick <= due {
                    return Some(self.at_tick(e.tick));
                }
                i = e.next;
            }
            step += 1;
        }
        // Everything is more than one turn out.
        self.entries
            .iter()
            .filter(|e| e.place == Place::Linked)
            .map(|e| e.tick)
            .min()
            .map(|t| self.at_tick(t))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The wheel with its keys' handles kept by key, as the endpoint keeps them in its
    /// connections (a fired key's handle marked fired, kept for its next arming).
    struct Keyed {
        w: TimerWheel,
        handles: HashMap<u64, Option<Armed>>,
    }

    impl Keyed {
        fn new(base: Timestamp, tick: Duration, slots: usize) -> Self {
            Keyed {
                w: TimerWheel::new(base, tick, slots),
                handles: HashMap::new(),
            }
        }

        fn insert(&mut self, key: u64, deadline: Timestamp) {
            let h = self.handles.entry(key).or_default();
            self.w.insert(key, deadline, h);
        }

        fn cancel(&mut self, key: u64) {
            let mut h = self.handles.remove(&key).flatten();
            self.w.cancel(key, &mut h);
            assert_eq!(h, None);
        }

        fn expire(
            &mut self,
            now: Timestamp,
            out: &mut Vec<u64>,
            queued: &mut Vec<(u64, Timestamp)>,
        ) {
            let from = out.len();
            self.w.expire(now, out, queued);
            self.mark_fired(&out[from..]);
        }

        /// Time moved to `now` as the endpoint moves it: `advance`, then `expire_to` the tick
        /// it declines with.
        fn advance_then_expire(
            &mut self,
            now: Timestamp,
            out: &mut Vec<u64>,
            queued: &mut Vec<(u64, Timestamp)>,
        ) {
            if let Some(tick) = self.w.advance(now) {
                let from = out.len();
                self.w.expire_to(tick, out, queued);
                self.mark_fired(&out[from..]);
            }
        }

        fn mark_fired(&mut self, fired: &[u64]) {
            for k in fired {
                let h = self.handles.get_mut(k).expect("a fired key has a handle");
                *h = h.map(Armed::fired);
            }
        }

        /// Entries not free: one per key with a handle (armed or kept), none leaked.
        fn entries_in_use(&self) -> usize {
            self.w.entries.len() - self.w.free.len()
        }

        fn len(&self) -> usize {
            self.w.len()
        }

        fn is_empty(&self) -> bool {
            self.w.is_empty()
        }

        fn next_fire(&self) -> Option<Timestamp> {
            self.w.next_fire()
        }
    }

    #[test]
    fn fires_at_or_after_deadline_never_before() {
        let base = Timestamp::ZERO;
        let mut w = Keyed::new(base, Duration::from_millis(1), 8);
        w.insert(1, base + Duration::from_micros(2500));
        w.insert(2, base + Duration::from_millis(20)); // more than one turn out
        let mut out = Vec::new();
        w.expire(base + Duration::from_millis(2), &mut out, &mut Vec::new());
        assert!(out.is_empty());
        w.expire(base + Duration::from_millis(3), &mut out, &mut Vec::new());
        assert_eq!(out, vec![1]);
        out.clear();
        w.expire(base + Duration::from_millis(19), &mut out, &mut Vec::new());
        assert!(
            out.is_empty(),
            "a deadline one turn out must not fire early"
        );
        w.expire(base + Duration::from_millis(40), &mut out, &mut Vec::new());
        assert_eq!(out, vec![2]);
        assert!(w.is_empty());
    }

    #[test]
    fn past_deadline_fires_on_next_expiry() {
        let base = Timestamp::ZERO;
        let mut w = Keyed::new(base, Duration::from_millis(1), 4);
        let mut out = Vec::new();
        w.expire(base + Duration::from_millis(10), &mut out, &mut Vec::new());
        w.insert(7, base);
        w.expire(base + Duration::from_millis(11), &mut out, &mut Vec::new());
        assert_eq!(out, vec![7]);
    }

    /// Against a model (a map of key -> fire tick): any sequence of arming, cancelling and
    /// expiring fires the same keys at the same expiry, and `next_fire` is the model's
    /// earliest fire time. Deadlines and time steps are fractions of a turn (up to two turns):
    /// small wheels make wraps common, large ones (up to 9,000 slots, more than one summary
    /// word) make the searches skip many empty words.
    #[test]
    fn expiry_and_next_fire_agree_with_a_model() {
        use proptest::prelude::*;
        use std::collections::BTreeMap;
        #[derive(Debug, Clone)]
        enum Op {
            Arm(u64, u64),
            Cancel(u64),
            /// Time moves on; with `true`, through `advance` and `expire_to`, as the endpoint
            /// drives the wheel.
            Expire(u64, bool),
            Queue(u64, u64),
            SetBack(u64),
        }
        let op = prop_oneof![
            (0u64..40, 0u64..2000).prop_map(|(k, per_mille)| Op::Arm(k, per_mille)),
            (0u64..40).prop_map(Op::Cancel),
            (0u64..1000, any::<bool>())
                .prop_map(|(per_mille, quietly)| Op::Expire(per_mille, quietly)),
            (0u64..40, 0u64..300).prop_map(|(k, per_mille)| Op::Queue(k, per_mille)),
            (0u64..100).prop_map(Op::SetBack),
        ];
        let cfg = ProptestConfig::with_cases(300);
        let slots = prop_oneof![1usize..200, 4000usize..9000];
        proptest!(cfg, |(slots in slots, ops in proptest::collection::vec(op, 1..300))| {
            let base = Timestamp::ZERO;
            let tick = Duration::from_micros(10);
            let mut w = Keyed::new(base, tick, slots);
            let mut model: BTreeMap<u64, u64> = BTreeMap::new();
            // The queued lane: (tick, key, deadline) of each deadline queued and not fired.
            let mut lane: Vec<(u64, u64, Timestamp)> = Vec::new();
            let mut now = base;
            let mut now_tick = 0u64;
            let at = |t: u64| base + tick * t as u32;
            for op in ops {
                match op {
                    Op::Arm(k, per_mille) => {
                        let d = now + tick * (per_mille * slots as u64 / 1000) as u32;
                        w.insert(k, d);
                        let t = d.saturating_duration_since(base).as_nanos().div_ceil(tick.as_nanos()) as u64;
                        model.insert(k, t.max(now_tick + 1));
                    }
                    Op::Cancel(k) => {
                        w.cancel(k);
                        model.remove(&k);
                    }
                    Op::Expire(per_mille, quietly) => {
                        now += tick * (per_mille * slots as u64 / 1000) as u32;
                        let target = (now.saturating_duration_since(base).as_nanos() / tick.as_nanos()) as u64;
                        now_tick = now_tick.max(target);
                        let (mut out, mut queued) = (Vec::new(), Vec::new());
                        if quietly {
                            w.advance_then_expire(now, &mut out, &mut queued);
                        } else {
                            w.expire(now, &mut out, &mut queued);
                        }
                        prop_assert_eq!(w.w.now_tick, now_tick);
                        out.sort_unstable();
                        let due: Vec<u64> = model.iter().filter(|(_, &t)| t <= now_tick).map(|(&k, _)| k).collect();
                        model.retain(|_, t| *t > now_tick);
                        prop_assert_eq!(out, due);
                        // The queued deadlines due, in tick order (among one tick, as queued).
                        let (mut fired, kept): (Vec<(u64, u64, Timestamp)>, Vec<_>) =
                            std::mem::take(&mut lane).into_iter().partition(|q| q.0 <= now_tick);
                        fired.sort_by_key(|q| q.0);
                        let want: Vec<(u64, Timestamp)> = fired.iter().map(|q| (q.1, q.2)).collect();
                        prop_assert_eq!(queued, want);
                        lane = kept;
                    }
                    Op::Queue(k, per_mille) => {
                        // Deadlines from a little in the past to a third of a turn out.
                        let d = now + tick * (per_mille * slots as u64 / 1000) as u32 - tick * 3;
                        w.w.queue(k, d);
                        let t = d.saturating_duration_since(base).as_nanos().div_ceil(tick.as_nanos()) as u64;
                        lane.push((t.max(now_tick + 1), k, d));
                    }
                    Op::SetBack(per_mille) => {
                        // The caller's clock set back: deadlines queued from it come earlier.
                        now -= tick * (per_mille * slots as u64 / 1000) as u32;
                    }
                }
                prop_assert_eq!(w.len(), model.len());
                prop_assert_eq!(w.entries_in_use(), w.handles.values().flatten().count());
                prop_assert_eq!(w.w.queued_len(), lane.len());
                let earliest = model.values().copied().chain(lane.iter().map(|q| q.0)).min();
                prop_assert_eq!(w.next_fire(), earliest.map(at));
            }
        });
    }

    /// Driven through `advance` (an expiry to the tick it declines with, as the endpoint
    /// drives it), the wheel fires what `expire` alone fires, at the same calls, with the same
    /// tick and next firing: a key armed, cancelled, re-armed earlier or later and a delayed
    /// ACK queued between calls.
    #[test]
    fn advancing_quietly_fires_as_expire_does() {
        let base = Timestamp::ZERO;
        let us = Duration::from_micros;
        let mut quiet = Keyed::new(base, us(25), 64);
        let mut plain = Keyed::new(base, us(25), 64);
        let mut now = base;
        for i in 0..2_000u64 {
            let both = |w: &mut Keyed| match i % 5 {
                0 => w.insert(1, now + us(200 + i % 7 * 30)),
                1 => w.cancel(1),
                2 => w.insert(1, now + us(10 + i % 3 * 40)),
                3 => w.w.queue(2, now + us(25 + i % 4 * 10)),
                _ => w.insert(3, now + us(i % 11 * 9)),
            };
            both(&mut quiet);
            both(&mut plain);
            now += us(i % 13 * 7);
            let (mut a, mut qa) = (Vec::new(), Vec::new());
            quiet.advance_then_expire(now, &mut a, &mut qa);
            let (mut b, mut qb) = (Vec::new(), Vec::new());
            plain.expire(now, &mut b, &mut qb);
            assert_eq!((a, qa), (b, qb), "call {i}");
            assert_eq!(quiet.w.now_tick, plain.w.now_tick);
            assert_eq!(quiet.next_fire(), plain.next_fire());
        }
    }

    /// The lane keeps what a deque in tick order keeps (pushes after those of their tick, pops
    /// off the front), through drains and the dropping of its taken front; after a push its
    /// vector holds at most twice its deadlines and the compaction threshold.
    #[test]
    fn the_lane_is_a_deque_in_tick_order() {
        use proptest::prelude::*;
        use std::collections::VecDeque;
        let op = prop_oneof![3 => (0u64..50).prop_map(Some), 2 => Just(None)];
        proptest!(|(ops in proptest::collection::vec(op, 0..600))| {
            let (mut lane, mut model) = (Lane::default(), VecDeque::new());
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Some(t) => {
                        let q = Queued { tick: t, key: i as u64, at: Timestamp::from_nanos(t) };
                        lane.push(q);
                        let at = model.iter().rposition(|e: &Queued| e.tick <= t).map_or(0, |i| i + 1);
                        model.insert(at, q);
                        // What was taken is dropped before it outgrows the rest.
                        prop_assert!(lane.items.len() <= 2 * model.len() + LANE_COMPACT_FROM);
                    }
                    None if model.is_empty() => prop_assert!(lane.front().is_none()),
                    None => {
                        prop_assert_eq!(lane.front(), model.front());
                        lane.pop_front();
                        model.pop_front();
                    }
                }
                prop_assert_eq!(lane.len(), model.len());
                prop_assert!(lane.items[lane.head..].iter().eq(model.iter()));
            }
        });
    }

    /// A handle kept past its entry's release (the entry since reused by another key) moves
    /// nothing of the other key's: the stale handle arms a new entry.
    #[test]
    fn a_stale_handle_does_not_move_another_keys_entry() {
        let base = Timestamp::ZERO;
        let ms = Duration::from_millis;
        let mut w = TimerWheel::new(base, ms(1), 64);
        let (mut one, mut two) = (None, None);
        w.insert(1, base + ms(2), &mut one);
        // Cancelled through a copy: `one` is stale.
        w.cancel(1, &mut one.clone());
        w.insert(2, base + ms(10), &mut two);
        // `one` still names the entry key 2 now has.
        w.insert(1, base + ms(5), &mut one);
        assert_ne!(one, two);
        w.cancel(1, &mut one.clone());
        assert_eq!(w.len(), 1);
        let mut out = Vec::new();
        w.expire(base + ms(11), &mut out, &mut Vec::new());
        assert_eq!(out, vec![2], "key 2 kept its deadline");
        w.cancel(2, &mut two);
        assert!(w.is_empty());
        assert_eq!(w.entries.len(), 0, "every entry freed: the table cleared");
    }

    /// A fired entry is kept for its key: re-arming it through the fired handle links the
    /// same entry again (nothing allocated or taken from the free list), fires at the new
    /// deadline and not before, and `cancel` frees it. Against the old behaviour (the entry
    /// freed on expiry, a new one taken at the next arming) the keys fire at the same ticks.
    #[test]
    fn a_fired_entry_is_kept_for_its_keys_next_arming() {
        let base = Timestamp::ZERO;
        let ms = Duration::from_millis;
        let mut kept = TimerWheel::new(base, ms(1), 16);
        let mut fresh = TimerWheel::new(base, ms(1), 16);
        let (mut h, mut g) = (None, None);
        let mut entry = None;
        for round in 0..100u32 {
            let now = base + ms(u64::from(round) * 7);
            let deadline = now + ms(u64::from(round % 5) * 9 + 1);
            kept.insert(1, deadline, &mut h);
            fresh.insert(1, deadline, &mut g);
            let e = h.expect("armed").entry;
            assert_eq!(*entry.get_or_insert(e), e, "the one entry, re-armed");
            assert_eq!(kept.len(), 1);
            assert_eq!(kept.next_fire(), fresh.next_fire());
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut t = now;
            while a.is_empty() {
                t += ms(1);
                kept.expire(t, &mut a, &mut Vec::new());
                fresh.expire(t, &mut b, &mut Vec::new());
                assert_eq!(a, b, "the same key at the same tick");
                assert!(a.is_empty() || t >= deadline, "never before its deadline");
            }
            assert_eq!(a, vec![1]);
            h = h.map(Armed::fired);
            // The old way: the entry was freed, the handle dropped.
            fresh.cancel(1, &mut g);
            assert!(kept.is_empty() && kept.next_fire().is_none());
            assert_eq!(kept.entries.len() - kept.free.len(), 1, "kept, not freed");
        }
        kept.cancel(1, &mut h);
        assert_eq!(h, None);
        assert_eq!(kept.entries.len(), 0, "cancel frees a kept entry");
    }

    /// Arming a key again moves its entry: however often a deadline changes, the wheel holds
    /// one entry per key, and only the last deadline fires.
    #[test]
    fn re_arming_moves_the_one_entry_of_a_key() {
        let base = Timestamp::ZERO;
        let mut w = Keyed::new(base, Duration::from_millis(1), 64);
        for i in 0..=10_000u64 {
            // Alternately far and near, as a connection's keepalive and delayed ACK; far last.
            let d = if i % 2 == 0 { 5000 } else { 3 };
            w.insert(1, base + Duration::from_millis(d + i % 7));
            w.insert(2, base + Duration::from_millis(40));
        }
        assert_eq!(w.len(), 2);
        assert_eq!(w.w.entries.len() - w.w.free.len(), 2, "one entry per key");
        let mut out = Vec::new();
        w.expire(base + Duration::from_millis(100), &mut out, &mut Vec::new());
        assert_eq!(out, vec![2], "key 1 was last armed far out");
        w.cancel(1);
        w.expire(base + Duration::from_secs(10), &mut out, &mut Vec::new());
        assert_eq!(out, vec![2]);
        assert!(w.is_empty());
    }

    /// A slot holding entries due now between entries a turn or more out fires only the due
    /// ones, at their tick, and keeps the others linked: each later fires at its own tick,
    /// never earlier, and can still be moved and cancelled.
    #[test]
    fn a_slot_fires_its_due_entries_and_keeps_the_rest() {
        let base = Timestamp::ZERO;
        let ms = Duration::from_millis;
        let mut w = Keyed::new(base, ms(1), 4);
        // Slot 1: ticks 1, 5, 9, 5, 1 (inserted in this order, so listed last first).
        for (key, at) in [(10, 1), (11, 5), (12, 9), (13, 5), (14, 1)] {
            w.insert(key, base + ms(at));
        }
        let mut out = Vec::new();
        w.expire(base + ms(1), &mut out, &mut Vec::new());
        assert_eq!(
            out,
            vec![14, 10],
            "the due entries of the slot, in list order"
        );
        assert_eq!(w.w.next_fire(), Some(base + ms(5)));
        out.clear();
        w.expire(base + ms(4), &mut out, &mut Vec::new());
        assert!(out.is_empty(), "tick 5 must not fire at tick 4");
        w.insert(13, base + ms(2)); // moved out of the relinked list: fires at once
        w.expire(base + ms(5), &mut out, &mut Vec::new());
        assert_eq!(out, vec![13, 11]);
        out.clear();
        w.expire(base + ms(8), &mut out, &mut Vec::new());
        assert!(out.is_empty(), "tick 9 must not fire at tick 8");
        assert_eq!(w.w.next_fire(), Some(base + ms(9)));
        w.expire(base + ms(9), &mut out, &mut Vec::new());
        assert_eq!(out, vec![12]);
        assert!(w.is_empty());
        assert_eq!(w.w.next_fire(), None);
    }
}
