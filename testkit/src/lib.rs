//! Test support shared by the workspace's test binaries (a dev-dependency only, never shipped).
//!
//! - [`checksum`]: the Internet checksum (RFC 1071) over several slices.
//! - [`synthetic`]: one TCP connection between 198.18.0.1 and 198.18.0.2 as Ethernet frames,
//!   written by hand for the dissectors to read (no network, no root).
//! - [`pcap`]: classic pcap files of Ethernet frames.
//! - [`tools`]: whether a tool may be missing (`CI=true` says no), and temporary paths.
//! - [`tshark`]: running tshark over a capture file, and live captures in a namespace.
//! - [`iwarp_oracle`]: the checks every live iWARP capture of one connection must pass.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod checksum;
pub mod iwarp_oracle;
pub mod pattern;
pub mod pcap;
pub mod synthetic;
pub mod tools;
pub mod tshark;

pub use checksum::internet_checksum;
pub use pattern::{fill_pattern, pattern};
pub use pcap::pcap_file;
pub use synthetic::{Capture, Peer};
pub use tools::{require_tool, skipping_forbidden, unique_temp_path, TempPath};
pub use tshark::{LiveCapture, Tshark};
