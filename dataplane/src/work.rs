//! The work requests of one queue pair in flight: ddp carries an id of ours in each, and the
//! completion gets the caller's id back, is held back when the request was unsignaled and
//! succeeded, and frees the request's gather region ([`crate::sgl`]).
//!
//! Send queue completions come in posting order (RFC 5040 §5.3 and ddp's send queue), so a
//! signaled completion reported after unsignaled ones implies those are done.

use std::collections::VecDeque;

use crate::sync::{Mutex, MutexGuard};

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

/// Ids of receive requests carry this bit; send-queue ids do not.
const RECV: u64 = 1 << 63;

/// One work queue's requests in flight, in posting order: the id of `slots[i]` is
/// `base + i`. Completions come in posting order on each queue (receives are consumed in the
/// order posted, the send queue completes in order), so a completion is the front entry and
/// costs no hashing; one out of order leaves a hole until the entries before it complete. The
/// length is the distance from the oldest request in flight to the newest, within the
/// endpoint's cap on outstanding work.
#[derive(Debug, Default)]
struct Ring {
    base: u64,
    slots: VecDeque<Option<Entry>>,
}

impl Ring {
    fn push(&mut self, e: Entry) -> u64 {
        self.slots.push_back(Some(e));
        self.base.wrapping_add(self.slots.len() as u64 - 1)
    }

    fn take(&mut self, id: u64) -> Option<Entry> {
        let i = usize::try_from(id.wrapping_sub(self.base)).ok()?;
        let e = self.slots.get_mut(i)?.take()?;
        while self.slots.front().is_some_and(Option::is_none) {
            self.slots.pop_front();
            self.base = self.base.wrapping_add(1);
        }
        Some(e)
    }

    #[cfg(test)]
    fn live(&self) -> usize {
        self.slots.iter().flatten().count()
    }
}

#[derive(Debug, Default)]
struct Table {
    send: Ring,
    recv: Ring,
}

impl Table {
    fn take(&mut self, id: u64) -> Option<Entry> {
        if id & RECV != 0 {
            self.recv.take(id & !RECV)
        } else {
            self.send.take(id)
        }
    }
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

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a request about to be posted on the receive queue (`recv`) or the send queue,
    /// with its gather region if it has one; returns the id ddp carries.
    pub(crate) fn start(
        &self,
        wr_id: u64,
        recv: bool,
        report_success: bool,
        gather: Option<RegionHandle>,
    ) -> u64 {
        let e = Entry {
            wr_id,
            report_success,
            gather,
        };
        let mut t = self.table();
        if recv {
            // Ids stay below 2^63 on each queue (2^63 requests of one queue pair).
            t.recv.push(e) | RECV
        } else {
            t.send.push(e) & !RECV
        }
    }

    /// Forgets requests that were never posted and frees their gather regions.
    pub(crate) fn cancel(&self, ids: impl IntoIterator<Item = u64>) {
        let gone: Vec<Entry> = {
            let mut t = self.table();
            ids.into_iter().filter_map(|i| t.take(i)).collect()
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
        let Some(e) = self.table().take(wc.wr_id) else {
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
        let t = self.table();
        t.send.live() + t.recv.live()
    }

    /// Slots held (in flight, and holes behind the oldest).
    #[cfg(test)]
    fn slots(&self) -> usize {
        let t = self.table();
        t.send.slots.len() + t.recv.slots.len()
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
        let quiet = t.start(70, false, false, r);
        let failing = t.start(71, false, false, r);
        let loud = t.start(72, false, true, r);
        assert_eq!(t.in_flight(), 3);
        assert!(t.complete(wc(quiet, WcStatus::Success)).is_none());
        let f = t.complete(wc(failing, WcStatus::Flushed)).unwrap();
        assert_eq!((f.wr_id, f.status), (71, WcStatus::Flushed));
        assert_eq!(t.complete(wc(loud, WcStatus::Success)).unwrap().wr_id, 72);
        assert_eq!(t.in_flight(), 0);
        let never = t.start(73, false, true, r);
        t.cancel([never]);
        assert_eq!(t.in_flight(), 0);
        assert_eq!(t.slots(), 0);
    }

    /// Receives and sends are tracked apart: a receive waiting long (none arrives) does not
    /// hold back the send queue's slots, and a completion out of posting order leaves a hole
    /// that closes when the older ones complete.
    #[test]
    fn each_queue_frees_its_slots_in_order_and_survives_disorder() {
        let pd = ProtectionDomain::new(1, &StagSeeds::fixed_for_tests(1));
        let t = WorkTracker::new(pd);
        let waiting = t.start(1, true, true, None);
        for i in 0..1000 {
            let id = t.start(100 + i, false, true, None);
            assert_eq!(
                t.complete(wc(id, WcStatus::Success)).unwrap().wr_id,
                100 + i
            );
        }
        // One receive in flight; the thousand sends left nothing behind.
        assert_eq!((t.in_flight(), t.slots()), (1, 1));
        let ids: Vec<u64> = (0..4)
            .map(|i| t.start(200 + i, false, true, None))
            .collect();
        assert_eq!(
            t.complete(wc(ids[2], WcStatus::Success)).unwrap().wr_id,
            202
        );
        assert_eq!(
            t.complete(wc(ids[0], WcStatus::Success)).unwrap().wr_id,
            200
        );
        // ids[1] still out: its slot and the hole after it stay.
        assert_eq!((t.in_flight(), t.slots()), (3, 4));
        assert_eq!(
            t.complete(wc(ids[1], WcStatus::Success)).unwrap().wr_id,
            201
        );
        assert_eq!(
            t.complete(wc(ids[3], WcStatus::Success)).unwrap().wr_id,
            203
        );
        assert_eq!(t.complete(wc(waiting, WcStatus::Success)).unwrap().wr_id, 1);
        assert_eq!((t.in_flight(), t.slots()), (0, 0));
        // An id that is not ours (or completed already) passes through untouched.
        assert_eq!(
            t.complete(wc(ids[0], WcStatus::Success)).unwrap().wr_id,
            ids[0]
        );
        assert_eq!(
            t.complete(wc(waiting, WcStatus::Flushed)).unwrap().wr_id,
            waiting
        );
    }
}
