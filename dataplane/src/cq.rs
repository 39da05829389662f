//! Completion queue: shared by any number of queue pairs, polled by the application.
//!
//! Completion events (verbs' `ibv_req_notify_cq` / `ibv_get_cq_event`): [`CompletionQueue::arm`]
//! asks for one event at the next completion added from then on, or with `solicited_only` at
//! the next receive of a Send carrying the solicited-event flag (RFC 5040 §5.3: Send with SE)
//! or the next unsuccessful completion; [`CompletionQueue::wait_event`] sleeps until an armed
//! event fires. One arm gives at most one event; the application re-arms after handling it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::Completion;

#[derive(Debug, Default)]
pub(crate) struct CqInner {
    queue: Mutex<Queue>,
    ready: Condvar,
}

/// The completions, how many threads sleep waiting for one, and the event arming.
#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Completion>,
    sleepers: usize,
    armed: Option<Arm>,
    /// Events fired and not yet taken by [`CompletionQueue::wait_event`] (at most one per arm).
    events: u64,
}

/// What an armed completion queue fires on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arm {
    /// The next completion.
    Next,
    /// The next solicited receive or unsuccessful completion.
    Solicited,
}

impl Arm {
    fn fires_on(self, c: &Completion) -> bool {
        match self {
            Arm::Next => true,
            Arm::Solicited => c.solicited || c.status != crate::Status::Success,
        }
    }
}

impl CqInner {
    /// Appends `c`; fires an armed event it matches; wakes sleeping waiters only when there are
    /// any (no futex call per completion on the fast path).
    pub(crate) fn push(&self, c: Completion) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.armed.is_some_and(|a| a.fires_on(&c)) {
            q.armed = None;
            q.events += 1;
        }
        q.items.push_back(c);
        if q.sleepers > 0 {
            self.ready.notify_all();
        }
    }
}

/// Something that produces completions when driven: an inline AF_XDP engine runs a round.
pub(crate) trait Drive: Send + Sync + std::fmt::Debug {
    /// Runs the engine once.
    fn drive(&self);
}

/// A completion queue. Cheap to clone; clones share the queue.
#[derive(Debug, Clone, Default)]
pub struct CompletionQueue {
    pub(crate) inner: Arc<CqInner>,
    pub(crate) device_id: u64,
    /// An inline engine to run while the queue is empty. Weak: the device's routes hold
    /// completion queues, so a strong handle here would keep a dropped device (its engine and
    /// XDP program) alive for ever.
    pub(crate) driver: Option<Weak<dyn Drive>>,
}

impl CompletionQueue {
    pub(crate) fn new(device_id: u64) -> Self {
        Self {
            inner: Arc::default(),
            device_id,
            driver: None,
        }
    }

    /// Moves up to `out.capacity() - out.len()` (at least one) completions into `out`; returns how many.
    /// Never blocks.
    pub fn poll(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        self.drive_if_empty();
        let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
        let n = max.min(q.items.len());
        out.extend(q.items.drain(..n));
        n
    }

    /// Returns the next completion, if any, without blocking.
    pub fn poll_one(&self) -> Option<Completion> {
        self.drive_if_empty();
        self.inner
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .items
            .pop_front()
    }

    /// Waits up to `timeout` for the next completion.
    pub fn wait(&self, timeout: Duration) -> Option<Completion> {
        let deadline = Instant::now() + timeout;
        if self.driver().is_some() {
            // Inline engine: run it until something arrives (busy polling; the CPU is given up
            // only now and then, so a waiting peer on the same core still gets to run).
            let mut idle = 0u32;
            loop {
                if let Some(c) = self.poll_one() {
                    return Some(c);
                }
                idle = idle.wrapping_add(1);
                if idle.is_multiple_of(64) {
                    if Instant::now() >= deadline {
                        return None;
                    }
                    std::thread::yield_now();
                }
            }
        }
        self.sleep_until(deadline, |q| q.items.pop_front())
    }

    /// Sleeps on the queue until `take` finds something or `deadline` passes.
    fn sleep_until<T>(
        &self,
        deadline: Instant,
        mut take: impl FnMut(&mut Queue) -> Option<T>,
    ) -> Option<T> {
        let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(x) = take(&mut q) {
                return Some(x);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            q.sleepers += 1;
            q = self
                .inner
                .ready
                .wait_timeout(q, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            q.sleepers -= 1;
        }
    }
}

impl CompletionQueue {
    /// The inline engine, while its device is alive.
    fn driver(&self) -> Option<Arc<dyn Drive>> {
        self.driver.as_ref()?.upgrade()
    }

