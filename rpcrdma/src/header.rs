//! The RPC-over-RDMA transport header (§4.1, §4.2): a checked view of its fixed 16 bytes
//! ([`Packet`]) and the whole header as a value ([`HeaderRepr`]) with `parse` / `emit` /
//! `buffer_len`.
//!
//! Wire order (RPCRDMA-27): xid, vers, credit, proc, [align, thresh], read list, write list,
//! reply chunk, [RPC message].

use crate::chunk_list::{ChunkLists, Limits};
use crate::error::HeaderError;
use crate::xdr::{XdrReader, XdrWriter};

/// The only protocol version this crate speaks (RPCRDMA-23).
pub const VERSION: u32 = 1;

/// Field offsets of the fixed part; RPCRDMA-24: the same in every version.
mod field {
    use std::ops::Range;
    pub const XID: Range<usize> = 0..4;
    pub const VERS: Range<usize> = 4..8;
    pub const CREDIT: Range<usize> = 8..12;
    pub const PROC: Range<usize> = 12..16;
    pub const BODY: usize = 16;
}

/// Length of the fixed part (xid, vers, credit, proc).
pub const FIXED_LEN: usize = field::BODY;

/// `rdma_proc` (RPCRDMA-26).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Proc {
    /// Chunk lists, then the RPC message.
    Msg = 0,
    /// Chunk lists only; the message moves by RDMA.
    NoMsg = 1,
    /// Align and threshold, chunk lists, then a padded RPC message.
    MsgP = 2,
    /// The client finished reading a reply's read chunks.
    Done = 3,
    /// An encoding error in a request.
    Error = 4,
}

impl TryFrom<u32> for Proc {
    type Error = HeaderError;
    fn try_from(v: u32) -> Result<Self, HeaderError> {
        Ok(match v {
            0 => Proc::Msg,
            1 => Proc::NoMsg,
            2 => Proc::MsgP,
            3 => Proc::Done,
            4 => Proc::Error,
            _ => return Err(HeaderError::UnknownProc(v)),
        })
    }
}

/// `rpc_rdma_errcode`.
pub mod errcode {
    /// Unsupported version; the body carries the supported range.
    pub const ERR_VERS: u32 = 1;
    /// Chunk encoding error.
    pub const ERR_CHUNK: u32 = 2;
}

/// A checked zero-copy view of a transport header's fixed part.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn word(b: &[u8], r: std::ops::Range<usize>) -> u32 {
    u32::from_be_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking; accessors may panic if it is shorter than 16 bytes.
    pub fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps `buffer` after checking it holds the 16 fixed bytes.
    pub fn new_checked(buffer: T) -> Result<Self, HeaderError> {
        if buffer.as_ref().len() < FIXED_LEN {
            return Err(HeaderError::Truncated);
        }
        Ok(Self { buffer })
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// `rdma_xid`.
    pub fn xid(&self) -> u32 {
        word(self.buffer.as_ref(), field::XID)
    }

    /// `rdma_vers`.
    pub fn vers(&self) -> u32 {
        word(self.buffer.as_ref(), field::VERS)
    }

    /// `rdma_credit`: requested in a call, granted in a reply.
    pub fn credit(&self) -> u32 {
        word(self.buffer.as_ref(), field::CREDIT)
    }

    /// The raw `proc` word.
    pub fn proc_raw(&self) -> u32 {
        word(self.buffer.as_ref(), field::PROC)
    }

    /// Everything after the fixed part.
    pub fn body(&self) -> &[u8] {
        &self.buffer.as_ref()[field::BODY..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_word(&mut self, r: std::ops::Range<usize>, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets `rdma_xid`.
    pub fn set_xid(&mut self, v: u32) {
        self.set_word(field::XID, v)
    }

    /// Sets `rdma_vers`.
    pub fn set_vers(&mut self, v: u32) {
        self.set_word(field::VERS, v)
    }

    /// Sets `rdma_credit`.
    pub fn set_credit(&mut self, v: u32) {
        self.set_word(field::CREDIT, v)
    }

    /// Sets the `proc` word.
    pub fn set_proc_raw(&mut self, v: u32) {
        self.set_word(field::PROC, v)
    }

    /// Everything after the fixed part, writable.
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::BODY..]
    }
}

/// The body of an RDMA_ERROR (`rpc_rdma_error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorBody {
    /// ERR_VERS with the inclusive supported range.
    Vers {
        /// Lowest supported version.
        low: u32,
        /// Highest supported version.
        high: u32,
    },
    /// ERR_CHUNK.
    Chunk,
    /// Any other code (the `default` arm: eight words). `code` is never 1 or 2 after `parse`.
    Other {
        /// The error code.
        code: u32,
        /// `rdma_extra[8]`.
        extra: [u32; 8],
    },
}

