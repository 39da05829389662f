//! Why an application call on an endpoint was refused.

/// Why an application call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// No such connection (closed, or never existed).
    #[error("no such connection")]
    NoConnection,
    /// The connection's queue pair does not exist yet (TCP not established).
    #[error("connection not ready")]
    NotReady,
    /// The work request was refused.
    #[error("post refused: {0}")]
    Post(ddp::WorkRequestError),
    /// No free local port in the active-open range.
    #[error("no free local port")]
    NoPort,
    /// A listener on this port exists already.
    #[error("port in use")]
    PortInUse,
    /// Private data longer than the MPA limit.
    #[error("private data too long")]
    PrivateDataTooLong,
    /// The remote address is of another family (IPv4, IPv6) than the endpoint's own.
    #[error("remote address of another family than ours")]
    AddressFamily,
    /// The endpoint holds `max_connections` connections already.
    #[error("connection limit reached")]
    TooManyConnections,
    /// `max_outstanding_work` work requests are posted and not yet completed and polled.
    #[error("too many outstanding work requests")]
    TooMuchWork,
    /// The neighbour table is full of addresses in use.
    #[error("neighbour table full")]
    NeighboursFull,
    /// A stream call on an iWARP connection.
    #[error("not a stream connection")]
    NotAStream,
    /// A TCP RDMA option mark was refused.
    #[error("transfer mark refused: {0:?}")]
    Annotate(tcp_offload::rdma::AnnotateError),
    /// The configuration's TCP settings fail `tcp_offload::Config::validate` (the error names
    /// the setting).
    #[error("endpoint configuration, {0}")]
    Config(tcp_offload::TcpConfigError),
    /// A TCP RDMA option receive buffer or read was refused.
    #[error("transfer placement refused: {0:?}")]
    Placement(tcp_offload::rdma::PlacementError),
}
