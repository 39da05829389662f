//! What the tests of the libraries share: Debian's RDMA programs and headers (unpacked by
//! `deploy/rdma-tools`), our libraries (linked by `deploy/verbs-libs`), and skipping outside CI.
#![allow(dead_code)]

pub mod programs;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's root folder.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The profile folder this test binary was built into (`target/debug`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/debug/deps/NAME-HASH
    exe.parent()
        .and_then(Path::parent)
        .expect("target/PROFILE/deps")
        .to_path_buf()
}

/// True under CI (`CI=true`): what a test needs must be there, and skipping is failing.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips (returns `None` after saying why) outside CI; fails under CI.
pub fn unavailable<T>(why: &str) -> Option<T> {
    if in_ci() {
        panic!("{why} (CI=true: this test must run)");
    }
    eprintln!("skipped: {why}");
    None
}

/// Debian's perftest, rdmacm-utils and ibverbs-utils with their libraries and the rdma-core
/// headers, unpacked under `target/rdma-tools` (fetched once by `deploy/rdma-tools`).
pub fn rdma_tools() -> Option<PathBuf> {
    let out = Command::new("bash")
        .arg(workspace().join("deploy/rdma-tools"))
        .output()
        .expect("run deploy/rdma-tools");
    if !out.status.success() {
        return unavailable(&format!(
            "deploy/rdma-tools failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Some(PathBuf::from(text.lines().last().expect("a folder").trim()))
}

/// The unpacked programs' library folders under `tools` (fio's Ceph engines link one from a
/// folder of its own).
pub fn tool_library_dirs(tools: &Path) -> [PathBuf; 2] {
    let lib = tools.join("usr/lib/x86_64-linux-gnu");
    [lib.clone(), lib.join("ceph")]
}

/// The staticlib this test's build made: the newest `libverbs_abi-*.a` in `deps` (cargo does
/// not copy a test build's archive up to `target/PROFILE/`).
fn staticlib(profile: &Path) -> PathBuf {
    std::fs::read_dir(profile.join("deps"))
        .expect("target/PROFILE/deps")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libverbs_abi-") && n.ends_with(".a"))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("the verbs-abi staticlib of this build")
}

/// Our four libraries, linked from this build's staticlib into `target/PROFILE/xwarp-lib`.
pub fn verbs_libs() -> PathBuf {
    let profile = profile_dir();
    let out = Command::new("bash")
        .arg(workspace().join("deploy/verbs-libs"))
        .arg("--link-only")
        .arg("--profile-dir")
        .arg(&profile)
        .arg("--staticlib")
        .arg(staticlib(&profile))
        .output()
        .expect("run deploy/verbs-libs");
    assert!(
        out.status.success(),
        "deploy/verbs-libs failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    profile.join("xwarp-lib")
}

/// A fresh temporary folder (removed on drop).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("xwarp-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("a temporary folder");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
