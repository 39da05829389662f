//! Resets for segments that do not belong to a connection (RFC 9293 §3.10.7.1).

use crate::checksum::TxChecksum;
use crate::isn::FourTuple;
use crate::seq::SeqNum;
use crate::wire::{Flags, SegmentRepr, TcpOptions, TcpSegment};

#[derive(Clone, Copy, Debug)]
pub(crate) struct RstOut {
    pub seq: SeqNum,
    pub ack: Option<SeqNum>,
}

/// The RST answering `seg` (RFC 9293 §3.10.7.1).
pub(crate) fn rst_for(seg: &TcpSegment<'_>) -> RstOut {
    if seg.flags.ack {
        RstOut {
            seq: seg.ack,
            ack: None,
        }
    } else {
        RstOut {
            seq: SeqNum(0),
            ack: Some(seg.seq.plus(seg.seg_len())),
        }
    }
}

/// Emits a bare RST (no options, window 0), its checksum finished as `cks` says.
pub(crate) fn emit_rst(
    tuple: FourTuple,
    r: RstOut,
    buf: &mut [u8],
    cks: TxChecksum,
) -> Option<usize> {
    let repr = SegmentRepr {
        tuple,
        seq: r.seq,
        ack: r.ack,
        flags: Flags {
            rst: true,
            ..Default::default()
        },
        window: 0,
        options: TcpOptions::default(),
    };
    repr.emit_with(buf, 0, |_| {}, cks).ok()
}

/// Emits the RST answering `seg` into `buf` (for listeners and endpoints without a connection).
pub fn emit_rst_for(seg: &TcpSegment<'_>, buf: &mut [u8], cks: TxChecksum) -> Option<usize> {
    if seg.flags.rst {
        return None;
    }
    emit_rst(seg.tuple, rst_for(seg), buf, cks)
}
