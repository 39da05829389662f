//! Protection domains and memory regions.
//!
//! A [`ProtectionDomain`] owns a table of registered [`MemoryRegion`]s, each named by an STag
//! (24-bit index + 8-bit key, the key drawn from the OS random source so STags are not guessable,
//! DDP-06 §8). Queue pairs created in a domain can only reach that domain's regions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::memory::PinnedBuf;
use crate::RegisterError;

/// Access rights of a memory region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access(u8);

impl Access {
    /// Local read (source of Sends and RDMA Writes): always granted.
    pub const LOCAL_READ: Access = Access(0);
    /// Local write: the region may receive Sends and RDMA Read responses.
    pub const LOCAL_WRITE: Access = Access(1);
    /// Peers may RDMA Write into it.
    pub const REMOTE_WRITE: Access = Access(2);
    /// Peers may RDMA Read from it.
    pub const REMOTE_READ: Access = Access(4);
    /// Every right.
    pub const ALL: Access = Access(7);

    /// True when every right in `other` is present.
    pub fn contains(self, other: Access) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

#[derive(Debug)]
pub(crate) struct Region {
    pub(crate) buf: PinnedBuf,
    pub(crate) stag: u32,
    pub(crate) access: Access,
    pub(crate) pd_id: u64,
}

#[derive(Debug, Default)]
pub(crate) struct StagTable {
    by_index: HashMap<u32, Arc<Region>>,
    next_index: u32,
}

impl StagTable {
    /// Looks up a valid STag (index and key must both match).
    pub(crate) fn get(&self, stag: u32) -> Option<&Arc<Region>> {
        self.by_index.get(&(stag >> 8)).filter(|r| r.stag == stag)
    }

    fn free_index(&mut self) -> Option<u32> {
        for _ in 0..(1u32 << 24) {
            let i = self.next_index & 0x00ff_ffff;
            self.next_index = self.next_index.wrapping_add(1);
            // Index 0 stays unused so that STag 0 is never valid.
            if i != 0 && !self.by_index.contains_key(&i) {
                return Some(i);
            }
        }
        None
    }
}

static NEXT_PD: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
pub(crate) struct PdInner {
    pub(crate) id: u64,
    pub(crate) device_id: u64,
    pub(crate) table: Mutex<StagTable>,
}

/// A protection domain.
#[derive(Debug, Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

fn random_key() -> u8 {
    let mut b = [0u8; 1];
    // Safety: getrandom writes at most b.len() bytes into the valid buffer b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 1, 0) };
    if n == 1 {
        b[0]
    } else {
        // Fallback: address entropy; keys only make STags hard to guess, never correctness.
        (&b as *const _ as usize >> 4) as u8
    }
}

impl ProtectionDomain {
    pub(crate) fn new(device_id: u64) -> Self {
        Self {
            inner: Arc::new(PdInner {
                id: NEXT_PD.fetch_add(1, Ordering::Relaxed),
                device_id,
                table: Mutex::default(),
            }),
        }
    }

    /// Registers `len` zeroed bytes of pinned (page-aligned, mlock'ed) memory.
    pub fn register(&self, len: usize, access: Access) -> Result<MemoryRegion, RegisterError> {
        let buf = PinnedBuf::new(len)?;
        let mut t = self.inner.table.lock().unwrap_or_else(|e| e.into_inner());
        let index = t.free_index().ok_or(RegisterError::NoStag)?;
        let stag = (index << 8) | u32::from(random_key());
        let region = Arc::new(Region { buf, stag, access, pd_id: self.inner.id });
        t.by_index.insert(index, region.clone());
        Ok(MemoryRegion { region, pd: self.inner.clone() })
    }

    /// Registers pinned memory holding a copy of `data`.
    pub fn register_from(&self, data: &[u8], access: Access) -> Result<MemoryRegion, RegisterError> {
        let mr = self.register(data.len(), access)?;
        mr.region.buf.write_at(0, data);
        Ok(mr)
    }
}

/// A registered memory region. Dropping it invalidates its STag; bytes still used by an
/// in-flight work request stay mapped until that request finishes.
#[derive(Debug)]
pub struct MemoryRegion {
    pub(crate) region: Arc<Region>,
    pd: Arc<PdInner>,
}

impl MemoryRegion {
    /// The STag peers use to reach this region.
    pub fn stag(&self) -> u32 {
        self.region.stag
    }
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.region.buf.len()
    }
    /// Always false (empty regions cannot be registered).
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Its access rights.
    pub fn access(&self) -> Access {
        self.region.access
    }
    /// Copies `src` in at `offset`; `None` if out of bounds.
    pub fn write(&self, offset: usize, src: &[u8]) -> Option<()> {
        self.region.buf.write_at(offset, src)
    }
    /// Copies bytes at `offset` out into `dst`; `None` if out of bounds.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Option<()> {
        self.region.buf.read_at(offset, dst)
    }
    /// Runs `f` over `[offset, offset+len)`; `None` if out of bounds. No transfer may target the
    /// range meanwhile.
    pub fn with_slice<R>(&self, offset: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        self.region.buf.with_slice(offset, len, f)
    }
    /// Runs `f` over the mutable `[offset, offset+len)`; `None` if out of bounds. No transfer may
    /// target the range meanwhile.
    pub fn with_mut_slice<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        self.region.buf.with_mut_slice(offset, len, f)
    }
    /// Start address of the pinned memory (page aligned).
    pub fn addr(&self) -> usize {
        self.region.buf.addr()
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        let mut t = self.pd.table.lock().unwrap_or_else(|e| e.into_inner());
        let index = self.region.stag >> 8;
        if t.get(self.region.stag).is_some() {
            t.by_index.remove(&index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stags_are_unique_nonzero_and_resolve() {
        let pd = ProtectionDomain::new(1);
        let a = pd.register(100, Access::ALL).unwrap();
        let b = pd.register(100, Access::REMOTE_READ).unwrap();
        assert_ne!(a.stag(), b.stag());
        assert_ne!(a.stag() >> 8, 0);
        let t = pd.inner.table.lock().unwrap();
        assert_eq!(t.get(a.stag()).unwrap().stag, a.stag());
        // same index, other key: invalid (DDP-06 §8: STags must not be guessable)
        assert!(t.get(a.stag() ^ 0x01).is_none());
    }

    #[test]
    fn drop_invalidates_stag() {
        let pd = ProtectionDomain::new(1);
        let a = pd.register(10, Access::ALL).unwrap();
        let s = a.stag();
        drop(a);
        assert!(pd.inner.table.lock().unwrap().get(s).is_none());
    }

    #[test]
    fn access_flags() {
        let a = Access::LOCAL_WRITE | Access::REMOTE_READ;
        assert!(a.contains(Access::REMOTE_READ));
        assert!(!a.contains(Access::REMOTE_WRITE));
        assert!(Access::ALL.contains(a));
    }

    #[test]
    fn register_from_copies_and_empty_fails() {
        let pd = ProtectionDomain::new(1);
        let m = pd.register_from(b"hello", Access::ALL).unwrap();
        let mut o = [0u8; 5];
        m.read(0, &mut o).unwrap();
        assert_eq!(&o, b"hello");
        assert!(pd.register(0, Access::ALL).is_err());
    }
}
