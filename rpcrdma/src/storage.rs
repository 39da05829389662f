//! The xwarp block-storage RPC program: numbers, procedures, and the XDR of their arguments and
//! results. One store per server; offsets and counts are in bytes.
//!
//! ```text
//! program XWARP_BLOCK = 0x20005857 {          /* user-defined range */
//!   version V1 = 1 {
//!     void        NULL(void)          = 0;
//!     read_res    READ(read_args)     = 1;    /* data: DDP-eligible -> client's write chunk */
//!     write_res   WRITE(write_args)   = 2;    /* data: DDP-eligible -> client's read chunk  */
//!     commit_res  COMMIT(commit_args) = 3;    /* fsync of the range (count 0 = all) */
//!     getattr_res GETATTR(void)       = 4;
//!   }
//! }
//! struct read_args   { uint64 offset; uint32 count; };
//! union  read_res    switch (status s) { case OK: bool eof; opaque data<MAX_IO>; default: void; };
//! struct write_args  { uint64 offset; bool stable; opaque data<MAX_IO>; };
//! union  write_res   switch (status s) { case OK: uint32 count; bool committed; uint64 verf; default: void; };
//! struct commit_args { uint64 offset; uint32 count; };
//! union  commit_res  switch (status s) { case OK: uint64 verf; default: void; };
//! union  getattr_res switch (status s) { case OK: uint64 size; uint32 block_size; uint32 max_io;
//!                                        uint64 verf; default: void; };
//! ```
//!
//! DDP-eligible items: only READ's and WRITE's `data`. Write-list entry 0 of a READ
//! call receives the READ data. `verf` changes whenever the server restarts, so a client that
//! sees it change re-sends the writes it had not seen committed.

use crate::error::HeaderError;
use crate::reduced::{Payload, ReducedReader, ReducedWriter};
use crate::xdr::{XdrError, XdrReader, XdrWriter};

/// Program number (user-defined range 0x20000000-0x3fffffff).
pub const PROGRAM: u32 = 0x2000_5857;
/// Program version.
pub const VERSION: u32 = 1;
/// Largest READ or WRITE data accepted in one call (bounds the opaque on decode).
pub const MAX_IO: u32 = 16 << 20;

/// Procedures of the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum StorageProc {
    /// Ping.
    Null = 0,
    /// Read `count` bytes at `offset`.
    Read = 1,
    /// Write data at `offset`.
    Write = 2,
    /// Make a range durable.
    Commit = 3,
    /// Size and limits of the store.
    Getattr = 4,
}

impl TryFrom<u32> for StorageProc {
    type Error = u32;
    /// The procedure, or the unknown number back (answer PROC_UNAVAIL).
    fn try_from(v: u32) -> Result<Self, u32> {
        Ok(match v {
            0 => StorageProc::Null,
            1 => StorageProc::Read,
            2 => StorageProc::Write,
            3 => StorageProc::Commit,
            4 => StorageProc::Getattr,
            _ => return Err(v),
        })
    }
}

/// Result status of a procedure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum StoreStatus {
    /// Success; the result body follows.
    Ok = 0,
    /// I/O error on the store.
    Io = 1,
    /// Invalid argument.
    Inval = 2,
    /// Range beyond the end of the store.
    OutOfRange = 3,
    /// Request larger than the server's `max_io` or its chunk.
    TooBig = 4,
    /// Any other server failure.
    ServerFault = 5,
}

impl StoreStatus {
    fn decode(r: &mut XdrReader<'_>) -> Result<Self, XdrError> {
        Ok(match r.u32()? {
            0 => StoreStatus::Ok,
            1 => StoreStatus::Io,
            2 => StoreStatus::Inval,
            3 => StoreStatus::OutOfRange,
            4 => StoreStatus::TooBig,
            5 => StoreStatus::ServerFault,
            _ => return Err(XdrError::BadDiscriminant),
        })
    }
}

/// READ arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadArgs {
    /// Byte offset in the store.
    pub offset: u64,
    /// Bytes wanted.
    pub count: u32,
}

/// READ result body (status OK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadOk<'a> {
    /// The read reached the end of the store.
    pub eof: bool,
    /// The data: inline, or already RDMA-Written into the client's write chunk.
    pub data: Payload<'a>,
}

/// WRITE arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteArgs<'a> {
    /// Byte offset in the store.
    pub offset: u64,
    /// Commit before replying.
    pub stable: bool,
    /// The data: inline, or in the client's read chunk (the server RDMA-Reads it).
    pub data: Payload<'a>,
}

