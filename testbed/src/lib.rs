//! The network fixture of xwarp's privileged tests and of the bench: throw-away network
//! namespaces joined by veth pairs ([`VethTestbed`]), and what tests use to see and make
//! traffic on them without the code under test: an `AF_PACKET` socket ([`packet_socket`]),
//! ICMP echo through the kernel ([`ping`]) and raw Ethernet/IPv4/TCP frames ([`tcp_frame`]).
//!
//! A dev-dependency of `afxdp`, `dataplane` and `xwarpd`; a normal one of `bench` only, whose
//! `compare` builds testbeds at run time (`bench/tests/shipped_dependencies.rs` checks that
//! `dataplane` and `xwarpd` never carry it).
//!
//! Every `unsafe` block states why it is sound (`// Safety:`).
#![cfg(target_os = "linux")]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod packet_socket;
pub mod ping;
pub mod tcp_frame;
mod veth;

pub use veth::{available, for_test, for_test_bridged, Side, VethTestbed};
