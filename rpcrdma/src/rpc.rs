//! ONC RPC message headers (RFC 5531 §9): CALL with rpcvers 2, REPLY accepted or denied.
//! Procedure arguments and results follow these headers in the same XDR stream.

use crate::auth::OpaqueAuth;
use crate::xdr::{XdrError, XdrReader, XdrWriter};
use thiserror::Error;

/// The ONC RPC protocol version (RFC 5531: `rpcvers` = 2).
pub const RPC_VERSION: u32 = 2;

/// `msg_type`.
pub mod msg_type {
    /// CALL.
    pub const CALL: u32 = 0;
    /// REPLY.
    pub const REPLY: u32 = 1;
}

/// Errors decoding an RPC header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RpcError {
    /// Malformed XDR.
    #[error("malformed RPC header: {0}")]
    Xdr(#[from] XdrError),
    /// `msg_type` is neither CALL nor REPLY, or not the one expected.
    #[error("unexpected RPC message type {0}")]
    MsgType(u32),
    /// A CALL with `rpcvers` other than 2: answer MSG_DENIED / RPC_MISMATCH(2, 2).
    #[error("RPC version {0} not supported")]
    RpcVersion(u32),
}

/// The header of a CALL (`call_body` after `xid` and `msg_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallHeader<'a> {
    /// Transaction id.
    pub xid: u32,
    /// Program number.
    pub prog: u32,
    /// Program version.
    pub vers: u32,
    /// Procedure number.
    pub proc_num: u32,
    /// Credentials.
    pub cred: OpaqueAuth<'a>,
    /// Verifier.
    pub verf: OpaqueAuth<'a>,
}

impl<'a> CallHeader<'a> {
    /// A call with AUTH_NONE credentials and verifier.
    pub fn new(xid: u32, prog: u32, vers: u32, proc_num: u32) -> Self {
        Self {
            xid,
            prog,
            vers,
            proc_num,
            cred: OpaqueAuth::NONE,
            verf: OpaqueAuth::NONE,
        }
    }

    /// Encoded length in bytes (40 with AUTH_NONE).
    pub fn buffer_len(&self) -> usize {
        24 + self.cred.buffer_len() + self.verf.buffer_len()
    }

    /// Decodes a CALL header.
    pub fn decode(r: &mut XdrReader<'a>) -> Result<Self, RpcError> {
        let xid = r.u32()?;
        let mtype = r.u32()?;
        if mtype != msg_type::CALL {
            return Err(RpcError::MsgType(mtype));
        }
        let rpcvers = r.u32()?;
        if rpcvers != RPC_VERSION {
            return Err(RpcError::RpcVersion(rpcvers));
        }
        Ok(Self {
            xid,
            prog: r.u32()?,
            vers: r.u32()?,
            proc_num: r.u32()?,
            cred: OpaqueAuth::decode(r)?,
            verf: OpaqueAuth::decode(r)?,
        })
    }

    /// Encodes a CALL header.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        w.u32(self.xid)?;
        w.u32(msg_type::CALL)?;
        w.u32(RPC_VERSION)?;
        w.u32(self.prog)?;
        w.u32(self.vers)?;
        w.u32(self.proc_num)?;
        self.cred.encode(w)?;
        self.verf.encode(w)
    }
}

/// `accept_stat` of an accepted reply. With `Success` the results follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AcceptStat {
    /// RPC executed successfully; results follow.
    Success,
    /// Program not exported.
    ProgUnavail,
    /// Version not supported; the supported range.
    ProgMismatch {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// Procedure not supported.
    ProcUnavail,
    /// Arguments could not be decoded.
    GarbageArgs,
    /// Memory allocation failure or similar.
    SystemErr,
}

/// `reject_stat` of a denied reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectStat {
    /// RPC version not supported; the supported range.
    RpcMismatch {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// Authentication failed, with the `auth_stat`.
    AuthError(u32),
}

/// The body of a REPLY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplyStat<'a> {
    /// MSG_ACCEPTED.
    Accepted {
        /// Server's verifier.
        verf: OpaqueAuth<'a>,
        /// Outcome.
        stat: AcceptStat,
    },
    /// MSG_DENIED.
    Denied(RejectStat),
}

