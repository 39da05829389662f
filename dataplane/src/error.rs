//! Error enums of the verbs API. Small, `Copy` where possible, no panics on bad input.

use std::io;

/// Opening a device failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The requested transport is not available in this build or on this host.
    #[error("transport not available: {0}")]
    TransportUnavailable(&'static str),
}

/// Registering memory failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// Pinning the memory failed.
    #[error(transparent)]
    Pin(#[from] crate::memory::PinError),
    /// All 2^24 STag indices of the protection domain are in use.
    #[error("no free STag index in this protection domain")]
    NoStag,
}

/// A configuration value is out of range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Private data longer than the configured limit (at most 512 octets in RFC 5044).
    #[error("private data of {len} octets exceeds the limit of {limit}")]
    PrivateDataTooLong { len: usize, limit: usize },
    /// MPA revision other than 0 (draft) or 1 (RFC 5044).
    #[error("unsupported MPA revision {0} (0 or 1)")]
    Revision(u8),
    /// The private-data limit cannot exceed what PD_Length (16 bits) can express.
    #[error("private data limit {0} exceeds 65535")]
    PrivateDataLimit(usize),
}

/// Why an MPA connection could not be established.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A setting or the private data is invalid; nothing was sent.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The TCP connection could not be made or broke during startup.
    #[error("TCP: {0}")]
    Io(#[from] io::Error),
    /// The peer's startup frame was malformed (bad key, revision or PD_Length): TCP closed (MPA-82, MPA-97).
    #[error("malformed MPA startup frame from the peer: {0}")]
    Malformed(&'static str),
    /// The responder rejected the connection (R=1); its private data is attached (MPA-83).
    #[error("connection rejected by the peer")]
    Rejected { private_data: Vec<u8> },
    /// No complete startup frame within the startup timeout (MPA-92).
    #[error("MPA startup timed out")]
    Timeout,
    /// The memory regions and queues come from another device.
    #[error("protection domain or completion queue belongs to another device")]
    ForeignResource,
}

/// A work request could not be posted. Nothing was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The range lies outside the local memory region.
    #[error("local range outside the memory region")]
    LocalBounds,
    /// The memory region lacks the local access right this work request needs.
    #[error("memory region lacks the needed local access right")]
    LocalAccess,
    /// The memory region belongs to another protection domain.
    #[error("memory region belongs to another protection domain")]
    ForeignRegion,
    /// A message longer than the transport supports (u32 length).
    #[error("message too long")]
    TooLong,
    /// The queue pair is closed or in error; nothing more can be posted.
    #[error("queue pair is not connected")]
    NotConnected,
    /// Too many work requests outstanding on this queue.
    #[error("work queue full")]
    QueueFull,
}
