//! MPA framing (draft-ietf-rddp-mpa-01 / RFC 5044, with RFC 6581's enhanced connection
//! establishment), sans-IO: no sockets, no clocks, no threads. The
//! requirement ids MPA-xx cited here are defined in `REQUIREMENTS.md` at the repository's top.
//!
//! * [`fpdu`]: FPDU encode/decode, a pure function of (config, stream offset, ULPDU).
//! * [`framer`]: a stateful sender on top that tracks the stream offset.
//! * [`marker`]: marker view, positions and FPDUPTR resolution.
//! * [`crc`]: CRC32c, LSB first on the wire.
//! * [`spacing`]: where markers interrupt a ULPDU in its FPDU.
//! * [`mulpdu`](mod@mulpdu): MULPDU from EMSS.
//! * [`startup_frame`] and [`startup`]: MPA Request/Reply frames and the Initiator and
//!   Responder state machines; [`revision`]: Rev 0, 1 and 2 and which a peer accepts;
//!   [`enhanced`] and [`read_depths`]: Rev 2's IRD/ORD octets and peer-to-peer mode, and their
//!   negotiation (RFC 6581).
//! * [`stream`]: in-order receive parser over a byte stream of any segmentation.
//! * [`locate`](mod@locate): out-of-order FPDU locator for one committed TCP segment.
//! * [`error`]: error codes of draft §7 and the action each demands.
//!
//! Stream offsets are `u32` relative to SeqStart (the first octet after the sender's own
//! startup frame), wrapping like TCP sequence numbers.
//!
//! ```
//! use mpa::{Framer, FramingConfig, StreamParser};
//! let cfg = FramingConfig { markers: true, crc: true };
//! let mut tx = Framer::new(cfg, 0);
//! let mut wire = Vec::new();
//! // A ULPDU given as a gather list: e.g. DDP header, then payload.
//! tx.encode_to_vec(&[b"ddp-hdr", b"payload"], &mut wire).unwrap();
//! let mut rx = StreamParser::new(cfg, 0);
//! for chunk in wire.chunks(5) {
//!     rx.push(chunk);
//!     while let Some(f) = rx.next_fpdu().unwrap() {
//!         assert_eq!(f.ulpdu_to_vec(), b"ddp-hdrpayload");
//!     }
//! }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod crc;
mod crc_interleaved;
pub mod enhanced;
pub mod error;
pub mod fpdu;
pub mod framer;
pub mod locate;
pub mod marker;
pub mod mulpdu;
pub mod read_depths;
pub mod revision;
pub mod spacing;
pub mod startup;
pub mod startup_frame;
pub mod stream;

pub use enhanced::{RtrType, RtrTypes};
pub use error::{BufferTooSmall, EncodeError, ErrorAction, ErrorCode, FramingError, StartupError};
pub use fpdu::{
    decode_fpdu, encode_fpdu, encode_fpdu_marked, encode_fpdu_spaced, encode_fpdu_unmarked,
    encode_fpdu_with, fpdu_wire_len, Decoded, FpduLayout, FpduRef, FramingConfig, MAX_FPDU_LEN,
    MAX_ULPDU_LEN,
};
pub use framer::{Fit, Framer, WireLens};
pub use locate::{locate, LocateOptions, LocatedFpdu, Locator};
pub use mulpdu::mulpdu;
pub use read_depths::ReadDepths;
pub use revision::Revisions;
pub use spacing::Spacing;
pub use startup::{
    Initiator, Negotiated, RequestInfo, Responder, Role, StartupConfig, StartupEvent,
};
pub use stream::StreamParser;
