//! A completion queue's own completions: a thread adds them while the application arms, polls
//! and waits for the queue's event, or while two threads poll.

use loom::sync::Arc;
use loom::thread;

use super::{explore, FakeCount};
use crate::cm::event_queue::EventCount;
use crate::verbs::local_completions::LocalCompletions;

/// A thread adds one completion (firing the event when the queue was armed); the application
/// arms, polls, and waits for the event whenever the poll found nothing, until it has the
/// completion. The arm-then-poll protocol loses no wake-up: a completion the poll missed was
/// added after the arm, so its event wakes the waiter (a lost one leaves it waiting for ever:
/// a deadlock). One arm fires at most one event.
#[test]
fn an_armed_queue_never_misses_a_local_completion() {
    explore("local completions: add, arm, poll, wait", || {
        let q = Arc::new(LocalCompletions::default());
        let event = Arc::new(FakeCount::default());
        let adder = {
            let (q, event) = (q.clone(), event.clone());
            thread::spawn(move || {
                if q.push(7u8) {
                    event.add_one();
                }
            })
        };
        let mut got = Vec::new();
        let mut arms = 0;
        while got.is_empty() {
            q.arm();
            arms += 1;
            if q.poll(8, |c| got.push(c)) == 0 {
                event.take_one().unwrap();
                arms -= 1;
            }
        }
        adder.join().unwrap();
        assert_eq!(got, [7]);
        assert!(event.value() <= arms, "one arm fired two events");
        assert_eq!(q.poll(8, |c| got.push(c)), 0, "a completion polled twice");
    });
}

/// A thread adds two completions while two threads poll one each; afterwards a last poll
/// takes what is left. Every completion is polled exactly once, in the order added.
#[test]
fn racing_pollers_take_each_completion_once() {
    explore("local completions: add while two poll", || {
        let q = Arc::new(LocalCompletions::default());
        let adder = {
            let q = q.clone();
            thread::spawn(move || {
                assert!(!q.push(1u8) && !q.push(2u8), "an unarmed queue fired");
            })
        };
        let poller = {
            let q = q.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                q.poll(1, |c| got.push(c));
                got
            })
        };
        let mut got = Vec::new();
        q.poll(1, |c| got.push(c));
        adder.join().unwrap();
        let theirs = poller.join().unwrap();
        q.poll(8, |c| got.push(c));
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "polled out of order: {got:?}"
        );
        got.extend(theirs);
        got.sort_unstable();
        assert_eq!(got, [1, 2], "a completion lost or polled twice");
    });
}
