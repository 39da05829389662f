//! Supervision: a panic in any thread of the daemon (an engine, a store or echo connection, a
//! service thread) is fatal. The panic hook logs ONE line naming the thread, the place and the
//! message (no backtrace spew) and records the failure; the main loop sees it, shuts down as on
//! SIGTERM (bounded by [`SHUTDOWN_LIMIT`]) and the process exits with [`EXIT_PANIC`], so the
//! service manager restarts it (`Restart=on-failure` in `deploy/xwarpd.service`). A daemon whose
//! data path died never keeps looking alive. Panics after the first (often its consequences, such
//! as a poisoned lock) are not logged again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// The exit status after a thread panicked (EX_SOFTWARE, sysexits.h).
pub const EXIT_PANIC: u8 = 70;
/// How long the shutdown after a panic may take before the process exits regardless.
pub const SHUTDOWN_LIMIT: Duration = Duration::from_secs(10);

static FIRST: OnceLock<String> = OnceLock::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs the panic hook (once per process).
pub fn install() {
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        let at = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        let line = format!("thread '{name}' panicked{at}: {}", msg.replace('\n', " "));
        if FIRST.set(line.clone()).is_ok() {
            tracing::error!("{line}; stopping xwarpd (exit {EXIT_PANIC})");
        }
    }));
}

/// The first panic's description, once a thread has panicked.
pub fn failure() -> Option<&'static str> {
    FIRST.get().map(String::as_str)
}

/// Ends the process with [`EXIT_PANIC`] if it is still running [`SHUTDOWN_LIMIT`] from now
/// (a shutdown that hangs on what the panic left behind).
pub fn exit_if_shutdown_hangs() {
    let _ = std::thread::Builder::new()
        .name("xwarpd-watchdog".into())
        .spawn(|| {
            std::thread::sleep(SHUTDOWN_LIMIT);
            std::process::exit(i32::from(EXIT_PANIC));
        });
}
