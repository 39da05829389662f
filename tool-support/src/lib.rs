//! What xwarp's shipped programs share with each other and with the tests that check what they
//! wrote, so each is defined once:
//!
//! - [`ByteSize`]: a byte count as people write it on a command line or in a config file
//!   (`4096`, `4K`, `4KiB`, `4 MiB`, `1G`; powers of 1024). Each program keeps its own limits.
//! - [`TimeSpan`]: a duration as people write it, one grammar for every tool and config file
//!   (`10` seconds, `1.5s`, `250ms`, `5m`, `1h`). Each program keeps its own limits.
//! - [`pattern`]: the deterministic test pattern the tools write and verify (`xwarp-rdma`,
//!   `xwarp-bench rpc_write/rpc_read --verify`), the simulator checks streams against, and the
//!   tests use (`testkit` re-exports it).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod byte_size;
pub mod pattern;
pub mod time_span;

pub use byte_size::{ByteSize, SizeError};
pub use pattern::Pattern;
pub use time_span::{SpanError, TimeSpan};
