//! The store's connection slots shared fairly among sources: no source (an address, or an
//! IPv6 prefix: [`SourceShare`]) holds more than its share of the cap, and when every slot is
//! taken a silent connection (no call in flight, none for a while: [`DEFAULT_SILENT_AFTER`] by
//! default; idle longest first) gives way to the new client. A working connection never does: a client between two
//! calls is not silent. So one address, or a flood of connections that finish MPA and then say
//! nothing, cannot keep other clients out.
//!
//! [`decide`] is the choice, without I/O or clocks; [`SlotState`] is what the gate and a
//! connection's thread share about that connection.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use endpoint::{SourceKey, SourceShare};

use super::admission::Refusal;

/// How long a connection must have had no call (and no octet, over TCP) to count as silent,
/// by default.
pub const DEFAULT_SILENT_AFTER: Duration = Duration::from_secs(1);

/// Why a connection that gave its slot to a new client ended (logged).
pub(crate) const EVICTED: &str = "silent while the store was full: gave way to a new client";

/// What the choice needs to know of an open connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotView {
    /// Its source.
    pub(crate) source: SourceKey,
    /// A call is in flight.
    pub(crate) busy: bool,
    /// Since its last call ended (or it connected).
    pub(crate) idle: Duration,
}

/// What to do with a new client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A slot is free.
    Admit,
    /// Admit it in place of the open connection at this index, which is closed.
    Evict(usize),
    /// Refuse it.
    Refuse(Refusal),
}

/// What the gate decides with: `cap` slots in all, `share` of them per source, and how long a
/// connection must have been idle to count as silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) cap: usize,
    pub(crate) share: SourceShare,
    pub(crate) silent_after: Duration,
}

/// The choice for a client from `new`, with `open` the connections open now (oldest first):
/// refused at its source's share; admitted when a slot is free; else in place of the silent
/// connection idle longest (ties: the oldest); else refused (every connection is working).
pub(crate) fn decide(open: &[SlotView], new: SourceKey, limits: &Limits) -> Verdict {
    let held = open.iter().filter(|s| s.source == new).count();
    if held >= limits.share.per_source.max(1) {
        return Verdict::Refuse(Refusal::SourceShare);
    }
    if open.len() < limits.cap {
        return Verdict::Admit;
    }
    open.iter()
        .enumerate()
        .filter(|(_, s)| !s.busy && s.idle >= limits.silent_after)
        .max_by_key(|&(i, s)| (s.idle, std::cmp::Reverse(i)))
        .map_or(Verdict::Refuse(Refusal::Full), |(i, _)| Verdict::Evict(i))
}

/// What the gate and a connection's thread share about the connection: its source, whether a
/// call is in flight and when the last one ended, and whether it was told to give way.
#[derive(Debug)]
pub(crate) struct SlotState {
    source: SourceKey,
    /// The gate's clock origin: `last_active` counts milliseconds from it.
    origin: Instant,
    last_active: AtomicU64,
    busy: AtomicBool,
    evicted: AtomicBool,
    closed: AtomicBool,
}

impl SlotState {
    pub(crate) fn new(source: SourceKey, origin: Instant) -> Self {
        let s = SlotState {
            source,
            origin,
            last_active: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        };
        s.touch();
        s
    }

    /// The connection did something now (a call, octets of one).
    pub(crate) fn touch(&self) {
        let ms = u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_active.store(ms, Ordering::Relaxed);
    }

    /// A call is being served (`true`) or has been answered (`false`).
    pub(crate) fn set_busy(&self, busy: bool) {
        self.touch();
        self.busy.store(busy, Ordering::Release);
    }

    /// Whether the gate gave this connection's slot to another client: it is to close.
    pub(crate) fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Acquire)
    }

    /// Tells the connection to give way (its thread closes it at its next look).
    pub(crate) fn evict(&self) {
        self.evicted.store(true, Ordering::Release);
    }

    /// The connection has closed.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether it still holds its slot (open and not evicted).
    pub(crate) fn holds_slot(&self) -> bool {
        !self.closed.load(Ordering::Acquire) && !self.is_evicted()
    }

    /// What [`decide`] needs, as of `now`.
    pub(crate) fn view(&self, now: Instant) -> SlotView {
        let last = self.origin + Duration::from_millis(self.last_active.load(Ordering::Relaxed));
        SlotView {
            source: self.source,
            busy: self.busy.load(Ordering::Acquire),
            idle: now.saturating_duration_since(last),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> SourceKey {
        SourceKey(s.parse().unwrap())
    }

    fn view(source: &str, busy: bool, idle_ms: u64) -> SlotView {
        SlotView {
            source: key(source),
            busy,
            idle: Duration::from_millis(idle_ms),
        }
    }

    fn limits(cap: usize, per_source: usize) -> Limits {
        Limits {
            cap,
            share: SourceShare {
                per_source,
                ..SourceShare::default()
            },
            silent_after: DEFAULT_SILENT_AFTER,
        }
    }

    #[test]
    fn a_source_at_its_share_is_refused_even_with_free_slots() {
        let open = [
            view("198.18.0.3", false, 5000),
            view("198.18.0.3", false, 0),
        ];
        let d = |who| decide(&open, key(who), &limits(64, 2));
        assert_eq!(d("198.18.0.3"), Verdict::Refuse(Refusal::SourceShare));
        assert_eq!(d("198.18.0.2"), Verdict::Admit);
    }

    /// Full: the silent connection idle longest gives way; working ones and ones between
    /// calls (idle under a second) never do.
    #[test]
    fn when_full_a_silent_connection_gives_way_before_a_working_one() {
        let open = [
            view("198.18.0.3", true, 90_000),
            view("198.18.0.3", false, 200),
            view("198.18.0.4", false, 7_000),
            view("198.18.0.5", false, 9_000),
            view("198.18.0.6", false, 9_000),
        ];
        let new = key("198.18.0.2");
        assert_eq!(
            decide(&open, new, &limits(5, 5)),
            Verdict::Evict(3),
            "the longest silent (ties: the oldest), not the busy one idle longer"
        );
        let working = [
            view("198.18.0.3", true, 90_000),
            view("198.18.0.4", false, 999),
        ];
        assert_eq!(
            decide(&working, new, &limits(2, 5)),
            Verdict::Refuse(Refusal::Full),
            "nobody silent: refused"
        );
        assert_eq!(decide(&working, new, &limits(3, 5)), Verdict::Admit);
        let never = Limits {
            silent_after: Duration::MAX,
            ..limits(5, 5)
        };
        assert_eq!(
            decide(&open, new, &never),
            Verdict::Refuse(Refusal::Full),
            "with eviction off, a full store refuses"
        );
    }

    #[test]
    fn the_shared_state_tracks_calls_eviction_and_close() {
        let t0 = Instant::now();
        let s = SlotState::new(key("198.18.0.3"), t0);
        assert!(s.holds_slot() && !s.view(t0).busy);
        s.set_busy(true);
        assert!(s.view(t0).busy);
        s.set_busy(false);
        let later = Instant::now() + Duration::from_secs(3);
        assert!(s.view(later).idle >= Duration::from_secs(2));
        s.evict();
        assert!(s.is_evicted() && !s.holds_slot());
        let c = SlotState::new(key("198.18.0.3"), t0);
        c.close();
        assert!(!c.holds_slot());
    }
}
