//! The descriptors applications poll: an event counter (an eventfd in semaphore mode: readable
//! while events wait, one taken per read; blocking unless the application made it
//! non-blocking) and an epoll set (a completion channel over its completion queues' eventfds).

use std::os::raw::c_int;

/// A counting eventfd: `add_one` per event, `take_one` per event taken.
#[derive(Debug)]
pub(crate) struct EventCounter {
    fd: c_int,
}

fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl EventCounter {
    /// A new counter at zero (blocking, close-on-exec).
    pub(crate) fn new() -> std::io::Result<Self> {
        // Safety: eventfd has no memory preconditions.
        let fd = unsafe { libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(EventCounter { fd })
    }

    /// A new non-blocking counter at zero (for the library's own reads).
    pub(crate) fn new_nonblocking() -> std::io::Result<Self> {
        // Safety: eventfd has no memory preconditions.
        let fd = unsafe {
            libc::eventfd(
                0,
                libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC | libc::EFD_NONBLOCK,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(EventCounter { fd })
    }

    /// The descriptor.
    pub(crate) fn raw(&self) -> c_int {
        self.fd
    }

    /// Counts one event.
    pub(crate) fn add_one(&self) {
        let one = 1u64;
        // Safety: writes 8 octets from a live u64 to our eventfd.
        let _ = unsafe { libc::write(self.fd, (&one as *const u64).cast(), 8) };
    }

    /// Takes one event: blocks until there is one, unless the descriptor is non-blocking
    /// (then `Err(EAGAIN)` when there is none). A signal ends the wait (`Err(EINTR)`), as it
    /// ends libibverbs' `read`: programs stop a timed test from their signal handler.
    pub(crate) fn take_one(&self) -> Result<(), c_int> {
        let mut v = 0u64;
        // Safety: reads 8 octets into a live u64 from our eventfd.
        let n = unsafe { libc::read(self.fd, (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            Ok(())
        } else {
            Err(last_errno())
        }
    }
}

impl Drop for EventCounter {
    fn drop(&mut self) {
        // Safety: our descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// An epoll set: readable while one of its descriptors is.
#[derive(Debug)]
pub(crate) struct EpollSet {
    fd: c_int,
}

impl EpollSet {
    /// A new empty set (close-on-exec).
    pub(crate) fn new() -> std::io::Result<Self> {
        // Safety: epoll_create1 has no memory preconditions.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(EpollSet { fd })
    }

    /// The descriptor.
    pub(crate) fn raw(&self) -> c_int {
        self.fd
    }

    /// Watches `fd` for reading, reporting `token`.
    pub(crate) fn add(&self, fd: c_int, token: u64) -> Result<(), c_int> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // Safety: ev is a live epoll_event; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(last_errno());
        }
        Ok(())
    }

    /// Stops watching `fd`.
    pub(crate) fn remove(&self, fd: c_int) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // Safety: as in `add`.
        let _ = unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    /// The token of a ready descriptor: waits for one unless the set's descriptor is
    /// non-blocking (then `Err(EAGAIN)` when none is ready). A signal ends the wait
    /// (`Err(EINTR)`).
    pub(crate) fn wait_one(&self) -> Result<u64, c_int> {
        // Safety: F_GETFL on our descriptor.
        let flags = unsafe { libc::fcntl(self.fd, libc::F_GETFL) };
        let timeout = if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
            0
        } else {
            -1
        };
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // Safety: room for one event in `ev`.
        let n = unsafe { libc::epoll_wait(self.fd, &mut ev, 1, timeout) };
        match n {
            1 => Ok(ev.u64),
            0 => Err(libc::EAGAIN),
            _ => Err(last_errno()),
        }
    }
}

impl Drop for EpollSet {
    fn drop(&mut self) {
        // Safety: our descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(fd: c_int) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // Safety: one live pollfd.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    fn nonblocking(fd: c_int) {
        // Safety: F_SETFL on a descriptor of the test's.
        unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) };
    }

    /// The counter is readable exactly while events wait, one taken per call; non-blocking,
    /// an empty one says EAGAIN.
    #[test]
    fn event_counter_counts_and_honours_nonblocking() {
        let c = EventCounter::new().unwrap();
        assert!(!readable(c.raw()));
        c.add_one();
        c.add_one();
        assert!(readable(c.raw()));
        c.take_one().unwrap();
        assert!(readable(c.raw()));
        c.take_one().unwrap();
        assert!(!readable(c.raw()));
        nonblocking(c.raw());
        assert_eq!(c.take_one(), Err(libc::EAGAIN));
    }

    extern "C" fn ignore(_: c_int) {}

    /// A signal ends a blocking wait with EINTR (a program's timer stops a test blocked in
    /// ibv_get_cq_event or rdma_get_cm_event).
    #[test]
    fn a_signal_ends_a_blocking_wait() {
        // Safety: a no-op handler for SIGUSR2, without SA_RESTART; the action is a zeroed
        // sigaction with the handler set.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore as extern "C" fn(c_int) as usize;
            libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut());
        }
        let c = std::sync::Arc::new(EventCounter::new().unwrap());
        let set = std::sync::Arc::new(EpollSet::new().unwrap());
        set.add(c.raw(), 1).unwrap();
        for wait_on_set in [false, true] {
            let (c2, s2) = (c.clone(), set.clone());
            let (tx, rx) = std::sync::mpsc::channel();
            let t = std::thread::spawn(move || {
                // Safety: pthread_self has no preconditions.
                tx.send(unsafe { libc::pthread_self() }).unwrap();
                if wait_on_set {
                    s2.wait_one().map(drop)
                } else {
                    c2.take_one()
                }
            });
            let tid = rx.recv().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100));
            // Safety: tid is a live thread of this test, blocked in its wait.
            unsafe { libc::pthread_kill(tid, libc::SIGUSR2) };
            assert_eq!(t.join().unwrap(), Err(libc::EINTR), "set: {wait_on_set}");
        }
    }

    /// The set reports the token of a readable member and is readable itself meanwhile.
    #[test]
    fn epoll_set_reports_ready_members() {
        let set = EpollSet::new().unwrap();
        let (a, b) = (EventCounter::new().unwrap(), EventCounter::new().unwrap());
        set.add(a.raw(), 1).unwrap();
        set.add(b.raw(), 2).unwrap();
        nonblocking(set.raw());
        assert_eq!(set.wait_one(), Err(libc::EAGAIN));
        b.add_one();
        assert!(readable(set.raw()));
        assert_eq!(set.wait_one(), Ok(2));
        b.take_one().unwrap();
        set.remove(b.raw());
        assert_eq!(set.wait_one(), Err(libc::EAGAIN));
    }
}
