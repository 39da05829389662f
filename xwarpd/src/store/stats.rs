//! Counters of the store service and of each open connection (relaxed atomics).
//!
//! Per-connection counters live only while the connection does: when it closes (its
//! [`ConnGuard`] drops) they are folded into the service's totals and the connection leaves the
//! list, so the list, and the metric series drawn from it, stay bounded by the connection cap.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rpcrdma::storage::StorageCall;

use super::admission::Refusal;

/// Call counters, of one connection or of the whole service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    /// READ calls.
    pub reads: u64,
    /// WRITE calls.
    pub writes: u64,
    /// COMMIT calls.
    pub commits: u64,
    /// GETATTR and NULL calls.
    pub other_calls: u64,
    /// Bytes returned by READ.
    pub bytes_read: u64,
    /// Bytes stored by WRITE.
    pub bytes_written: u64,
    /// Calls answered with a non-OK status.
    pub errors: u64,
    /// Messages refused at the transport or RPC level (RDMA_ERROR, RPC rejections).
    pub refused: u64,
    /// Long calls (RDMA_NOMSG, RDMA-Read from their position-0 chunk).
    pub long_calls: u64,
    /// Long replies (into a reply chunk, or as a position-0 read chunk).
    pub long_replies: u64,
}

impl std::ops::AddAssign for CallCounts {
    fn add_assign(&mut self, o: Self) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.commits += o.commits;
        self.other_calls += o.other_calls;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.errors += o.errors;
        self.refused += o.refused;
        self.long_calls += o.long_calls;
        self.long_replies += o.long_replies;
    }
}

/// [`CallCounts`] as atomics.
#[derive(Debug, Default)]
struct AtomicCounts {
    reads: AtomicU64,
    writes: AtomicU64,
    commits: AtomicU64,
    other_calls: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
    errors: AtomicU64,
    refused: AtomicU64,
    long_calls: AtomicU64,
    long_replies: AtomicU64,
}

fn inc(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

impl AtomicCounts {
    fn load(&self) -> CallCounts {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CallCounts {
            reads: l(&self.reads),
            writes: l(&self.writes),
            commits: l(&self.commits),
            other_calls: l(&self.other_calls),
            bytes_read: l(&self.bytes_read),
            bytes_written: l(&self.bytes_written),
            errors: l(&self.errors),
            refused: l(&self.refused),
            long_calls: l(&self.long_calls),
            long_replies: l(&self.long_replies),
        }
    }

    fn add(&self, c: CallCounts) {
        inc(&self.reads, c.reads);
        inc(&self.writes, c.writes);
        inc(&self.commits, c.commits);
        inc(&self.other_calls, c.other_calls);
        inc(&self.bytes_read, c.bytes_read);
        inc(&self.bytes_written, c.bytes_written);
        inc(&self.errors, c.errors);
        inc(&self.refused, c.refused);
        inc(&self.long_calls, c.long_calls);
        inc(&self.long_replies, c.long_replies);
    }
}

/// Counters of one open connection.
#[derive(Debug)]
pub struct ConnStats {
    id: u64,
    peer: String,
    counts: AtomicCounts,
}

impl ConnStats {
    pub(crate) fn count_call(&self, call: &StorageCall<'_>) {
        let c = &self.counts;
        inc(
            match call {
                StorageCall::Read(_) => &c.reads,
                StorageCall::Write(_) => &c.writes,
                StorageCall::Commit(_) => &c.commits,
                StorageCall::Getattr | StorageCall::Null => &c.other_calls,
            },
            1,
        );
    }
    pub(crate) fn count_error(&self) {
        inc(&self.counts.errors, 1)
    }
    pub(crate) fn count_refused(&self) {
        inc(&self.counts.refused, 1)
    }
    pub(crate) fn count_long_call(&self) {
        inc(&self.counts.long_calls, 1)
    }
    pub(crate) fn count_long_reply(&self) {
        inc(&self.counts.long_replies, 1)
    }
    pub(crate) fn add_read(&self, n: u64) {
        inc(&self.counts.bytes_read, n)
    }
    pub(crate) fn add_written(&self, n: u64) {
        inc(&self.counts.bytes_written, n)
    }
}

/// A point-in-time copy of one open connection's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnSnapshot {
    /// The connection's number (counts up from 0 over the service's life; never reused).
    pub id: u64,
    /// The peer's address.
    pub peer: String,
    /// Its calls.
    pub counts: CallCounts,
}

