//! Two queue pairs joined by an in-memory byte pipe: MPA startup, then RDMAP over FPDUs. The
//! pair and its pump are here; the tests, one file per concern, below.

mod operations;
mod receive;
mod retransmit;
mod startup_and_errors;

use super::*;
use crate::ddp::memory::{Memory, RegionHandle, VecMemory};
use crate::ddp::stag::Stag;
use crate::ddp::stag_table::{Access, PdId, StreamId};
use crate::rdmap::completion::{WcOpcode, WcStatus};
use crate::rdmap::term_code::LlpError;
use crate::rdmap::work_request::{LocalBuf, RemoteBuf, SendOpts, WorkRequest};
use crate::test_support::filled_region;

pub(crate) struct End {
    pub qp: Qp,
    pub tags: StagTable,
    pub mem: VecMemory,
    /// Octets sent by the other end, not yet fed in.
    pub inbox: Vec<u8>,
}

impl End {
    pub fn new(qp: Qp, seed: u64) -> End {
        End {
            qp,
            tags: StagTable::new(seed),
            mem: VecMemory::new(),
            inbox: Vec::new(),
        }
    }

    pub fn region(
        &mut self,
        len: usize,
        access: Access,
        fill: impl Fn(usize) -> u8,
    ) -> (RegionHandle, Stag) {
        let at = (0x10_0000, PdId(1));
        filled_region(&mut self.tags, &mut self.mem, at, len, access, fill)
    }

    pub fn completions(&mut self) -> Vec<WorkCompletion> {
        std::iter::from_fn(|| self.qp.poll_completion()).collect()
    }

    pub fn events(&mut self) -> Vec<QpEvent> {
        std::iter::from_fn(|| self.qp.poll_event()).collect()
    }
}

/// `len` octets at `offset` of `region`.
pub(crate) fn local(region: RegionHandle, offset: u64, len: u32) -> LocalBuf {
    LocalBuf {
        region,
        offset,
        len,
    }
}

/// `to` in the peer's region of `stag`.
pub(crate) fn remote(stag: Stag, to: u64) -> RemoteBuf {
    RemoteBuf { stag, to }
}

pub(crate) fn qp_cfg(stream: u32, markers: bool, crc: bool) -> QpConfig {
    let mut c = QpConfig::default();
    c.engine.stream = StreamId(stream);
    c.engine.pd = PdId(1);
    c.startup.want_markers = markers;
    c.startup.want_crc = crc;
    c
}

pub(crate) fn pair(markers: bool, crc: bool) -> (End, End) {
    let now = Instant::now();
    let mut ic = qp_cfg(1, markers, crc);
    ic.private_data = b"hello".to_vec();
    let mut rc = qp_cfg(2, markers, crc);
    rc.private_data = b"ok".to_vec();
    let a = End::new(Qp::new_initiator(ic, now).unwrap(), 11);
    let b = End::new(Qp::new_responder(rc, now), 22);
    (a, b)
}

/// Move octets both ways until quiet, feeding the receiver in `chunk`-octet pieces (so FPDUs
/// straddle reads), acknowledging everything written at once (the kernel transport's rule).
pub(crate) fn pump(a: &mut End, b: &mut End, chunk: usize) {
    loop {
        let moved = one_way(a, b, chunk) | one_way(b, a, chunk);
        if !moved {
            break;
        }
    }
}

/// Everything `src` wants to send, into `dst`; true if anything moved.
fn one_way(src: &mut End, dst: &mut End, chunk: usize) -> bool {
    let now = Instant::now();
    let mut buf = vec![0u8; 70_000];
    let mut moved = false;
    while let Some(n) = src.qp.poll_transmit(&src.tags, &src.mem, &mut buf) {
        dst.inbox.extend_from_slice(&buf[..n]);
        moved = true;
    }
    src.qp.on_acked(src.qp.tx_offset());
    let inbox = std::mem::take(&mut dst.inbox);
    for piece in inbox.chunks(chunk.max(1)) {
        dst.qp
            .handle_rx_bytes(&mut dst.tags, &mut dst.mem, now, piece);
    }
    moved
}

/// Octet `i` of the shared test pattern of `seed` (`testkit::Pattern`).
fn pattern(seed: usize) -> impl Fn(usize) -> u8 {
    move |i| testkit::Pattern::new(seed as u64).byte_at(i as u64)
}

/// Collect the FPDUs `src` wants to send, each with its transmit offset (one per TCP segment,
/// as an MPA-aware TCP sends them).
pub(crate) fn fpdus(src: &mut End) -> Vec<(u64, Vec<u8>)> {
    let mut buf = vec![0u8; 70_000];
    let mut v = Vec::new();
    loop {
        let pos = src.qp.tx_offset();
        let Some(n) = src.qp.poll_transmit(&src.tags, &src.mem, &mut buf) else {
            break;
        };
        v.push((pos, buf[..n].to_vec()));
    }
    v
}
