//! Transport-header errors and the answer each one gets (§5.3).

use crate::xdr::XdrError;
use thiserror::Error;

/// Why a received transport header (or the chunk data it describes) was refused.
/// Small and `Copy`; [`HeaderError::response`] says what a server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// Fewer than the 16 fixed bytes: no XID to answer to, so the message is dropped.
    #[error("transport header shorter than 16 bytes")]
    Truncated,
    /// `vers` is not 1 (RPCRDMA-23, RPCRDMA-33).
    #[error("unsupported RPC-over-RDMA version {0}")]
    UnsupportedVersion(u32),
    /// `proc` is not 0..=4.
    #[error("unknown transport procedure {0}")]
    UnknownProc(u32),
    /// The chunk lists are not well-formed XDR (bad optional word, count past the end, too many
    /// entries for our limits).
    #[error("malformed chunk lists: {0}")]
    Xdr(XdrError),
    /// A read position is not a multiple of 4.
    #[error("read chunk position not 4-byte aligned")]
    MisalignedPosition,
    /// Read positions are not in ascending order.
    #[error("read chunk positions out of order")]
    UnorderedPositions,
    /// A position-0 read chunk outside RDMA_NOMSG (§5.1).
    #[error("position-zero read chunk outside RDMA_NOMSG")]
    PositionZeroOutsideNoMsg,
    /// RDMA_NOMSG that says where the message is nowhere (no position-0 read chunk in a call; no
    /// reply chunk and no position-0 read chunk in a reply).
    #[error("RDMA_NOMSG without a chunk holding the message")]
    NoMsgWithoutMessage,
    /// A write chunk or reply chunk with no segments in a call.
    #[error("empty write or reply chunk")]
    EmptyChunk,
    /// A segment of length 0 advertised in a call.
    #[error("zero-length segment in a call")]
    ZeroLengthSegment,
    /// A segment longer than the local maximum I/O size.
    #[error("segment longer than the local limit")]
    SegmentTooLong,
    /// RDMA_MSGP `align` is not a non-zero power of two that is a multiple of 4 (§3.5).
    #[error("RDMA_MSGP alignment invalid")]
    BadAlignment,
    /// RDMA_MSGP carrying read chunks: positions in a padded stream are undefined (P-3).
    #[error("read chunks in RDMA_MSGP")]
    ReadChunkInPaddedMessage,
    /// RDMA_MSGP or RDMA_DONE while draft-00 compatibility is off (RFC 8166 "not to be used").
    #[error("draft-00 procedure not enabled")]
    CompatProcDisabled,
    /// A reply carrying a read list while read chunks in replies are off (RFC 8166 behaviour).
    #[error("read list in a reply")]
    ReadListInReply,
    /// A reply chunk in an RDMA_MSG/RDMA_MSGP reply (it is echoed only with RDMA_NOMSG, RPCRDMA-30).
    #[error("reply chunk in an inline reply")]
    ReplyChunkInInlineReply,
    /// A reply's write list or reply chunk is not an echo of the call's (RPCRDMA-18, W-1).
    #[error("reply chunks do not echo the call's")]
    EchoMismatch,
    /// An inline byte count differs from the sum of its chunk's lengths (RPCRDMA-13).
    #[error("inline length differs from chunk length")]
    LengthMismatch,
    /// A read chunk was not consumed by decoding the message, or a write chunk was missing.
    #[error("chunk does not match the message")]
    ChunkNotUsed,
    /// A procedure the receiving side never accepts (RDMA_ERROR at a server, RDMA_DONE at a
    /// client): dropped.
    #[error("procedure not valid in this direction")]
    WrongDirection,
    /// A long message (the position-0 read chunk of an RDMA_NOMSG, RPCRDMA-29) longer than the
    /// receiver's buffer for it; refused before anything is allocated or read.
    #[error("long message larger than the receiver's buffer for it")]
    LongMessageTooLong,
}

impl From<XdrError> for HeaderError {
    fn from(e: XdrError) -> Self {
        HeaderError::Xdr(e)
    }
}

/// What a server sends back for a refused request (§5.3). RPCRDMA-34: every transport-header or
/// chunk error other than the version is answered with ERR_CHUNK; only malformed XDR inside the
/// RPC arguments gets GARBAGE_ARGS (see `storage_send`). The choice is deterministic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorResponse {
    /// Nothing: no XID to answer (too short), or a message that is never answered.
    Drop,
    /// RDMA_ERROR / ERR_VERS with the supported range (RPCRDMA-33).
    ErrVers,
    /// RDMA_ERROR / ERR_CHUNK (RPCRDMA-32).
    ErrChunk,
}

impl HeaderError {
    /// The answer a server gives to a request refused with this error. A client cannot answer
    /// a bad reply (RDMA_ERROR is only a reply to requests): it fails the RPC instead.
    pub fn response(self) -> ErrorResponse {
        match self {
            HeaderError::Truncated | HeaderError::WrongDirection => ErrorResponse::Drop,
            HeaderError::UnsupportedVersion(_) => ErrorResponse::ErrVers,
            _ => ErrorResponse::ErrChunk,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpcrdma_33_34_error_mapping_is_fixed() {
        assert_eq!(HeaderError::Truncated.response(), ErrorResponse::Drop);
        assert_eq!(
            HeaderError::UnsupportedVersion(7).response(),
            ErrorResponse::ErrVers
        );
        assert_eq!(
            HeaderError::UnknownProc(9).response(),
            ErrorResponse::ErrChunk
        );
        assert_eq!(
            HeaderError::LengthMismatch.response(),
            ErrorResponse::ErrChunk
        );
        assert_eq!(
            HeaderError::Xdr(XdrError::BadBool).response(),
            ErrorResponse::ErrChunk
        );
        assert_eq!(HeaderError::WrongDirection.response(), ErrorResponse::Drop);
    }
}
