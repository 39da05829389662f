//! MPA errors and the action each one demands (draft §7).
//!
//! Three kinds are kept apart: framing errors on a receive half connection (codes 2 and 3,
//! plus the bad-length case A11: stop delivery, keep TCP open), startup failures (code 4:
//! close TCP at once; codes 6 and 7 of RFC 6581: Terminate, then close) and local API misuse
//! ([`EncodeError`], nothing goes on the wire).

use thiserror::Error;

/// The numeric MPA error codes of draft §7. Kept numerically stable: RDMAP Terminate
/// messages carry 2 and 3 as "LLP/MPA" error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorCode {
    /// 1: TCP connection closed, terminated or lost.
    ConnectionLost = 1,
    /// 2: received CRC differs from the computed one.
    CrcError = 2,
    /// 3: markers and the ULPDU_Length chain disagree about an FPDU start.
    MarkerError = 3,
    /// 4: invalid MPA Request or Reply frame (also: startup timed out).
    InvalidStartupFrame = 4,
    /// 5: local catastrophic error (RFC 6581 §9).
    LocalCatastrophic = 5,
    /// 6: insufficient IRD resources: the peer's ORD exceeds our IRD (RFC 6581 §5, §9).
    InsufficientIrd = 6,
    /// 7: no matching RTR option: peer-to-peer mode asked and no offered RTR type chosen
    /// (RFC 6581 §5, §9).
    NoMatchingRtr = 7,
}

/// What the owner of the connection must do after an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorAction {
    /// Report to DDP/the ULP and deliver no further FPDU on this half connection
    /// (MPA-111), but do **not** close TCP (MPA-112): the ULP closes, possibly after
    /// sending a Terminate on the other half connection.
    StopDelivery,
    /// Close the TCP connection immediately and report the error locally (MPA-79,
    /// MPA-82, MPA-86, MPA-109).
    Close,
    /// The connection is already gone; only report it (code 1).
    Report,
    /// MPA reached Full Operation but the RDMA parameters cannot work (RFC 6581 codes 6 and
    /// 7): send a Terminate carrying the code (layer LLP, type MPA), then close.
    Terminate,
}

/// A receive-side framing error: the FPDU at `offset` is invalid (draft §5.2, §5.4, §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum FramingError {
    /// CRC checking is on and the CRC field does not match (code 2, MPA-55).
    #[error("MPA CRC error (code 2)")]
    CrcMismatch,
    /// A marker's FPDUPTR disagrees with the FPDU found by ULPDU_Length (code 3, MPA-108).
    #[error("MPA marker error (code 3)")]
    MarkerMismatch,
    /// ULPDU_Length above 64768 (ambiguity A11): treated as an invalid FPDU like code 2,
    /// without waiting for up to 64 KiB of data.
    #[error("MPA ULPDU_Length {0} above 64768")]
    UlpduTooLong(u16),
    /// With markers on, an FPDU offset where no FPDU can start (not a multiple of 4, or 4
    /// past a marker position; see [`crate::fpdu::is_valid_start`]): the caller's stream
    /// bookkeeping is off.
    #[error("no FPDU can start at this stream offset with markers on")]
    Misaligned,
}

impl FramingError {
    /// The draft §7 code reported to DDP.
    pub fn code(self) -> ErrorCode {
        match self {
            FramingError::CrcMismatch | FramingError::UlpduTooLong(_) => ErrorCode::CrcError,
            FramingError::MarkerMismatch | FramingError::Misaligned => ErrorCode::MarkerError,
        }
    }

    /// What to do: always stop delivery on this half connection and keep TCP open.
    pub fn action(self) -> ErrorAction {
        ErrorAction::StopDelivery
    }
}

/// Why the startup phase (Request/Reply exchange) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum StartupError {
    /// The 16-octet key is neither the Request nor the Reply key (MPA-86, MPA-95, MPA-97).
    #[error("bad MPA key")]
    BadKey,
    /// An Initiator received a Request key: both ends are Initiators (MPA-89).
    #[error("peer is also an MPA Initiator")]
    PeerIsInitiator,
    /// A Responder received a Reply key: both ends are Responders.
    #[error("peer is also an MPA Responder")]
    PeerIsResponder,
    /// Rev is not the configured revision (MPA-102).
    #[error("unsupported MPA revision {0}")]
    BadRevision(u8),
    /// PD_Length above the local private-data limit (MPA-91, ambiguity A16).
    #[error("MPA private data length {0} above the local limit")]
    PrivateDataTooLong(u16),
    /// A Rev 2 frame with the Enhanced flag and fewer than 4 octets of private data
    /// (RFC 6581 §7.1).
    #[error("MPA Rev 2 frame without its IRD/ORD octets")]
    BadEnhancedData,
    /// The Reply's ORD exceeds our IRD (RFC 6581 §5, code 6).
    #[error("peer ORD {peer_ord} above our IRD {ird}")]
    InsufficientIrd {
        /// Our IRD.
        ird: u16,
        /// The peer's ORD.
        peer_ord: u16,
    },
    /// We asked for peer-to-peer mode and the Reply chose no RTR type we offered (RFC 6581 §5,
    /// code 7).
    #[error("no matching RTR option")]
    NoMatchingRtr,
    /// No complete frame before the startup deadline (MPA-90, MPA-92).
    #[error("MPA startup timed out")]
    Timeout,
    /// TCP closed or reset during startup.
    #[error("connection closed during MPA startup")]
    ConnectionClosed,
}

