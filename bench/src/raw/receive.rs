//! Receiving in the raw tools: the next batch of frames, and which frames of a multi-buffer
//! stream belong to a packet the tool takes (the verdict on a packet is taken at its first
//! frame and holds for the rest of its chain).

use afxdp::{Frame, XdpError, XskQueue};

/// Reclaims sent frames and receives up to 64 frames into `rx`; returns how many. When none
/// came, kicks the tx ring (copy mode sends what is queued per kick) and, unless `busy_poll`,
/// waits up to a millisecond in `poll(2)` for the rx ring.
pub(super) fn next_batch(
    q: &mut XskQueue,
    rx: &mut Vec<Frame>,
    busy_poll: bool,
) -> Result<usize, XdpError> {
    q.reclaim();
    let n = q.recv(rx, 64);
    if n == 0 {
        q.kick_tx();
        if !busy_poll {
            q.poll_rx(1)?;
        }
    }
    Ok(n)
}

/// A receiver's place in a stream of frames that may form chains (multi-buffer): the verdict
/// on a packet is taken at its first frame and holds for the rest of its chain.
#[derive(Debug, Default)]
pub(super) struct ChainVerdict {
    /// Inside a chain: the verdict its first frame got.
    rest_of: Option<bool>,
}

impl ChainVerdict {
    /// The verdict for the next frame, which `continues` into another or not: `judge()` for
    /// a packet's first frame, the first frame's verdict for the rest. Also whether this is a
    /// first frame.
    pub(super) fn next(&mut self, continues: bool, judge: impl FnOnce() -> bool) -> (bool, bool) {
        let (verdict, first) = match self.rest_of {
            Some(v) => (v, false),
            None => (judge(), true),
        };
        self.rest_of = continues.then_some(verdict);
        (verdict, first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_keeps_the_verdict_of_its_first_frame() {
        let mut v = ChainVerdict::default();
        let judged = std::cell::Cell::new(0);
        let judge = |verdict: bool| {
            let judged = &judged;
            move || {
                judged.set(judged.get() + 1);
                verdict
            }
        };
        // A whole packet, a chain of three (accepted), a chain of two (refused), a packet.
        assert_eq!(v.next(false, judge(true)), (true, true));
        assert_eq!(v.next(true, judge(true)), (true, true));
        assert_eq!(v.next(true, judge(false)), (true, false));
        assert_eq!(v.next(false, judge(false)), (true, false));
        assert_eq!(v.next(true, judge(false)), (false, true));
        assert_eq!(v.next(false, judge(true)), (false, false));
        assert_eq!(v.next(false, judge(false)), (false, true));
        assert_eq!(judged.get(), 4, "judged once per packet");
    }
}
