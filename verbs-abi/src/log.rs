//! One-line messages to standard error, each kind at most once per process: what the library
//! refused and why (an unsupported verb, a transport that failed to open). Programs keep
//! running; the errno or completion status carries the failure.

use std::collections::HashSet;
use std::fmt::Display;
use std::sync::Mutex;

static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Prints `xwarp: <msg>` once per distinct `key`.
pub(crate) fn once(key: impl Display, msg: impl Display) {
    let key = key.to_string();
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if said.get_or_insert_with(HashSet::new).insert(key) {
        eprintln!("xwarp: {msg}");
    }
}

/// Prints `xwarp: <msg>` (for failures that are each worth a line).
pub(crate) fn always(msg: impl Display) {
    eprintln!("xwarp: {msg}");
}

/// True when `XWARP_VERBS_DEBUG` is set: [`debug`] lines are printed.
pub(crate) fn debugging() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("XWARP_VERBS_DEBUG").is_some())
}

/// Prints `xwarp: <msg>` when `XWARP_VERBS_DEBUG` is set (connection events, queue pair
/// state changes).
pub(crate) fn debug(msg: impl Display) {
    if debugging() {
        eprintln!("xwarp: {msg}");
    }
}

/// Says once that `what` is not supported, and why or what to use instead.
pub(crate) fn unsupported(what: &str, why: &str) {
    once(what, format_args!("{what} is not supported: {why}"));
}
