//! A hashed timer wheel: O(1) insertion, expiry by walking the slots passed since the last call.
//! Entries are `(key, deadline)`; stale entries (a key re-armed elsewhere) are the caller's to
//! ignore. Deadlines further out than one turn stay in their slot until their tick comes.

use std::time::{Duration, Instant};

/// The wheel.
#[derive(Debug)]
pub struct TimerWheel {
    base: Instant,
    tick: Duration,
    /// The last tick expired.
    now_tick: u64,
    /// When the tick after `now_tick` begins: `expire` before it has nothing to do (a compare
    /// instead of a 128-bit division on every endpoint round).
    next_tick_at: Instant,
    slots: Vec<Vec<(u64, u64)>>,
    len: usize,
}

impl TimerWheel {
    /// `slots` slots of `tick` each, counting from `base`.
    pub fn new(base: Instant, tick: Duration, slots: usize) -> Self {
        TimerWheel {
            base,
            tick: tick.max(Duration::from_nanos(1)),
            now_tick: 0,
            next_tick_at: base + tick.max(Duration::from_nanos(1)),
            slots: vec![Vec::new(); slots.max(1)],
            len: 0,
        }
    }

    fn tick_of(&self, t: Instant) -> u64 {
        let d = t.saturating_duration_since(self.base);
        (d.as_nanos() / self.tick.as_nanos()) as u64
    }

    fn tick_ceil(&self, t: Instant) -> u64 {
        let d = t.saturating_duration_since(self.base).as_nanos();
        let k = self.tick.as_nanos();
        d.div_ceil(k) as u64
    }

    /// The instant at which an entry armed for `deadline` fires (its tick's end).
    pub fn fire_time(&self, deadline: Instant) -> Instant {
        let t = self.tick_ceil(deadline);
        self.base + Duration::from_nanos((t as u128 * self.tick.as_nanos()) as u64)
    }

    /// Entries held (stale ones included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Arms `key` for `deadline` (rounded up to the next tick; a past deadline fires at the next
    /// expiry).
    pub fn insert(&mut self, key: u64, deadline: Instant) {
        let t = self.tick_ceil(deadline).max(self.now_tick + 1);
        let n = self.slots.len() as u64;
        self.slots[(t % n) as usize].push((key, t));
        self.len += 1;
    }

    /// Moves time to `now` and appends the keys whose deadline tick has passed to `out`.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<u64>) {
        if now < self.next_tick_at {
            return;
        }
        let target = self.tick_of(now);
        if target <= self.now_tick {
            return;
        }
        let n = self.slots.len() as u64;
        let steps = (target - self.now_tick).min(n);
        for i in 1..=steps {
            let slot = &mut self.slots[((self.now_tick + i) % n) as usize];
            let before = slot.len();
            slot.retain(|&(k, t)| {
                if t <= target {
                    out.push(k);
                    false
                } else {
                    true
                }
            });
            self.len -= before - slot.len();
            if slot.is_empty() && slot.capacity() > 16 {
                // A burst of timers is gone: give its memory back.
                slot.shrink_to_fit();
            }
        }
        self.now_tick = target;
        self.next_tick_at =
            self.base + Duration::from_nanos(((target + 1) as u128 * self.tick.as_nanos()) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_at_or_after_deadline_never_before() {
        let base = Instant::now();
        let mut w = TimerWheel::new(base, Duration::from_millis(1), 8);
        w.insert(1, base + Duration::from_micros(2500));
        w.insert(2, base + Duration::from_millis(20)); // more than one turn out
        let mut out = Vec::new();
        w.expire(base + Duration::from_millis(2), &mut out);
        assert!(out.is_empty());
        w.expire(base + Duration::from_millis(3), &mut out);
        assert_eq!(out, vec![1]);
        out.clear();
        w.expire(base + Duration::from_millis(19), &mut out);
        assert!(
            out.is_empty(),
            "a deadline one turn out must not fire early"
        );
        w.expire(base + Duration::from_millis(40), &mut out);
        assert_eq!(out, vec![2]);
        assert!(w.is_empty());
    }

    #[test]
    fn past_deadline_fires_on_next_expiry() {
        let base = Instant::now();
        let mut w = TimerWheel::new(base, Duration::from_millis(1), 4);
        let mut out = Vec::new();
        w.expire(base + Duration::from_millis(10), &mut out);
        w.insert(7, base);
        w.expire(base + Duration::from_millis(11), &mut out);
        assert_eq!(out, vec![7]);
    }
}