/// WRITE result body (status OK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteOk {
    /// Bytes written.
    pub count: u32,
    /// The data is durable (a stable write, or already committed).
    pub committed: bool,
    /// Server instance verifier.
    pub verifier: u64,
}

/// COMMIT arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommitArgs {
    /// Start of the range.
    pub offset: u64,
    /// Length of the range; 0 means to the end of the store.
    pub count: u32,
}

/// COMMIT result body (status OK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommitOk {
    /// Server instance verifier.
    pub verifier: u64,
}

/// GETATTR result body (status OK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GetattrOk {
    /// Size of the store in bytes.
    pub size: u64,
    /// Preferred I/O alignment.
    pub block_size: u32,
    /// Largest READ/WRITE the server accepts.
    pub max_io: u32,
    /// Server instance verifier.
    pub verifier: u64,
}

/// A call of the program: procedure and arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StorageCall<'a> {
    /// NULL.
    Null,
    /// READ.
    Read(ReadArgs),
    /// WRITE.
    Write(WriteArgs<'a>),
    /// COMMIT.
    Commit(CommitArgs),
    /// GETATTR.
    Getattr,
}

/// A reply of the program: per procedure, a result body or a non-OK status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StorageReply<'a> {
    /// NULL.
    Null,
    /// READ.
    Read(Result<ReadOk<'a>, StoreStatus>),
    /// WRITE.
    Write(Result<WriteOk, StoreStatus>),
    /// COMMIT.
    Commit(Result<CommitOk, StoreStatus>),
    /// GETATTR.
    Getattr(Result<GetattrOk, StoreStatus>),
}

impl<'a> StorageCall<'a> {
    /// The procedure.
    pub fn proc(&self) -> StorageProc {
        match self {
            StorageCall::Null => StorageProc::Null,
            StorageCall::Read(_) => StorageProc::Read,
            StorageCall::Write(_) => StorageProc::Write,
            StorageCall::Commit(_) => StorageProc::Commit,
            StorageCall::Getattr => StorageProc::Getattr,
        }
    }

    /// Encodes the arguments; returns the read-chunk position of WRITE data sent as a chunk.
    pub fn encode(&self, w: &mut ReducedWriter<'_>) -> Result<Option<u32>, XdrError> {
        match self {
            StorageCall::Null | StorageCall::Getattr => Ok(None),
            StorageCall::Read(a) => {
                w.xdr().u64(a.offset)?;
                w.xdr().u32(a.count).map(|()| None)
            }
            StorageCall::Write(a) => {
                w.xdr().u64(a.offset)?;
                w.xdr().bool(a.stable)?;
                w.ddp_opaque(&a.data)
            }
            StorageCall::Commit(a) => {
                w.xdr().u64(a.offset)?;
                w.xdr().u32(a.count).map(|()| None)
            }
        }
    }

    /// Decodes the arguments of `proc` (reduced stream of a call, RPCRDMA-16: WRITE data at a
    /// read-chunk position resolves to that chunk). Checks all read chunks were used.
    pub fn decode(proc: StorageProc, r: &mut ReducedReader<'a, '_>) -> Result<Self, HeaderError> {
        Ok(match proc {
            StorageProc::Null => StorageCall::Null,
            StorageProc::Getattr => StorageCall::Getattr,
            StorageProc::Read => StorageCall::Read(ReadArgs {
                offset: r.xdr().u64()?,
                count: r.xdr().u32()?,
            }),
            StorageProc::Write => StorageCall::Write(WriteArgs {
                offset: r.xdr().u64()?,
                stable: r.xdr().bool()?,
                data: r.ddp_opaque(MAX_IO)?,
            }),
            StorageProc::Commit => StorageCall::Commit(CommitArgs {
                offset: r.xdr().u64()?,
                count: r.xdr().u32()?,
            }),
        })
    }
}

