//! The work requests of one queue pair in flight: ddp carries an id of ours in each, and the
//! completion gets the caller's id back, is held back when the request was unsignaled and
//! succeeded, and frees the request's gather region ([`crate::sgl`]).
//!
//! Send queue completions come in posting order (RFC 5040 §5.3 and ddp's send queue), so a
//! signaled completion reported after unsignaled ones implies those are done.

use std::sync::Mutex;

use endpoint::FastMap;

use ddp::{RegionHandle, WcStatus, WorkCompletion};

use crate::ProtectionDomain;

/// What a request in flight needs at its completion.
#[derive(Debug, Clone, Copy)]
struct Entry {
    wr_id: u64,
    report_success: bool,
    /// The gather region to release at completion, for a scatter-gather list.
    gather: Option<RegionHandle>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    live: FastMap<u64, Entry>,
}

/// A queue pair's requests in flight.
#[derive(Debug)]
pub(crate) struct WorkTracker {
    pd: ProtectionDomain,
    table: Mutex<Table>,
}

impl WorkTracker {
    pub(crate) fn new(pd: ProtectionDomain) -> Self {
        WorkTracker {
            pd,
            table: Mutex::default(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a request about to be posted, with its gather region if it has one; returns
    /// the id ddp carries.
    pub(crate) fn start(
        &self,
        wr_id: u64,
        report_success: bool,
        gather: Option<RegionHandle>,
    ) -> u64 {
        let mut t = self.table();
        let id = t.next;
        t.next = t.next.wrapping_add(1);
        t.live.insert(
            id,
            Entry {
                wr_id,
                report_success,
                gather,
            },
        );
        id
    }

    /// Forgets requests that were never posted and frees their gather regions.
    pub(crate) fn cancel(&self, ids: impl IntoIterator<Item = u64>) {
        let gone: Vec<Entry> = {
            let mut t = self.table();
            ids.into_iter().filter_map(|i| t.live.remove(&i)).collect()
        };
        let mut st = self.pd.inner.lock();
        for g in gone.iter().filter_map(|e| e.gather) {
            crate::sgl::release(&mut st, g);
        }
    }

    /// ddp's completion of one of our requests, as the caller sees it: `None` when it is held
    /// back (an unsignaled request that succeeded). Takes the domain's lock to free a gather
    /// region: call without holding it.
    pub(crate) fn complete(&self, mut wc: WorkCompletion) -> Option<WorkCompletion> {
        let Some(e) = self.table().live.remove(&wc.wr_id) else {
            return Some(wc);
        };
        if let Some(g) = e.gather {
            crate::sgl::release(&mut self.pd.inner.lock(), g);
        }
        wc.wr_id = e.wr_id;
        (e.report_success || wc.status != WcStatus::Success).then_some(wc)
    }

    /// Requests in flight.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.table().live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pd::StagSeeds;
    use ddp::WcOpcode;

    fn wc(id: u64, status: WcStatus) -> WorkCompletion {
        WorkCompletion {
            wr_id: id,
            opcode: WcOpcode::Write,
            status,
            byte_len: 1,
            invalidated: None,
            solicited: false,
        }
    }

    /// Unsignaled successes are held back, failures never are, and every completion gets the
    /// caller's id back and leaves nothing in flight.
    #[test]
    fn unsignaled_success_is_held_back_and_ids_map_back() {
        let pd = ProtectionDomain::new(1, &StagSeeds::fixed_for_tests(1));
        let t = WorkTracker::new(pd);
        let r = Some(RegionHandle::new(1, 1));
        let quiet = t.start(70, false, r);
        let failing = t.start(71, false, r);
        let loud = t.start(72, true, r);
        assert_eq!(t.in_flight(), 3);
        assert!(t.complete(wc(quiet, WcStatus::Success)).is_none());
        let f = t.complete(wc(failing, WcStatus::Flushed)).unwrap();
        assert_eq!((f.wr_id, f.status), (71, WcStatus::Flushed));
        assert_eq!(t.complete(wc(loud, WcStatus::Success)).unwrap().wr_id, 72);
        assert_eq!(t.in_flight(), 0);
        let never = t.start(73, true, r);
        t.cancel([never]);
        assert_eq!(t.in_flight(), 0);
    }
}
