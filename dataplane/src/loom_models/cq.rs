//! The completion queue: the engine completes while the application arms, polls, waits on
//! the queue or on its completion channel, and takes the events.

use std::time::Duration;

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use super::explore;
use crate::cq::{Channel, CqInner};
use crate::{Completion, Opcode, Status};

/// The completion channel as its eventfd behaves: made on first use, readable while its count
/// is above zero, and a thread can block until it is (as epoll on the descriptor would).
#[derive(Debug, Default)]
struct FakeChannel {
    made: AtomicBool,
    count: Mutex<u64>,
    readable: Condvar,
}

impl Channel for FakeChannel {
    fn wake(&self) {
        if self.made.load(Ordering::Acquire) {
            *self.count.lock().unwrap() += 1;
            self.readable.notify_all();
        }
    }

    fn drain(&self) {
        if self.made.load(Ordering::Acquire) {
            *self.count.lock().unwrap() = 0;
        }
    }
}

impl FakeChannel {
    /// Makes the channel; true when this call made it.
    fn make(&self) -> bool {
        !self.made.swap(true, Ordering::AcqRel)
    }

    /// Blocks until the channel is readable. A wake-up that never comes is a deadlock, which
    /// loom reports.
    fn wait_readable(&self) {
        let mut count = self.count.lock().unwrap();
        while *count == 0 {
            count = self.readable.wait(count).unwrap();
        }
    }

    fn is_readable(&self) -> bool {
        *self.count.lock().unwrap() > 0
    }
}

type Cq = CqInner<FakeChannel>;

/// A blocking wait's budget: loom's condition variables never time out, so only a
/// notification ends the wait.
fn forever() -> Option<Duration> {
    Some(Duration::from_secs(3600))
}

fn completion(wr_id: u64, solicited: bool) -> Completion {
    Completion {
        wr_id,
        opcode: if solicited {
            Opcode::Recv
        } else {
            Opcode::Send
        },
        status: Status::Success,
        byte_len: 1,
        qp_num: 1,
        solicited,
        invalidated: None,
    }
}

fn ids(cs: &[Completion]) -> Vec<u64> {
    cs.iter().map(|c| c.wr_id).collect()
}

/// The engine pushes two completions; the application arms, polls, and sleeps in
/// `wait_event` whenever the poll found nothing, until it has both. The arm-then-poll
/// protocol loses no wake-up: a completion the poll missed came after the arm, so its event
/// wakes the sleeper (a lost one leaves it asleep for ever: a deadlock).
#[test]
fn an_armed_waiter_never_misses_a_completion() {
    explore("cq: arm, poll, wait_event", || {
        let cq = Arc::new(Cq::new(4, FakeChannel::default()));
        let engine = {
            let cq = cq.clone();
            thread::spawn(move || {
                cq.push(completion(1, false)).unwrap();
                cq.push(completion(2, true)).unwrap();
            })
        };
        let mut got = Vec::new();
        while got.len() < 2 {
            cq.arm(false);
            if cq.poll(&mut got, 8) == 0 {
                assert!(cq.wait_event(forever), "a wait with no deadline ended");
            }
        }
        engine.join().unwrap();
        assert_eq!(ids(&got), [1, 2]);
        assert!(cq.error().is_none());
    });
}

/// The engine pushes a plain, a solicited and a plain completion while the application makes
/// the channel, arms solicited-only and polls; when the poll has not found the solicited
/// completion it blocks on the channel and takes the event. At most one event fires, and it
/// comes with the solicited completion (the poll after it finds it); none fires only when the
/// solicited completion was queued before the arm (the poll after the arm found it); at the end
/// the channel is readable exactly when an event waits, and not after it is taken.
#[test]
fn a_solicited_only_event_comes_with_its_completion() {
    explore("cq: solicited-only arm, wait on the channel", || {
        let cq = Arc::new(Cq::new(4, FakeChannel::default()));
        let engine = {
            let cq = cq.clone();
            thread::spawn(move || {
                for (id, solicited) in [(1, false), (2, true), (3, false)] {
                    cq.push(completion(id, solicited)).unwrap();
                }
            })
        };
        cq.make_channel(|ch| ch.make());
        cq.arm(true);
        let mut got = Vec::new();
        cq.poll(&mut got, 8);
        let mut taken = 0;
        let found_at_once = got.iter().any(|c| c.solicited);
        if !found_at_once {
            cq.channel().wait_readable();
            taken = cq.take_events();
            assert_eq!(taken, 1, "a readable channel without one event to take");
            cq.poll(&mut got, 8);
            assert!(
                got.iter().any(|c| c.solicited),
                "an event fired before its solicited completion was queued"
            );
        }
        engine.join().unwrap();
        let readable = cq.channel().is_readable();
        let left = cq.take_events();
        assert_eq!(
            readable,
            left > 0,
            "the channel disagrees with the events waiting"
        );
        assert!(
            !cq.channel().is_readable(),
            "readable after the events were taken"
        );
        assert!(taken + left <= 1, "one arm fired {} events", taken + left);
        assert!(
            taken + left == 1 || found_at_once,
            "no event, yet the solicited completion was queued after the arm"
        );
        cq.poll(&mut got, 8);
        assert_eq!(ids(&got), [1, 2, 3]);
    });
}

/// A queue of one, armed; the engine pushes three completions while the application makes
/// the channel (after the first event may have fired), blocks on it, takes the events and
/// polls once. The first event always shows; the overrun, if the application polled too late,
/// fires one more event (armed or not), however many completions it drops; once overrun, every
/// later completion is refused and the queue reports the error; the completions kept are
/// exactly those accepted, in order; and the channel is readable exactly while an event waits.
#[test]
fn an_overrun_fires_one_event_that_shows_on_the_channel() {
    explore("cq: overrun, channel made late", || {
        let cq = Arc::new(Cq::new(1, FakeChannel::default()));
        cq.arm(false);
        let engine = {
            let cq = cq.clone();
            thread::spawn(move || {
                (1..=3)
                    .map(|id| cq.push(completion(id, false)).is_ok())
                    .collect::<Vec<bool>>()
            })
        };
        cq.make_channel(|ch| ch.make());
        cq.channel().wait_readable();
        let mut events = cq.take_events();
        assert!(events >= 1, "a readable channel without an event to take");
        let mut got = Vec::new();
        cq.poll(&mut got, 8);
        let accepted = engine.join().unwrap();

        let readable = cq.channel().is_readable();
        let left = cq.take_events();
        assert_eq!(
            readable,
            left > 0,
            "the channel disagrees with the events waiting"
        );
        events += left;
        cq.poll(&mut got, 8);
        let overrun = accepted.contains(&false);
        assert!(
            accepted.windows(2).all(|w| w[0] || !w[1]),
            "a completion accepted after the overrun: {accepted:?}"
        );
        assert_eq!(cq.error().is_some(), overrun);
        assert_eq!(
            events,
            1 + u64::from(overrun),
            "the armed event, and one for the overrun ({accepted:?})"
        );
        let kept: Vec<u64> = (1..=3).filter(|&id| accepted[id as usize - 1]).collect();
        assert_eq!(ids(&got), kept);
    });
}