fn encode_status<T>(
    w: &mut ReducedWriter<'_>,
    res: &Result<T, StoreStatus>,
    body: impl FnOnce(&mut ReducedWriter<'_>, &T) -> Result<(), XdrError>,
) -> Result<(), XdrError> {
    match res {
        Ok(v) => {
            w.xdr().u32(StoreStatus::Ok as u32)?;
            body(w, v)
        }
        Err(StoreStatus::Ok) => Err(XdrError::BadDiscriminant),
        Err(s) => w.xdr().u32(*s as u32),
    }
}

fn decode_status<'a, 'c, T>(
    r: &mut ReducedReader<'a, 'c>,
    body: impl FnOnce(&mut ReducedReader<'a, 'c>) -> Result<T, HeaderError>,
) -> Result<Result<T, StoreStatus>, HeaderError> {
    match StoreStatus::decode(r.xdr())? {
        StoreStatus::Ok => body(r).map(Ok),
        s => Ok(Err(s)),
    }
}

fn u64_u32_u32_u64(r: &mut XdrReader<'_>) -> Result<(u64, u32, u32, u64), XdrError> {
    Ok((r.u64()?, r.u32()?, r.u32()?, r.u64()?))
}

impl<'a> StorageReply<'a> {
    /// The procedure this reply answers.
    pub fn proc(&self) -> StorageProc {
        match self {
            StorageReply::Null => StorageProc::Null,
            StorageReply::Read(_) => StorageProc::Read,
            StorageReply::Write(_) => StorageProc::Write,
            StorageReply::Commit(_) => StorageProc::Commit,
            StorageReply::Getattr(_) => StorageProc::Getattr,
        }
    }

    /// Encodes the result. READ data as [`Payload::WriteChunk`] writes only its length word
    /// (RPCRDMA-17: the data went by RDMA Write). `Err(StoreStatus::Ok)` is refused.
    pub fn encode(&self, w: &mut ReducedWriter<'_>) -> Result<(), XdrError> {
        match self {
            StorageReply::Null => Ok(()),
            StorageReply::Read(res) => encode_status(w, res, |w, ok| {
                w.xdr().bool(ok.eof)?;
                w.ddp_opaque(&ok.data).map(|_| ())
            }),
            StorageReply::Write(res) => encode_status(w, res, |w, ok| {
                w.xdr().u32(ok.count)?;
                w.xdr().bool(ok.committed)?;
                w.xdr().u64(ok.verifier)
            }),
            StorageReply::Commit(res) => encode_status(w, res, |w, ok| w.xdr().u64(ok.verifier)),
            StorageReply::Getattr(res) => encode_status(w, res, |w, ok| {
                let x: &mut XdrWriter<'_> = w.xdr();
                x.u64(ok.size)?;
                x.u32(ok.block_size)?;
                x.u32(ok.max_io)?;
                x.u64(ok.verifier)
            }),
        }
    }

    /// Decodes the result of `proc` (reduced stream of a reply: READ data resolves to the echoed
    /// write chunk if the call had one, RPCRDMA-19).
    pub fn decode(proc: StorageProc, r: &mut ReducedReader<'a, '_>) -> Result<Self, HeaderError> {
        Ok(match proc {
            StorageProc::Null => StorageReply::Null,
            StorageProc::Read => StorageReply::Read(decode_status(r, |r| {
                Ok(ReadOk {
                    eof: r.xdr().bool()?,
                    data: r.ddp_opaque(MAX_IO)?,
                })
            })?),
            StorageProc::Write => StorageReply::Write(decode_status(r, |r| {
                Ok(WriteOk {
                    count: r.xdr().u32()?,
                    committed: r.xdr().bool()?,
                    verifier: r.xdr().u64()?,
                })
            })?),
            StorageProc::Commit => StorageReply::Commit(decode_status(r, |r| {
                Ok(CommitOk {
                    verifier: r.xdr().u64()?,
                })
            })?),
            StorageProc::Getattr => StorageReply::Getattr(decode_status(r, |r| {
                let (size, block_size, max_io, verifier) = u64_u32_u32_u64(r.xdr())?;
                Ok(GetattrOk {
                    size,
                    block_size,
                    max_io,
                    verifier,
                })
            })?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk_list::ChunkLists;
    use proptest::prelude::*;

    fn roundtrip_call(call: StorageCall<'_>) {
        let mut buf = [0u8; 256];
        let mut w = ReducedWriter::new(&mut buf);
        assert_eq!(call.encode(&mut w), Ok(None));
        let n = w.position();
        let lists = ChunkLists::default();
        let mut r = ReducedReader::for_call(&buf[..n], &lists);
        assert_eq!(StorageCall::decode(call.proc(), &mut r), Ok(call));
        assert_eq!(r.finish(), Ok(&[][..]));
    }

    #[test]
    fn proc_numbers_are_stable() {
        for (n, p) in [
            (0, StorageProc::Null),
            (1, StorageProc::Read),
            (2, StorageProc::Write),
            (3, StorageProc::Commit),
            (4, StorageProc::Getattr),
        ] {
            assert_eq!(StorageProc::try_from(n), Ok(p));
            assert_eq!(p as u32, n);
        }
        assert_eq!(StorageProc::try_from(5), Err(5));
    }

    #[test]
    fn read_args_are_offset_then_count() {
        let mut buf = [0u8; 16];
        let mut w = ReducedWriter::new(&mut buf);
        StorageCall::Read(ReadArgs {
            offset: 0x1_0000_0000,
            count: 4096,
        })
        .encode(&mut w)
        .unwrap();
        assert_eq!(w.position(), 12);
        assert_eq!(buf[..12], [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x10, 0]);
    }

    #[test]
    fn write_with_chunk_data_returns_the_position_and_decodes_to_the_chunk() {
        let mut buf = [0u8; 64];
        let mut w = ReducedWriter::new(&mut buf);
        w.xdr().zeros(40).unwrap(); // an AUTH_NONE call header
        let call = StorageCall::Write(WriteArgs {
            offset: 8192,
            stable: false,
            data: Payload::ReadChunk {
                position: 0,
                len: 65536,
            },
        });
        // 40 header + 8 offset + 4 stable + 4 length word.
        assert_eq!(call.encode(&mut w), Ok(Some(56)));
        let n = w.position();
        let lists = ChunkLists {
            reads: vec![crate::segment::ReadSegment {
                position: 56,
                target: crate::segment::Segment {
                    handle: 7,
                    length: 65536,
                    offset: 0x1000,
                },
            }],
            ..Default::default()
        };
        let mut r = ReducedReader::for_call(&buf[..n], &lists);
        r.xdr().skip(40).unwrap();
        let got = StorageCall::decode(StorageProc::Write, &mut r).unwrap();
        assert_eq!(
            got,
            StorageCall::Write(WriteArgs {
                offset: 8192,
                stable: false,
                data: Payload::ReadChunk {
                    position: 56,
                    len: 65536
                }
            })
        );
        assert!(r.finish().is_ok());
    }

    #[test]
    fn reply_with_bad_status_word_is_refused() {
        let buf = [0, 0, 0, 9];
        let lists = ChunkLists::default();
        let mut r = ReducedReader::for_reply(&buf, &lists);
        assert_eq!(
            StorageReply::decode(StorageProc::Commit, &mut r),
            Err(HeaderError::Xdr(XdrError::BadDiscriminant))
        );
    }

    fn status() -> impl Strategy<Value = StoreStatus> {
        prop_oneof![
            Just(StoreStatus::Io),
            Just(StoreStatus::Inval),
            Just(StoreStatus::OutOfRange),
            Just(StoreStatus::TooBig),
            Just(StoreStatus::ServerFault),
        ]
    }

    proptest! {
        #[test]
        fn inline_calls_roundtrip(offset in any::<u64>(), count in any::<u32>(), stable in any::<bool>(),
                                  data in proptest::collection::vec(any::<u8>(), 0..64)) {
            roundtrip_call(StorageCall::Null);
            roundtrip_call(StorageCall::Getattr);
            roundtrip_call(StorageCall::Read(ReadArgs { offset, count }));
            roundtrip_call(StorageCall::Commit(CommitArgs { offset, count }));
            roundtrip_call(StorageCall::Write(WriteArgs { offset, stable, data: Payload::Inline(&data) }));
        }

        #[test]
        fn inline_replies_roundtrip(a in any::<u64>(), b in any::<u32>(), c in any::<u32>(), d in any::<u64>(),
                                    flag in any::<bool>(), err in proptest::option::of(status()),
                                    data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let replies = match err {
                None => [
                    StorageReply::Read(Ok(ReadOk { eof: flag, data: Payload::Inline(&data) })),
                    StorageReply::Write(Ok(WriteOk { count: b, committed: flag, verifier: d })),
                    StorageReply::Commit(Ok(CommitOk { verifier: a })),
                    StorageReply::Getattr(Ok(GetattrOk { size: a, block_size: b, max_io: c, verifier: d })),
                ],
                Some(s) => [
                    StorageReply::Read(Err(s)),
                    StorageReply::Write(Err(s)),
                    StorageReply::Commit(Err(s)),
                    StorageReply::Getattr(Err(s)),
                ],
            };
            for reply in replies.into_iter().chain([StorageReply::Null]) {
                let mut buf = [0u8; 256];
                let mut w = ReducedWriter::new(&mut buf);
                reply.encode(&mut w).unwrap();
                let n = w.position();
                let lists = ChunkLists::default();
                let mut r = ReducedReader::for_reply(&buf[..n], &lists);
                prop_assert_eq!(StorageReply::decode(reply.proc(), &mut r), Ok(reply));
                prop_assert_eq!(r.finish(), Ok(&[][..]));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), p in 0u32..5) {
            let lists = ChunkLists::default();
            let proc = StorageProc::try_from(p).unwrap();
            let _ = StorageCall::decode(proc, &mut ReducedReader::for_call(&bytes, &lists));
            let _ = StorageReply::decode(proc, &mut ReducedReader::for_reply(&bytes, &lists));
        }
    }
}