/// The header of a REPLY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplyHeader<'a> {
    /// Transaction id of the call.
    pub xid: u32,
    /// Accepted or denied.
    pub stat: ReplyStat<'a>,
}

impl<'a> ReplyHeader<'a> {
    /// An accepted reply with AUTH_NONE verifier and `stat`.
    pub fn accepted(xid: u32, stat: AcceptStat) -> Self {
        Self {
            xid,
            stat: ReplyStat::Accepted {
                verf: OpaqueAuth::NONE,
                stat,
            },
        }
    }

    /// A successful reply (results follow) with AUTH_NONE verifier.
    pub fn success(xid: u32) -> Self {
        Self::accepted(xid, AcceptStat::Success)
    }

    /// The answer to a call with an unsupported `rpcvers`.
    pub fn rpc_mismatch(xid: u32) -> Self {
        Self {
            xid,
            stat: ReplyStat::Denied(RejectStat::RpcMismatch {
                low: RPC_VERSION,
                high: RPC_VERSION,
            }),
        }
    }

    /// Whether results follow (accepted with SUCCESS).
    pub fn is_success(&self) -> bool {
        matches!(
            self.stat,
            ReplyStat::Accepted {
                stat: AcceptStat::Success,
                ..
            }
        )
    }

    /// Encoded length in bytes (24 for an AUTH_NONE SUCCESS).
    pub fn buffer_len(&self) -> usize {
        12 + match &self.stat {
            ReplyStat::Accepted { verf, stat } => {
                verf.buffer_len()
                    + 4
                    + if matches!(stat, AcceptStat::ProgMismatch { .. }) {
                        8
                    } else {
                        0
                    }
            }
            ReplyStat::Denied(RejectStat::RpcMismatch { .. }) => 12,
            ReplyStat::Denied(RejectStat::AuthError(_)) => 8,
        }
    }

    /// Decodes a REPLY header.
    pub fn decode(r: &mut XdrReader<'a>) -> Result<Self, RpcError> {
        let xid = r.u32()?;
        let mtype = r.u32()?;
        if mtype != msg_type::REPLY {
            return Err(RpcError::MsgType(mtype));
        }
        let stat = match r.u32()? {
            0 => {
                let verf = OpaqueAuth::decode(r)?;
                let stat = match r.u32()? {
                    0 => AcceptStat::Success,
                    1 => AcceptStat::ProgUnavail,
                    2 => AcceptStat::ProgMismatch {
                        low: r.u32()?,
                        high: r.u32()?,
                    },
                    3 => AcceptStat::ProcUnavail,
                    4 => AcceptStat::GarbageArgs,
                    5 => AcceptStat::SystemErr,
                    _ => return Err(XdrError::BadDiscriminant.into()),
                };
                ReplyStat::Accepted { verf, stat }
            }
            1 => ReplyStat::Denied(match r.u32()? {
                0 => RejectStat::RpcMismatch {
                    low: r.u32()?,
                    high: r.u32()?,
                },
                1 => RejectStat::AuthError(r.u32()?),
                _ => return Err(XdrError::BadDiscriminant.into()),
            }),
            _ => return Err(XdrError::BadDiscriminant.into()),
        };
        Ok(Self { xid, stat })
    }

    /// Encodes a REPLY header.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        w.u32(self.xid)?;
        w.u32(msg_type::REPLY)?;
        match &self.stat {
            ReplyStat::Accepted { verf, stat } => {
                w.u32(0)?;
                verf.encode(w)?;
                match stat {
                    AcceptStat::Success => w.u32(0),
                    AcceptStat::ProgUnavail => w.u32(1),
                    AcceptStat::ProgMismatch { low, high } => {
                        w.u32(2)?;
                        w.u32(*low)?;
                        w.u32(*high)
                    }
                    AcceptStat::ProcUnavail => w.u32(3),
                    AcceptStat::GarbageArgs => w.u32(4),
                    AcceptStat::SystemErr => w.u32(5),
                }
            }
            ReplyStat::Denied(rej) => {
                w.u32(1)?;
                match rej {
                    RejectStat::RpcMismatch { low, high } => {
                        w.u32(0)?;
                        w.u32(*low)?;
                        w.u32(*high)
                    }
                    RejectStat::AuthError(s) => {
                        w.u32(1)?;
                        w.u32(*s)
                    }
                }
            }
        }
    }
}

