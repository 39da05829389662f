//! Connection parameters: the inline sizes and RDMA Read limits each side announces, in the two
//! encodings there are, and what they mean for the [`ChunkPlanner`].
//!
//! * The draft's in-band Connection Configuration Protocol (§6.2, CONF_RDMA): an RPC program
//!   whose number the draft never assigned (so it is a parameter here). Its call must fit the
//!   1 KiB baseline and the single initial credit (§6.1).
//! * RFC 8797's 8-byte connection private data, which later practice uses instead: it fits the
//!   MPA startup frames' private data, so an xwarp connection can carry it at connect time.
//!   Layout: magic `0xf6ab0e18`, version 1, flags (bit 0: Remote Invalidation), send size and
//!   receive size each encoded as `(bytes >> 10) - 1` (1 KiB to 256 KiB).
//!
//! `maxrdmaread` (§6.2) is read as IRD (RPCRDMA-38): the value X announces bounds the
//! Reads that target X's memory; 0 forbids them, so a client announcing 0 sends no read chunks
//! and a server announcing 0 puts none in replies.

use crate::planner::{ChunkPlanner, DEFAULT_INLINE};
use crate::xdr::{XdrError, XdrReader, XdrWriter};

/// RFC 8797 private data magic.
pub const PRIVATE_DATA_MAGIC: u32 = 0xf6ab_0e18;
/// RFC 8797 private data version.
pub const PRIVATE_DATA_VERSION: u8 = 1;
/// Length of the RFC 8797 private data.
pub const PRIVATE_DATA_LEN: usize = 8;
/// Smallest and largest sizes the private data can state.
pub const PRIVATE_DATA_SIZES: (u32, u32) = (1 << 10, 256 << 10);

/// One side's RFC 8797 connection parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivateData {
    /// The sender accepts Send With Invalidate.
    pub remote_invalidation: bool,
    /// Largest Send this side will send, in bytes.
    pub send_size: u32,
    /// Size of this side's receive buffers, in bytes.
    pub recv_size: u32,
}

fn size_code(bytes: u32) -> u8 {
    let b = bytes.clamp(PRIVATE_DATA_SIZES.0, PRIVATE_DATA_SIZES.1);
    ((b >> 10) - 1) as u8
}

fn size_of_code(code: u8) -> u32 {
    (u32::from(code) + 1) << 10
}

impl PrivateData {
    /// The 8 bytes; sizes are rounded down to whole KiB within 1 KiB..=256 KiB.
    pub fn encode(&self) -> [u8; PRIVATE_DATA_LEN] {
        let m = PRIVATE_DATA_MAGIC.to_be_bytes();
        [
            m[0],
            m[1],
            m[2],
            m[3],
            PRIVATE_DATA_VERSION,
            u8::from(self.remote_invalidation),
            size_code(self.send_size),
            size_code(self.recv_size),
        ]
    }

    /// Parses the private data a peer sent. `None` when it is not RFC 8797 data (too short,
    /// other magic, other version): the peer then gets the 1 KiB defaults.
    pub fn decode(pd: &[u8]) -> Option<Self> {
        if pd.len() < PRIVATE_DATA_LEN
            || pd[..4] != PRIVATE_DATA_MAGIC.to_be_bytes()
            || pd[4] != PRIVATE_DATA_VERSION
        {
            return None;
        }
        Some(Self {
            remote_invalidation: pd[5] & 1 != 0,
            send_size: size_of_code(pd[6]),
            recv_size: size_of_code(pd[7]),
        })
    }

    /// Inline limits once both sides are known: a Send may be as large as the smaller of the
    /// sender's send size and the receiver's receive size; a peer without private data counts
    /// as 1 KiB both ways. Returns `(max_inline_call, max_inline_reply)` seen from the client.
    pub fn inline_limits(client: &PrivateData, server: Option<&PrivateData>) -> (u32, u32) {
        let s = server.copied().unwrap_or(PrivateData {
            remote_invalidation: false,
            send_size: DEFAULT_INLINE,
            recv_size: DEFAULT_INLINE,
        });
        (
            client.send_size.min(s.recv_size),
            s.send_size.min(client.recv_size),
        )
    }
}

/// CONF_RDMA arguments (`config_rdma_req`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigRequest {
    /// Largest inline call the client proposes.
    pub max_call_size: u32,
    /// Largest inline reply the client accepts.
    pub max_reply_size: u32,
    /// RDMA Reads that may target the client at once (0: none, RPCRDMA-38).
    pub max_rdma_read: u32,
}

/// CONF_RDMA results (`config_rdma_reply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigReply {
    /// Largest inline call the server accepts (RPCRDMA-36).
    pub max_call_size: u32,
    /// The server's receive-buffer alignment for padded opaque data (RDMA_MSGP).
    pub align: u32,
    /// RDMA Reads that may target the server at once (0: no read chunks in replies).
    pub max_rdma_read: u32,
}

/// CONF_RDMA's version and procedure numbers (§6.2); the program number is a parameter.
pub mod ccp {
    /// Version of CONFIG_RDMA_PROG.
    pub const VERSION: u32 = 1;
    /// Procedure CONF_RDMA.
    pub const CONF_RDMA: u32 = 1;
    /// Program number used by default: the draft left it unassigned ("nnnnnn"); this is in the
    /// user-defined range and configurable by callers.
    pub const DEFAULT_PROGRAM: u32 = 0x2000_5858;
}

