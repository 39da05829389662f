//! Flow control (RFC 9293 §3.8.6): the receive window we advertise (never shrunk, window-update
//! ACKs when reading opens it) and the peer's send window (SND.WL1/WL2 rule).

use crate::lean::SegmentHeader;

use super::timers::Timer;
use super::Connection;

impl Connection {
    pub(super) fn rcv_wnd(&self) -> u64 {
        self.rcv_edge.saturating_sub(self.recv.nxt)
    }

    /// The window we can advertise now (octets, before scaling).
    pub(super) fn window_to_advertise(&self) -> u64 {
        u64::from(self.cfg.recv_buffer).saturating_sub(self.recv.held())
    }

    pub(super) fn advertise(&mut self, syn: bool) -> u16 {
        let free = self.window_to_advertise();
        let scale = if syn { 0 } else { self.opts.rcv_wscale };
        let mut w = (free >> scale).min(65535);
        // Never shrink the window (RFC 9293 §3.8.6.2.2).
        let edge_now = self.recv.nxt + (w << scale);
        if edge_now < self.rcv_edge {
            w = (self.rcv_edge - self.recv.nxt)
                .div_ceil(1 << scale)
                .min(65535);
        }
        self.rcv_edge = self.rcv_edge.max(self.recv.nxt + (w << scale));
        w as u16
    }

    pub(super) fn maybe_window_update(&mut self, before: u64) {
        let after = self.window_to_advertise();
        self.window_update_if_opened(before, after);
    }

    /// Asks for a window-update ACK when reading opened the window from `before` to `after` by
    /// min(2 EMSS, buffer / 2) while it was below half the buffer.
    pub(super) fn window_update_if_opened(&mut self, before: u64, after: u64) {
        let thresh = u64::from(self.emss())
            .saturating_mul(2)
            .min(u64::from(self.cfg.recv_buffer) / 2);
        if self.state.is_synchronized()
            && after >= before + thresh
            && before < u64::from(self.cfg.recv_buffer) / 2
        {
            self.ack_now = true;
        }
    }

    pub(super) fn update_window(&mut self, seg: &SegmentHeader, force: bool) {
        // RFC 9293 §3.10.7.4 fifth check: SND.WL1/WL2 rule.
        if force
            || self.snd_wl1.lt(seg.seq)
            || (self.snd_wl1 == seg.seq && self.snd_wl2.le(seg.ack))
        {
            let scale = if seg.flags.syn {
                0
            } else {
                self.opts.snd_wscale
            };
            let wnd = u32::from(seg.window) << scale;
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = seg.ack;
            if wnd == self.snd_wnd && wnd > 0 {
                // Open and unchanged: what follows was done when it opened (the persist timer
                // is armed and backed off only while the window is shut).
                debug_assert!(
                    self.max_snd_wnd >= wnd
                        && !self.timers.is_armed(Timer::Persist)
                        && self.persist_backoff == 0
                        && self.persist_since.is_none()
                );
                return;
            }
            self.snd_wnd = wnd;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            if self.snd_wnd > 0 {
                self.timers.stop(Timer::Persist);
                self.persist_backoff = 0;
                self.persist_since = None;
            }
        }
    }
}
