//! A background thread with a stop flag, stopped and joined when dropped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A named thread running `f(stop)`; `f` returns once `stop` reads true.
#[derive(Debug)]
pub struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Spawns `f` on a thread called `name`.
    pub fn spawn(
        name: &str,
        f: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || f(&s2))?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// True while the worker was not asked to stop.
    pub fn running(stop: &AtomicBool) -> bool {
        !stop.load(Ordering::Acquire)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