/// A point-in-time copy of the service's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreSnapshot {
    /// Calls of every connection the service had, open or closed.
    pub totals: CallCounts,
    /// The open connections, oldest first (at most the connection cap).
    pub open: Vec<ConnSnapshot>,
    /// Connections accepted.
    pub accepted: u64,
    /// Connections refused: the peer is in no allowed network.
    pub refused_not_allowed: u64,
    /// Connections refused: the server was at its connection cap, none of them silent.
    pub refused_full: u64,
    /// Connections refused: their source held its share of the connections.
    pub refused_source_share: u64,
    /// Silent connections closed to give their slot to a new client (the server was full).
    pub evicted: u64,
    /// Connections closed for having had no call within the idle timeout.
    pub idle_closed: u64,
}

/// Counters of a store service.
#[derive(Debug, Default)]
pub struct StoreStats {
    open: Mutex<Vec<Arc<ConnStats>>>,
    /// Calls of connections that have closed.
    closed: AtomicCounts,
    accepted: AtomicU64,
    refused_not_allowed: AtomicU64,
    refused_full: AtomicU64,
    refused_source_share: AtomicU64,
    evicted: AtomicU64,
    idle_closed: AtomicU64,
}

/// An open connection's place in [`StoreStats`]; dropping it folds the connection's counters
/// into the totals and removes it from the open list.
#[derive(Debug)]
pub(crate) struct ConnGuard {
    stats: Arc<StoreStats>,
    conn: Arc<ConnStats>,
}

impl std::ops::Deref for ConnGuard {
    type Target = ConnStats;
    fn deref(&self) -> &ConnStats {
        &self.conn
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut open = self.stats.lock_open();
        open.retain(|c| !Arc::ptr_eq(c, &self.conn));
        // Under the lock, so a snapshot sees the counts either in the list or in the totals.
        self.stats.closed.add(self.conn.counts.load());
    }
}

impl StoreStats {
    fn lock_open(&self) -> std::sync::MutexGuard<'_, Vec<Arc<ConnStats>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an open connection (counted as accepted).
    pub(crate) fn add_conn(self: &Arc<Self>, peer: String) -> ConnGuard {
        let mut open = self.lock_open();
        let conn = Arc::new(ConnStats {
            id: self.accepted.fetch_add(1, Ordering::Relaxed),
            peer,
            counts: AtomicCounts::default(),
        });
        open.push(conn.clone());
        ConnGuard {
            stats: self.clone(),
            conn,
        }
    }

    pub(crate) fn count_refusal(&self, why: Refusal) {
        inc(
            match why {
                Refusal::NotAllowed => &self.refused_not_allowed,
                Refusal::Full => &self.refused_full,
                Refusal::SourceShare => &self.refused_source_share,
            },
            1,
        );
    }

    pub(crate) fn count_evicted(&self) {
        inc(&self.evicted, 1)
    }

    pub(crate) fn count_idle_closed(&self) {
        inc(&self.idle_closed, 1)
    }

    /// The counters now.
    pub fn snapshot(&self) -> StoreSnapshot {
        let open = self.lock_open();
        let mut totals = self.closed.load();
        let open: Vec<ConnSnapshot> = open
            .iter()
            .map(|c| {
                let counts = c.counts.load();
                totals += counts;
                ConnSnapshot {
                    id: c.id,
                    peer: c.peer.clone(),
                    counts,
                }
            })
            .collect();
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StoreSnapshot {
            totals,
            open,
            accepted: l(&self.accepted),
            refused_not_allowed: l(&self.refused_not_allowed),
            refused_full: l(&self.refused_full),
            refused_source_share: l(&self.refused_source_share),
            evicted: l(&self.evicted),
            idle_closed: l(&self.idle_closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_connection_leaves_the_list_and_its_counts_stay_in_the_totals() {
        let s = Arc::new(StoreStats::default());
        let a = s.add_conn("198.18.0.2:1".into());
        let b = s.add_conn("198.18.0.3:1".into());
        a.add_read(10);
        a.count_error();
        b.add_written(5);
        let snap = s.snapshot();
        assert_eq!(snap.open.len(), 2);
        assert_eq!((snap.open[0].id, snap.open[1].id), (0, 1));
        assert_eq!(snap.totals.bytes_read, 10);
        drop(a);
        let snap = s.snapshot();
        assert_eq!(snap.open.len(), 1, "the closed connection's series is gone");
        assert_eq!(snap.open[0].peer, "198.18.0.3:1");
        assert_eq!(
            (
                snap.totals.bytes_read,
                snap.totals.errors,
                snap.totals.bytes_written
            ),
            (10, 1, 5)
        );
        drop(b);
        // Many connections come and go: the list stays empty, the totals keep counting.
        for _ in 0..1000 {
            s.add_conn("198.18.0.4:1".into()).add_read(1);
        }
        let snap = s.snapshot();
        assert!(snap.open.is_empty());
        assert_eq!((snap.accepted, snap.totals.bytes_read), (1002, 1010));
    }
}
