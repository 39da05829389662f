//! AF_XDP transport: XDP program loading, UMEM and sockets, per-core engines.
