//! Where a test runs: an ordinary build, or the test command's AddressSanitizer build
//! (`RUSTFLAGS=-Zsanitizer=address`, nightly; `deploy/xwarp test`). This crate's build script
//! reads the target's `sanitize` cfg, so every test binary that links testkit knows.
//!
//! Under the sanitizer, the C allocator is the sanitizer's: it takes no `mallopt` tuning,
//! keeps freed blocks in a quarantine (up to 256 MiB) and maps shadow memory for every byte in
//! use, so a process's resident set says nothing about what the code holds. Memory-error and
//! leak checks hold there instead (LeakSanitizer reports at exit, and fails the process).

/// True in a build instrumented with AddressSanitizer.
pub const ADDRESS_SANITIZER: bool = cfg!(address_sanitizer);

/// Asserts that `grown` octets of resident-set growth stay below `bound`, in an ordinary
/// build; under AddressSanitizer, whose allocator makes the figure meaningless (see the module
/// docs), says so on stdout instead.
pub fn assert_rss_below(grown: u64, bound: u64, what: &str) {
    if ADDRESS_SANITIZER {
        println!("{what}: {grown} octets (bound {bound} not checked under AddressSanitizer)");
    } else {
        assert!(
            grown < bound,
            "{what}: {grown} octets, the bound is {bound}"
        );
    }
}
