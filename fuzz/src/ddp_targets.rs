//! DDP and RDMAP: every header view and `Repr`, and a queue pair fed an arbitrary FPDU stream.

use ddp::WorkRequest;
use std::time::Instant;

use ddp::{
    Access, DdpPacket, DdpRepr, LocalBuf, Memory, PdId, Qp, QpConfig, ReadRequestPacket,
    ReadRequestRepr, RegionHandle, RegionSpec, StagTable, StreamId, TerminatePacket, TerminateRepr,
    VecMemory,
};

use crate::Input;

/// Parses `data` with `parse`; when that succeeds, emits the result into a fresh buffer of
/// its length and parses that again: the two parses must agree (what we emit is what we read).
macro_rules! reparse {
    ($data:expr, $view:ident, $repr:ident) => {
        if let Ok(p) = $view::new_checked($data) {
            if let Ok(r) = $repr::parse(&p) {
                let mut buf = vec![0u8; r.buffer_len()];
                r.emit(&mut $view::new_unchecked(&mut buf[..]));
                let again = $repr::parse(&$view::new_checked(&buf[..]).expect("emitted length"))
                    .expect("what we emit parses");
                assert_eq!(again, r);
            }
        }
    };
}

/// Arbitrary octets as each DDP and RDMAP header (the first octet picks which): parsing never
/// panics, and a parsed header re-emits to octets that parse to the same header. The RDMAP
/// control octet inside a DDP header, too.
pub fn ddp_headers(data: &[u8]) {
    let mut input = Input::new(data);
    let which = input.u8();
    let data = input.rest();
    match which % 3 {
        0 => {
            reparse!(data, DdpPacket, DdpRepr);
            if let Some(&b) = data.get(1) {
                if let Ok(c) = ddp::RdmapControl::parse(b) {
                    assert_eq!(ddp::RdmapControl::parse(c.emit()), Ok(c));
                }
            }
        }
        1 => reparse!(data, ReadRequestPacket, ReadRequestRepr),
        _ => reparse!(data, TerminatePacket, TerminateRepr),
    }
}

/// A [`Memory`] that checks every access against the regions' lengths: ddp promises to check
/// bounds before it calls, so an access outside a region is a bug (a panic here). Optionally
/// it logs where each write went, so a checker need only look at what changed.
pub struct CheckedMemory(VecMemory, Option<Vec<(RegionHandle, u64, usize)>>);

impl CheckedMemory {
    /// Checked access to `mem`.
    pub fn new(mem: VecMemory) -> Self {
        CheckedMemory(mem, None)
    }

    /// Checked access to `mem` that logs every write (region, offset, length) until
    /// [`CheckedMemory::take_writes`] drains the log.
    pub fn logging_writes(mem: VecMemory) -> Self {
        CheckedMemory(mem, Some(Vec::new()))
    }

    /// The writes logged since the last call (empty unless built by
    /// [`CheckedMemory::logging_writes`]), oldest first; `into` is cleared first.
    pub fn take_writes(&mut self, into: &mut Vec<(RegionHandle, u64, usize)>) {
        into.clear();
        if let Some(log) = &mut self.1 {
            std::mem::swap(log, into);
        }
    }

    /// The memory behind the checks.
    pub fn inner(&self) -> &VecMemory {
        &self.0
    }

    /// The memory behind the checks, to fill regions.
    pub fn inner_mut(&mut self) -> &mut VecMemory {
        &mut self.0
    }

    fn check(&self, region: RegionHandle, offset: u64, len: usize) {
        let size = self.0.get(region).map_or(0, |r| r.len() as u64);
        assert!(
            offset
                .checked_add(len as u64)
                .is_some_and(|end| end <= size),
            "access to {region:?} at {offset}+{len} outside its {size} octets"
        );
    }
}

impl Memory for CheckedMemory {
    fn write(&mut self, region: RegionHandle, offset: u64, data: &[u8]) {
        self.check(region, offset, data.len());
        if let Some(log) = &mut self.1 {
            log.push((region, offset, data.len()));
        }
        self.0.write(region, offset, data);
    }
    fn read(&self, region: RegionHandle, offset: u64, out: &mut [u8]) {
        self.check(region, offset, out.len());
        self.0.read(region, offset, out);
    }
}

/// The queue pair's surroundings in [`qp_stream`]: its STag table and checked memory, the
/// region its receives are posted in, and the STag of the region a peer may write and read
/// (the seed corpus addresses it).
pub struct QpFixture {
    tags: StagTable,
    mem: CheckedMemory,
    rx: RegionHandle,
    /// STag of the 8 KiB remotely writable and readable region (TO from 0x1000).
    pub target: ddp::Stag,
}

