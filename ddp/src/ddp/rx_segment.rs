//! A received DDP segment as the engine sees it: one contiguous slice, or the parts left
//! between MPA markers, so placement copies each part straight into the region (no
//! reassembly copy). Headers and small RDMAP payloads are read from a short contiguous prefix.

use crate::ddp::memory::{Memory, RegionHandle};
use crate::ddp::untagged::UNTAGGED_HEADER_LEN;
use crate::rdmap::terminate::TERMINATE_HEADER_MAX_LEN;

/// Longest prefix made contiguous: the largest header plus the largest inline RDMAP payload.
pub const HEAD_MAX: usize = UNTAGGED_HEADER_LEN + TERMINATE_HEADER_MAX_LEN;

/// A received segment: its parts, total length and contiguous prefix.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RxSegment<'a> {
    parts: &'a [&'a [u8]],
    len: usize,
    /// The whole segment when it is one part, else its first `HEAD_MAX` octets (or fewer).
    head: &'a [u8],
}

/// Copy the first octets of `parts` into `buf`; returns how many.
pub(crate) fn gather_prefix(parts: &[&[u8]], buf: &mut [u8]) -> usize {
    let mut n = 0;
    for p in parts {
        let take = p.len().min(buf.len() - n);
        buf[n..n + take].copy_from_slice(&p[..take]);
        n += take;
        if n == buf.len() {
            break;
        }
    }
    n
}

impl<'a> RxSegment<'a> {
    /// `head` must be `parts[0]` when there is one part, else the gathered prefix.
    pub(crate) fn new(parts: &'a [&'a [u8]], head: &'a [u8]) -> Self {
        RxSegment {
            parts,
            len: parts.iter().map(|p| p.len()).sum(),
            head,
        }
    }

    /// Total octets.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The contiguous prefix (all of it when one part or short).
    pub(crate) fn head(&self) -> &'a [u8] {
        self.head
    }

    /// The payload after `skip` header octets, when it is inside the contiguous prefix.
    pub(crate) fn small_payload(&self, skip: usize) -> Option<&'a [u8]> {
        (self.head.len() == self.len)
            .then(|| self.head.get(skip..))
            .flatten()
    }

    /// Write every octet after the first `skip` into `region` from `offset` on.
    pub(crate) fn write_payload<M: Memory + ?Sized>(
        &self,
        mem: &mut M,
        region: RegionHandle,
        offset: u64,
        skip: usize,
    ) {
        let mut skip = skip;
        let mut at = offset;
        for p in self.parts {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            let chunk = &p[skip..];
            skip = 0;
            mem.write(region, at, chunk);
            at += chunk.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::memory::VecMemory;

    #[test]
    fn parts_write_like_one_slice() {
        let whole: Vec<u8> = (0..200u8).collect();
        let parts: [&[u8]; 3] = [&whole[..7], &whole[7..150], &whole[150..]];
        let mut buf = [0u8; HEAD_MAX];
        let n = gather_prefix(&parts, &mut buf);
        assert_eq!(&buf[..n], &whole[..HEAD_MAX]);
        let seg = RxSegment::new(&parts, &buf[..n]);
        assert_eq!(seg.len(), 200);
        assert!(seg.small_payload(18).is_none(), "not all in the prefix");
        let mut mem = VecMemory::new();
        mem.insert(RegionHandle::new(1, 1), vec![0; 300]);
        seg.write_payload(&mut mem, RegionHandle::new(1, 1), 10, 18);
        assert_eq!(
            &mem.get(RegionHandle::new(1, 1)).unwrap()[10..192],
            &whole[18..]
        );
    }
}
