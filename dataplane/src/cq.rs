//! Completion queue: shared by any number of queue pairs, polled by the application.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::Completion;

#[derive(Debug, Default)]
pub(crate) struct CqInner {
    queue: Mutex<Queue>,
    ready: Condvar,
}

/// The completions, and how many threads sleep waiting for one.
#[derive(Debug, Default)]
struct Queue {
    items: VecDeque<Completion>,
    sleepers: usize,
}

impl CqInner {
    /// Appends `c`; wakes sleeping waiters only when there are any (no futex call per
    /// completion on the fast path).
    pub(crate) fn push(&self, c: Completion) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(c) = q.items.pop_front() {
                return Some(c);
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

    #[test]
    fn wait_wakes_on_push_from_another_thread() {
        let cq = CompletionQueue::new(1);
        let cq2 = cq.clone();
        let t = std::thread::spawn(move || cq2.inner.push(c(9)));
        assert_eq!(cq.wait(Duration::from_secs(10)).unwrap().wr_id, 9);
        t.join().unwrap();
    }
}