impl ConfigRequest {
    /// Encodes the three words.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        w.u32(self.max_call_size)?;
        w.u32(self.max_reply_size)?;
        w.u32(self.max_rdma_read)
    }

    /// Decodes the three words.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self, XdrError> {
        Ok(Self {
            max_call_size: r.u32()?,
            max_reply_size: r.u32()?,
            max_rdma_read: r.u32()?,
        })
    }
}

impl ConfigReply {
    /// Encodes the three words.
    pub fn encode(&self, w: &mut XdrWriter<'_>) -> Result<(), XdrError> {
        w.u32(self.max_call_size)?;
        w.u32(self.align)?;
        w.u32(self.max_rdma_read)
    }

    /// Decodes the three words.
    pub fn decode(r: &mut XdrReader<'_>) -> Result<Self, XdrError> {
        Ok(Self {
            max_call_size: r.u32()?,
            align: r.u32()?,
            max_rdma_read: r.u32()?,
        })
    }

    /// The client's planner after the exchange: calls up to the server's `max_call_size`
    /// inline (RPCRDMA-36), replies up to the client's own `max_reply_size`, read chunks in
    /// calls only if the client allows Reads of its memory (RPCRDMA-38).
    pub fn client_planner(&self, req: &ConfigRequest, base: ChunkPlanner) -> ChunkPlanner {
        ChunkPlanner {
            max_inline_call: self.max_call_size,
            max_inline_reply: req.max_reply_size,
            call_read_chunks: req.max_rdma_read > 0,
            ..base
        }
    }

    /// Whether the server may put read chunks in replies (it allows Reads of its memory).
    pub fn reply_read_chunks(&self) -> bool {
        self.max_rdma_read > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdr::encode_to_vec;

    #[test]
    fn private_data_layout_and_roundtrip() {
        let pd = PrivateData {
            remote_invalidation: true,
            send_size: 4096,
            recv_size: 1024,
        };
        let b = pd.encode();
        assert_eq!(b, [0xf6, 0xab, 0x0e, 0x18, 1, 1, 3, 0]);
        assert_eq!(PrivateData::decode(&b), Some(pd));
        // Limits of the one-byte encoding.
        let big = PrivateData {
            remote_invalidation: false,
            send_size: 1 << 20,
            recv_size: 100,
        };
        let back = PrivateData::decode(&big.encode()).unwrap();
        assert_eq!((back.send_size, back.recv_size), (256 << 10, 1024));
    }

    #[test]
    fn foreign_private_data_is_ignored() {
        let mut b = PrivateData {
            remote_invalidation: false,
            send_size: 4096,
            recv_size: 4096,
        }
        .encode();
        assert_eq!(PrivateData::decode(&b[..7]), None);
        b[4] = 2;
        assert_eq!(PrivateData::decode(&b), None);
        b[4] = 1;
        b[0] = 0;
        assert_eq!(PrivateData::decode(&b), None);
    }

    #[test]
    fn rpcrdma_35_inline_limits_default_to_1k_without_peer_data() {
        let client = PrivateData {
            remote_invalidation: false,
            send_size: 8192,
            recv_size: 8192,
        };
        assert_eq!(PrivateData::inline_limits(&client, None), (1024, 1024));
        let server = PrivateData {
            remote_invalidation: false,
            send_size: 4096,
            recv_size: 16384,
        };
        assert_eq!(
            PrivateData::inline_limits(&client, Some(&server)),
            (8192, 4096)
        );
    }

    #[test]
    fn rpcrdma_36_38_conf_rdma_sets_the_planner() {
        let req = ConfigRequest {
            max_call_size: 4096,
            max_reply_size: 8192,
            max_rdma_read: 0,
        };
        let rep = ConfigReply {
            max_call_size: 2048,
            align: 4096,
            max_rdma_read: 16,
        };
        let v = encode_to_vec(24, |w| {
            req.encode(w)?;
            rep.encode(w)
        })
        .unwrap();
        let mut r = XdrReader::new(&v);
        assert_eq!(ConfigRequest::decode(&mut r), Ok(req));
        assert_eq!(ConfigReply::decode(&mut r), Ok(rep));
        let p = rep.client_planner(&req, ChunkPlanner::default());
        assert_eq!(p.max_inline_call, 2048);
        assert_eq!(p.max_inline_reply, 8192);
        assert!(!p.call_read_chunks, "client announced maxrdmaread 0");
        assert!(rep.reply_read_chunks());
        // A 3000-byte call now goes as a long call (RPCRDMA-36).
        let shape = crate::planner::CallShape {
            message_len: 3000,
            ..Default::default()
        };
        assert_eq!(
            p.plan_call(&shape),
            Err(crate::planner::PlanError::CallTooLarge),
            "with Reads of client memory forbidden, no long call either"
        );
        let p = ChunkPlanner {
            call_read_chunks: true,
            ..p
        };
        assert_eq!(
            p.plan_call(&shape).unwrap().form,
            crate::planner::CallForm::LongCall
        );
    }
}
