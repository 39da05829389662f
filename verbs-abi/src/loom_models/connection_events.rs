//! An identifier's connection events: the connecting thread reports ESTABLISHED while the
//! watcher and the application report the end, and the application destroys the identifier.

use loom::sync::Arc;
use loom::thread;

use super::{explore, FakeCount};
use crate::cm::connection_events::ConnectionEvents;
use crate::cm::event_queue::EventQueue;

const ESTABLISHED: u8 = 1;
const DISCONNECTED: u8 = 2;

type Channel = EventQueue<u8, FakeCount>;

/// Everything queued on `ch`, oldest first.
fn drain(ch: &Channel) -> Vec<u8> {
    (0..ch.count().value())
        .map(|_| ch.next().unwrap())
        .collect()
}

/// The identifier and its channel, and a thread that makes the connection (ESTABLISHED) and
/// one that finds it ended (the watcher: DISCONNECTED).
fn connecting_and_watching() -> (
    Arc<ConnectionEvents>,
    Arc<Channel>,
    [thread::JoinHandle<bool>; 2],
) {
    let id = Arc::new(ConnectionEvents::default());
    let ch = Arc::new(EventQueue::new(FakeCount::default()));
    let connect = {
        let (id, ch) = (id.clone(), ch.clone());
        thread::spawn(move || id.establish(|| ch.push(ESTABLISHED)))
    };
    let watcher = {
        let (id, ch) = (id.clone(), ch.clone());
        thread::spawn(move || id.disconnect(|| ch.push(DISCONNECTED)))
    };
    (id, ch, [connect, watcher])
}

/// The connecting thread reports ESTABLISHED while the watcher and the application's
/// `rdma_disconnect` both try to report the end. The channel holds a prefix of
/// [ESTABLISHED, DISCONNECTED]: never the end before the start, never the end twice.
#[test]
fn the_end_is_reported_once_and_after_the_start() {
    explore(
        "connection events: establish, watcher and rdma_disconnect",
        || {
            let (id, ch, threads) = connecting_and_watching();
            let mine = id.disconnect(|| ch.push(DISCONNECTED));
            let [connected, watched] = threads.map(|t| t.join().unwrap());
            let events = drain(&ch);
            assert!(connected, "the connection was not reported");
            assert!(!(mine && watched), "both reported the end");
            let want: &[u8] = if mine || watched {
                &[ESTABLISHED, DISCONNECTED]
            } else {
                &[ESTABLISHED]
            };
            assert_eq!(events, want, "events out of order or repeated");
        },
    );
}

/// The application destroys the identifier while the connecting thread and the watcher
/// report: nothing is queued once the destroy has returned (an event naming a destroyed
/// identifier would hand the application freed memory).
#[test]
fn nothing_is_reported_after_destroy() {
    explore(
        "connection events: destroy while connecting and watching",
        || {
            let (id, ch, threads) = connecting_and_watching();
            id.destroy();
            let at_destroy = ch.count().value();
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(
                ch.count().value(),
                at_destroy,
                "an event queued after the identifier was destroyed"
            );
            let events = drain(&ch);
            assert!(
                events.is_empty()
                    || events == [ESTABLISHED]
                    || events == [ESTABLISHED, DISCONNECTED],
                "events out of order: {events:?}"
            );
        },
    );
}
