//! Completion queue: shared by any number of queue pairs, polled by the application.
//!
//! Completion events (verbs' `ibv_req_notify_cq` / `ibv_get_cq_event`): [`CompletionQueue::arm`]
//! asks for one event at the next completion added from then on, or with `solicited_only` at
//! the next receive of a Send carrying the solicited-event flag (RFC 5040 §5.3: Send with SE)
//! or the next unsuccessful completion; [`CompletionQueue::wait_event`] sleeps until an armed
//! event fires. One arm gives at most one event; the application re-arms after handling it.
//!
//! The completion channel: [`CompletionQueue::event_fd`] is an eventfd that is readable while
//! fired events wait to be taken ([`CompletionQueue::take_events`]), for epoll or any event
//! loop; with the `async` feature, [`CompletionQueue::next_event`] awaits it.
//!
//! Bounded: a queue holds at most its capacity of unpolled completions. One more is an
//! overrun, as in verbs (`IBV_EVENT_CQ_ERR`): the queue goes into error and drops it and every
//! later one, an event fires (armed or not) so that a waiting application learns of it, and the
//! queue pairs that deliver to it fail with [`crate::QpError::CqOverrun`].

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::kernel::Waker;
use crate::sync::{AtomicU64, Condvar, Mutex, MutexGuard};
use crate::Completion;

/// The capacity of [`crate::Device::create_cq`]'s queues.
pub const DEFAULT_CQ_CAPACITY: usize = 1 << 16;

/// Where fired events show: the completion channel. Called only under the queue's lock, so
/// the channel's readability and the count of waiting events change together.
pub(crate) trait Channel: std::fmt::Debug {
    /// Makes the channel readable, if it exists.
    fn wake(&self);
    /// Makes it unreadable.
    fn drain(&self);
}

/// The completion channel: an eventfd, made on first use ([`CompletionQueue::event_fd`]).
impl Channel for OnceLock<Waker> {
    fn wake(&self) {
        if let Some(ch) = self.get() {
            ch.wake();
        }
    }

    fn drain(&self) {
        if let Some(ch) = self.get() {
            ch.drain();
        }
    }
}

/// The state a completion queue's clones share: the completions, the event arming, the
/// sleepers, and the channel `C` the events show on (the loom models put a fake one there).
#[derive(Debug)]
pub(crate) struct CqInner<C = OnceLock<Waker>> {
    queue: Mutex<Queue>,
    ready: Condvar,
    channel: C,
    /// Lanes of a multi-queue xdp device whose queue pairs complete here (bit i: lane i):
    /// an inline queue drives those, or every lane while none is known.
    pub(crate) lanes: AtomicU64,
}

impl Default for CqInner {
    fn default() -> Self {
        CqInner::with_capacity(DEFAULT_CQ_CAPACITY)
    }
}

/// The completions, how many threads sleep waiting for one, and the event arming.
#[derive(Debug)]
struct Queue {
    items: VecDeque<Completion>,
    capacity: usize,
    /// A completion found the queue full: it is in error, and drops what comes.
    overrun: bool,
    sleepers: usize,
    armed: Option<Arm>,
    /// Events fired and not yet taken by [`CompletionQueue::wait_event`] (at most one per arm).
    events: u64,
}

/// Why a completion queue stopped taking completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CqError {
    /// More completions arrived than the queue holds unpolled; they and all later ones are lost.
    #[error("completion queue overrun (more than {capacity} completions unpolled): poll more often or create a larger queue with Device::create_cq_with")]
    Overrun {
        /// The queue's capacity.
        capacity: usize,
    },
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
    /// A queue of `capacity` (at least 1) whose channel is an eventfd made on first use.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        CqInner::new(capacity, OnceLock::new())
    }
}

/// How long a blocking wait may still sleep: `None` once `deadline` passed.
fn until(deadline: Instant) -> impl FnMut() -> Option<Duration> {
    move || {
        let now = Instant::now();
        (now < deadline).then(|| deadline - now)
    }
}

