//! Threads the library starts for itself (engines, acceptors, connection drivers, the drop-in
//! libraries' watchers). They block every signal: a signal sent to the process (SIGINT,
//! SIGTERM, a program's SIGALRM) must reach one of the application's threads, where it
//! interrupts the blocking call the application is waiting in, never a thread the application
//! does not know about.

use std::io;
use std::thread::JoinHandle;

/// Spawns `f` on a thread named `name` that blocks every signal before it runs `f`.
pub fn spawn<F, T>(name: impl Into<String>, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            block_signals();
            f()
        })
}

/// Blocks every signal in the calling thread (the faults a thread raises itself, such as
/// SIGSEGV, still end the process).
fn block_signals() {
    // Safety: `set` is a local sigset_t that sigfillset initialises before pthread_sigmask
    // reads it; a null old-set pointer is allowed.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    /// The mask of thread `tid` of this process, from /proc (SigBlk, hexadecimal).
    fn blocked_mask(tid: i32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("SigBlk:")).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    }

    #[test]
    fn a_library_thread_blocks_the_signals_a_process_is_sent() {
        let t = super::spawn("xwarp-test", || {
            // Safety: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            blocked_mask(tid)
        })
        .unwrap();
        let mask = t.join().unwrap();
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGALRM,
            libc::SIGUSR1,
            libc::SIGHUP,
        ] {
            assert_ne!(
                mask & (1 << (sig - 1)),
                0,
                "signal {sig} not blocked: {mask:#x}"
            );
        }
        // The spawning thread keeps its own mask.
        // Safety: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        assert_eq!(blocked_mask(me) & (1 << (libc::SIGTERM - 1)), 0);
    }
}
