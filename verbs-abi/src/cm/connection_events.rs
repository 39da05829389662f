//! The order of one identifier's connection events, as applications rely on it: ESTABLISHED
//! before DISCONNECTED, each at most once (the watcher, finding the peer gone, and
//! `rdma_disconnect` may both try to report the end), and no event once `rdma_destroy_id`
//! has returned. A step and the queueing of its event happen under one lock, so every other
//! thread sees them as one move. `crate::loom_models::connection_events` checks this in
//! every interleaving.

use crate::sync::{Mutex, MutexGuard};

/// Where an identifier's connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No connection made yet (or the attempt failed).
    Unconnected,
    /// ESTABLISHED was reported.
    Established,
    /// DISCONNECTED was reported.
    Disconnected,
    /// The application destroyed the identifier: nothing more is reported.
    Destroyed,
}

/// An identifier's connection phase, moved with the event that reports each step.
#[derive(Debug)]
pub(crate) struct ConnectionEvents {
    phase: Mutex<Phase>,
}

impl Default for ConnectionEvents {
    fn default() -> Self {
        ConnectionEvents {
            phase: Mutex::new(Phase::Unconnected),
        }
    }
}

impl ConnectionEvents {
    fn lock(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The phase now.
    pub(crate) fn phase(&self) -> Phase {
        *self.lock()
    }

    /// Moves from `from` to `to` and queues the step's event with `report`, both under the
    /// lock; false (nothing queued) from any other phase.
    fn step(&self, from: Phase, to: Phase, report: impl FnOnce()) -> bool {
        let mut phase = self.lock();
        if *phase != from {
            return false;
        }
        *phase = to;
        // The model's broken variant: the event queued after the lock is released, where a
        // later step's event (or a destroy) may come first.
        #[cfg(loom_broken = "cm_report_after_unlock")]
        drop(phase);
        report();
        true
    }

    /// The connection is made: ESTABLISHED, queued by `report`. False when the identifier was
    /// destroyed (or is connected already): nothing is queued.
    pub(crate) fn establish(&self, report: impl FnOnce()) -> bool {
        self.step(Phase::Unconnected, Phase::Established, report)
    }

    /// The connection ended: DISCONNECTED, queued by `report` the first time only. False when
    /// not established, already reported or destroyed.
    pub(crate) fn disconnect(&self, report: impl FnOnce()) -> bool {
        self.step(Phase::Established, Phase::Disconnected, report)
    }

    /// A connection attempt failed (REJECTED, UNREACHABLE, ...): queued by `report` unless the
    /// identifier was destroyed or connected meanwhile.
    pub(crate) fn fail(&self, report: impl FnOnce()) -> bool {
        self.step(Phase::Unconnected, Phase::Unconnected, report)
    }

    /// The application destroyed the identifier: once this returns, nothing more is queued.
    pub(crate) fn destroy(&self) {
        *self.lock() = Phase::Destroyed;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Each step reports once, in order, and nothing is reported after a destroy.
    #[test]
    fn steps_report_once_in_order_and_not_after_destroy() {
        let ev = ConnectionEvents::default();
        let mut got = Vec::new();
        assert!(!ev.disconnect(|| got.push("disconnected")), "ended unmade");
        assert!(ev.fail(|| got.push("rejected")));
        assert!(ev.establish(|| got.push("established")));
        assert!(!ev.establish(|| got.push("established")));
        assert!(
            !ev.fail(|| got.push("rejected")),
            "a made connection failed"
        );
        assert!(ev.disconnect(|| got.push("disconnected")));
        assert!(!ev.disconnect(|| got.push("disconnected")), "ended twice");
        assert_eq!(got, ["rejected", "established", "disconnected"]);
        let gone = ConnectionEvents::default();
        gone.destroy();
        assert!(!gone.establish(|| got.push("late")));
        assert!(!gone.fail(|| got.push("late")));
        assert_eq!(gone.phase(), Phase::Destroyed);
        assert_eq!(got.len(), 3);
    }
}
