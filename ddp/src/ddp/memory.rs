//! Where placed data lives. ddp never holds registered memory: the caller implements [`Memory`]
//! (the dataplane over pinned memory; tests over `Vec<u8>`), and ddp copies straight between
//! frames and regions through it, so the one copy from the received frame is the only copy.
//!
//! The trait only copies, it never lends: registered memory is shared with the application
//! (and, for a NIC, a device), so no reference into it may exist while ddp works on it.

use crate::ddp::region_slots::RegionSlots;

/// A small caller-visible name for one registration of a memory region: the STag table's slot
/// and the slot's generation. A slot is reused after deregistration under a new generation, so
/// a handle kept by a work request (a posted receive, a Read's sink, a queued Send) never names
/// the region registered in the slot later: the table and the memory refuse the stale handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionHandle {
    index: u32,
    generation: u32,
}

impl RegionHandle {
    /// The handle of registration `generation` of slot `index` (the table makes these; other
    /// [`Memory`] implementations and tests may too).
    pub const fn new(index: u32, generation: u32) -> Self {
        RegionHandle { index, generation }
    }

    /// The slot (the STag's 24-bit index).
    pub const fn index(self) -> u32 {
        self.index
    }

    /// Which registration of the slot this is.
    pub const fn generation(self) -> u32 {
        self.generation
    }
}

/// Byte access to registered regions. `offset` is from the start of the region (0-based), and
/// ddp only calls these after checking `offset + len` against the region's registered length.
pub trait Memory {
    /// Copy `data` into `region` at `offset`.
    fn write(&mut self, region: RegionHandle, offset: u64, data: &[u8]);
    /// Copy `out.len()` octets of `region` at `offset` into `out`. The transmit path calls it
    /// with the frame itself as `out` (the one copy).
    fn read(&self, region: RegionHandle, offset: u64, out: &mut [u8]);
}

/// A [`Memory`] over owned vectors, for tests and simple users, found by the handle's slot and
/// generation ([`RegionSlots`], as the dataplane finds its pinned regions). Unknown regions read as zeros and drop writes (an implementation bug
/// would show up as wrong data in byte-for-byte checks).
#[derive(Debug, Default, Clone)]
pub struct VecMemory {
    regions: RegionSlots<Vec<u8>>,
}

impl VecMemory {
    /// An empty set of regions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Attach backing storage for `region`.
    pub fn insert(&mut self, region: RegionHandle, bytes: Vec<u8>) {
        self.regions.insert(region, bytes);
    }

    /// The bytes of `region`.
    pub fn get(&self, region: RegionHandle) -> Option<&[u8]> {
        self.regions.get(region).map(|v| &v[..])
    }

    /// The bytes of `region`, writable.
    pub fn get_mut(&mut self, region: RegionHandle) -> Option<&mut Vec<u8>> {
        self.regions.get_mut(region)
    }

    /// Detach the storage of `region` (after deregistration).
    pub fn remove(&mut self, region: RegionHandle) -> Option<Vec<u8>> {
        self.regions.remove(region)
    }
}

impl Memory for VecMemory {
    fn write(&mut self, region: RegionHandle, offset: u64, data: &[u8]) {
        if let Some(v) = self.regions.get_mut(region) {
            let start = offset as usize;
            if let Some(dst) = v.get_mut(start..start + data.len()) {
                dst.copy_from_slice(data);
            }
        }
    }

    fn read(&self, region: RegionHandle, offset: u64, out: &mut [u8]) {
        let start = offset as usize;
        let src = self
            .regions
            .get(region)
            .and_then(|v| v.get(start..start.checked_add(out.len())?));
        match src {
            Some(src) => out.copy_from_slice(src),
            None => out.fill(0),
        }
    }
}
