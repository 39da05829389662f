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
//! search (default: `testkit::loom_explore::DEFAULT_PREEMPTIONS`). Each model has a broken
//! variant that removes one ordering or lock the structure needs; adding
//! `--cfg loom_broken="NAME"` to `RUSTFLAGS` builds it, and its model fails: `handoff_len_after_unlock`, `cq_drain_after_unlock`,
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

pub(crate) use testkit::loom_explore::explore;
