//! libibverbs: devices, contexts, protection domains, memory regions, completion queues and
//! channels, queue pairs and posting, over `dataplane`.
//!
//! Every exported function takes what the application was given by this library (the
//! libibverbs contract); the pointers are checked for NULL and for the kind of object they
//! name before use.
#![allow(clippy::missing_safety_doc)]

pub(crate) mod context;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod fd;
pub(crate) mod local_completions;
pub(crate) mod pd_mr;
pub(crate) mod post;
pub(crate) mod qp;
pub(crate) mod unsupported;
