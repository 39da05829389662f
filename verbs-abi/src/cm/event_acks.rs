//! The events an identifier has handed to the application and not had back: as with
//! librdmacm, `rdma_destroy_id` returns only once every event about the identifier that
//! `rdma_get_cm_event` returned was acknowledged (`rdma_ack_cm_event`), and an event still
//! queued when its identifier is destroyed is never handed out.
//!
//! Programs rely on the wait: a thread handling DISCONNECTED acknowledges it while the main
//! thread destroys the identifier and then the channel, and the handler must be back in
//! `rdma_get_cm_event` (waiting) before the channel goes. The wait is bounded, so that a
//! program destroying an identifier whose event it still holds is told so instead of hanging.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Events about one identifier: how many the application holds, and whether it is gone.
#[derive(Debug, Default)]
pub(crate) struct EventAcks {
    st: Mutex<AckState>,
    acked: Condvar,
}

#[derive(Debug, Default)]
struct AckState {
    held: u32,
    destroyed: bool,
}

impl EventAcks {
    fn lock(&self) -> MutexGuard<'_, AckState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The application takes an event about the identifier: counted, true; false when the
    /// identifier was destroyed meanwhile (the event must not be handed out).
    pub(crate) fn take(&self) -> bool {
        let mut st = self.lock();
        if st.destroyed {
            return false;
        }
        st.held += 1;
        true
    }

    /// The application acknowledged one of the events it took.
    pub(crate) fn ack(&self) {
        let mut st = self.lock();
        st.held = st.held.saturating_sub(1);
        if st.held == 0 {
            self.acked.notify_all();
        }
    }

    /// The identifier is destroyed: no more events are taken; waits until those taken are
    /// acknowledged, at most `bound`. Returns how many are still held (0 normally).
    pub(crate) fn destroy(&self, bound: Duration) -> u32 {
        let deadline = Instant::now() + bound;
        let mut st = self.lock();
        st.destroyed = true;
        while st.held > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self
                .acked
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        st.held
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Destroy waits for the acknowledgement of an event taken before it, and no event is
    /// taken after it.
    #[test]
    fn destroy_waits_for_the_events_taken_and_refuses_later_ones() {
        let acks = Arc::new(EventAcks::default());
        assert!(acks.take());
        let a = acks.clone();
        let acker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            a.ack();
        });
        let started = Instant::now();
        assert_eq!(acks.destroy(Duration::from_secs(10)), 0);
        assert!(
            started.elapsed() >= Duration::from_millis(40),
            "did not wait"
        );
        acker.join().unwrap();
        assert!(!acks.take(), "an event taken after destroy");
    }

    /// An event never acknowledged holds destroy for the bound only, and is reported.
    #[test]
    fn destroy_gives_up_on_an_event_never_acknowledged() {
        let acks = EventAcks::default();
        assert!(acks.take());
        assert!(acks.take());
        acks.ack();
        assert_eq!(acks.destroy(Duration::from_millis(20)), 1);
    }
}
