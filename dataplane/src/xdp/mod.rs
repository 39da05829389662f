//! AF_XDP transport groundwork: the XDP steering program and its loader, AF_XDP queues with
//! owned frame tokens, next hops from the kernel's tables, the active-open port range, a netns
//! testbed and a raw-frame ping-pong.
//!
//! The layers, bottom up:
//! - [`maps`]: the Rust mirror of `bpf/xwarp_maps.h` (map names, sizes, counter layout).
//! - [`program`]: [`XdpProgram`] loads the embedded `bpf/xwarp_steer.bpf.c` object, attaches it
//!   (native, generic as a fallback; a stale copy replaced, a live one refused: `holders`),
//!   fills the port set, the owned addresses (`owned_addrs`) and the XSKMAP, detaches on drop;
//!   `test_run` runs it on one frame (`BPF_PROG_TEST_RUN`).
//! - [`queues`]: how many rx queues (and so engine queues) an interface has.
//! - [`xsk`]: [`XskQueue`], one UMEM and AF_XDP socket per engine queue; [`Frame`] tokens;
//!   [`steered_queue`] pairs a program with a registered queue.
//! - [`netlink`] and [`next_hop`]: routes, neighbours and link addresses over rtnetlink.
//! - [`ports`]: the active-open local port range and its reservation from the kernel.
//! - [`netns`]: entering network namespaces per thread; [`testbed`]: namespaces + veth pairs;
//!   [`packet_socket`]: an `AF_PACKET` socket to inject and capture raw frames in tests;
//!   [`ping`]: ICMP echo through the kernel.
//! - [`raw`]: raw Ethernet/IPv4/TCP frames over AF_XDP: ping-pong and echo (`raw_lat`).
#![cfg(target_os = "linux")]

mod error;
mod ethtool;
mod holders;
pub mod maps;
pub mod netlink;
pub mod netns;
pub mod next_hop;
mod owned_addrs;
pub mod packet_socket;
pub mod ping;
pub mod ports;
pub mod program;
pub mod queues;
pub mod raw;
mod ring;
pub mod rss;
mod rx_strip;
mod steered;
mod test_run;
mod tx_metadata;
mod tx_slabs;
// A test fixture (namespaces and veth pairs for the privileged tests of this workspace), not
// part of the library's API.
#[doc(hidden)]
pub mod testbed;
mod umem_area;
pub mod xsk;
pub mod xsk_features;
mod xsk_socket;

pub use error::{IfName, XdpError};
pub use maps::{PortKind, SteerCounters};
pub use next_hop::{resolve_next_hop, NextHop};
pub use ports::LocalPortRange;
pub use program::{AttachMode, AttachPolicy, XdpProgram};
pub use steered::steered_queue;
pub use test_run::XdpAction;
pub use xsk::{
    BindMode, BusyPoll, Frame, Slab, TxChecksumOffload, XskConfig, XskQueue, XskStatistics,
};
