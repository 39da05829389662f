//! Where placed data lives. ddp never holds registered memory: the caller implements [`Memory`]
//! (the dataplane over pinned memory; tests over `Vec<u8>`), and ddp copies straight between
//! frames and regions through it, so the one copy from the received frame is the only copy.
//!
//! The trait only copies, it never lends: registered memory is shared with the application
//! (and, for a NIC, a device), so no reference into it may exist while ddp works on it.

use crate::ddp::region_slots::RegionSlots;
use mpa::Spacing;

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
    /// Copy `len` octets from the runs of `src` that `spacing` describes (an FPDU's ULPDU
    /// between its marker slots; at least `spacing.span(len)` octets) into `region` at
    /// `offset`, skipping the holes. The same as one [`Memory::write`] per run; an
    /// implementation may find the region once instead.
    fn write_spaced(
        &mut self,
        region: RegionHandle,
        offset: u64,
        src: &[u8],
        len: usize,
        spacing: Spacing,
    ) {
        spacing.for_each_run(len, |at, to, n| {
            self.write(region, offset + at as u64, &src[to..to + n])
        });
    }
    /// Copy `out.len()` octets of `region` at `offset` into `out`. The transmit path calls it
    /// with the frame itself as `out` (the one copy).
    fn read(&self, region: RegionHandle, offset: u64, out: &mut [u8]);
    /// Copy `len` octets of `region` at `offset` into the runs of `out` that `spacing`
    /// describes (an FPDU's ULPDU between its marker slots; `out` holds at least
    /// `spacing.span(len)` octets), leaving the holes as they are. The same octets as one
    /// [`Memory::read`] per run; an implementation may find the region once instead.
    fn read_spaced(
        &self,
        region: RegionHandle,
        offset: u64,
        len: usize,
        spacing: Spacing,
        out: &mut [u8],
    ) {
        spacing.for_each_run(len, |at, to, n| {
            self.read(region, offset + at as u64, &mut out[to..to + n])
        });
    }
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

    fn write_spaced(
        &mut self,
        region: RegionHandle,
        offset: u64,
        src: &[u8],
        len: usize,
        spacing: Spacing,
    ) {
        if let Some(v) = self.regions.get_mut(region) {
            let start = offset as usize;
            if let Some(dst) = v.get_mut(start..start + len) {
                spacing.copy_out(src, dst);
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

    fn read_spaced(
        &self,
        region: RegionHandle,
        offset: u64,
        len: usize,
        spacing: Spacing,
        out: &mut [u8],
    ) {
        let start = offset as usize;
        let src = self
            .regions
            .get(region)
            .and_then(|v| v.get(start..start.checked_add(len)?));
        match src {
            Some(src) => spacing.copy_in(src, out),
            None => zero_runs(len, spacing, out),
        }
    }
}

/// Zeroes the runs of `out` that a stretch of `len` data octets spaced as `spacing` takes
/// (a read outside the region). Out of line, so that [`VecMemory::read_spaced`] is a short
/// step to its copy.
#[cold]
#[inline(never)]
fn zero_runs(len: usize, spacing: Spacing, out: &mut [u8]) {
    spacing.for_each_run(len, |_, to, n| out[to..to + n].fill(0));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory with only the required methods: the provided `read_spaced`/`write_spaced`,
    /// one `read`/`write` per run.
    struct PerRun(VecMemory);

    impl Memory for PerRun {
        fn write(&mut self, region: RegionHandle, offset: u64, data: &[u8]) {
            self.0.write(region, offset, data)
        }
        fn read(&self, region: RegionHandle, offset: u64, out: &mut [u8]) {
            self.0.read(region, offset, out)
        }
    }

    /// `VecMemory`'s one-lookup spaced copies move the same octets as one copy per run,
    /// leave the holes alone, and treat an unknown region as the plain copies do.
    #[test]
    fn spaced_copies_equal_one_copy_per_run() {
        let h = RegionHandle::new(1, 0);
        let data: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8 + 1).collect();
        for first in [0usize, 2, 14, 300, 508] {
            let sp = Spacing::new(first);
            for len in [1usize, 14, 508, 1440, 2000] {
                let mut fast = VecMemory::new();
                fast.insert(h, data.clone());
                let slow = PerRun(fast.clone());
                let mut a = vec![0u8; sp.span(len)];
                let mut b = a.clone();
                fast.read_spaced(h, 7, len, sp, &mut a);
                slow.read_spaced(h, 7, len, sp, &mut b);
                assert_eq!(a, b, "read first {first} len {len}");
                let (mut fast_w, mut slow_w) = (fast.clone(), PerRun(fast.clone()));
                let src: Vec<u8> = (0..a.len()).map(|i| i as u8).collect();
                fast_w.write_spaced(h, 100, &src, len, sp);
                slow_w.write_spaced(h, 100, &src, len, sp);
                assert_eq!(
                    fast_w.get(h),
                    slow_w.0.get(h),
                    "write first {first} len {len}"
                );
                let mut z = vec![9u8; sp.span(len)];
                let mut y = z.clone();
                fast.read_spaced(RegionHandle::new(5, 0), 0, len, sp, &mut z);
                slow.read_spaced(RegionHandle::new(5, 0), 0, len, sp, &mut y);
                assert_eq!(z, y, "unknown region first {first} len {len}");
            }
        }
    }
}
