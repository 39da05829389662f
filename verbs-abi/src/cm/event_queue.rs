//! An event channel's queue: events in order beside a counter that says how many wait (the
//! channel's eventfd, which the application may poll). Producers (the connecting, accepting
//! and watching threads, and the application's own calls) add events while the application
//! takes them; each event is taken once and none is left behind a counter at zero.
//!
//! An event is queued before it is counted, so a taker that got a count always finds an
//! event. `crate::loom_models::event_queue` checks this in every interleaving.

use std::collections::VecDeque;
use std::os::raw::c_int;

use crate::sync::Mutex;
use crate::verbs::fd::EventCounter;

/// How many events wait, as a descriptor the application can poll counts them.
pub(crate) trait EventCount {
    /// Counts one event.
    fn add_one(&self);
    /// Takes one count: waits for one unless the count is non-blocking (`Err(EAGAIN)` then);
    /// `Err(EINTR)` when a signal ends the wait.
    fn take_one(&self) -> Result<(), c_int>;
}

impl EventCount for EventCounter {
    fn add_one(&self) {
        EventCounter::add_one(self);
    }

    fn take_one(&self) -> Result<(), c_int> {
        EventCounter::take_one(self)
    }
}

/// Events in order, counted by `C`.
#[derive(Debug)]
pub(crate) struct EventQueue<T, C> {
    queue: Mutex<VecDeque<T>>,
    count: C,
}

impl<T, C: EventCount> EventQueue<T, C> {
    /// An empty queue counted by `count` (at zero).
    pub(crate) fn new(count: C) -> Self {
        EventQueue {
            queue: Mutex::new(VecDeque::new()),
            count,
        }
    }

    /// The counter.
    #[cfg(all(test, loom))]
    pub(crate) fn count(&self) -> &C {
        &self.count
    }

    /// Queues `event`, then counts it.
    pub(crate) fn push(&self, event: T) {
        // The model's broken variant: counted before it is queued, so a taker may find the
        // count and no event, and the event is left with the count spent.
        #[cfg(loom_broken = "cm_count_before_queue")]
        self.count.add_one();
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(event);
        #[cfg(not(loom_broken = "cm_count_before_queue"))]
        self.count.add_one();
    }

    /// The next event: waits for one as [`EventCount::take_one`] does.
    pub(crate) fn next(&self) -> Result<T, c_int> {
        loop {
            self.count.take_one()?;
            let e = self
                .queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
            if let Some(e) = e {
                return Ok(e);
            }
        }
    }
}