impl ErrorBody {
    /// The `rpc_rdma_errcode` word.
    pub fn code(&self) -> u32 {
        match self {
            ErrorBody::Vers { .. } => errcode::ERR_VERS,
            ErrorBody::Chunk => errcode::ERR_CHUNK,
            ErrorBody::Other { code, .. } => *code,
        }
    }

    fn buffer_len(&self) -> usize {
        4 + match self {
            ErrorBody::Vers { .. } => 8,
            ErrorBody::Chunk => 0,
            ErrorBody::Other { .. } => 32,
        }
    }
}

/// `rdma_body`: what follows the fixed part, by `proc`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Body {
    /// RDMA_MSG: chunk lists, then the RPC message.
    Msg(ChunkLists),
    /// RDMA_NOMSG: chunk lists only.
    NoMsg(ChunkLists),
    /// RDMA_MSGP: padding parameters, chunk lists, then the padded RPC message (§3.5).
    MsgP {
        /// `rdma_align`: the alignment padded data starts on.
        align: u32,
        /// `rdma_thresh`: opaque data at least this long is padded (P-1).
        thresh: u32,
        /// The chunk lists.
        chunks: ChunkLists,
    },
    /// RDMA_DONE: nothing follows.
    Done,
    /// RDMA_ERROR.
    Error(ErrorBody),
}

impl Body {
    /// The `proc` of this body.
    pub fn proc(&self) -> Proc {
        match self {
            Body::Msg(_) => Proc::Msg,
            Body::NoMsg(_) => Proc::NoMsg,
            Body::MsgP { .. } => Proc::MsgP,
            Body::Done => Proc::Done,
            Body::Error(_) => Proc::Error,
        }
    }

    /// The chunk lists, for MSG, NOMSG and MSGP.
    pub fn chunks(&self) -> Option<&ChunkLists> {
        match self {
            Body::Msg(c) | Body::NoMsg(c) | Body::MsgP { chunks: c, .. } => Some(c),
            Body::Done | Body::Error(_) => None,
        }
    }

    /// Whether an RPC message follows the header in the same Send (MSG and MSGP).
    pub fn carries_message(&self) -> bool {
        matches!(self, Body::Msg(_) | Body::MsgP { .. })
    }
}

/// A whole transport header. `vers` is implied: [`VERSION`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HeaderRepr {
    /// `rdma_xid`: the RPC XID; takes precedence over the one in the message (RPCRDMA-25).
    pub xid: u32,
    /// Requested (call, DONE) or granted (reply, ERROR) credits.
    pub credit: u32,
    /// Everything after the fixed part.
    pub body: Body,
}

