//! Test and bench tools over the AF_XDP layer (`afxdp`): a netns testbed and a raw-frame
//! ping-pong.
//!
//! - [`testbed`]: namespaces + veth pairs; [`packet_socket`]: an `AF_PACKET` socket to inject
//!   and capture raw frames in tests; [`ping`]: ICMP echo through the kernel.
//! - [`raw`]: raw Ethernet/IPv4/TCP frames over AF_XDP: ping-pong and echo (`raw_lat`).
#![cfg(target_os = "linux")]

pub mod packet_socket;
pub mod ping;
pub mod raw;
// A test fixture (namespaces and veth pairs for the privileged tests of this workspace), not
// part of the library's API.
#[doc(hidden)]
pub mod testbed;
