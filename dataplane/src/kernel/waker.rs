//! An eventfd that wakes a connection driver blocked in `poll(2)`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Wakes the connection driver when the application posts work or asks to close.
#[derive(Debug)]
pub(crate) struct Waker {
    fd: OwnedFd,
}

impl Waker {
    pub(crate) fn new() -> io::Result<Self> {
        // Safety: eventfd has no memory-safety preconditions; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // Safety: fd is a fresh descriptor we exclusively own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Makes the eventfd readable.
    pub(crate) fn wake(&self) {
        let one: u64 = 1;
        // Safety: writes 8 bytes from a valid u64 to our eventfd. EAGAIN (counter saturated)
        // still leaves it readable, so the result does not matter.
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Resets the eventfd after a wake-up.
    pub(crate) fn drain(&self) {
        let mut v: u64 = 0;
        // Safety: reads at most 8 bytes into a valid u64; non-blocking.
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Waker {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Readiness of the two descriptors a driver waits on.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ready {
    pub(crate) readable: bool,
    pub(crate) hangup: bool,
    pub(crate) woken: bool,
}

/// Waits until `sock` is readable (if `want_read`) or writable (if `want_write`), it hangs
/// up, the waker fires, or `timeout_ms` passes.
pub(crate) fn wait(
    sock: RawFd,
    want_read: bool,
    want_write: bool,
    waker: &Waker,
    timeout_ms: i32,
) -> io::Result<Ready> {
    let mut fds = [
        libc::pollfd {
            fd: sock,
            events: if want_read { libc::POLLIN } else { 0 }
                | if want_write { libc::POLLOUT } else { 0 },
            revents: 0,
        },
        libc::pollfd {
            fd: waker.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // Safety: fds is a valid array of 2 pollfd structures for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(Ready::default());
        }
        return Err(e);
    }
    let r = fds[0].revents;
    Ok(Ready {
        readable: r & libc::POLLIN != 0,
        hangup: r & (libc::POLLHUP | libc::POLLERR) != 0,
        woken: fds[1].revents & libc::POLLIN != 0,
    })
}

/// Waits until `fd` is readable or `timeout_ms` passes; true when readable.
pub(crate) fn wait_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // Safety: p is one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_then_drain() {
        let w = Waker::new().unwrap();
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let r = wait(a.as_raw_fd(), true, false, &w, 0).unwrap();
        assert!(!r.woken && !r.readable);
        w.wake();
        let r = wait(a.as_raw_fd(), true, false, &w, 1000).unwrap();
        assert!(r.woken);
        w.drain();
        let r = wait(a.as_raw_fd(), true, false, &w, 0).unwrap();
        assert!(!r.woken);
    }
}
