//! loom models of the structures the engine and application threads share: each runs a
//! bounded scenario under `loom`, which explores every interleaving of its threads' lock and
//! atomic operations (within a bound on preemptions) and fails on a broken assertion, a
//! deadlock (a lost wake-up leaves a thread blocked for ever) or a leak.
//!
//! - [`handoff`]: two lanes hand packets to a third lane's bounded inbox while its owner
//!   drains it.
//! - [`cq`]: the engine completes while the application arms, polls, waits (on the queue or on
//!   its completion channel) and takes the events.
//! - [`queue_pair`]: the application posts and closes while the driver completes and fails the
//!   stream.
//!
//! Run (their own target directory: the `loom` cfg rebuilds everything):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p dataplane --release --lib loom_models -- --nocapture
//! ```
//!
//! (`deploy/xwarp test` runs them so.)
//!
//! Each model prints how many interleavings it explored. `LOOM_MAX_PREEMPTIONS` bounds the
//! search (default here: [`DEFAULT_PREEMPTIONS`]). Each model has a broken variant that removes
//! one ordering or lock the structure needs; adding `--cfg loom_broken="NAME"` to `RUSTFLAGS`
//! builds it, and its model fails: `handoff_len_after_unlock`, `cq_drain_after_unlock`,
//! `qp_deliver_after_unlock`. Passed to dataplane alone, it rebuilds only dataplane (the
//! `bench` profile is the release one with the test harness); then run the printed executable:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo rustc -p dataplane --lib \
//!     --profile bench -- --cfg 'loom_broken="handoff_len_after_unlock"'
//! target/loom/release/deps/dataplane-HASH loom_models --test-threads=1 --nocapture
//! ```
//!
//! Such a build replaces the modelled structures' locks and atomics with loom's (`crate::sync`),
//! which only work inside a model: it runs these tests and nothing else.

mod cq;
mod handoff;
mod queue_pair;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Preemptions loom tries per interleaving when `LOOM_MAX_PREEMPTIONS` is not set: the three
/// models take about 12 s together at this bound in a release build on two cores.
pub(crate) const DEFAULT_PREEMPTIONS: usize = 8;

/// Explores every interleaving of `scenario` and prints how many there were.
pub(crate) fn explore(name: &str, scenario: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(DEFAULT_PREEMPTIONS));
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        scenario();
    });
    println!(
        "loom model {name}: {} interleavings explored (at most {} preemptions each)",
        runs.load(Ordering::Relaxed),
        builder.preemption_bound.unwrap_or(usize::MAX)
    );
}
