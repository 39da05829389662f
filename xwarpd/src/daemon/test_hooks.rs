//! Fault injection for tests, compiled into debug builds only:
//! - `XWARP_TEST_PANIC=PLACE`: the thread that reaches [`panic_if`]`(PLACE)` panics. Places:
//!   `store` (a store connection's thread, when a client connects), `echo` (an echo
//!   connection's thread). The AF_XDP engine thread reads the same variable (`engine`, in
//!   `dataplane`).
//! - `XWARP_TEST_FAULTS=seed=7,rx_drop=0.001,...`: the xdp transport's engines inject faults
//!   ([`faults`]; the names are `dataplane::engine::FaultConfig`'s fields: drop, duplicate,
//!   reorder and corrupt per direction). The daemon logs them at start and exports what was
//!   injected as `xwarpd_engine_faults_injected_total`. `deploy/xwarp soak` uses it.

use dataplane::engine::{FaultConfig, FaultParseError};

use super::config::ConfigError;

/// The engines' fault injection from `XWARP_TEST_FAULTS` (see the module docs); `None` when
/// it is unset, or in a release build.
pub fn faults() -> Result<Option<FaultConfig>, ConfigError> {
    if !cfg!(debug_assertions) {
        return Ok(None);
    }
    let Ok(v) = std::env::var("XWARP_TEST_FAULTS") else {
        return Ok(None);
    };
    v.parse()
        .map(Some)
        .map_err(|e: FaultParseError| ConfigError::Invalid {
            setting: "XWARP_TEST_FAULTS",
            value: e.item,
            expected: e.expected,
        })
}

/// Panics when `XWARP_TEST_PANIC` names `place`.
pub fn panic_if(place: &str) {
    if std::env::var("XWARP_TEST_PANIC").is_ok_and(|v| v == place) {
        panic!("injected by XWARP_TEST_PANIC={place}");
    }
}
