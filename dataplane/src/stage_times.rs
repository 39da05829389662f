//! Where a message's time goes in this process, stage by stage (the latency model of PERFORMANCE.md):
//! the engine's receive batch and `handle_frame`, the rest of its round, routing, the verbs
//! layer's way from the routed data to the next post, the post, the answer's framing, the
//! `sendto` that carries it. Compiled in with the `stage-times` feature only (`cargo build
//! --release -p bench --features stage-times`; xwarp-bench prints [`report`] on exit):
//! without it every call here is empty, reads no clock and [`report`] returns `None`.
//!
//! Counts are process-wide (relaxed atomics): meant for one connection at a time, as the
//! latency tests run. The dozen clock reads per message add a few per cent to the figures.

/// A timed stage of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// A receive batch that brought frames: ring and `handle_frame`.
    RxBatch,
    /// The endpoint's `handle_frame` of one frame.
    HandleFrame,
    /// The rest of that engine round on the message's path: timers, `poll_transmit`, flush,
    /// or only the received connections' completions and timers when nothing is to be sent
    /// (`Endpoint::service_received`).
    EngineRound,
    /// The round's `poll_transmit`.
    PollTransmit,
    /// Completions and events routed to the verbs queues after that round.
    Route,
    /// From the routed round to the next post's entry (CQ, memory, the application's loop).
    Detect,
    /// The endpoint's post under the engine lock.
    Post,
    /// `transmit_now`: the answer framed and flushed (its `sendto` included).
    TransmitNow,
    /// One `sendto` kick of the transmit ring (timed by `afxdp`: [`afxdp::sendto_times`]).
    #[cfg_attr(not(feature = "stage-times"), allow(dead_code))]
    Sendto,
}

#[cfg(feature = "stage-times")]
mod on {
    use super::Stage;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    use std::sync::OnceLock;
    use std::time::Instant;

    pub(super) const STAGES: [(Stage, &str); 9] = [
        (
            Stage::RxBatch,
            "receive batch with frames (ring + handle_frame)",
        ),
        (Stage::HandleFrame, "  of which handle_frame, per frame"),
        (Stage::EngineRound, "rest of that engine round"),
        (Stage::PollTransmit, "  of which poll_transmit"),
        (Stage::Route, "routing to the verbs queues"),
        (Stage::Detect, "routed round to the next post"),
        (Stage::Post, "endpoint post"),
        (Stage::TransmitNow, "transmit_now (framing, flush, sendto)"),
        (Stage::Sendto, "sendto"),
    ];

    static BASE: OnceLock<Instant> = OnceLock::new();
    static SUM: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];
    static COUNT: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];
    /// When the last engine round with frames ended, and when its routing ended (0: none
    /// since the last post).
    static ROUND_END: AtomicU64 = AtomicU64::new(0);
    static ROUTED: AtomicU64 = AtomicU64::new(0);

    /// Where `m` is kept.
    pub(super) fn cell(m: super::Mark) -> &'static AtomicU64 {
        match m {
            super::Mark::RoundEnd => &ROUND_END,
            super::Mark::Routed => &ROUTED,
        }
    }

    pub(super) fn now() -> u64 {
        // Nanoseconds since the first reading; never 0 (0 means "none" above).
        BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
    }

    pub(super) fn record(stage: Stage, since: u64) -> u64 {
        let t = now();
        let i = stage as usize;
        SUM[i].fetch_add(t.saturating_sub(since), Relaxed);
        COUNT[i].fetch_add(1, Relaxed);
        t
    }

    pub(super) fn means() -> Vec<(Stage, &'static str, u64, u64)> {
        STAGES
            .iter()
            .map(|&(s, name)| {
                let (sum, n) = match s {
                    Stage::Sendto => {
                        let k = afxdp::sendto_times();
                        (k.total_ns, k.kicks)
                    }
                    _ => (
                        SUM[s as usize].load(Relaxed),
                        COUNT[s as usize].load(Relaxed),
                    ),
                };
                (s, name, sum / n.max(1), n)
            })
            .collect()
    }
}

