//! SIGHUP: read the configuration again (the same file and flags) and apply what can change
//! while running: the log filter. Every other changed setting is named in a warning (it takes
//! effect at the next start); a configuration that no longer validates is refused with an error
//! and the running one is kept. The service manager hears `RELOADING=1` then `READY=1`.

use sd_notify::NotifyState;

use super::{DaemonConfig, DaemonError};

/// Reads the configuration again.
pub type ReloadFn = Box<dyn Fn() -> Result<DaemonConfig, DaemonError> + Send>;
/// Replaces the log filter.
pub type SetLogFn = Box<dyn Fn(&str) -> Result<(), String> + Send>;

/// How the daemon re-reads and applies its configuration (the binary provides both).
#[derive(Default)]
pub struct Hooks {
    /// Reads the configuration again, as at start.
    pub reload: Option<ReloadFn>,
    /// Replaces the log filter.
    pub set_log: Option<SetLogFn>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("reload", &self.reload.is_some())
            .field("set_log", &self.set_log.is_some())
            .finish()
    }
}

/// The settings that differ between `old` and `new` and cannot change while running.
fn fixed_changes(old: &DaemonConfig, new: &DaemonConfig) -> Vec<&'static str> {
    [
        ("transport", old.transport != new.transport),
        ("xdp", old.xdp != new.xdp),
        ("control_socket", old.control_socket != new.control_socket),
        ("metrics", old.metrics != new.metrics),
        (
            "mpa",
            (old.markers, old.crc, old.segment_per_fpdu)
                != (new.markers, new.crc, new.segment_per_fpdu),
        ),
        ("admission", old.backlog_share != new.backlog_share),
        ("store", old.store != new.store),
        ("listener", old.listeners != new.listeners),
    ]
    .into_iter()
    .filter_map(|(name, changed)| changed.then_some(name))
    .collect()
}

/// Reloads on SIGHUP: `running` is updated with what was applied.
pub(super) fn reload(running: &mut DaemonConfig, hooks: &Hooks) {
    let mut state = vec![NotifyState::Reloading];
    state.extend(NotifyState::monotonic_usec_now());
    let _ = sd_notify::notify(&state);
    tracing::info!("SIGHUP: reloading the configuration");
    match hooks.reload.as_ref().map(|r| r()) {
        None => tracing::warn!("SIGHUP: nothing to reload (no configuration source)"),
        Some(Err(e)) => {
            tracing::error!("SIGHUP: the configuration is not valid, keeping the running one: {e}")
        }
        Some(Ok(new)) => {
            if new.log != running.log {
                match hooks.set_log.as_ref().map(|f| f(&new.log)) {
                    Some(Ok(())) => {
                        tracing::info!(log = %new.log, "SIGHUP: log filter applied");
                        running.log = new.log.clone();
                    }
                    Some(Err(e)) => tracing::error!("SIGHUP: log filter not applied: {e}"),
                    None => tracing::warn!("SIGHUP: log changed: takes effect at restart"),
                }
            }
            for name in fixed_changes(running, &new) {
                tracing::warn!(
                    "SIGHUP: {name} changed: cannot change while running, takes effect at restart"
                );
            }
        }
    }
    let _ = sd_notify::notify(&[NotifyState::Ready]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::Overrides;

    #[test]
    fn changes_that_need_a_restart_are_named() {
        let o = Overrides::default();
        let a = DaemonConfig::from_toml("log = \"info\"", "a", &o).unwrap();
        let b = DaemonConfig::from_toml(
            "log = \"debug\"\nmetrics = \"off\"\n[mpa]\ncrc = false\n[[listener]]\naddr = \"127.0.0.1:1\"",
            "b",
            &o,
        )
        .unwrap();
        assert_eq!(fixed_changes(&a, &a), Vec::<&str>::new());
        assert_eq!(fixed_changes(&a, &b), vec!["metrics", "mpa", "listener"]);
    }
}
