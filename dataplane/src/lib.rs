//! xwarp data plane: the verbs-like API over the kernel and AF_XDP transports.
//!
//! ```text
//! Device::open(Transport::Kernel)
//!   ├─ alloc_pd() -> ProtectionDomain ── register(len, Access) -> MemoryRegion (pinned, STag)
//!   ├─ create_cq() -> CompletionQueue ── poll / wait -> Completion { wr_id, opcode, status, byte_len }
//!   ├─ listen(addr, ConnectionConfig) -> Listener ── accept() -> Incoming ── accept(QpInit, pd) -> QueuePair
//!   └─ connect(addr, QpInit, &ConnectionConfig, private_data) -> QueuePair
//! QueuePair::{post(wr_id, mr, range, PostKind) and its post_send / post_recv / post_write /
//!            post_read shorthands, close}
//! ```
//!
//! Every connection runs the same sans-IO protocol stack (`mpa`, `ddp`); the transport only
//! moves bytes: [`Transport::Kernel`] over kernel TCP sockets, `Transport::Xdp` (later) over
//! AF_XDP with our own TCP.
//!
//! The only crate of the workspace with `unsafe` (AF_XDP rings and UMEM, syscalls, pinned
//! memory): every `unsafe` block and impl states why it is sound (`// Safety:`), and an
//! `unsafe fn` spells out each unsafe operation in its body.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod completion;
mod config;
mod counters;
mod cq;
mod device;
pub mod engine;
mod error;
mod kernel;
mod listener;
mod mapped_file;
pub mod memory;
mod pd;
mod qp;
mod qp_events;
mod sgl;
mod work;
pub mod xdp;
mod xdp_device;

pub use completion::{Completion, Opcode, Status};
pub use config::{ConnectionConfig, EngineMode, MpaSettings, Transport, XdpConfig, XdpInfo};
pub use counters::CounterSnapshot;
pub use cq::{CompletionQueue, CqError, DEFAULT_CQ_CAPACITY};
pub use device::{Device, EngineLoad, QpInit};
pub use error::{ConnectError, DeviceError, PostError, RegisterError};
pub use listener::{AcceptError, Incoming, Listener};
pub use mapped_file::{FileRegion, MappedFile};
pub use pd::{os_random_u64, Access, MemoryRegion, ProtectionDomain};
pub use qp::{PostKind, PostListError, QpError, QueuePair, RemoteAddr};
pub use sgl::{Sge, WorkRequest, MAX_SGE};
