//! loom models of the state the library's threads share: each runs a bounded scenario under
//! `loom`, which explores every interleaving of its threads' lock and atomic operations (within
//! a bound on preemptions) and fails on a broken assertion, a deadlock (a lost wake-up leaves a
//! thread blocked for ever) or a leak.
//!
//! - [`local_completions`]: a thread adds the library's own completions while the application
//!   arms, polls and waits for the event, and two pollers race.
//! - [`event_queue`]: two threads queue events on a channel while the application takes them.
//! - [`connection_events`]: the connecting thread, the watcher and the application report a
//!   connection's events and destroy its identifier.
//!
//! Run (the target directory of dataplane's models: the `loom` cfg rebuilds everything):
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p verbs-abi --release --lib loom_models -- --nocapture
//! ```
//!
//! (`deploy/xwarp test` runs them so.) Each model prints how many interleavings it explored;
//! `LOOM_MAX_PREEMPTIONS` bounds the search (default:
//! `testkit::loom_explore::DEFAULT_PREEMPTIONS`). Each structure has a broken variant that
//! removes one ordering or lock it needs; adding `--cfg loom_broken="NAME"` to `RUSTFLAGS`
//! builds it, and its model fails:
//! `local_len_after_unlock`, `cm_count_before_queue`, `cm_report_after_unlock`. Passed to
//! verbs-abi alone it rebuilds only verbs-abi (the `bench` profile is the release one with the
//! test harness); then run the printed executable:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo rustc -p verbs-abi --lib \
//!     --profile bench -- --cfg 'loom_broken="local_len_after_unlock"'
//! target/loom/release/deps/verbs_abi-HASH loom_models --test-threads=1 --nocapture
//! ```

mod connection_events;
mod event_queue;
mod local_completions;

use std::os::raw::c_int;

use loom::sync::{Condvar, Mutex};

use crate::cm::event_queue::EventCount;
pub(crate) use testkit::loom_explore::explore;

/// An event counter as the blocking eventfd behaves: a taker waits until the count is above
/// zero (a wake-up that never comes is a deadlock, which loom reports).
#[derive(Debug, Default)]
pub(crate) struct FakeCount {
    count: Mutex<u64>,
    above_zero: Condvar,
}

impl FakeCount {
    /// The count now.
    pub(crate) fn value(&self) -> u64 {
        *self.count.lock().unwrap()
    }
}

impl EventCount for FakeCount {
    fn add_one(&self) {
        *self.count.lock().unwrap() += 1;
        self.above_zero.notify_all();
    }

    fn take_one(&self) -> Result<(), c_int> {
        let mut count = self.count.lock().unwrap();
        while *count == 0 {
            count = self.above_zero.wait(count).unwrap();
        }
        *count -= 1;
        Ok(())
    }
}
