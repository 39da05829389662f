//! The completions the library makes itself (a flushed receive, a post with a bad lkey or on
//! a queue pair in error), kept beside xwarp's completion queue. Any application thread may
//! add one while another polls the queue and a third arms it; each completion is polled once,
//! none is lost, and an armed queue fires its event for a completion added after the arm.
//!
//! The arm and the additions meet under one lock, so the arm-then-poll protocol holds: an
//! addition either comes before the arm (the poll after the arm sees its count) or after it
//! (it finds the queue armed and fires the event). The count lets a poll with nothing local
//! take no lock. `crate::loom_models::local_completions` checks this in every interleaving.

use std::collections::VecDeque;

use crate::sync::{AtomicUsize, Mutex, MutexGuard, Ordering};

/// A queue of completions with an arm that fires once, at the next addition.
#[derive(Debug)]
pub(crate) struct LocalCompletions<T> {
    inner: Mutex<Inner<T>>,
    /// How many are queued: written under the lock, read without it by [`poll`](Self::poll).
    len: AtomicUsize,
}

#[derive(Debug)]
struct Inner<T> {
    queue: VecDeque<T>,
    /// The next addition fires the event.
    armed: bool,
}

impl<T> Default for LocalCompletions<T> {
    fn default() -> Self {
        LocalCompletions {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                armed: false,
            }),
            len: AtomicUsize::new(0),
        }
    }
}

impl<T> LocalCompletions<T> {
    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `c`. True when the queue was armed: the caller fires its event (once per arm).
    pub(crate) fn push(&self, c: T) -> bool {
        let mut inner = self.lock();
        inner.queue.push_back(c);
        let fire = std::mem::take(&mut inner.armed);
        let len = inner.queue.len();
        // The model's broken variant: the count published after the lock is released, where
        // an arm and a poll in between find the queue unarmed and its count still 0.
        #[cfg(loom_broken = "local_len_after_unlock")]
        drop(inner);
        self.len.store(len, Ordering::Release);
        fire
    }

    /// Arms the queue: the next [`push`](Self::push) fires. A completion already queued does
    /// not: the application polls after arming.
    pub(crate) fn arm(&self) {
        self.lock().armed = true;
    }

    /// Hands up to `max` completions to `put`, oldest first; how many. Takes no lock when
    /// none is queued.
    pub(crate) fn poll(&self, max: usize, mut put: impl FnMut(T)) -> usize {
        if max == 0 || self.len.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut inner = self.lock();
        let n = inner.queue.len().min(max);
        for c in inner.queue.drain(..n) {
            put(c);
        }
        self.len.store(inner.queue.len(), Ordering::Release);
        n
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// An arm fires at the next addition only, once; polls take the oldest first, each once.
    #[test]
    fn an_arm_fires_once_at_the_next_addition() {
        let q = LocalCompletions::default();
        assert!(!q.push(1), "an unarmed queue fired");
        q.arm();
        assert!(q.push(2), "an armed queue did not fire");
        assert!(!q.push(3), "one arm fired twice");
        let mut got = Vec::new();
        assert_eq!(q.poll(2, |c| got.push(c)), 2);
        assert_eq!(q.poll(0, |c| got.push(c)), 0);
        assert_eq!(q.poll(8, |c| got.push(c)), 1);
        assert_eq!(q.poll(8, |c| got.push(c)), 0);
        assert_eq!(got, [1, 2, 3]);
    }
}
