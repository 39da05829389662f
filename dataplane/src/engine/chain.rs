//! Gathering a packet that arrived as a chain of frames (AF_XDP multi-buffer: every frame but
//! the last is marked "continues") into one buffer, so that the endpoint sees whole packets:
//! the fallback for chains that are not one run of the receive strip.
//! A packet that fits one frame is passed through without a copy.

/// The chain received so far; it may end in a later receive batch.
#[derive(Debug)]
pub(crate) struct RxChain {
    buf: Vec<u8>,
    /// `buf` holds the packet handed out last: cleared on the next frame.
    delivered: bool,
    /// Set while the rest of a chain too long to gather is skipped.
    skipping: bool,
    /// The last frame fed continues into the next one.
    mid_chain: bool,
    dropped: u64,
    max: usize,
}

impl RxChain {
    /// Gathers packets of at most `max` octets; a longer chain is dropped whole.
    pub(crate) fn new(max: usize) -> Self {
        RxChain {
            buf: Vec::with_capacity(max),
            delivered: false,
            skipping: false,
            mid_chain: false,
            dropped: 0,
            max,
        }
    }

    /// Takes the next received frame, `data`, which `continues` into the next one or not.
    /// Returns the packet this frame completes: `data` itself when it is a whole packet,
    /// else the gathered chain.
    pub(crate) fn feed<'a>(&'a mut self, data: &'a [u8], continues: bool) -> Option<&'a [u8]> {
        if self.delivered {
            self.buf.clear();
            self.delivered = false;
        }
        self.mid_chain = continues;
        if self.buf.is_empty() && !self.skipping && !continues {
            return Some(data);
        }
        if !self.skipping {
            if self.buf.len() + data.len() > self.max {
                self.buf.clear();
                self.skipping = true;
                self.dropped += 1;
            } else {
                afxdp::bulk_copy::extend_from_slice(&mut self.buf, data);
            }
        }
        if continues {
            return None;
        }
        if std::mem::take(&mut self.skipping) {
            return None;
        }
        self.delivered = true;
        Some(&self.buf)
    }

    /// Whether a chain is under way: the last frame fed continues into the next one.
    pub(crate) fn mid_chain(&self) -> bool {
        self.mid_chain
    }

    /// Chains dropped for being longer than the limit.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(c: &mut RxChain, frames: &[(&[u8], bool)]) -> Vec<Vec<u8>> {
        frames
            .iter()
            .filter_map(|&(d, more)| c.feed(d, more).map(<[u8]>::to_vec))
            .collect()
    }

    #[test]
    fn whole_frames_pass_through_and_chains_are_gathered() {
        let mut c = RxChain::new(100);
        let got = feed_all(
            &mut c,
            &[
                (b"one", false),
                (b"tw", true),
                (b"o-", true),
                (b"parts", false),
                (b"three", false),
            ],
        );
        assert_eq!(got, [&b"one"[..], b"two-parts", b"three"]);
        assert_eq!(c.dropped(), 0);
    }

    #[test]
    fn a_chain_may_end_in_a_later_batch() {
        let mut c = RxChain::new(100);
        assert!(!c.mid_chain());
        assert_eq!(c.feed(b"abc", true), None);
        // (the batch ends here; the frame went back to the pool: its octets were copied)
        assert!(c.mid_chain(), "the next frame continues the chain");
        assert_eq!(c.feed(b"def", false), Some(&b"abcdef"[..]));
        assert!(!c.mid_chain());
        assert_eq!(c.feed(b"g", false), Some(&b"g"[..]));
        // A chain being skipped (too long) is under way too.
        let mut c = RxChain::new(2);
        assert_eq!(c.feed(b"abc", true), None);
        assert!(c.mid_chain());
        assert_eq!(c.feed(b"d", false), None);
        assert!(!c.mid_chain());
    }

    #[test]
    fn an_overlong_chain_is_dropped_whole_and_counted() {
        let mut c = RxChain::new(8);
        let got = feed_all(
            &mut c,
            &[
                (b"12345", true),
                (b"67890", true),
                (b"abc", false),
                (b"next", true),
                (b"ok", false),
            ],
        );
        assert_eq!(got, [&b"nextok"[..]]);
        assert_eq!(c.dropped(), 1);
        // Exactly the limit is still a packet.
        assert_eq!(c.feed(b"1234", true), None);
        assert_eq!(c.feed(b"5678", false), Some(&b"12345678"[..]));
    }
}
