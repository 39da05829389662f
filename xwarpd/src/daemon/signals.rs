//! SIGINT/SIGTERM: the handler only sets a flag; the daemon's main loop polls it and shuts
//! down in order.
//!
//! The handlers are `signal-hook`'s (an atomic store, async-signal-safe). SIGPIPE needs no
//! handler: the Rust runtime ignores it before `main`, so a vanished control client makes a
//! write fail with `EPIPE` instead of killing the daemon.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

/// The number of the signal that asked us to stop; 0 while none has.
static SIGNALLED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

fn signalled() -> &'static Arc<AtomicUsize> {
    SIGNALLED.get_or_init(|| Arc::new(AtomicUsize::new(0)))
}

/// Installs the handlers for SIGINT and SIGTERM.
pub fn install() -> std::io::Result<()> {
    for sig in [SIGINT, SIGTERM] {
        // Signal numbers are small and positive: the cast is lossless.
        signal_hook::flag::register_usize(sig, signalled().clone(), sig as usize)?;
    }
    Ok(())
}

/// The signal that asked us to stop, if any.
pub fn received() -> Option<i32> {
    match signalled().load(Ordering::SeqCst) {
        0 => None,
        s => i32::try_from(s).ok(),
    }
}
