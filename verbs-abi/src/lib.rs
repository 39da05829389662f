//! A drop-in `libibverbs.so.1` and `librdmacm.so.1` over xwarp's verbs API: unmodified
//! rdma-core programs (perftest, rping, ibv_devinfo) run over xwarp's kernel or xdp transport.
//!
//! The crate builds a staticlib; `deploy/verbs-libs` links it into `libibverbs.so.1` with a
//! version script (every exported symbol on its rdma-core version node), and links
//! `librdmacm.so.1` (jumps into libibverbs' private `xwarp_*` functions: one engine per
//! process) and stub `libmlx5.so.1` / `libefa.so.1` beside it. `xwarp-run` runs a program on
//! them.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod abi;
mod cm;
mod errno;
mod handle;
mod log;
#[cfg(all(test, loom))]
mod loom_models;
pub mod settings;
mod sync;
mod verbs;
