//! The block-storage service: an mmap-ed, registered file served over RPC-over-RDMA.
