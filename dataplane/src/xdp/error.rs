//! Errors of the XDP/AF_XDP layer: small `Copy` values (an errno and the operation it came from).

use std::fmt;
use std::io;

/// What failed while setting up or driving XDP and AF_XDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum XdpError {
    /// A system call or libbpf/libxdp call failed with this errno.
    #[error("{op}: {}", Errno(*errno))]
    Os { op: &'static str, errno: i32 },
    /// The interface name does not exist in the current network namespace.
    #[error("no interface with that name in this network namespace")]
    NoSuchInterface,
    /// An XDP program that is not ours is attached; we do not replace it.
    #[error("interface already runs a foreign XDP program (id {id}); detach it first")]
    ForeignProgram { id: u32 },
    /// The embedded object lacks a program or map this code expects (a build mismatch).
    #[error("the embedded XDP object has no {0}")]
    ObjectMismatch(&'static str),
    /// A value outside what the map or the ring accepts.
    #[error("invalid argument: {0}")]
    Invalid(&'static str),
    /// The kernel's tables have no route to the destination.
    #[error("no route to the destination")]
    NoRoute,
    /// The neighbour did not resolve in time.
    #[error("neighbour resolution timed out")]
    NeighbourTimeout,
    /// A netlink reply we could not decode.
    #[error("undecodable netlink reply")]
    Netlink,
}

impl XdpError {
    /// The error of the last failed system call, tagged with `op`.
    pub(crate) fn last_os(op: &'static str) -> Self {
        Self::from_io(op, &io::Error::last_os_error())
    }

    /// An `io::Error` tagged with `op`.
    pub(crate) fn from_io(op: &'static str, e: &io::Error) -> Self {
        Self::Os {
            op,
            errno: e.raw_os_error().unwrap_or(libc::EIO),
        }
    }

    /// A libbpf return value (`-errno`) tagged with `op`.
    pub(crate) fn from_neg(op: &'static str, ret: i32) -> Self {
        Self::Os {
            op,
            errno: ret.checked_neg().unwrap_or(libc::EIO),
        }
    }

    /// The errno, when this came from the OS.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

struct Errno(i32);

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.0))
    }
}
