//! Transmission on a queue: frames onto the tx ring, whole packets at a time, and the kicks
//! that make the kernel send them.

use super::{Frame, Holder, TxChecksumOffload, XskQueue};

impl XskQueue {
    /// Queues frames from the front of `frames` on the tx ring, as many whole packets as the
    /// ring has room for (a chain of [`XskQueue::scatter`] or a slab is never split), and kicks
    /// the kernel if it asks. The queued tokens leave `frames`; the rest stay for the next
    /// call, so a backlog longer than the ring drains as the kernel consumes it. Returns how
    /// many were queued. With [`XskQueue::offloads_tcp_checksum`], the first frame of every
    /// TCP packet queued gets its checksum request.
    pub fn send(&mut self, frames: &mut Vec<Frame>) -> usize {
        if frames.is_empty() {
            return 0;
        }
        let want = u32::try_from(frames.len()).unwrap_or(u32::MAX);
        let fit = whole_packets_within(frames, self.socket.tx.room(want) as usize);
        if fit == 0 {
            return 0;
        }
        if self.tx_checksum != TxChecksumOffload::Off {
            // `Kernel` chains were finished by `scatter`. `frames` starts with a packet's
            // first frame: earlier calls queued whole packets only.
            let chains_done = self.tx_checksum == TxChecksumOffload::Kernel;
            let mut first = true;
            for f in frames[..fit].iter_mut() {
                if first && !(chains_done && f.continues()) {
                    self.request_tcp_checksum(f);
                }
                first = !f.continues();
            }
        }
        self.descs.clear();
        for f in &frames[..fit] {
            self.check_owner(f);
            self.descs.push(libc::xdp_desc {
                addr: f.addr,
                len: f.len,
                options: f.options,
            });
        }
        // Every descriptor is a frame of this UMEM whose token we hold; the tokens of the
        // frames the ring accepts are dropped below, so user space cannot touch them until the
        // completion ring gives them back. The room was counted above: all of them fit.
        let n = self.socket.tx.produce(&self.descs);
        for i in 0..n {
            let addr = self.descs[i].addr;
            self.lend(addr, Holder::TxRing);
        }
        frames.drain(..n);
        self.in_tx += n;
        if n > 0 && self.tx_wants_kick() {
            self.socket.kick_tx();
        }
        n
    }

    /// Whether the kernel must be kicked to transmit (always without need_wakeup).
    fn tx_wants_kick(&self) -> bool {
        !self.need_wakeup || self.socket.tx.needs_wakeup()
    }

    /// Kicks the kernel again while transmitted frames have not all completed (copy mode sends
    /// at most a budget per `sendto` and says nothing about the rest). Call it after
    /// [`XskQueue::reclaim`], so that a batch the last `send` finished costs no second `sendto`.
    pub fn kick_tx(&mut self) {
        if self.in_tx > 0 && self.tx_wants_kick() {
            self.socket.kick_tx();
        }
    }
}

/// How many frames from the front of `frames` make whole packets within `room` ring slots:
/// the longest prefix of at most `room` that ends with a packet's last frame (one without
/// `XDP_PKT_CONTD`), or all of `frames` when they fit.
fn whole_packets_within(frames: &[Frame], room: usize) -> usize {
    if frames.len() <= room {
        return frames.len();
    }
    (1..=room)
        .rev()
        .find(|&k| !frames[k - 1].continues())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::super::XDP_PKT_CONTD;
    use super::*;

    /// Packets of `lens` frames each, as the tx backlog holds them.
    fn backlog(lens: &[usize]) -> Vec<Frame> {
        let mut v = Vec::new();
        for &n in lens {
            for i in 0..n {
                v.push(Frame {
                    addr: v.len() as u64 * 4096,
                    len: 64,
                    options: if i + 1 < n { XDP_PKT_CONTD } else { 0 },
                    owner: 0,
                });
            }
        }
        v
    }

    #[test]
    fn a_backlog_longer_than_the_room_goes_in_whole_packets() {
        // Single-frame packets: as many as there is room for (the old all-or-nothing queued
        // none of a backlog longer than the ring, ever).
        assert_eq!(whole_packets_within(&backlog(&[1; 300]), 256), 256);
        assert_eq!(whole_packets_within(&backlog(&[1; 300]), 0), 0);
        // Chains of three: never a part of one.
        let chains = backlog(&[3; 100]);
        assert_eq!(whole_packets_within(&chains, 64), 63);
        assert_eq!(whole_packets_within(&chains, 2), 0);
        // Mixed: the last packet that ends within the room.
        let mixed = backlog(&[1, 3, 1, 3]);
        assert_eq!(whole_packets_within(&mixed, 5), 5);
        assert_eq!(whole_packets_within(&mixed, 7), 5);
        assert_eq!(whole_packets_within(&mixed, 8), 8);
        assert_eq!(whole_packets_within(&mixed, 100), 8);
        assert_eq!(whole_packets_within(&[], 0), 0);
    }
}
