//! How a queue's UMEM is cut: the pool's frames from offset 0, the transmit slabs after them,
//! the receive strip last; and the slots of its books ([`FrameBooks`]): one per frame up to
//! the strip, one per strip position after that.

use super::{TxChecksumOffload, XskConfig, TX_SLABS, UMEM_HEADROOM};
use crate::frame_books::FrameBooks;
use crate::rx_strip::RxStrip;
use crate::tx_slabs::TxSlabs;

/// The parts of a queue's UMEM (see the module docs).
pub(super) struct UmemLayout {
    /// Frames of the free pool, from offset 0.
    pub pool_frames: u32,
    pub slabs: Option<TxSlabs>,
    pub strip: Option<RxStrip>,
    /// Where the frame-aligned part (pool and slabs) ends and the strip begins.
    pub aligned_end: u64,
}

impl UmemLayout {
    /// The layout for `cfg`, with the TCP checksums done by `tx_checksum` (slabs only when the
    /// engine does them) and a receive strip when `with_strip`.
    pub(super) fn new(cfg: &XskConfig, tx_checksum: TxChecksumOffload, with_strip: bool) -> Self {
        let pool_frames = cfg.pool_frames(with_strip);
        let frame_size = u64::from(cfg.frame_size);
        let frames_len = u64::from(pool_frames) * frame_size;
        let slabs =
            (cfg.multi_buffer && cfg.slab_frames > 1 && tx_checksum == TxChecksumOffload::Off)
                .then(|| TxSlabs::new(frames_len, frame_size, cfg.slab_frames, TX_SLABS));
        let aligned_end = frames_len + slabs.as_ref().map_or(0, TxSlabs::len);
        let strip = with_strip.then(|| {
            RxStrip::new(
                aligned_end,
                frame_size,
                u64::from(UMEM_HEADROOM),
                2 * cfg.fill_target(),
            )
        });
        UmemLayout {
            pool_frames,
            slabs,
            strip,
            aligned_end,
        }
    }

    /// Octets of UMEM it takes.
    pub(super) fn len(&self) -> u64 {
        self.aligned_end + self.strip.as_ref().map_or(0, RxStrip::len)
    }

    /// Empty books for it: every frame and strip position ours.
    pub(super) fn books(&self, frame_size: u64) -> FrameBooks {
        let strip = self.strip.as_ref().map_or(0, RxStrip::positions);
        FrameBooks::new((self.aligned_end / frame_size) as usize + strip)
    }
}
