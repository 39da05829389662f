//! Error enums of the verbs API. Small, `Copy` where possible, no panics on bad input.

use std::io;

/// Opening a device failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The requested transport is not available in this build or on this host.
    #[error("transport not available: {0}")]
    TransportUnavailable(&'static str),
    /// Setting up XDP or AF_XDP on the interface failed (attach, socket, addresses).
    #[error("AF_XDP set-up on {interface}: {error}")]
    Xdp {
        /// What was being set up.
        interface: &'static str,
        /// The failure.
        error: afxdp::XdpError,
    },
    /// The interface has no address to serve (no IPv4 nor global IPv6 address, or not the
    /// one `XdpConfig::address` names).
    #[error(
        "the interface has no address to serve: assign one (ip addr add), or name one of its addresses in XdpConfig::address"
    )]
    NoAddress,
    /// `XdpConfig::queues` is 0 or more than 64.
    #[error("an AF_XDP device serves 1 to 64 queues, not {0}")]
    Queues(u32),
    /// The engine refused its configuration (a TCP setting derived from the interface, such
    /// as an MSS from a tiny MTU; the message names it).
    #[error("engine configuration refused: {0}")]
    Engine(endpoint::EndpointError),
    /// The OS random source (the engine's secrets are drawn from it) failed.
    #[error("the OS random source (getrandom) failed: {0}; the device needs it for its keys")]
    Random(io::ErrorKind),
}

/// Registering memory failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// Pinning the memory failed.
    #[error(transparent)]
    Pin(#[from] crate::memory::PinError),
    /// The region's tagged offsets would wrap past 2^64 (`register_raw_at`'s base).
    #[error("the region's tagged offsets wrap: base_to + len must stay below 2^64")]
    TaggedOffsetWraps,
    /// The STag table of the protection domain is full.
    #[error("no free STag in this protection domain: deregister regions no longer used, or spread them over more protection domains")]
    NoStag,
}

/// Why an MPA connection could not be established.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A setting or the private data is invalid; nothing was sent.
    #[error("invalid use: {0}")]
    Usage(#[from] mpa::startup::UsageError),
    /// The TCP connection could not be made or broke during startup.
    #[error("TCP: {0}")]
    Io(#[from] io::Error),
    /// MPA startup failed: malformed frame (bad key, revision, PD_Length), timeout, or TCP
    /// closed. TCP is closed (MPA-79, MPA-82, MPA-92).
    #[error("MPA startup failed: {0}")]
    Startup(mpa::StartupError),
    /// The responder rejected the connection (R=1); its private data is attached (MPA-83).
    #[error("connection rejected by the peer")]
    Rejected {
        /// The Reply's private data.
        private_data: Vec<u8>,
    },
    /// The protection domain or completion queues come from another device.
    #[error("the protection domain or a completion queue belongs to another device: make them with this device's alloc_pd / create_cq")]
    ForeignResource,
    /// A work request posted before the Reply was refused.
    #[error("posting before the Reply: {0}")]
    Post(PostError),
    /// The transport of this device cannot connect yet.
    #[error("this device's transport cannot connect: open the device with Device::open_xdp or Transport::Kernel")]
    Unavailable,
}

/// A work request could not be posted. Nothing was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The range lies outside the local memory region.
    #[error(
        "local range outside the memory region: keep offset + length within MemoryRegion::len()"
    )]
    LocalBounds,
    /// The memory region belongs to another protection domain.
    #[error("the memory region belongs to another protection domain: register it in the queue pair's (QpInit::pd)")]
    ForeignRegion,
    /// A message longer than 2^32 - 1 bytes.
    #[error("message too long: a message carries at most 2^32 - 1 bytes; split it")]
    TooLong,
    /// The queue pair is closed or in error; nothing more can be posted.
    #[error("the queue pair is closed or failed (QueuePair::error says why): connect a new one")]
    NotConnected,
    /// A scatter-gather list must have 1 to [`crate::MAX_SGE`] elements.
    #[error("a work request needs 1 to {} scatter-gather elements", crate::MAX_SGE)]
    SglLength,
    /// A receive or RDMA Read sink in a region registered without `Access::LOCAL_WRITE`.
    #[error("the region lacks the right this request needs: register receive and RDMA Read sinks with Access::LOCAL_WRITE")]
    Access,
    /// No STag left for a scatter-gather list's gather region.
    #[error("no free STag in the protection domain for the scatter-gather list: deregister regions or wait for posted lists to complete")]
    NoStag,
    /// The protocol engine refused it (local access check: rights, bounds, PD).
    #[error("refused by the queue pair: {0}")]
    Refused(ddp::WorkRequestError),
}
