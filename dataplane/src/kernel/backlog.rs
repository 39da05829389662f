//! The kernel transport listener's backlog: connections accepted whose MPA startup has not
//! finished (the Request being read, or waiting for the application's accept), shared fairly
//! among sources by [`FairBacklog`]. A connection refused a place is reset at once; one evicted
//! to make room is reset through a handle on its socket, which wakes the thread reading its
//! Request.

use std::collections::HashMap;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::{Arc, Mutex};

use endpoint::{BacklogRefusal, FairBacklog, PendingSlot};

use super::connection_driver::reset_on_close;
use crate::counters::DeviceCounters;
use crate::ConnectionConfig;

/// A listener's pending connections.
#[derive(Debug)]
pub(crate) struct KernelBacklog(Arc<Mutex<Table>>);

#[derive(Debug)]
struct Table {
    backlog: FairBacklog,
    /// A second handle on each pending socket, by the id given to the backlog.
    sockets: HashMap<u64, TcpStream>,
    next_id: u64,
}

/// A connection's place in the backlog, held while its MPA startup runs; dropping it leaves.
#[derive(Debug)]
pub(crate) struct PendingPlace {
    table: Arc<Mutex<Table>>,
    slot: PendingSlot,
    id: u64,
}

impl KernelBacklog {
    /// The backlog `config` asks for.
    pub(crate) fn new(config: &ConnectionConfig) -> Self {
        KernelBacklog(Arc::new(Mutex::new(Table {
            backlog: FairBacklog::new(config.backlog, config.backlog_share),
            sockets: HashMap::new(),
            next_id: 0,
        })))
    }

    /// A place for `stream` from `peer`, making room by resetting the connection the backlog
    /// evicts; `None`: `stream` is reset (counted).
    pub(crate) fn admit(
        &self,
        stream: &TcpStream,
        peer: IpAddr,
        counters: &DeviceCounters,
    ) -> Option<PendingPlace> {
        let mut t = lock(&self.0);
        let id = t.next_id;
        t.next_id += 1;
        match t.backlog.admit(id, peer) {
            Err(why) => {
                DeviceCounters::inc(&counters.backlog_refused);
                if why == BacklogRefusal::SourceShare {
                    DeviceCounters::inc(&counters.backlog_share_refused);
                }
                reset_on_close(stream);
                None
            }
            Ok(a) => {
                if let Some(victim) = a.evicted.and_then(|v| t.sockets.remove(&v)) {
                    DeviceCounters::inc(&counters.backlog_evictions);
                    reset_now(&victim);
                }
                if let Ok(handle) = stream.try_clone() {
                    t.sockets.insert(id, handle);
                }
                Some(PendingPlace {
                    table: self.0.clone(),
                    slot: a.slot,
                    id,
                })
            }
        }
    }

    /// Pending connections held.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.0).backlog.len()
    }
}

impl Drop for PendingPlace {
    fn drop(&mut self) {
        let mut t = lock(&self.table);
        t.backlog.remove(self.slot);
        t.sockets.remove(&self.id);
    }
}

fn lock(t: &Mutex<Table>) -> std::sync::MutexGuard<'_, Table> {
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// Resets an evicted connection: closing its last handle sends RST, and shutting its receive
/// side wakes the thread blocked reading its Request (end of stream), which then closes it.
/// Nothing is sent before the RST (a FIN first would leave the peer reading end of stream).
fn reset_now(s: &TcpStream) {
    reset_on_close(s);
    let _ = s.shutdown(Shutdown::Read);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// Over loopback: a source at its share is reset at once; in a full backlog the oldest
    /// connection of the source holding the most is reset (its reader wakes), and leaving
    /// frees a place.
    #[test]
    fn refusals_and_evictions_reset_the_sockets_and_places_are_given_back() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let config = ConnectionConfig::default().with_backlog(
            3,
            endpoint::SourceShare {
                per_source: 2,
                ..Default::default()
            },
        );
        let b = KernelBacklog::new(&config);
        let counters = DeviceCounters::default();
        let pair = || {
            let c = TcpStream::connect(addr).unwrap();
            // (A broken expectation fails rather than hangs.)
            c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let (s, _) = l.accept().unwrap();
            (c, s)
        };
        let one: std::net::IpAddr = "198.18.0.3".parse().unwrap();
        let two: std::net::IpAddr = "198.18.0.4".parse().unwrap();
        let (mut c1, s1) = pair();
        let (mut c2, s2) = pair();
        let (mut c3, s3) = pair();
        let p1 = b.admit(&s1, one, &counters).unwrap();
        let p2 = b.admit(&s2, one, &counters).unwrap();
        assert!(b.admit(&s3, one, &counters).is_none(), "at its share");
        drop(s3);
        let mut buf = [0u8; 1];
        let reset = std::io::ErrorKind::ConnectionReset;
        assert_eq!(
            c3.read(&mut buf).unwrap_err().kind(),
            reset,
            "the refused one was reset"
        );
        let (_c4, s4) = pair();
        let _p4 = b.admit(&s4, two, &counters).unwrap();
        // Full (3): a third source evicts the oldest of `one`'s two.
        let (_c5, s5) = pair();
        let _p5 = b.admit(&s5, "198.18.0.5".parse().unwrap(), &counters);
        assert!(_p5.is_some());
        let snap = counters.snapshot();
        assert_eq!(
            (
                snap.backlog_refused,
                snap.backlog_share_refused,
                snap.backlog_evictions
            ),
            (1, 1, 1)
        );
        // The evicted socket's reader wakes (end of stream) and its close resets the peer.
        let mut r = s1.try_clone().unwrap();
        assert_eq!(r.read(&mut buf).unwrap(), 0);
        drop((r, s1, p1));
        assert_eq!(
            c1.read(&mut buf).unwrap_err().kind(),
            reset,
            "the evicted one's peer sees a reset"
        );
        assert_eq!(b.len(), 3, "the evicted place was gone already");
        drop(p2);
        assert_eq!(b.len(), 2);
        c2.set_read_timeout(Some(std::time::Duration::from_millis(50)))
            .unwrap();
        assert!(
            matches!(
                c2.read(&mut buf).unwrap_err().kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "a connection that left normally is not reset"
        );
        drop(s2);
    }
}
