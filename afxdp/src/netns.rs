//! Network namespaces, per thread: `setns(2)` moves only the calling thread, so a thread can work
//! inside a test namespace while the rest of the process stays where it was.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A handle on a network namespace (an open `/proc/.../ns/net` or `/run/netns/NAME`).
#[derive(Debug)]
pub struct NetNs {
    fd: OwnedFd,
}

impl NetNs {
    /// The calling thread's namespace.
    pub fn current() -> io::Result<Self> {
        Self::open("/proc/thread-self/ns/net")
    }

    /// A namespace created by `ip netns add NAME`.
    pub fn named(name: &str) -> io::Result<Self> {
        Self::open(Path::new("/run/netns").join(name))
    }

    /// Opens a namespace file.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        Ok(Self {
            fd: File::open(path)?.into(),
        })
    }

    /// The namespace's identity (device and inode of its nsfs file).
    pub fn id(&self) -> io::Result<(u64, u64)> {
        let m = File::from(self.fd.try_clone()?).metadata()?;
        Ok((m.dev(), m.ino()))
    }

    /// Whether the calling thread is in this namespace now.
    pub fn is_current(&self) -> io::Result<bool> {
        Ok(Self::current()?.id()? == self.id()?)
    }

    /// Moves the calling thread into this namespace until the guard drops.
    pub fn enter(&self) -> io::Result<NetNsGuard> {
        let previous = Self::current()?;
        setns(&self.fd)?;
        Ok(NetNsGuard { previous })
    }
}

/// Restores the thread's previous namespace on drop.
#[derive(Debug)]
#[must_use = "the thread leaves the namespace when the guard drops"]
pub struct NetNsGuard {
    previous: NetNs,
}

impl Drop for NetNsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.previous.fd) {
            tracing::error!("could not return to the previous network namespace: {e}");
        }
    }
}

fn setns(fd: &OwnedFd) -> io::Result<()> {
    // Safety: `fd` is an open namespace file owned by the caller for the duration of the call;
    // setns only reads it.
    let ret = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
