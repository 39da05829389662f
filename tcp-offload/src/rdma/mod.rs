//! The TCP RDMA option (draft-csapuntz-tcprdma-00; requirement ids TCPRDMA-*, defined in
//! `REQUIREMENTS.md`): a pure annotation on segments that carry bytes of a bulk
//! transfer, telling the receiver which transfer (RID) they belong to and where in its buffer
//! they go, so that it can place them at once, even out of order, and skip the copy later.
//!
//! * [`option`]: the option's codec (kind 25, lengths 2, 4, 16, 20).
//! * [`annotate`]: the sender's marks (runs, message starts), the one-run cut and the option per segment.
//! * [`placement`]: the receiver's buffers per RID, placement and the placed ranges.
//! * The connection's calls (`Connection::mark_transfer`, `expect_transfer`, `recv_transfer`, …)
//!   are in `connection/rdma.rs`.

pub mod annotate;
pub mod option;
pub mod placement;

pub use annotate::{AnnotateError, MssAccounting, SendMarks, Transfer};
pub use option::{RdmaAnnotation, RdmaOption, RdmaOptionError};
pub use placement::{PlacedTransfer, PlacementError};

#[cfg(test)]
mod wire_tests;
