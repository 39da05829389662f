//! SIGINT/SIGTERM: the handler only sets a flag; the daemon's main loop polls it and shuts
//! down in order. SIGHUP sets another flag: the main loop reloads the configuration.
//!
//! The handlers are `signal-hook`'s (an atomic store, async-signal-safe). SIGPIPE needs no
//! handler: the Rust runtime ignores it before `main`, so a vanished control client makes a
//! write fail with `EPIPE` instead of killing the daemon.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The number of the signal that asked us to stop; 0 while none has.
static SIGNALLED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// Set by SIGHUP, cleared by [`take_hangup`].
static HANGUP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

fn signalled() -> &'static Arc<AtomicUsize> {
    SIGNALLED.get_or_init(|| Arc::new(AtomicUsize::new(0)))
}

fn hangup() -> &'static Arc<AtomicBool> {
    HANGUP.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP.
pub fn install() -> std::io::Result<()> {
    for sig in [SIGINT, SIGTERM] {
        // Signal numbers are small and positive: the cast is lossless.
        signal_hook::flag::register_usize(sig, signalled().clone(), sig as usize)?;
    }
    signal_hook::flag::register(SIGHUP, hangup().clone())?;
    Ok(())
}

/// True once after each SIGHUP (several before the call count as one).
pub fn take_hangup() -> bool {
    hangup().swap(false, Ordering::SeqCst)
}

/// The signal that asked us to stop, if any.
pub fn received() -> Option<i32> {
    match signalled().load(Ordering::SeqCst) {
        0 => None,
        s => i32::try_from(s).ok(),
    }
}