/// The fixture [`qp_stream`] runs in: the same STags every time.
pub fn qp_fixture() -> QpFixture {
    let mut tags = StagTable::new(7);
    let mut mem = CheckedMemory::new(VecMemory::new());
    let mut region = |len: usize, access: Access| {
        let (h, stag) = tags
            .register(RegionSpec {
                base_to: 0x1000,
                len: len as u64,
                access,
                pd: PdId(1),
                stream: None,
            })
            .expect("room in the table");
        mem.0.insert(h, vec![0u8; len]);
        (h, stag)
    };
    let (rx, _) = region(2048, Access::LOCAL_WRITE);
    let (_, target) = region(8192, Access::REMOTE_WRITE | Access::REMOTE_READ);
    QpFixture {
        tags,
        mem,
        rx,
        target,
    }
}

/// An established queue pair (stream 1, PD 1) with markers and CRC as given.
pub fn qp_established(markers: bool, crc: bool) -> Qp {
    let mut cfg = QpConfig::default();
    cfg.engine.stream = StreamId(1);
    cfg.engine.pd = PdId(1);
    let negotiated = mpa::Negotiated {
        role: mpa::Role::Initiator,
        tx_markers: markers,
        rx_markers: markers,
        crc,
        revision: 1,
        read_depths: mpa::ReadDepths::default(),
        peer_read_depths: None,
        rtr: None,
        peer_private_data: Vec::new(),
        local_frame_len: 20,
        peer_frame_len: 20,
    };
    Qp::new_established(cfg, &negotiated)
}

/// An established queue pair (markers and CRC as the input says) with a remotely writable and
/// readable region and two posted receives, fed the rest of the input as its in-order FPDU
/// stream in input-sized pieces, transmitting whatever it answers (Read Responses, Terminate):
/// no panic, no memory access outside a registered region, no receive completion longer than
/// its buffer, and once in the error state it stays there. With the piece size's top bit set,
/// every piece but the first is first handed to the out-of-order path, last first (MPA's
/// locator: markers and the length chain only); and the stream ends with the peer's FIN, after
/// which a receive posted completes flushed (DDP-69).
pub fn qp_stream(data: &[u8]) {
    let mut input = Input::new(data);
    let (markers, crc) = (input.bool(), input.bool());
    let raw_piece = input.u16();
    let out_of_order = raw_piece & 0x8000 != 0;
    let piece = usize::from(raw_piece % 4096).max(1);
    let stream = input.rest();

    let QpFixture {
        mut tags,
        mut mem,
        rx,
        ..
    } = qp_fixture();
    let mut qp = qp_established(markers, crc);
    let posted = [(1u64, 0u64, 1024u32), (2, 1024, 1024)];
    for (wr_id, offset, len) in posted {
        qp.post(
            &tags,
            WorkRequest::recv(
                wr_id,
                LocalBuf {
                    region: rx,
                    offset,
                    len,
                },
            ),
        )
        .expect("receive posted");
    }
    let now = Instant::now();
    let mut out = vec![0u8; mpa::MAX_FPDU_LEN];
    let mut was_error = false;
    if out_of_order {
        for (i, p) in stream.chunks(piece).enumerate().skip(1).rev() {
            qp.handle_segment(&tags, &mut mem, (i * piece) as u64, p);
        }
    }
    for p in stream.chunks(piece) {
        qp.handle_rx_bytes(&mut tags, &mut mem, now, p);
        while qp.poll_transmit(&tags, &mem, &mut out).is_some() {}
        while let Some(wc) = qp.poll_completion() {
            if let Some(&(_, _, len)) = posted.iter().find(|(id, _, _)| *id == wc.wr_id) {
                assert!(wc.byte_len <= len, "{wc:?} longer than its buffer");
            }
        }
        while qp.poll_event().is_some() {}
        assert!(!was_error || qp.is_error(), "left the error state");
        was_error = qp.is_error();
    }
    if out_of_order {
        qp.handle_peer_fin();
        let late = LocalBuf {
            region: rx,
            offset: 0,
            len: 16,
        };
        if qp.post(&tags, WorkRequest::recv(9, late)).is_ok() {
            let wc = std::iter::from_fn(|| qp.poll_completion()).find(|wc| wc.wr_id == 9);
            assert_eq!(wc.map(|w| w.status), Some(ddp::WcStatus::Flushed), "DDP-69");
        }
    }
}
