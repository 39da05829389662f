//! An event channel's queue: two threads queue events while the application takes them.

use loom::sync::Arc;
use loom::thread;

use super::{explore, FakeCount};
use crate::cm::event_queue::EventQueue;

/// Two threads (a connecting thread and the watcher, say) each queue one event while the
/// application takes two, waiting for each. The application gets both, each once, and each
/// thread's events in order; the count ends at zero. An event counted before it is queued
/// would let the application spend the count on an empty queue and wait for ever beside the
/// event (a deadlock).
#[test]
fn events_from_two_threads_are_each_taken_once() {
    explore(
        "event queue: two threads queue, the application takes",
        || {
            let q = Arc::new(EventQueue::new(FakeCount::default()));
            let producers: Vec<_> = [1u8, 2]
                .into_iter()
                .map(|e| {
                    let q = q.clone();
                    thread::spawn(move || q.push(e))
                })
                .collect();
            let mut got = vec![q.next().unwrap(), q.next().unwrap()];
            for p in producers {
                p.join().unwrap();
            }
            got.sort_unstable();
            assert_eq!(got, [1, 2], "an event lost or taken twice");
            assert_eq!(q.count().value(), 0, "a count left without its event");
        },
    );
}
