//! Local ports for active opens: a range (reserved from the kernel by the host set-up) handed
//! out round robin, skipping ports in use.

use std::ops::RangeInclusive;

/// The active-open port allocator.
#[derive(Debug)]
pub(crate) struct LocalPorts {
    range: RangeInclusive<u16>,
    next: u16,
}

impl LocalPorts {
    /// Hands out `range`, starting at its first port.
    pub(crate) fn new(range: RangeInclusive<u16>) -> Self {
        LocalPorts {
            next: *range.start(),
            range,
        }
    }

    /// The next port of the range for which `taken` is false, trying each port of the range
    /// at most once; the search goes on from there next time.
    pub(crate) fn allocate(&mut self, mut taken: impl FnMut(u16) -> bool) -> Option<u16> {
        let (first, last) = (*self.range.start(), *self.range.end());
        let span = u32::from(last) - u32::from(first) + 1;
        for _ in 0..span {
            let port = self.next;
            self.next = if port >= last { first } else { port + 1 };
            if !taken(port) {
                return Some(port);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_skips_taken_and_wraps() {
        let mut p = LocalPorts::new(10..=12);
        assert_eq!(p.allocate(|_| false), Some(10));
        assert_eq!(p.allocate(|port| port == 11), Some(12));
        assert_eq!(p.allocate(|_| false), Some(10));
        assert_eq!(p.allocate(|_| true), None);
        assert_eq!(p.allocate(|_| false), Some(11));
    }
}