impl StartupError {
    /// The draft §7 code (4 for every frame problem and the timeout, 1 for a lost connection;
    /// RFC 6581's 6 and 7 for IRD/ORD and RTR mismatches).
    pub fn code(self) -> ErrorCode {
        match self {
            StartupError::ConnectionClosed => ErrorCode::ConnectionLost,
            StartupError::InsufficientIrd { .. } => ErrorCode::InsufficientIrd,
            StartupError::NoMatchingRtr => ErrorCode::NoMatchingRtr,
            _ => ErrorCode::InvalidStartupFrame,
        }
    }

    /// What to do: close TCP immediately (or just report if it is already gone); after a
    /// valid Reply whose RDMA parameters do not fit, Terminate first (RFC 6581 §5).
    pub fn action(self) -> ErrorAction {
        match self {
            StartupError::ConnectionClosed => ErrorAction::Report,
            StartupError::InsufficientIrd { .. } | StartupError::NoMatchingRtr => {
                ErrorAction::Terminate
            }
            _ => ErrorAction::Close,
        }
    }
}

/// Local misuse of the sending API: nothing was written, the connection is intact (MPA-22).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum EncodeError {
    /// The ULPDU is longer than 64768 octets (MPA-22).
    #[error("ULPDU of {0} octets above 64768")]
    UlpduTooLong(usize),
    /// The output buffer is shorter than the FPDU (`needed` octets).
    #[error("output buffer too small: {needed} octets needed")]
    BufferTooSmall {
        /// Octets the FPDU takes.
        needed: usize,
    },
    /// Markers on and no FPDU can start at this offset ([`crate::fpdu::is_valid_start`]).
    #[error("no FPDU can start at this stream offset with markers on")]
    Misaligned,
    /// A Responder may not send an FPDU before it has received one (MPA-85).
    #[error("responder must receive an FPDU before sending one")]
    AwaitingPeerFpdu,
}

/// A copy target shorter than the ULPDU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
#[error("buffer too small: {needed} octets needed")]
pub struct BufferTooSmall {
    /// Octets the copy needs.
    pub needed: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §7: codes 1-4 stay numerically stable (Terminate messages carry them).
    #[test]
    fn codes_are_the_draft_numbers() {
        assert_eq!(ErrorCode::ConnectionLost as u8, 1);
        assert_eq!(ErrorCode::CrcError as u8, 2);
        assert_eq!(ErrorCode::MarkerError as u8, 3);
        assert_eq!(ErrorCode::InvalidStartupFrame as u8, 4);
    }

    /// RFC 6581 §9: the codes it adds, and the Terminate its two negotiation errors demand.
    #[test]
    fn rfc6581_9_codes() {
        assert_eq!(ErrorCode::LocalCatastrophic as u8, 5);
        assert_eq!(ErrorCode::InsufficientIrd as u8, 6);
        assert_eq!(ErrorCode::NoMatchingRtr as u8, 7);
        let e = StartupError::InsufficientIrd {
            ird: 1,
            peer_ord: 2,
        };
        assert_eq!(
            (e.code(), e.action()),
            (ErrorCode::InsufficientIrd, ErrorAction::Terminate)
        );
        let e = StartupError::NoMatchingRtr;
        assert_eq!(
            (e.code(), e.action()),
            (ErrorCode::NoMatchingRtr, ErrorAction::Terminate)
        );
        let e = StartupError::BadEnhancedData;
        assert_eq!(
            (e.code(), e.action()),
            (ErrorCode::InvalidStartupFrame, ErrorAction::Close)
        );
    }

    /// MPA-111/112: framing errors stop delivery, never close TCP; MPA-109: startup errors close.
    #[test]
    fn actions_per_error_class() {
        assert_eq!(
            FramingError::CrcMismatch.action(),
            ErrorAction::StopDelivery
        );
        assert_eq!(
            FramingError::MarkerMismatch.action(),
            ErrorAction::StopDelivery
        );
        assert_eq!(
            FramingError::UlpduTooLong(65000).action(),
            ErrorAction::StopDelivery
        );
        assert_eq!(FramingError::CrcMismatch.code(), ErrorCode::CrcError);
        assert_eq!(FramingError::MarkerMismatch.code(), ErrorCode::MarkerError);
        assert_eq!(
            FramingError::UlpduTooLong(65000).code(),
            ErrorCode::CrcError
        );
        for e in [
            StartupError::BadKey,
            StartupError::PeerIsInitiator,
            StartupError::PeerIsResponder,
            StartupError::BadRevision(7),
            StartupError::PrivateDataTooLong(600),
            StartupError::Timeout,
        ] {
            assert_eq!(e.action(), ErrorAction::Close, "{e:?}");
            assert_eq!(e.code(), ErrorCode::InvalidStartupFrame, "{e:?}");
        }
        assert_eq!(StartupError::ConnectionClosed.action(), ErrorAction::Report);
        assert_eq!(
            StartupError::ConnectionClosed.code(),
            ErrorCode::ConnectionLost
        );
    }
}
