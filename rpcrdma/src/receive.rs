//! The receive path of one Send: parse, validate, and decide the answer (§5.3).
//! Nothing here starts RDMA; a caller only acts on [`ServerInbound::Call`] or
//! [`ClientInbound::Reply`], so an invalid header never leads to a Read or Write (RPCRDMA-31).

use crate::chunk_rules::Rules;
use crate::error::{ErrorResponse, HeaderError};
use crate::header::{Body, ErrorBody, HeaderRepr, Packet};

/// Parses the header at the start of `buf` and applies one direction's chunk rules.
fn parse_checked(
    buf: &[u8],
    rules: &Rules,
    check: fn(&Rules, &HeaderRepr) -> Result<(), HeaderError>,
) -> Result<HeaderRepr, HeaderError> {
    let h = HeaderRepr::parse(&Packet::new_checked(buf)?, &rules.limits)?;
    check(rules, &h)?;
    Ok(h)
}

/// What a server makes of one received Send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerInbound<'a> {
    /// A valid call: its header and the bytes after it (the inline RPC message for MSG/MSGP).
    Call {
        /// The transport header.
        header: HeaderRepr,
        /// Bytes after the header.
        message: &'a [u8],
    },
    /// RDMA_DONE: the client has read the read chunks of reply `xid` (RPCRDMA-04).
    Done {
        /// XID of the reply whose chunks may now be freed (C-5).
        xid: u32,
        /// The client's requested credit.
        credit: u32,
    },
    /// Refused. `reply` is the RDMA_ERROR to send, `None` to drop silently.
    Refused {
        /// Why.
        error: HeaderError,
        /// The answer, if any.
        reply: Option<HeaderRepr>,
    },
}

/// Classifies a Send received by a server. `grant` is the credit value to put in an RDMA_ERROR
/// (C-4: ERROR carries a valid grant).
pub fn receive_at_server<'a>(buf: &'a [u8], rules: &Rules, grant: u32) -> ServerInbound<'a> {
    let parsed = parse_checked(buf, rules, Rules::check_call);
    match parsed {
        Ok(HeaderRepr {
            xid,
            credit,
            body: Body::Done,
        }) => ServerInbound::Done { xid, credit },
        Ok(header) => {
            let n = header.buffer_len();
            ServerInbound::Call {
                header,
                message: &buf[n..],
            }
        }
        Err(error) => ServerInbound::Refused {
            error,
            reply: refusal(buf, error, grant),
        },
    }
}

/// The RDMA_ERROR a server sends for a request in `buf` refused with `error`, or `None` when
/// the request is dropped. ERR_VERS echoes the XID and states the supported range (RPCRDMA-33);
/// ERR_CHUNK echoes the XID (RPCRDMA-32).
pub fn refusal(buf: &[u8], error: HeaderError, grant: u32) -> Option<HeaderRepr> {
    let xid = Packet::new_checked(buf).ok()?.xid();
    match error.response() {
        ErrorResponse::Drop => None,
        ErrorResponse::ErrVers => Some(HeaderRepr::err_vers(xid, grant)),
        ErrorResponse::ErrChunk => Some(HeaderRepr::err_chunk(xid, grant)),
    }
}

/// What a client makes of one received Send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientInbound<'a> {
    /// A valid reply: its header and the bytes after it.
    Reply {
        /// The transport header.
        header: HeaderRepr,
        /// Bytes after the header.
        message: &'a [u8],
    },
    /// The server refused call `xid`.
    Error {
        /// XID of the refused call.
        xid: u32,
        /// The server's grant.
        credit: u32,
        /// Why.
        body: ErrorBody,
    },
    /// A reply the client cannot use; it fails call `xid` (if known) with a transport error.
    Invalid {
        /// XID, when at least 16 bytes arrived.
        xid: Option<u32>,
        /// Why.
        error: HeaderError,
    },
}

