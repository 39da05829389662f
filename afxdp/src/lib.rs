//! AF_XDP and XDP for xwarp: the steering program and its loader, AF_XDP queues with owned frame
//! tokens, next hops from the kernel's tables and the active-open port range. The I/O layer
//! under `dataplane`'s engine; it knows nothing of TCP connections, MPA or verbs.
//!
//! The layers, bottom up:
//! - [`maps`]: the Rust mirror of `bpf/xwarp_maps.h` (map names, sizes, counter layout).
//! - [`program`]: [`XdpProgram`] loads the embedded `bpf/xwarp_steer.bpf.c` object (built by
//!   this crate's `build.rs`), attaches it (native, generic as a fallback; a stale copy
//!   replaced, a live one refused: `holders`), fills the port set, the owned addresses
//!   (`owned_addrs`) and the XSKMAP, detaches on drop; `test_run` runs it on one frame
//!   (`BPF_PROG_TEST_RUN`).
//! - [`queues`] and [`rss`]: how many rx queues an interface has, and its RSS (ethtool).
//! - [`xsk`]: [`XskQueue`], one UMEM and AF_XDP socket per queue (our own rings on `libc`,
//!   which check the kernel's indices; `frame_books`: who holds each frame, so the kernel
//!   cannot hand one back twice); [`Frame`] tokens; [`xsk_features`]: what the driver offers;
//!   [`steered_queue`] pairs a program with a registered queue.
//! - [`netlink`] and [`next_hop`]: routes, neighbours and link addresses over rtnetlink.
//! - [`ports`]: the active-open local port range and its reservation from the kernel.
//! - [`netns`]: entering network namespaces per thread.
//! - [`bulk_copy`]: copies into and out of frames in pieces glibc copies fast.
//! - [`sendto_times`]: the time spent in transmit kicks (with the `sendto-times` feature).
//!
//! Every `unsafe` block and impl states why it is sound (`// Safety:`), and an `unsafe fn`
//! spells out each unsafe operation in its body.
#![cfg(target_os = "linux")]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod bulk_copy;
mod error;
mod ethtool;
mod frame_books;
mod holders;
pub mod maps;
pub mod netlink;
pub mod netns;
pub mod next_hop;
mod owned_addrs;
pub mod ports;
pub mod program;
pub mod queues;
mod ring;
pub mod rss;
mod rx_strip;
mod sendto_times;
mod steered;
mod test_run;
mod tx_metadata;
mod tx_slabs;
mod umem_area;
pub mod xsk;
pub mod xsk_features;
mod xsk_socket;

pub use error::{IfName, XdpError};
pub use maps::{PortKind, SteerCounters};
pub use next_hop::{resolve_next_hop, NextHop};
pub use ports::LocalPortRange;
pub use program::{AttachMode, AttachPolicy, XdpProgram};
pub use sendto_times::{sendto_times, SendtoTimes};
pub use steered::steered_queue;
pub use test_run::XdpAction;
pub use xsk::{
    BindMode, BusyPoll, Frame, Slab, TxChecksumOffload, XskConfig, XskQueue, XskRefused,
    XskStatistics,
};
