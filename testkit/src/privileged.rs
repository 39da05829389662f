//! The one rule for tests that need privileges or tools: may they skip, or must they run?
//!
//! Under CI (`CI` set to `true`, `1` or `yes`, any case) a test that cannot run fails, naming
//! what is missing: CI runs as root with every tool installed, so a skip there would hide a
//! broken test. Elsewhere (a developer's unprivileged shell) the test prints one `SKIP` line
//! saying why and passes without testing anything.

use std::process::{Command, Stdio};

/// True when tests must run rather than skip: the `CI` environment variable is `true`, `1` or
/// `yes` (any case).
pub fn must_run() -> bool {
    std::env::var("CI").is_ok_and(|v| ci_value_forbids_skipping(&v))
}

fn ci_value_forbids_skipping(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes")
}

/// What a test does when it cannot run: `Ok(x)` gives `Some(x)`; `Err(why)` panics under CI
/// ([`must_run`]) naming `test` and `why`, and elsewhere prints `SKIP test: why` and gives
/// `None`.
pub fn or_skip<T>(test: &str, ready: Result<T, String>) -> Option<T> {
    match ready {
        Ok(x) => Some(x),
        Err(why) => {
            assert!(
                !must_run(),
                "{test}: cannot run ({why}) and CI forbids skipping (deploy/xwarp sets up what it needs)"
            );
            eprintln!("SKIP {test}: {why}");
            None
        }
    }
}

/// True when this process runs as root (effective uid 0, read from `/proc/self/status`).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// True when `tool` is on the PATH.
pub fn have_tool(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// True when the process is root; otherwise see [`or_skip`] (panics under CI).
pub fn require_root(test: &str) -> bool {
    let ready = if is_root() {
        Ok(())
    } else {
        Err("needs root (network or mount namespaces)".to_string())
    };
    or_skip(test, ready).is_some()
}

/// True when `tool` is on the PATH; otherwise see [`or_skip`] (panics under CI).
pub fn require_tool(test: &str, tool: &str) -> bool {
    let ready = if have_tool(tool) {
        Ok(())
    } else {
        Err(format!("{tool} is not installed"))
    };
    or_skip(test, ready).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_values_that_forbid_skipping() {
        for v in ["true", "TRUE", "True", "1", "yes"] {
            assert!(ci_value_forbids_skipping(v), "{v}");
        }
        for v in ["", "0", "false", "no", "maybe"] {
            assert!(!ci_value_forbids_skipping(v), "{v}");
        }
    }

    #[test]
    fn ready_is_never_skipped() {
        assert_eq!(or_skip("t", Ok::<_, String>(7)), Some(7));
    }

    #[test]
    fn sh_is_found() {
        assert!(have_tool("sh"));
        assert!(require_tool("sh_is_found", "sh"));
        assert!(!have_tool("no-such-tool-xwarp"));
    }
}
