//! Scatter-gather lists: a work request's local memory as up to [`MAX_SGE`] pieces of the
//! domain's regions.
//!
//! A request with one element uses its region directly. A request with more gets a *gather
//! region* for as long as it is in flight: an entry of the domain's STag table (local rights
//! only, so no peer can name it) whose bytes are the elements one after the other, read and
//! written piece by piece by [`crate::pd::PdMemory`]. ddp sees one local buffer, so a Send,
//! Write or Read with a list stays ONE message on the wire (one MSN, one Read Request), and a
//! receive with a list takes one incoming Send. The gather region is dropped when the
//! request completes, and with any region it reaches when that region is deregistered (the
//! request then completes flushed).

use std::ops::Range;
use std::sync::Arc;

use ddp::{Access, LocalBuf, RegionHandle, RegionSpec};

use crate::memory::PinnedBuf;
use crate::pd::PdState;
use crate::{MemoryRegion, PostError, PostKind, ProtectionDomain};

/// Most elements one work request may have.
pub const MAX_SGE: usize = 32;

/// One scatter-gather element: `len` bytes at `offset` in a registered region.
#[derive(Debug, Clone, Copy)]
pub struct Sge<'a> {
    /// The region (of the queue pair's protection domain).
    pub mr: &'a MemoryRegion,
    /// Offset from the region's start.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

impl<'a> Sge<'a> {
    /// The element `mr[range]` (a reversed range is refused at post time).
    pub fn new(mr: &'a MemoryRegion, range: Range<usize>) -> Self {
        Sge {
            mr,
            offset: range.start,
            // A reversed range gets a length that cannot fit, so posting it fails the bounds.
            len: range.end.checked_sub(range.start).unwrap_or(usize::MAX),
        }
    }
}

/// A work request for [`crate::QueuePair::post_list`]: the caller's id, what to do, the local
/// scatter-gather list, and whether a successful completion is reported.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WorkRequest<'a> {
    /// The caller's id; it comes back in the completion.
    pub wr_id: u64,
    /// What to do.
    pub kind: PostKind,
    /// The local memory, in message order (1 to [`MAX_SGE`] elements).
    pub sgl: &'a [Sge<'a>],
    /// Report a successful completion (true by default). An unsignaled request still
    /// reports an unsuccessful one; a later signaled completion on the same queue implies it
    /// is done. Receives are always signaled (verbs' rule).
    pub signaled: bool,
}

impl<'a> WorkRequest<'a> {
    /// A signaled request.
    pub fn new(wr_id: u64, kind: PostKind, sgl: &'a [Sge<'a>]) -> Self {
        WorkRequest {
            wr_id,
            kind,
            sgl,
            signaled: true,
        }
    }

    /// The same request, unsignaled (no completion unless it fails; see
    /// [`WorkRequest::signaled`]).
    pub fn unsignaled(self) -> Self {
        WorkRequest {
            signaled: false,
            ..self
        }
    }

    /// Whether its successful completion is reported (receives always are).
    pub(crate) fn reports_success(&self) -> bool {
        self.signaled || self.kind == PostKind::Recv
    }

    /// The local right its memory needs: the sink of a receive or a Read is written.
    fn need(&self) -> Access {
        match self.kind {
            PostKind::Recv | PostKind::Read(_) => Access::LOCAL_WRITE,
            PostKind::Send { .. } | PostKind::Write(_) => Access::default(),
        }
    }

    /// Checks the list against `pd` (the domain, bounds, rights, total length) without
    /// locking anything; nothing is registered.
    pub(crate) fn check(&self, pd: &ProtectionDomain) -> Result<u32, PostError> {
        if self.sgl.is_empty() || self.sgl.len() > MAX_SGE {
            return Err(PostError::SglLength);
        }
        let mut total = 0u64;
        for s in self.sgl {
            if !pd.owns(s.mr) {
                return Err(PostError::ForeignRegion);
            }
            if s.offset
                .checked_add(s.len)
                .is_none_or(|end| end > s.mr.len())
            {
                return Err(PostError::LocalBounds);
            }
            if !s.mr.access().contains(self.need()) {
                return Err(PostError::Access);
            }
            total += s.len as u64;
        }
        u32::try_from(total).map_err(|_| PostError::TooLong)
    }

    /// The local buffer of a one-element list: its region, nothing registered. `len` is
    /// [`WorkRequest::check`]'s total.
    pub(crate) fn single_buf(&self, len: u32) -> LocalBuf {
        let one = &self.sgl[0];
        LocalBuf {
            region: one.mr.handle,
            offset: one.offset as u64,
            len,
        }
    }

    /// The local buffer ddp gets: the one element's region, or a new gather region of the
    /// list (registered in `st`; the caller releases it with [`release`]). `len` is
    /// [`WorkRequest::check`]'s total.
    pub(crate) fn local_buf(
        &self,
        st: &mut PdState,
        pd: &ProtectionDomain,
        len: u32,
    ) -> Result<LocalBuf, PostError> {
        if self.sgl.len() == 1 {
            return Ok(self.single_buf(len));
        }
        let gather = Gather {
            pieces: self
                .sgl
                .iter()
                .map(|s| Piece {
                    region: s.mr.handle,
                    buf: s.mr.buf.clone(),
                    offset: s.offset,
                    len: s.len,
                })
                .collect(),
        };
        let spec = RegionSpec {
            base_to: 0,
            len: u64::from(len),
            access: self.need(),
            pd: pd.inner.id,
            stream: None,
        };
        let (region, _) = st.tags.register(spec).map_err(|_| PostError::NoStag)?;
        st.mem.gathers.insert(region, gather);
        Ok(LocalBuf {
            region,
            offset: 0,
            len,
        })
    }
}

