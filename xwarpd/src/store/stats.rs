//! Counters of the store service and of each of its connections (relaxed atomics).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rpcrdma::storage::StorageCall;

/// Counters of one connection.
#[derive(Debug, Default)]
pub struct ConnStats {
    /// The peer's address.
    pub peer: String,
    /// Still connected.
    pub connected: AtomicBool,
    /// READ calls.
    pub reads: AtomicU64,
    /// WRITE calls.
    pub writes: AtomicU64,
    /// COMMIT calls.
    pub commits: AtomicU64,
    /// GETATTR and NULL calls.
    pub other_calls: AtomicU64,
    /// Bytes returned by READ.
    pub bytes_read: AtomicU64,
    /// Bytes stored by WRITE.
    pub bytes_written: AtomicU64,
    /// Calls answered with a non-OK status.
    pub errors: AtomicU64,
    /// Messages refused at the transport or RPC level (RDMA_ERROR, RPC rejections, drops).
    pub refused: AtomicU64,
}

fn inc(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

impl ConnStats {
    pub(crate) fn count_call(&self, call: &StorageCall<'_>) {
        inc(
            match call {
                StorageCall::Read(_) => &self.reads,
                StorageCall::Write(_) => &self.writes,
                StorageCall::Commit(_) => &self.commits,
                StorageCall::Getattr | StorageCall::Null => &self.other_calls,
            },
            1,
        );
    }
    pub(crate) fn count_commit(&self) {}
    pub(crate) fn count_error(&self) {
        inc(&self.errors, 1)
    }
    pub(crate) fn count_refused(&self) {
        inc(&self.refused, 1)
    }
    pub(crate) fn add_read(&self, n: u64) {
        inc(&self.bytes_read, n)
    }
    pub(crate) fn add_written(&self, n: u64) {
        inc(&self.bytes_written, n)
    }
}

/// A point-in-time copy of one connection's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnSnapshot {
    /// The peer's address.
    pub peer: String,
    /// Still connected.
    pub connected: bool,
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
    /// Messages refused (RDMA_ERROR, RPC rejections, drops).
    pub refused: u64,
}

/// Counters of a store service: every connection it ever had (closed ones keep their totals).
#[derive(Debug, Default)]
pub struct StoreStats {
    conns: Mutex<Vec<Arc<ConnStats>>>,
}

impl StoreStats {
    pub(crate) fn add_conn(&self, peer: String) -> Arc<ConnStats> {
        let c = Arc::new(ConnStats {
            peer,
            connected: AtomicBool::new(true),
            ..ConnStats::default()
        });
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(c.clone());
        c
    }

    /// One snapshot per connection, oldest first.
    pub fn snapshot(&self) -> Vec<ConnSnapshot> {
        let g = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        g.iter()
            .map(|c| {
                let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
                ConnSnapshot {
                    peer: c.peer.clone(),
                    connected: c.connected.load(Ordering::Relaxed),
                    reads: l(&c.reads),
                    writes: l(&c.writes),
                    commits: l(&c.commits),
                    other_calls: l(&c.other_calls),
                    bytes_read: l(&c.bytes_read),
                    bytes_written: l(&c.bytes_written),
                    errors: l(&c.errors),
                    refused: l(&c.refused),
                }
            })
            .collect()
    }
}
