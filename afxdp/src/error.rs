//! Errors of the XDP/AF_XDP layer: small `Copy` values (an errno and the operation it came from).

use std::fmt;
use std::io;

/// What failed while setting up or driving XDP and AF_XDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum XdpError {
    /// A system call or libbpf call failed with this errno.
    #[error("{op}: {}", Errno(*errno))]
    Os {
        /// The call that failed.
        op: &'static str,
        /// Its errno.
        errno: i32,
    },
    /// The interface name does not exist in the current network namespace.
    #[error("no interface with that name in this network namespace")]
    NoSuchInterface,
    /// An XDP program that is not ours is attached; we do not replace it.
    #[error("interface already runs a foreign XDP program (id {id}); detach it first")]
    ForeignProgram {
        /// The foreign program's id.
        id: u32,
    },
    /// Another engine's steering program is attached and its owner is alive: a second engine
    /// on the interface is refused, and the live program is left alone.
    #[error(
        "{ifname} already runs xwarp_steer (program id {id}) for a live process (pid {pid}): \
         another xwarp engine serves this interface. Stop that process first (a program left \
         by a crashed one is replaced), or run this engine on another interface"
    )]
    ProgramInUse {
        /// The interface.
        ifname: IfName,
        /// The kernel's id of the live program.
        id: u32,
        /// A process that holds it.
        pid: u32,
    },
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
    pub fn from_io(op: &'static str, e: &io::Error) -> Self {
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

/// An interface name, kept by value (at most `IFNAMSIZ - 1` = 15 octets, longer ones cut) so
/// that errors stay `Copy`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IfName {
    len: u8,
    bytes: [u8; 15],
}

impl IfName {
    /// `name`, cut to 15 octets.
    pub fn new(name: &str) -> Self {
        let mut bytes = [0u8; 15];
        let len = name.len().min(bytes.len());
        bytes[..len].copy_from_slice(&name.as_bytes()[..len]);
        IfName {
            len: len as u8,
            bytes,
        }
    }

    /// The name (lossy if a cut fell inside a UTF-8 sequence).
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.bytes[..usize::from(self.len)])
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

impl fmt::Debug for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

struct Errno(i32);

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.0))
    }
}