/// A clock reading for [`record`] (0 without the feature).
#[inline(always)]
pub(crate) fn now() -> u64 {
    #[cfg(feature = "stage-times")]
    return on::now();
    #[cfg(not(feature = "stage-times"))]
    0
}

/// Adds the time from `since` to now to `stage`; returns now (0 without the feature).
#[inline(always)]
pub(crate) fn record(stage: Stage, since: u64) -> u64 {
    #[cfg(feature = "stage-times")]
    return on::record(stage, since);
    #[cfg(not(feature = "stage-times"))]
    {
        let _ = (stage, since);
        0
    }
}

/// An engine round that received frames ended at `t` (from [`record`]).
#[inline(always)]
pub(crate) fn round_ended(t: u64) {
    put(Mark::RoundEnd, t);
}

/// Routing after a round with frames is done: times [`Stage::Route`] and starts
/// [`Stage::Detect`].
#[inline(always)]
pub(crate) fn routed() {
    let since = take(Mark::RoundEnd);
    if since != 0 {
        put(Mark::Routed, record(Stage::Route, since));
    }
}

/// A post begins: ends [`Stage::Detect`] if a routed round came before it; returns now.
#[inline(always)]
pub(crate) fn post_begins() -> u64 {
    let since = take(Mark::Routed);
    if since != 0 {
        return record(Stage::Detect, since);
    }
    now()
}

/// The instants kept between stages.
#[derive(Clone, Copy)]
enum Mark {
    RoundEnd,
    Routed,
}

/// Takes the instant `m` holds (0: none, or without the feature).
#[inline(always)]
fn take(m: Mark) -> u64 {
    #[cfg(feature = "stage-times")]
    return on::cell(m).swap(0, std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "stage-times"))]
    {
        let _ = m;
        0
    }
}

/// Keeps the instant `t` in `m`.
#[inline(always)]
fn put(m: Mark, t: u64) {
    #[cfg(feature = "stage-times")]
    on::cell(m).store(t, std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "stage-times"))]
    let _ = (m, t);
}

/// The stages' means in ns and counts, one line each; `None` without the feature or before
/// any message.
pub fn report() -> Option<String> {
    #[cfg(feature = "stage-times")]
    {
        let m = on::means();
        if m.iter().all(|&(_, _, _, n)| n == 0) {
            return None;
        }
        let mut out = String::from("stage times (mean ns per occurrence, occurrences):\n");
        for (_, name, mean, n) in m {
            out += &format!("  {name:<50} {mean:>8} {n:>10}\n");
        }
        Some(out)
    }
    #[cfg(not(feature = "stage-times"))]
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(feature = "stage-times"))]
    #[test]
    fn without_the_feature_nothing_is_timed() {
        assert_eq!(now(), 0);
        assert_eq!(record(Stage::Post, 5), 0);
        routed();
        assert_eq!(post_begins(), 0);
        assert_eq!(report(), None);
    }

    /// Counts are process-wide, so other tests driving an engine at the same time may add to
    /// them: the checks are lower bounds.
    #[cfg(feature = "stage-times")]
    #[test]
    fn with_the_feature_each_stage_is_counted_and_named() {
        let t0 = now();
        assert!(t0 > 0);
        let t1 = record(Stage::HandleFrame, t0);
        assert!(t1 >= t0);
        round_ended(t1);
        routed();
        assert!(post_begins() >= t1);
        let m = on::means();
        let count = |s: Stage| m.iter().find(|e| e.0 == s).map(|e| e.3).unwrap();
        assert!(count(Stage::HandleFrame) >= 1);
        assert!(count(Stage::Route) >= 1);
        assert!(count(Stage::Detect) >= 1);
        let r = report().expect("stages were timed");
        assert!(r.contains("handle_frame") && r.contains("sendto"), "{r}");
        assert_eq!(r.lines().count(), 1 + on::STAGES.len());
    }
}