    /// Arms the queue for one completion event: at the next completion added from now on, or
    /// with `solicited_only` at the next receive of a solicited Send (or unsuccessful
    /// completion) only, as verbs' `ibv_req_notify_cq(cq, solicited_only)`. Completions
    /// already queued fire nothing. Arming again replaces the condition (`false` widens it).
    pub fn arm(&self, solicited_only: bool) {
        let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.armed = Some(if solicited_only {
            Arm::Solicited
        } else {
            Arm::Next
        });
    }

    /// Waits up to `timeout` for an armed event to fire and takes it (as `ibv_get_cq_event`);
    /// false when none fired. The completions stay in the queue for [`Self::poll`].
    pub fn wait_event(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let take = |q: &mut Queue| (q.events > 0).then(|| q.events -= 1);
        if let Some(d) = self.driver() {
            // Inline engine: run it until the event fires.
            loop {
                let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
                if take(&mut q).is_some() {
                    return true;
                }
                drop(q);
                if Instant::now() >= deadline {
                    return false;
                }
                d.drive();
                std::thread::yield_now();
            }
        }
        self.sleep_until(deadline, take).is_some()
    }

    fn drive_if_empty(&self) {
        if let Some(d) = self.driver() {
            let empty = self
                .inner
                .queue
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .items
                .is_empty();
            if empty {
                d.drive();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Opcode, Status};

    fn c(wr_id: u64) -> Completion {
        Completion {
            wr_id,
            opcode: Opcode::Send,
            status: Status::Success,
            byte_len: 1,
            qp_num: 1,
            solicited: false,
            invalidated: None,
        }
    }

    #[test]
    fn fifo_and_bounded_poll() {
        let cq = CompletionQueue::new(1);
        for i in 0..5 {
            cq.inner.push(c(i));
        }
        let mut out = Vec::new();
        assert_eq!(cq.poll(&mut out, 3), 3);
        assert_eq!(out.iter().map(|c| c.wr_id).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(cq.poll_one().unwrap().wr_id, 3);
        assert_eq!(cq.wait(Duration::from_millis(1)).unwrap().wr_id, 4);
        assert!(cq.wait(Duration::from_millis(1)).is_none());
    }

    fn solicited(wr_id: u64) -> Completion {
        Completion {
            opcode: Opcode::Recv,
            solicited: true,
            ..c(wr_id)
        }
    }

    /// Solicited-only arming (verbs' `ibv_req_notify_cq(solicited_only)`): unsolicited
    /// completions queue without an event; the solicited one fires it, once; an unsuccessful
    /// completion fires it too; completions queued before arming fire nothing.
    #[test]
    fn solicited_only_arm_fires_on_solicited_or_error_once() {
        let cq = CompletionQueue::new(1);
        let short = Duration::from_millis(5);
        cq.inner.push(solicited(0));
        assert!(!cq.wait_event(short), "not armed: no event");
        cq.arm(true);
        cq.inner.push(c(1));
        assert!(!cq.wait_event(short), "unsolicited: no event");
        cq.inner.push(solicited(2));
        cq.inner.push(solicited(3));
        assert!(cq.wait_event(short));
        assert!(!cq.wait_event(short), "one arm, one event");
        let mut out = Vec::new();
        assert_eq!(cq.poll(&mut out, 10), 4, "completions stay for poll");
        cq.arm(true);
        cq.inner.push(Completion {
            status: Status::Flushed,
            ..c(4)
        });
        assert!(cq.wait_event(short), "an error fires a solicited-only arm");
        cq.arm(false);
        cq.inner.push(c(5));
        assert!(cq.wait_event(short), "a plain arm fires on any completion");
    }

    #[test]
    fn wait_event_wakes_on_push_from_another_thread() {
        let cq = CompletionQueue::new(1);
        cq.arm(true);
        let cq2 = cq.clone();
        let t = std::thread::spawn(move || {
            cq2.inner.push(c(1));
            cq2.inner.push(solicited(2));
        });
        assert!(cq.wait_event(Duration::from_secs(10)));
        t.join().unwrap();
        let mut out = Vec::new();
        cq.poll(&mut out, 10);
        assert!(out.last().unwrap().solicited);
    }

    #[test]
    fn wait_wakes_on_push_from_another_thread() {
        let cq = CompletionQueue::new(1);
        let cq2 = cq.clone();
        let t = std::thread::spawn(move || cq2.inner.push(c(9)));
        assert_eq!(cq.wait(Duration::from_secs(10)).unwrap().wr_id, 9);
        t.join().unwrap();
    }
}
