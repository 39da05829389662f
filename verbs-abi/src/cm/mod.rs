//! librdmacm on MPA: event channels, identifiers, address and route resolution, listen,
//! connect, accept, reject and disconnect. These are libibverbs' private `xwarp_rdma_*`
//! functions; `librdmacm.so.1` jumps to them, so one engine serves the process.
#![allow(clippy::missing_safety_doc)]

pub(crate) mod addr;
mod addrinfo;
mod channel;
mod connect;
pub(crate) mod connection_events;
mod event_acks;
pub(crate) mod event_queue;
mod id;
