//! RPC-over-RDMA transport headers. Filled by the storage issue.
#![forbid(unsafe_code)]