impl<C: Channel> CqInner<C> {
    /// A queue of `capacity` (at least 1) whose events show on `channel`.
    pub(crate) fn new(capacity: usize, channel: C) -> Self {
        CqInner {
            queue: Mutex::new(Queue {
                items: VecDeque::new(),
                capacity: capacity.max(1),
                overrun: false,
                sleepers: 0,
                armed: None,
                events: 0,
            }),
            ready: Condvar::new(),
            channel,
            lanes: Default::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The channel the events show on.
    pub(crate) fn channel(&self) -> &C {
        &self.channel
    }

    /// Appends `c`; fires an armed event it matches; wakes sleeping waiters only when there are
    /// any (no futex call per completion on the fast path). `Err` when the queue is full or
    /// already overrun: `c` is dropped (the queue is in error from then on).
    pub(crate) fn push(&self, c: Completion) -> Result<(), CqError> {
        let mut q = self.lock();
        if q.overrun || q.items.len() >= q.capacity {
            let first = !q.overrun;
            q.overrun = true;
            if first {
                // The asynchronous error: an event whether armed or not.
                q.armed = None;
                self.fire(&mut q);
            }
            return Err(CqError::Overrun {
                capacity: q.capacity,
            });
        }
        if q.armed.is_some_and(|a| a.fires_on(&c)) {
            q.armed = None;
            self.fire(&mut q);
        }
        q.items.push_back(c);
        if q.sleepers > 0 {
            self.ready.notify_all();
        }
        Ok(())
    }

    /// Records a fired event and makes the channel readable (under the queue's lock, so the
    /// eventfd and the count agree).
    fn fire(&self, q: &mut Queue) {
        q.events += 1;
        self.channel.wake();
        if q.sleepers > 0 {
            self.ready.notify_all();
        }
    }

    /// Makes the channel with `make` (true when this call made it), under the queue's lock:
    /// an event fired before shows on it at once, and one fired after finds it.
    pub(crate) fn make_channel(&self, make: impl FnOnce(&C) -> bool) {
        let q = self.lock();
        if make(&self.channel) && q.events > 0 {
            self.channel.wake();
        }
    }

    /// Takes every fired event; the channel is unreadable afterwards.
    pub(crate) fn take_events(&self) -> u64 {
        let mut q = self.lock();
        let n = std::mem::take(&mut q.events);
        // Under the lock: an event fired between the take and the drain would be left
        // counted on an unreadable channel (the model's broken variant does that).
        #[cfg(loom_broken = "cq_drain_after_unlock")]
        drop(q);
        if n > 0 {
            self.channel.drain();
        }
        n
    }

    /// Takes one fired event, if any; the channel shows no event once the last is taken.
    fn take_event(&self, q: &mut Queue) -> bool {
        if q.events == 0 {
            return false;
        }
        q.events -= 1;
        if q.events == 0 {
            self.channel.drain();
        }
        true
    }

    /// Arms the queue for one event (see [`CompletionQueue::arm`]).
    pub(crate) fn arm(&self, solicited_only: bool) {
        self.lock().armed = Some(if solicited_only {
            Arm::Solicited
        } else {
            Arm::Next
        });
    }

    /// Moves up to `max` completions into `out`; returns how many.
    pub(crate) fn poll(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        let mut q = self.lock();
        let n = max.min(q.items.len());
        out.extend(q.items.drain(..n));
        n
    }

    /// The oldest completion, if any.
    pub(crate) fn pop(&self) -> Option<Completion> {
        self.lock().items.pop_front()
    }

    /// Takes one fired event, without blocking.
    pub(crate) fn try_take_event(&self) -> bool {
        self.take_event(&mut self.lock())
    }

    /// Sleeps until an event fires and takes it; false when `more` says the time is up.
    pub(crate) fn wait_event(&self, more: impl FnMut() -> Option<Duration>) -> bool {
        self.sleep_until(more, |q| self.take_event(q).then_some(()))
            .is_some()
    }

    /// Sleeps until a completion arrives and takes it; `None` when `more` says the time is up.
    pub(crate) fn wait(&self, more: impl FnMut() -> Option<Duration>) -> Option<Completion> {
        self.sleep_until(more, |q| q.items.pop_front())
    }

    /// Sleeps on the queue until `take` finds something or `more` (how long to sleep next)
    /// says the time is up. Counted as a sleeper meanwhile, so pushes notify.
    fn sleep_until<T>(
        &self,
        mut more: impl FnMut() -> Option<Duration>,
        mut take: impl FnMut(&mut Queue) -> Option<T>,
    ) -> Option<T> {
        let mut q = self.lock();
        loop {
            if let Some(x) = take(&mut q) {
                return Some(x);
            }
            let wait = more()?;
            q.sleepers += 1;
            q = self
                .ready
                .wait_timeout(q, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            q.sleepers -= 1;
        }
    }

    /// The queue's capacity.
    pub(crate) fn capacity(&self) -> usize {
        self.lock().capacity
    }

    /// Why the queue is in error, if it is.
    pub(crate) fn error(&self) -> Option<CqError> {
        let q = self.lock();
        q.overrun.then_some(CqError::Overrun {
            capacity: q.capacity,
        })
    }
}

/// Something that produces completions when driven: an inline AF_XDP engine runs a round.
pub(crate) trait Drive: Send + Sync + std::fmt::Debug {
    /// Runs the engine once: of a multi-queue device, the lanes in mask `lanes` (0: all).
    fn drive(&self, lanes: u64);

    /// Nothing but the application's calls runs the engine (no engine thread): a wait on the
    /// queue must drive it rather than sleep.
    fn needs_caller(&self) -> bool {
        true
    }
}

impl CompletionQueue {
    /// Queue pairs of lane `lane` complete here: an inline queue drives that lane.
    pub(crate) fn add_lane(&self, lane: u16) {
        self.inner.lanes.fetch_or(1u64 << lane, Ordering::Relaxed);
    }
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
    pub(crate) fn new(device_id: u64, capacity: usize) -> Self {
        Self {
            inner: Arc::new(CqInner::with_capacity(capacity)),
            device_id,
            driver: None,
        }
    }

    /// How many unpolled completions it holds at most.
    pub fn capacity(&self) -> usize {
        self.inner.capacity()
    }

    /// Why the queue is in error, if it is: completions were lost to an overrun.
    pub fn error(&self) -> Option<CqError> {
        self.inner.error()
    }

    /// The completion channel: an eventfd (non-blocking, close-on-exec) that is readable
    /// while fired events wait to be taken with [`Self::take_events`]; for epoll or any event
    /// loop. An event fires when an [armed](Self::arm) condition is met or the queue
    /// overruns. The descriptor lives as long as the queue (and its clones).
    ///
    /// With an inline AF_XDP engine nothing runs the engine while the application sleeps on
    /// the descriptor: use [`crate::EngineMode::Threaded`] (or the kernel transport) then.
    pub fn event_fd(&self) -> std::io::Result<BorrowedFd<'_>> {
        if self.inner.channel().get().is_none() {
            let w = Waker::new()?;
            self.inner.make_channel(|ch| ch.set(w).is_ok());
        }
        let ch = self
            .inner
            .channel()
            .get()
            .ok_or(std::io::ErrorKind::Other)?;
        Ok(ch.as_fd())
    }

    /// Takes the events fired since the last take, without blocking (verbs'
    /// `ibv_get_cq_event` and `ibv_ack_cq_events` together): how many; the channel is not
    /// readable afterwards. Re-arm with [`Self::arm`] before polling the completions.
    pub fn take_events(&self) -> u64 {
        self.inner.take_events()
    }

    /// Moves up to `max` (at least one when there are any) completions into `out`; returns
    /// how many. Never blocks. On an inline device an empty queue drives the engine first.
    pub fn poll(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        match self.inner.poll(out, max) {
            0 if self.drive() => self.inner.poll(out, max),
            n => n,
        }
    }

    /// Returns the next completion, if any, without blocking. On an inline device an empty
    /// queue drives the engine first (a queue with completions takes one lock, nothing else).
    pub fn poll_one(&self) -> Option<Completion> {
        self.inner
            .pop()
            .or_else(|| self.drive().then(|| self.inner.pop()).flatten())
    }

    /// Waits up to `timeout` for the next completion.
    pub fn wait(&self, timeout: Duration) -> Option<Completion> {
        let deadline = Instant::now() + timeout;
        if self.driver().is_some_and(|d| d.needs_caller()) {
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
        self.inner.wait(until(deadline))
    }
}

impl CompletionQueue {
    /// Whether polling an empty queue runs an engine round (an inline device, or one whose
    /// engine thread the application's calls assist: [`crate::XdpConfig::assist`]).
    pub fn polls_drive(&self) -> bool {
        self.driver().is_some()
    }

    /// The inline engine, while its device is alive.
    fn driver(&self) -> Option<Arc<dyn Drive>> {
        self.driver.as_ref()?.upgrade()
    }

    /// Arms the queue for one completion event: at the next completion added from now on, or
    /// with `solicited_only` at the next receive of a solicited Send (or unsuccessful
    /// completion) only, as verbs' `ibv_req_notify_cq(cq, solicited_only)`. Completions
    /// already queued fire nothing. Arming again replaces the condition (`false` widens it).
    pub fn arm(&self, solicited_only: bool) {
        self.inner.arm(solicited_only);
    }

    /// Waits up to `timeout` for an armed event to fire and takes it (as `ibv_get_cq_event`);
    /// false when none fired. The completions stay in the queue for [`Self::poll`].
    pub fn wait_event(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        if let Some(d) = self.driver().filter(|d| d.needs_caller()) {
            // Inline engine: run it until the event fires.
            loop {
                if self.inner.try_take_event() {
                    return true;
                }
                if Instant::now() >= deadline {
                    return false;
                }
                d.drive(self.inner.lanes.load(Ordering::Relaxed));
                std::thread::yield_now();
            }
        }
        self.inner.wait_event(until(deadline))
    }

    /// Waits until an event fires (an [armed](Self::arm) condition met, or an overrun) and
    /// takes the fired events: [`Self::take_events`] as a future, for any executor
    /// (`async-io`'s reactor watches [`Self::event_fd`]). One waiter per queue at a time (a
    /// second concurrent one fails to register the descriptor). Needs a threaded engine or the
    /// kernel transport: nothing drives an inline engine while this waits.
    #[cfg(feature = "async")]
    pub async fn next_event(&self) -> std::io::Result<u64> {
        let fd = async_io::Async::new(self.event_fd()?)?;
        loop {
            let n = self.take_events();
            if n > 0 {
                return Ok(n);
            }
            fd.readable().await?;
        }
    }

    /// Drives the inline engine (the lanes of this queue's queue pairs); false when there is
    /// none (a threaded device, or its device is gone).
    fn drive(&self) -> bool {
        let Some(d) = self.driver() else {
            return false;
        };
        d.drive(self.inner.lanes.load(Ordering::Relaxed));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Opcode, Status};
    use std::os::fd::AsRawFd;

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
        let cq = CompletionQueue::new(1, 16);
        for i in 0..5 {
            cq.inner.push(c(i)).unwrap();
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
        let cq = CompletionQueue::new(1, 16);
        let short = Duration::from_millis(5);
        cq.inner.push(solicited(0)).unwrap();
        assert!(!cq.wait_event(short), "not armed: no event");
        cq.arm(true);
        cq.inner.push(c(1)).unwrap();
        assert!(!cq.wait_event(short), "unsolicited: no event");
        cq.inner.push(solicited(2)).unwrap();
        cq.inner.push(solicited(3)).unwrap();
        assert!(cq.wait_event(short));
        assert!(!cq.wait_event(short), "one arm, one event");
        let mut out = Vec::new();
        assert_eq!(cq.poll(&mut out, 10), 4, "completions stay for poll");
        cq.arm(true);
        cq.inner
            .push(Completion {
                status: Status::Flushed,
                ..c(4)
            })
            .unwrap();
        assert!(cq.wait_event(short), "an error fires a solicited-only arm");
        cq.arm(false);
        cq.inner.push(c(5)).unwrap();
        assert!(cq.wait_event(short), "a plain arm fires on any completion");
    }

    #[test]
    fn wait_event_wakes_on_push_from_another_thread() {
        let cq = CompletionQueue::new(1, 16);
        cq.arm(true);
        let cq2 = cq.clone();
        let t = std::thread::spawn(move || {
            cq2.inner.push(c(1)).unwrap();
            cq2.inner.push(solicited(2)).unwrap();
        });
        assert!(cq.wait_event(Duration::from_secs(10)));
        t.join().unwrap();
        let mut out = Vec::new();
        cq.poll(&mut out, 10);
        assert!(out.last().unwrap().solicited);
    }

    /// A full queue overruns (verbs' CQ error): the completion is dropped and so is every
    /// later one, even after polling; one event fires, armed or not, and shows on the
    /// channel's eventfd until taken.
    #[test]
    fn overrun_drops_fires_an_event_and_stays_in_error() {
        let cq = CompletionQueue::new(1, 2);
        let fd = cq.event_fd().unwrap().as_raw_fd();
        assert!(!readable(fd));
        cq.inner.push(c(0)).unwrap();
        cq.inner.push(c(1)).unwrap();
        assert_eq!(cq.error(), None);
        assert_eq!(cq.inner.push(c(2)), Err(CqError::Overrun { capacity: 2 }));
        assert_eq!(cq.error(), Some(CqError::Overrun { capacity: 2 }));
        assert!(readable(fd), "the overrun shows on the channel");
        assert_eq!(cq.take_events(), 1);
        assert!(!readable(fd));
        let mut out = Vec::new();
        assert_eq!(cq.poll(&mut out, 10), 2);
        assert!(cq.inner.push(c(3)).is_err(), "in error for good");
        assert_eq!(cq.take_events(), 0, "one event per overrun");
        assert!(cq.poll_one().is_none());
        let why = cq.error().unwrap().to_string();
        assert!(why.contains("create_cq_with"), "{why}");
    }

    /// The channel's eventfd is readable exactly while an armed event waits: a solicited-only
    /// arm ignores plain completions; taking the event (or `wait_event`) clears it.
    #[test]
    fn channel_fd_follows_armed_events() {
        let cq = CompletionQueue::new(1, 16);
        let fd = cq.event_fd().unwrap().as_raw_fd();
        cq.arm(true);
        cq.inner.push(c(1)).unwrap();
        assert!(!readable(fd), "unsolicited: no event");
        cq.inner.push(solicited(2)).unwrap();
        assert!(readable(fd));
        assert!(cq.wait_event(Duration::ZERO));
        assert!(!readable(fd), "taken by wait_event");
        cq.arm(false);
        cq.inner.push(c(3)).unwrap();
        assert!(readable(fd));
        assert_eq!(cq.take_events(), 1);
        assert!(!readable(fd));
        // An event fired before the channel existed shows once it is made.
        let late = CompletionQueue::new(1, 16);
        late.arm(false);
        late.inner.push(c(4)).unwrap();
        assert!(readable(late.event_fd().unwrap().as_raw_fd()));
    }

    /// The async adapter: awaiting `next_event` on a solicited-only arm returns at the
    /// solicited completion pushed by another thread, not at the plain one before it.
    #[cfg(feature = "async")]
    #[test]
    fn next_event_awaits_an_armed_event() {
        let cq = CompletionQueue::new(1, 16);
        cq.arm(true);
        let cq2 = cq.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            cq2.inner.push(c(1)).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            cq2.inner.push(solicited(2)).unwrap();
        });
        assert_eq!(async_io::block_on(cq.next_event()).unwrap(), 1);
        t.join().unwrap();
        let mut out = Vec::new();
        assert_eq!(cq.poll(&mut out, 10), 2, "both were there when it woke");
        cq.arm(false);
        cq.inner.push(c(3)).unwrap();
        assert_eq!(
            async_io::block_on(cq.next_event()).unwrap(),
            1,
            "ready at once"
        );
    }

    fn readable(fd: std::os::fd::RawFd) -> bool {
        crate::kernel::wait_readable(fd, 0).unwrap()
    }

    #[test]
    fn wait_wakes_on_push_from_another_thread() {
        let cq = CompletionQueue::new(1, 16);
        let cq2 = cq.clone();
        let t = std::thread::spawn(move || cq2.inner.push(c(9)).unwrap());
        assert_eq!(cq.wait(Duration::from_secs(10)).unwrap().wr_id, 9);
        t.join().unwrap();
    }
}
