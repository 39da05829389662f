//! Inline kernel-transport devices: no driver thread per connection. The application's own
//! calls run each connection's driver in steps: posting work frames and writes it at once,
//! polling or waiting on a completion queue reads what arrived (a non-blocking `read` per
//! connection stands for the wait) and places it. No thread hand-off lies between the
//! application and the socket, so a one-way trip costs what kernel TCP costs, plus the stack.
//!
//! Something must poll: a connection makes progress (timers, the close, retransmitted MPA
//! output) only while the application polls or waits on one of the device's completion queues.

use std::net::TcpStream;
use std::sync::{Arc, Mutex, TryLockError, Weak};
use std::time::{Duration, Instant};

use super::connection_driver::{Driver, DriverOptions, EstablishedTx};
use super::waker::wait_readable;
use crate::counters::DeviceCounters;
use crate::cq::Drive;
use crate::queue_pair::QpShared;

/// One connection run inline: its driver, until the connection is done.
#[derive(Debug)]
pub(crate) struct InlineConn {
    driver: Mutex<Option<Driver>>,
    fd: std::os::fd::RawFd,
}

impl InlineConn {
    /// One round of the connection ([`Driver::step`]; `read` first takes what arrived),
    /// unless another thread is running it right now. False once the connection is done (its
    /// driver finished).
    pub(crate) fn step(&self, read: bool) -> bool {
        let mut g = match self.driver.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => return true,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        let Some(d) = g.as_mut() else {
            return false;
        };
        match d.step(read) {
            Ok(true) => true,
            r => {
                if let Some(d) = g.take() {
                    d.finish(r.map(|_| ()));
                }
                false
            }
        }
    }

    /// Output only (after a post): frames and writes what is queued, without the read.
    pub(crate) fn transmit(&self) {
        self.step(false);
    }

    /// Steps the connection until `done` says so or `timeout` passes, sleeping in poll(2) on
    /// the socket (at most `nap`) between steps: for a caller that waits on this connection
    /// alone (MPA startup).
    pub(crate) fn drive_until<T>(
        &self,
        timeout: Duration,
        nap: Duration,
        mut done: impl FnMut() -> Option<T>,
    ) -> Option<T> {
        let deadline = Instant::now() + timeout;
        loop {
            let alive = self.step(true);
            if let Some(x) = done() {
                return Some(x);
            }
            if !alive || Instant::now() >= deadline {
                return done();
            }
            let _ = wait_readable(self.fd, nap.as_millis().max(1) as i32);
        }
    }
}

/// The connections of an inline device, run by its completion queues' polls and waits.
#[derive(Debug, Default)]
pub(crate) struct InlineDrivers {
    conns: Mutex<Vec<Arc<InlineConn>>>,
}

impl InlineDrivers {
    /// Starts running `sock` for `shared` inline; the queue pair's posts and close step it
    /// from now on. A socket that cannot be made non-blocking ends the connection at once
    /// (its error on the queue pair).
    pub(crate) fn start(
        &self,
        sock: TcpStream,
        shared: &Arc<QpShared>,
        counters: Arc<DeviceCounters>,
        opts: DriverOptions,
        established: Option<EstablishedTx>,
    ) -> Arc<InlineConn> {
        let mut d = Driver::new(sock, shared.clone(), counters, opts, established);
        let fd = d.raw_fd();
        let conn = Arc::new(InlineConn {
            driver: Mutex::new(None),
            fd,
        });
        shared.set_inline(Arc::downgrade(&conn));
        match d.start() {
            Ok(()) => {
                *conn.driver.lock().unwrap_or_else(|p| p.into_inner()) = Some(d);
                self.lock().push(conn.clone());
            }
            Err(e) => d.finish(Err(e)),
        }
        conn
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<InlineConn>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drive for InlineDrivers {
    /// One step of every connection; finished ones are dropped from the set.
    fn drive(&self, _lanes: u64) {
        self.lock().retain(|c| c.step(true));
    }
}

impl Drop for InlineDrivers {
    /// The device is gone: nothing will step its connections again. Each closes now (FIN;
    /// what ddp had not framed completes flushed).
    fn drop(&mut self) {
        for c in self.lock().drain(..) {
            let d = c.driver.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(d) = d {
                d.finish(Ok(()));
            }
        }
    }
}

/// A weak handle on a queue pair's inline connection, as [`QpShared`] keeps it.
pub(crate) type InlineHandle = Weak<InlineConn>;
