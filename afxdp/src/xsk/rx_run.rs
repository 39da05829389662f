//! Receiving into the strip (the books are [`crate::rx_strip`]): the fill ring draws from
//! it, and a received chain whose frames sit end to end is lent as one slice.

use super::{BindMode, Frame, Holder, XskConfig, XskQueue};
use crate::xsk_features::{DevFeatures, XDP_XSK_ZEROCOPY};

/// Whether a queue made with `cfg` gets a receive strip: asked for, multi-buffer, and sure to
/// run in copy mode (bound `Copy`, or `Auto` on a driver whose `features` lack zero-copy;
/// asked only then, `None`: unknown). A driver's zero-copy path is not known to honour
/// unaligned chunks, and under `Auto` one that refused them would fall back to copy mode
/// unseen; such queues keep aligned frames.
pub(super) fn strip_for(cfg: &XskConfig, features: impl FnOnce() -> Option<DevFeatures>) -> bool {
    if !(cfg.rx_strip && cfg.multi_buffer) {
        return false;
    }
    match cfg.bind_mode {
        BindMode::Copy => true,
        BindMode::ZeroCopy => false,
        BindMode::Auto => features().is_some_and(|f| f.xdp & XDP_XSK_ZEROCOPY == 0),
    }
}

impl XskQueue {
    /// Whether the fill ring draws from a receive strip (see [`super::XskConfig::rx_strip`]).
    pub fn has_rx_strip(&self) -> bool {
        self.strip.is_some()
    }

    /// [`XskQueue::refill`] from the strip: its free positions in strip order, up to the fill
    /// target.
    pub(super) fn refill_from_strip(&mut self) -> usize {
        let Some(strip) = self.strip.as_mut() else {
            return 0;
        };
        let want = self.fill_target.saturating_sub(self.in_fill);
        if want == 0 {
            return 0;
        }
        self.addrs.clear();
        let taken = strip.take_for_fill(want, &mut self.addrs);
        // The strip's positions are ours and free (not in a ring, no token for them): once in
        // the fill ring nobody touches them until the rx ring returns them as frames.
        let n = self.socket.fill.produce(&self.addrs);
        strip.untake(taken - n);
        self.lend_addrs(n, Holder::FillRing);
        self.in_fill += n;
        if self.need_wakeup && self.socket.fill.needs_wakeup() {
            self.socket.kick_fill();
        }
        n
    }

    /// The packet carried by the chain `frames` (in order, every frame but the last marked
    /// [`Frame::continues`]) as one slice of the UMEM, when its frames are consecutive strip
    /// positions, each but the last full; `None` otherwise (gather it instead).
    pub fn chain_run(&self, frames: &[Frame]) -> Option<&[u8]> {
        let strip = self.strip.as_ref()?;
        let (first, last) = (frames.first()?, frames.last()?);
        let mut end = first.addr;
        for f in frames {
            self.check_owner(f);
            strip.position_of(f.addr)?;
            if f.addr != end {
                return None;
            }
            end = f.addr + u64::from(f.len);
            if !std::ptr::eq(f, last) && u64::from(f.len) != strip.stride() {
                return None;
            }
        }
        if u64::from(last.len) > strip.stride() {
            return None;
        }
        let len = usize::try_from(end - first.addr).ok()?;
        // Safety: `[first.addr, end)` is the union of the frames' data spans, which are
        // adjacent (checked above) and each inside its strip position (a length at most the
        // stride from a position's data start). Every frame is a token of this UMEM that the
        // caller holds for the borrow's length: no ring holds those positions, so the kernel
        // does not write them, and no other token refers to them.
        Some(unsafe { self.umem.bytes(first.addr, len) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strip_only_where_the_socket_surely_runs_in_copy_mode() {
        let cfg = |bind_mode, multi_buffer, rx_strip| XskConfig {
            bind_mode,
            multi_buffer,
            rx_strip,
            ..XskConfig::default()
        };
        let never = || -> Option<DevFeatures> { panic!("features asked for a fixed bind mode") };
        let driver = |xdp| move || Some(DevFeatures { xdp, xsk: 0 });
        assert!(strip_for(&cfg(BindMode::Copy, true, true), never));
        assert!(!strip_for(&cfg(BindMode::ZeroCopy, true, true), never));
        assert!(!strip_for(&cfg(BindMode::Copy, false, true), never));
        assert!(!strip_for(&cfg(BindMode::Copy, true, false), never));
        // Auto: a driver without zero-copy (veth's bits: basic, redirect, ndo-xmit, rx-sg)
        // takes the strip; one with zero-copy, or unknown features, keeps aligned frames.
        assert!(strip_for(
            &cfg(BindMode::Auto, true, true),
            driver(1 | 2 | 4 | 32)
        ));
        assert!(!strip_for(
            &cfg(BindMode::Auto, true, true),
            driver(1 | 2 | 8)
        ));
        assert!(!strip_for(&cfg(BindMode::Auto, true, true), || None));
    }
}
