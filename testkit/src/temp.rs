//! Temporary paths for test files, unique per process and call.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A path in the temporary directory ending in `name`, unique to this process and call (pid
/// and a counter in the name), with nothing at it. Nobody removes it: for files a failing test
/// leaves behind on purpose (see [`TempPath`] for the guarded kind).
pub fn unique_temp_path(name: &str) -> PathBuf {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("xwarp-t-{}-{n}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// A path in the temporary directory, unique to this process and call (the name carries the
/// pid, a counter and `name`), with nothing at it when created. Dropping it removes the file,
/// also when the test fails, unless the environment variable `XW_KEEP` is set (to look at a
/// capture after a failure).
#[derive(Debug)]
pub struct TempPath(pub PathBuf);

impl TempPath {
    /// A fresh path ending in `name` (e.g. `oracle.pcap`), see [`unique_temp_path`].
    pub fn new(name: &str) -> Self {
        TempPath(unique_temp_path(name))
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path as UTF-8 (temporary paths are).
    pub fn as_str(&self) -> &str {
        self.0.to_str().expect("temporary paths are UTF-8")
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if std::env::var_os("XW_KEEP").is_none() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_paths_are_unique_and_removed_on_drop() {
        let a = TempPath::new("x.pcap");
        let b = TempPath::new("x.pcap");
        assert_ne!(a.path(), b.path());
        assert!(a.as_str().contains(&std::process::id().to_string()));
        std::fs::write(a.path(), b"data").unwrap();
        let p = a.path().to_owned();
        drop(a);
        assert_eq!(p.exists(), std::env::var_os("XW_KEEP").is_some());
    }
}
