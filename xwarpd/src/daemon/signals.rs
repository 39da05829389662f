//! SIGINT/SIGTERM: the handler only sets a flag; the daemon's main loop polls it and shuts
//! down in order.

use std::sync::atomic::{AtomicI32, Ordering};

static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGNALLED.store(sig, Ordering::SeqCst);
}

/// Installs the handlers for SIGINT and SIGTERM (and ignores SIGPIPE, so a vanished control
/// client cannot kill the daemon).
pub fn install() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // Safety: a zeroed sigaction is valid; the handler is an extern "C" fn that only does an
        // atomic store, which is async-signal-safe; sigemptyset gets a valid mask pointer.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // Safety: setting SIGPIPE to SIG_IGN has no memory-safety preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    Ok(())
}

/// The signal that asked us to stop, if any.
pub fn received() -> Option<i32> {
    match SIGNALLED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
