//! RDMAP (RFC 5040) over DDP: its headers, its error numbers, and the per-stream engine.
//!
//! - wire: [`control`] (the RDMAP Control Field: version and opcodes; the queue numbers),
//!   [`read_request`], [`terminate`] (RDMAP headers), [`header_error`] (why one did not parse),
//!   [`term_code`] (the Terminate's Layer/EType/Code numbers).
//! - the ULP's interface: [`work_request`] (buffers, options, post errors), [`completion`].
//! - [`engine`]: the DDP/RDMAP engine of one stream at the ULPDU level (work requests,
//!   validation and placement, in-order delivery, completions, Terminate).

pub mod completion;
pub mod completion_ring;
pub mod control;
pub mod engine;
pub mod header_error;
pub mod read_request;
pub mod term_code;
pub mod terminate;
pub mod work_request;