/// Drops the gather region `region` of a finished (or never posted) request; a no-op for a
/// registered region of the caller's and for a gather region already dropped.
pub(crate) fn release(st: &mut PdState, region: RegionHandle) {
    if st.mem.gathers.remove(region).is_some() {
        st.tags.deregister(region);
    }
}

/// One element of a gather region.
#[derive(Debug)]
struct Piece {
    /// The caller's region it lies in.
    region: RegionHandle,
    buf: Arc<PinnedBuf>,
    offset: usize,
    len: usize,
}

/// The bytes of a scatter-gather list, one element after the other.
#[derive(Debug)]
pub(crate) struct Gather {
    pieces: Vec<Piece>,
}

impl Gather {
    /// True when one of its elements lies in `region`.
    pub(crate) fn reaches(&self, region: RegionHandle) -> bool {
        self.pieces.iter().any(|p| p.region == region)
    }

    /// Calls `f(piece, offset in piece, range of the data)` for each piece that
    /// `[at, at+len)` of the list covers; false when the range runs past the end.
    fn each(&self, at: usize, len: usize, mut f: impl FnMut(&Piece, usize, Range<usize>)) -> bool {
        let (mut pos, mut done) = (0usize, 0usize);
        for p in &self.pieces {
            if done == len {
                break;
            }
            let start = at + done;
            if start < pos + p.len {
                let inner = start - pos;
                let n = (p.len - inner).min(len - done);
                f(p, p.offset + inner, done..done + n);
                done += n;
            }
            pos += p.len;
        }
        done == len
    }

    /// Writes `data` at `at` of the list, piece by piece.
    pub(crate) fn scatter(&self, at: usize, data: &[u8]) {
        self.each(at, data.len(), |p, off, r| {
            let _ = p.buf.write_at(off, &data[r]);
        });
    }

    /// Reads `out.len()` bytes at `at` of the list; false when out of bounds.
    pub(crate) fn gather(&self, at: usize, out: &mut [u8]) -> bool {
        let mut ok = true;
        let all = self.each(at, out.len(), |p, off, r| {
            ok &= p.buf.read_at(off, &mut out[r]).is_some();
        });
        all && ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(buf: &Arc<PinnedBuf>, offset: usize, len: usize) -> Piece {
        Piece {
            region: RegionHandle::new(1, 1),
            buf: buf.clone(),
            offset,
            len,
        }
    }

    /// Bytes of the list map to the pieces in order, across piece boundaries, from any start.
    #[test]
    fn scatter_and_gather_cross_pieces_in_order() {
        let a = Arc::new(PinnedBuf::new(16).unwrap());
        let b = Arc::new(PinnedBuf::new(16).unwrap());
        let g = Gather {
            pieces: vec![piece(&a, 4, 3), piece(&b, 0, 2), piece(&a, 10, 4)],
        };
        g.scatter(0, b"abcdefghi");
        let mut out = [0u8; 16];
        a.read_at(0, &mut out).unwrap();
        assert_eq!(&out, b"\0\0\0\0abc\0\0\0fghi\0\0");
        let mut mid = [0u8; 5];
        assert!(g.gather(2, &mut mid));
        assert_eq!(&mid, b"cdefg");
        assert!(!g.gather(5, &mut [0u8; 5]), "past the end");
        g.scatter(8, b"XY");
        a.read_at(13, &mut out[..3]).unwrap();
        assert_eq!(&out[..3], b"X\0\0", "nothing past the list's end");
    }
}
