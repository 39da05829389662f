//! Test support shared by the workspace's test binaries (a dev-dependency only, never shipped).
//!
//! - [`checksum`]: the Internet checksum (RFC 1071) over several slices.
//! - [`synthetic`]: one TCP connection between 198.18.0.1 and 198.18.0.2 as Ethernet frames,
//!   written by hand for the dissectors to read (no network, no root).
//! - [`frame_corpus`]: frames for the rule of which frames are ours (the endpoint's classifier
//!   and the XDP program), each with its verdict, and mutations of a good one.
//! - [`pcap`]: classic pcap files of Ethernet frames.
//! - [`pattern`](mod@pattern): the deterministic test pattern (re-exported from `tool_support`, which the
//!   shipped tools use to write and verify data).
//! - [`privileged`]: the one rule for tests that need root or tools: skip, or (under CI) fail.
//! - [`temp`]: temporary paths.
//! - [`tshark`]: running tshark over a capture file, and live captures in a namespace.
//! - [`iwarp_oracle`]: the checks every live iWARP capture of one connection must pass.
//! - [`syn_flood`]: spoofed SYN frames and a fixed-seed source of spoofed addresses.
//! - [`idle_flood`]: the idle-connection flood's plan, bounds and clients.
//! - [`source_flood`]: idle and silent MPA floods from one source address of their own.
//! - [`sanitizer`]: whether the build runs under AddressSanitizer, and the memory bounds that
//!   hold only without it.
//! - `loom_explore` (in a build with `--cfg loom` only): running a loom model, counted.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod checksum;
pub mod frame_corpus;
pub mod idle_flood;
pub mod iwarp_oracle;
#[cfg(loom)]
pub mod loom_explore;
pub mod pcap;
pub mod privileged;
pub mod sanitizer;
pub mod source_flood;
pub mod syn_flood;
pub mod synthetic;
pub mod temp;
pub mod tshark;

pub use checksum::internet_checksum;
pub use pcap::pcap_file;
pub use privileged::{must_run, or_skip, require_root, require_tool};
pub use sanitizer::ADDRESS_SANITIZER;
pub use synthetic::{Capture, Peer};
pub use temp::{unique_temp_path, TempPath};
/// The test pattern: the one the shipped tools write and check (`tool_support::pattern`).
pub use tool_support::pattern::{self, fill_pattern, mix64, pattern, Pattern};
pub use tshark::{LiveCapture, Tshark};