/// The XID and type of an RPC message, read without decoding the rest (RPCRDMA-25 compares this
/// XID with the transport header's).
pub fn peek_xid_and_type(msg: &[u8]) -> Result<(u32, u32), XdrError> {
    let mut r = XdrReader::new(msg);
    Ok((r.u32()?, r.u32()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AUTH_SYS;
    use crate::xdr::encode_to_vec;
    use proptest::prelude::*;

    #[test]
    fn call_header_matches_worked_example_prefix() {
        // The worked example's reduced call (tests/worked_example.rs), octets 0..40.
        let h = CallHeader::new(0x1a2b_3c4d, 0x2000_0099, 1, 3);
        let v = encode_to_vec(64, |w| h.encode(w)).unwrap();
        let want: Vec<u8> = [0x1a2b_3c4d_u32, 0, 2, 0x2000_0099, 1, 3, 0, 0, 0, 0]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        assert_eq!(v, want);
        assert_eq!(h.buffer_len(), 40);
        assert_eq!(CallHeader::decode(&mut XdrReader::new(&v)), Ok(h));
    }

    #[test]
    fn call_with_rpcvers_3_is_refused_with_the_version() {
        let v: Vec<u8> = [1u32, 0, 3, 1, 1, 1, 0, 0, 0, 0]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        assert_eq!(
            CallHeader::decode(&mut XdrReader::new(&v)),
            Err(RpcError::RpcVersion(3))
        );
        let r = ReplyHeader::rpc_mismatch(1);
        let v = encode_to_vec(64, |w| r.encode(w)).unwrap();
        let want: Vec<u8> = [1u32, 1, 1, 0, 2, 2]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        assert_eq!(v, want);
    }

    #[test]
    fn reply_header_matches_worked_example_11_3() {
        let r = ReplyHeader::success(0x1a2b_3c4d);
        let v = encode_to_vec(64, |w| r.encode(w)).unwrap();
        let want: Vec<u8> = [0x1a2b_3c4d_u32, 1, 0, 0, 0, 0]
            .iter()
            .flat_map(|x| x.to_be_bytes())
            .collect();
        assert_eq!(v, want);
        assert!(r.is_success());
    }

    fn accept_stat() -> impl Strategy<Value = AcceptStat> {
        prop_oneof![
            Just(AcceptStat::Success),
            Just(AcceptStat::ProgUnavail),
            (any::<u32>(), any::<u32>())
                .prop_map(|(low, high)| AcceptStat::ProgMismatch { low, high }),
            Just(AcceptStat::ProcUnavail),
            Just(AcceptStat::GarbageArgs),
            Just(AcceptStat::SystemErr),
        ]
    }

    proptest! {
        #[test]
        fn call_roundtrip(xid in any::<u32>(), prog in any::<u32>(), vers in any::<u32>(), p in any::<u32>(),
                          body in proptest::collection::vec(any::<u8>(), 0..40)) {
            let h = CallHeader { cred: OpaqueAuth { flavor: AUTH_SYS, body: &body }, ..CallHeader::new(xid, prog, vers, p) };
            let v = encode_to_vec(256, |w| h.encode(w)).unwrap();
            prop_assert_eq!(v.len(), h.buffer_len());
            prop_assert_eq!(CallHeader::decode(&mut XdrReader::new(&v)), Ok(h));
        }

        #[test]
        fn reply_roundtrip(xid in any::<u32>(), stat in accept_stat(), denied in any::<Option<(bool, u32, u32)>>()) {
            let h = match denied {
                None => ReplyHeader::accepted(xid, stat),
                Some((true, low, high)) => ReplyHeader { xid, stat: ReplyStat::Denied(RejectStat::RpcMismatch { low, high }) },
                Some((false, s, _)) => ReplyHeader { xid, stat: ReplyStat::Denied(RejectStat::AuthError(s)) },
            };
            let v = encode_to_vec(256, |w| h.encode(w)).unwrap();
            prop_assert_eq!(v.len(), h.buffer_len());
            prop_assert_eq!(ReplyHeader::decode(&mut XdrReader::new(&v)), Ok(h));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = CallHeader::decode(&mut XdrReader::new(&bytes));
            let _ = ReplyHeader::decode(&mut XdrReader::new(&bytes));
        }
    }
}