/// Classifies a Send received by a client.
pub fn receive_at_client<'a>(buf: &'a [u8], rules: &Rules) -> ClientInbound<'a> {
    let parsed = parse_checked(buf, rules, Rules::check_reply);
    match parsed {
        Ok(HeaderRepr {
            xid,
            credit,
            body: Body::Error(body),
        }) => ClientInbound::Error { xid, credit, body },
        Ok(header) => {
            let n = header.buffer_len();
            ClientInbound::Reply {
                header,
                message: &buf[n..],
            }
        }
        Err(error) => ClientInbound::Invalid {
            xid: Packet::new_checked(buf).ok().map(|p| p.xid()),
            error,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk_list::ChunkLists;
    use crate::segment::{ReadSegment, Segment};

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    #[test]
    fn rpcrdma_33_version_7_is_answered_with_err_vers_1_1() {
        let buf = words(&[0x1a2b_3c4d, 7, 32, 0, 0, 0, 0]);
        let ServerInbound::Refused { error, reply } =
            receive_at_server(&buf, &Rules::default(), 32)
        else {
            panic!("accepted a version-7 header")
        };
        assert_eq!(error, HeaderError::UnsupportedVersion(7));
        let reply = reply.unwrap().to_vec();
        // "... 00000004 00000001 00000001 00000001" with the xid echoed.
        assert_eq!(reply, words(&[0x1a2b_3c4d, 1, 32, 4, 1, 1, 1]));
    }

    #[test]
    fn rpcrdma_32_bad_discriminant_gets_err_chunk_with_same_xid() {
        // The read-list "present" word is 2.
        let buf = words(&[0xdead_beef, 1, 8, 0, 2, 0, 0]);
        match receive_at_server(&buf, &Rules::default(), 8) {
            ServerInbound::Refused { reply: Some(r), .. } => {
                assert_eq!(r.to_vec(), words(&[0xdead_beef, 1, 8, 4, 2]));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rpcrdma_32_segment_count_past_the_end_gets_err_chunk() {
        // Write list with a chunk claiming 1000 segments and none following.
        let buf = words(&[5, 1, 8, 0, 0, 1, 1000]);
        match receive_at_server(&buf, &Rules::default(), 8) {
            ServerInbound::Refused { reply: Some(r), .. } => {
                assert_eq!(r, HeaderRepr::err_chunk(5, 8))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_proc_gets_err_chunk_and_short_header_is_dropped() {
        let buf = words(&[5, 1, 8, 9]);
        assert!(matches!(
            receive_at_server(&buf, &Rules::default(), 8),
            ServerInbound::Refused { error: HeaderError::UnknownProc(9), reply: Some(r) }
                if r == HeaderRepr::err_chunk(5, 8)
        ));
        assert_eq!(
            receive_at_server(&buf[..12], &Rules::default(), 8),
            ServerInbound::Refused {
                error: HeaderError::Truncated,
                reply: None
            }
        );
    }

    #[test]
    fn chunk_rule_violation_gets_err_chunk() {
        let h = HeaderRepr {
            xid: 77,
            credit: 2,
            body: Body::Msg(ChunkLists {
                reads: vec![ReadSegment {
                    position: 6,
                    target: Segment {
                        handle: 1,
                        length: 8,
                        offset: 0,
                    },
                }],
                ..Default::default()
            }),
        };
        let buf = h.to_vec();
        assert_eq!(
            receive_at_server(&buf, &Rules::default(), 3),
            ServerInbound::Refused {
                error: HeaderError::MisalignedPosition,
                reply: Some(HeaderRepr::err_chunk(77, 3))
            }
        );
    }

    #[test]
    fn error_at_server_is_dropped_and_done_is_reported() {
        let err = HeaderRepr::err_chunk(1, 1).to_vec();
        assert!(matches!(
            receive_at_server(&err, &Rules::default(), 1),
            ServerInbound::Refused { reply: None, .. }
        ));
        let done = HeaderRepr::done(42, 3).to_vec();
        assert_eq!(
            receive_at_server(&done, &Rules::default(), 1),
            ServerInbound::Done { xid: 42, credit: 3 }
        );
    }

    #[test]
    fn valid_call_yields_header_and_message() {
        let h = HeaderRepr {
            xid: 3,
            credit: 1,
            body: Body::Msg(ChunkLists::empty()),
        };
        let mut buf = h.to_vec();
        buf.extend_from_slice(b"rpc!");
        assert_eq!(
            receive_at_server(&buf, &Rules::default(), 1),
            ServerInbound::Call {
                header: h,
                message: b"rpc!"
            }
        );
    }

    #[test]
    fn client_sees_errors_and_flags_bad_replies() {
        let e = HeaderRepr::err_vers(9, 4).to_vec();
        assert_eq!(
            receive_at_client(&e, &Rules::default()),
            ClientInbound::Error {
                xid: 9,
                credit: 4,
                body: ErrorBody::Vers { low: 1, high: 1 }
            }
        );
        let done = HeaderRepr::done(9, 1).to_vec();
        assert_eq!(
            receive_at_client(&done, &Rules::default()),
            ClientInbound::Invalid {
                xid: Some(9),
                error: HeaderError::WrongDirection
            }
        );
    }
}