impl HeaderRepr {
    /// Parses the header at the start of `packet` with the given decode bounds. Checks structure
    /// only (version, proc, XDR well-formedness, bounds); `chunk_rules` checks meaning.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>, limits: &Limits) -> Result<Self, HeaderError> {
        let buf = packet.buffer.as_ref();
        if buf.len() < FIXED_LEN {
            return Err(HeaderError::Truncated);
        }
        // RPCRDMA-24: the version check reads nothing past word 3.
        let vers = packet.vers();
        if vers != VERSION {
            return Err(HeaderError::UnsupportedVersion(vers));
        }
        let proc = Proc::try_from(packet.proc_raw())?;
        let mut r = XdrReader::new(packet.body());
        let body = match proc {
            Proc::Msg => Body::Msg(ChunkLists::decode(&mut r, limits)?),
            Proc::NoMsg => Body::NoMsg(ChunkLists::decode(&mut r, limits)?),
            Proc::MsgP => Body::MsgP {
                align: r.u32()?,
                thresh: r.u32()?,
                chunks: ChunkLists::decode(&mut r, limits)?,
            },
            Proc::Done => Body::Done,
            Proc::Error => Body::Error(match r.u32()? {
                errcode::ERR_VERS => ErrorBody::Vers {
                    low: r.u32()?,
                    high: r.u32()?,
                },
                errcode::ERR_CHUNK => ErrorBody::Chunk,
                code => {
                    let mut extra = [0u32; 8];
                    for e in &mut extra {
                        *e = r.u32()?;
                    }
                    ErrorBody::Other { code, extra }
                }
            }),
        };
        Ok(Self {
            xid: packet.xid(),
            credit: packet.credit(),
            body,
        })
    }

    /// Parses the header at the start of `buf` with default limits; returns it and the bytes
    /// after it (the RPC message for MSG and MSGP).
    pub fn parse_bytes(buf: &[u8]) -> Result<(Self, &[u8]), HeaderError> {
        let repr = Self::parse(&Packet::new_checked(buf)?, &Limits::default())?;
        let n = repr.buffer_len();
        Ok((repr, &buf[n..]))
    }

    /// Encoded length in bytes.
    pub fn buffer_len(&self) -> usize {
        FIXED_LEN
            + match &self.body {
                Body::Msg(c) | Body::NoMsg(c) => c.buffer_len(),
                Body::MsgP { chunks, .. } => 8 + chunks.buffer_len(),
                Body::Done => 0,
                Body::Error(e) => e.buffer_len(),
            }
    }

    /// Writes the header at the start of `buf`; returns the bytes written (= `buffer_len`).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, HeaderError> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(HeaderError::Xdr(crate::xdr::XdrError::BufferTooShort));
        }
        let mut p = Packet::new_unchecked(&mut buf[..len]);
        p.set_xid(self.xid);
        p.set_vers(VERSION);
        p.set_credit(self.credit);
        p.set_proc_raw(self.body.proc() as u32);
        let mut w = XdrWriter::new(p.body_mut());
        match &self.body {
            Body::Msg(c) | Body::NoMsg(c) => c.encode(&mut w)?,
            Body::MsgP {
                align,
                thresh,
                chunks,
            } => {
                w.u32(*align)?;
                w.u32(*thresh)?;
                chunks.encode(&mut w)?;
            }
            Body::Done => {}
            Body::Error(e) => {
                w.u32(e.code())?;
                match e {
                    ErrorBody::Vers { low, high } => {
                        w.u32(*low)?;
                        w.u32(*high)?;
                    }
                    ErrorBody::Chunk => {}
                    ErrorBody::Other { extra, .. } => {
                        for e in extra {
                            w.u32(*e)?;
                        }
                    }
                }
            }
        }
        Ok(len)
    }

    /// The header as a fresh vector (tests and slow paths).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.buffer_len()];
        let n = self.emit(&mut v).expect("buffer sized by buffer_len");
        debug_assert_eq!(n, v.len());
        v
    }

    /// RDMA_DONE for the reply `xid` whose read chunks were read (C-5), requesting `credit`.
    pub fn done(xid: u32, credit: u32) -> Self {
        Self {
            xid,
            credit,
            body: Body::Done,
        }
    }

    /// RDMA_ERROR / ERR_VERS stating the range this crate supports (RPCRDMA-33).
    pub fn err_vers(xid: u32, grant: u32) -> Self {
        Self {
            xid,
            credit: grant,
            body: Body::Error(ErrorBody::Vers {
                low: VERSION,
                high: VERSION,
            }),
        }
    }

    /// RDMA_ERROR / ERR_CHUNK (RPCRDMA-32).
    pub fn err_chunk(xid: u32, grant: u32) -> Self {
        Self {
            xid,
            credit: grant,
            body: Body::Error(ErrorBody::Chunk),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn rpcrdma_26_golden_done_error_and_empty_headers() {
        // RDMA_DONE, RDMA_ERROR and header-only messages, byte for byte.
        let cases = [
            (
                HeaderRepr::done(0x1a2b_3c4d, 1),
                "1a2b3c4d 00000001 00000001 00000003",
            ),
            (
                HeaderRepr::err_vers(0x1a2b_3c4d, 32),
                "1a2b3c4d 00000001 00000020 00000004 00000001 00000001 00000001",
            ),
            (
                HeaderRepr::err_chunk(0x1a2b_3c4d, 32),
                "1a2b3c4d 00000001 00000020 00000004 00000002",
            ),
            (
                HeaderRepr {
                    xid: 0x1a2b_3c4d,
                    credit: 32,
                    body: Body::Msg(ChunkLists::empty()),
                },
                "1a2b3c4d 00000001 00000020 00000000 00000000 00000000 00000000",
            ),
            (
                HeaderRepr {
                    xid: 0x1a2b_3c4d,
                    credit: 32,
                    body: Body::MsgP {
                        align: 4096,
                        thresh: 1024,
                        chunks: ChunkLists::empty(),
                    },
                },
                "1a2b3c4d 00000001 00000020 00000002 00001000 00000400 00000000 00000000 00000000",
            ),
        ];
        for (repr, want) in cases {
            let want = hex(want);
            assert_eq!(repr.to_vec(), want, "{repr:?}");
            assert_eq!(repr.buffer_len(), want.len());
            let (back, rest) = HeaderRepr::parse_bytes(&want).unwrap();
            assert_eq!(back, repr);
            assert!(rest.is_empty());
        }
        assert_eq!(HeaderRepr::done(1, 1).to_vec().len(), 16);
    }

    #[test]
    fn rpcrdma_23_version_is_1_and_any_other_is_refused() {
        assert_eq!(VERSION, 1);
        for vers in [0u32, 2, 7, u32::MAX] {
            let mut b = HeaderRepr::done(1, 1).to_vec();
            b[4..8].copy_from_slice(&vers.to_be_bytes());
            assert_eq!(
                HeaderRepr::parse_bytes(&b).unwrap_err(),
                HeaderError::UnsupportedVersion(vers)
            );
        }
        assert_eq!(&HeaderRepr::done(1, 1).to_vec()[4..8], &[0, 0, 0, 1]);
    }

    #[test]
    fn rpcrdma_26_proc_values() {
        assert_eq!(Proc::Msg as u32, 0);
        assert_eq!(Proc::NoMsg as u32, 1);
        assert_eq!(Proc::MsgP as u32, 2);
        assert_eq!(Proc::Done as u32, 3);
        assert_eq!(Proc::Error as u32, 4);
        assert_eq!(Proc::try_from(5), Err(HeaderError::UnknownProc(5)));
    }

    #[test]
    fn rpcrdma_24_version_check_reads_only_the_fixed_words() {
        // vers = 2 and a body that would be garbage for version 1.
        let mut b = hex("cafef00d 00000002 00000005 00000000 00000007");
        b.extend_from_slice(&[0xff; 3]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.xid(), 0xcafe_f00d);
        assert_eq!(
            HeaderRepr::parse(&p, &Limits::default()),
            Err(HeaderError::UnsupportedVersion(2))
        );
        // Even with nothing after word 3.
        assert_eq!(
            HeaderRepr::parse_bytes(&b[..16]).unwrap_err(),
            HeaderError::UnsupportedVersion(2)
        );
    }

    #[test]
    fn header_shorter_than_16_bytes_is_truncated() {
        assert_eq!(
            Packet::new_checked(&[0u8; 15][..]).unwrap_err(),
            HeaderError::Truncated
        );
        assert_eq!(
            HeaderRepr::parse_bytes(&[]).unwrap_err(),
            HeaderError::Truncated
        );
    }

    #[test]
    fn unknown_error_code_consumes_eight_words() {
        let b = hex("00000001 00000001 00000001 00000004 00000063 \
             00000001 00000002 00000003 00000004 00000005 00000006 00000007 00000008");
        let (h, rest) = HeaderRepr::parse_bytes(&b).unwrap();
        assert_eq!(
            h.body,
            Body::Error(ErrorBody::Other {
                code: 99,
                extra: [1, 2, 3, 4, 5, 6, 7, 8]
            })
        );
        assert_eq!(h.buffer_len(), 52);
        assert!(rest.is_empty());
        assert_eq!(h.to_vec(), b);
    }

    #[test]
    fn emit_refuses_a_short_buffer() {
        let mut b = [0u8; 27];
        assert!(HeaderRepr::err_vers(1, 1).emit(&mut b).is_err());
    }

    mod prop {
        use super::super::*;
        use crate::segment::{ReadSegment, Segment, WriteChunk};
        use proptest::prelude::*;

        fn segment() -> impl Strategy<Value = Segment> {
            (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(handle, length, offset)| {
                Segment {
                    handle,
                    length,
                    offset,
                }
            })
        }

        fn write_chunk() -> impl Strategy<Value = WriteChunk> {
            proptest::collection::vec(segment(), 0..5).prop_map(WriteChunk::new)
        }

        fn chunks() -> impl Strategy<Value = ChunkLists> {
            (
                proptest::collection::vec(
                    (any::<u32>(), segment())
                        .prop_map(|(position, target)| ReadSegment { position, target }),
                    0..5,
                ),
                proptest::collection::vec(write_chunk(), 0..4),
                proptest::option::of(write_chunk()),
            )
                .prop_map(|(reads, writes, reply)| ChunkLists {
                    reads,
                    writes,
                    reply,
                })
        }

        pub(crate) fn body() -> impl Strategy<Value = Body> {
            prop_oneof![
                chunks().prop_map(Body::Msg),
                chunks().prop_map(Body::NoMsg),
                (any::<u32>(), any::<u32>(), chunks()).prop_map(|(align, thresh, chunks)| {
                    Body::MsgP {
                        align,
                        thresh,
                        chunks,
                    }
                }),
                Just(Body::Done),
                (any::<u32>(), any::<u32>())
                    .prop_map(|(low, high)| Body::Error(ErrorBody::Vers { low, high })),
                Just(Body::Error(ErrorBody::Chunk)),
                (3u32.., any::<[u32; 8]>())
                    .prop_map(|(code, extra)| Body::Error(ErrorBody::Other { code, extra })),
            ]
        }

        proptest! {
            /// RPCRDMA-27: parse(emit(x)) == x for every header shape; buffer_len is exact and a
            /// trailing RPC message is left untouched.
            #[test]
            fn rpcrdma_27_parse_emit_roundtrip(
                xid in any::<u32>(),
                credit in any::<u32>(),
                body in body(),
                tail in proptest::collection::vec(any::<u8>(), 0..8),
            ) {
                let h = HeaderRepr { xid, credit, body };
                let mut v = h.to_vec();
                prop_assert_eq!(v.len(), h.buffer_len());
                v.extend_from_slice(&tail);
                let (back, rest) = HeaderRepr::parse_bytes(&v).unwrap();
                prop_assert_eq!(back, h);
                prop_assert_eq!(rest, &tail[..]);
            }

            /// RPCRDMA-31: arbitrary bytes never panic the parser.
            #[test]
            fn rpcrdma_31_arbitrary_bytes_never_panic(
                bytes in proptest::collection::vec(any::<u8>(), 0..256),
            ) {
                let _ = HeaderRepr::parse_bytes(&bytes);
            }

            /// RPCRDMA-31: plausible headers (version 1, small proc, small words) with random
            /// tails never panic, and any success re-emits to the same prefix.
            #[test]
            fn rpcrdma_31_plausible_headers_never_panic(
                xid in any::<u32>(),
                proc in 0u32..6,
                words in proptest::collection::vec(0u32..4, 0..40),
            ) {
                let mut v: Vec<u8> = [xid, 1, 1, proc].iter().flat_map(|w| w.to_be_bytes()).collect();
                v.extend(words.iter().flat_map(|w| w.to_be_bytes()));
                if let Ok((h, rest)) = HeaderRepr::parse_bytes(&v) {
                    prop_assert_eq!(&h.to_vec()[..], &v[..v.len() - rest.len()]);
                }
            }
        }
    }
}
