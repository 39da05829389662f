//! xwarp data plane: the verbs-like API over the kernel and AF_XDP transports.
//!
//! ```text
//! Device::open(Transport::Kernel) / Device::open_xdp(XdpConfig)
//!   ├─ alloc_pd() -> ProtectionDomain ── register(len) / register_owned(Vec) / unsafe register_raw
//!   │                                    / register_file -> MemoryRegion (pinned, STag; into_inner)
//!   ├─ create_cq() / create_cq_with(capacity) -> CompletionQueue ── poll / wait -> Completion,
//!   │                                    arm + event_fd / take_events (async: next_event)
//!   ├─ listen(addr, ConnectionConfig) -> Listener ── accept() -> Incoming ── accept(QpInit, pd) -> QueuePair
//!   └─ connect(addr, QpInit, &ConnectionConfig, private_data) -> QueuePair
//! QueuePair::{post_list(&[WorkRequest { wr_id, kind, sgl: &[Sge], signaled }]), post(wr_id, mr,
//!            range, PostKind) and its post_send / post_recv / post_write / post_read
//!            shorthands, close}
//! ```
//!
//! Examples: `dataplane/examples/` (ping-pong, Write/Read from caller-owned memory, a block
//! storage client), run by the `examples` test.
//!
//! Every connection runs the same sans-IO protocol stack (`mpa`, `ddp`); the transport only
//! moves bytes: [`Transport::Kernel`] over kernel TCP sockets, [`Transport::Xdp`] over
//! AF_XDP (the `afxdp` crate's sockets and XDP program) with our own TCP.
//!
//! One of the workspace's crates with `unsafe` (here: syscalls, pinned memory, file mappings;
//! `afxdp` has the rings and UMEM, `testbed` its sockets): every `unsafe` block and impl states
//! why it is sound (`// Safety:`), and an `unsafe fn` spells out each unsafe operation in its
//! body.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod completion;
mod config;
mod counters;
mod cq;
mod device;
pub mod engine;
mod error;
pub mod heap;
mod kernel;
pub mod library_thread;
mod listener;
#[cfg(all(test, loom))]
mod loom_models;
mod mapped_file;
pub mod memory;
mod pd;
mod qp_events;
mod queue_pair;
mod sgl;
pub mod stage_times;
mod stream;
mod sync;
mod work;
mod xdp_device;

pub use completion::{Completion, Opcode, Status};
pub use config::{
    ConnectionConfig, EngineMode, LaneSteering, MpaSettings, Transport, XdpConfig, XdpInfo,
    DEFAULT_BACKLOG,
};
pub use counters::CounterSnapshot;
pub use cq::{CompletionQueue, CqError, DEFAULT_CQ_CAPACITY};
pub use ddp::NegotiatedFraming;
pub use device::{Device, EngineLoad, QpInit};
// Each source's share of a listener's backlog, on either transport.
pub use endpoint::{SourcePrefix, SourceShare};
pub use error::{ConnectError, DeviceError, PostError, RegisterError};
pub use listener::{AcceptError, Incoming, Listener};
pub use mapped_file::{FileRegion, MappedFile};
pub use pd::{os_random_u64, Access, MemoryRegion, ProtectionDomain};
pub use queue_pair::{PostKind, PostListError, QpError, QueuePair, RemoteAddr};
pub use sgl::{Sge, WorkRequest, MAX_SGE};
// The AF_XDP layer's types that the xdp transport's settings and reports use.
pub use afxdp::{
    AttachMode, AttachPolicy, BindMode, BusyPoll, SteerCounters, TxChecksumOffload, XdpError,
};
pub use stream::{PlacedTransfer, StreamConfig, StreamCounters, TcpListener, TcpStream, Transfer};
