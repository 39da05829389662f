//! How freed heap memory goes back to the OS.
//!
//! glibc's malloc raises its trim and mmap thresholds each time a large mmapped block is freed
//! (up to 32 MiB / 64 MiB), so after a burst of connections a thread's arena keeps megabytes of
//! free memory resident for good: after 2,048 idle connections were reaped, xwarpd's resident
//! set stayed 8 MiB above where it started, although its heap held almost none of it
//! (`xwarpd/tests/xwarpd_flood.rs`). Fixed thresholds give it back.

/// The thresholds [`return_freed_memory_promptly`] sets by default: 1 MiB.
pub const DEFAULT_RELEASE_THRESHOLD: usize = 1 << 20;

/// Makes the C allocator give freed memory back to the OS once an arena's free top exceeds
/// `threshold` octets, and serve blocks of `threshold` or more with their own mapping (freed
/// at once); this turns off glibc's dynamic thresholds. Process-wide: call it once, early,
/// before threads start (a daemon's `main`). Returns false if the allocator refused (it is
/// not glibc's, or `threshold` is out of its range); nothing else changes then.
pub fn return_freed_memory_promptly(threshold: usize) -> bool {
    let Ok(t) = libc::c_int::try_from(threshold) else {
        return false;
    };
    // Safety: mallopt only changes the allocator's tuning parameters; it takes the allocator's
    // own lock and reads no memory of ours.
    let trim = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, t) };
    // Safety: as above.
    let mmap = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, t) };
    trim == 1 && mmap == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// glibc takes the default; under AddressSanitizer (the test command's sanitizer step) the
    /// sanitizer's allocator stands in for glibc's and refuses every `mallopt`, which the
    /// function must report as a refusal rather than claim it took.
    #[test]
    fn glibc_takes_the_default_threshold_and_refuses_an_impossible_one() {
        // Past what the allocator's int parameter holds: refused, nothing set.
        assert!(!return_freed_memory_promptly(usize::MAX));
        assert_eq!(
            return_freed_memory_promptly(DEFAULT_RELEASE_THRESHOLD),
            !testkit::ADDRESS_SANITIZER,
            "glibc takes 1 MiB; AddressSanitizer's allocator takes no mallopt"
        );
    }
}
