//! The threads of a store service, whatever its transport: the acceptor, stopped through a
//! flag and joined, and one thread per admitted connection, all joined when the acceptor ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A service's acceptor thread and its stop flag.
#[derive(Debug)]
pub(crate) struct Acceptor {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Acceptor {
    /// Starts `run` as thread `name`; it should return soon after `stop` is set.
    pub(crate) fn spawn(
        name: &str,
        stop: Arc<AtomicBool>,
        run: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Self> {
        let thread = std::thread::Builder::new().name(name.into()).spawn(run)?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Sets the stop flag and joins the acceptor (which joins its connections).
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

/// The connection threads of one acceptor (at most its connection cap: one per slot).
#[derive(Debug, Default)]
pub(crate) struct ConnThreads(Mutex<Vec<JoinHandle<()>>>);

impl ConnThreads {
    /// Serves a connection on thread `name`; finished threads are forgotten.
    pub(crate) fn spawn(&self, name: &str, serve: impl FnOnce() + Send + 'static) {
        let h = std::thread::Builder::new().name(name.into()).spawn(serve);
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|h| !h.is_finished());
        match h {
            Ok(h) => v.push(h),
            Err(e) => tracing::warn!(error = %e, "cannot start a store connection thread"),
        }
    }

    /// Waits for every connection thread.
    pub(crate) fn join(self) {
        for h in self.0.into_inner().unwrap_or_default() {
            let _ = h.join();
        }
    }
}
