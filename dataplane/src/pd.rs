//! Protection domains and memory regions.
//!
//! A [`ProtectionDomain`] owns ddp's STag table (24-bit index + 8-bit key; keys from a CSPRNG
//! seeded from the OS, so STags are not guessable, DDP-06 §8) and the pinned memory behind each
//! registered region. Queue pairs created in a domain only reach that domain's regions: the
//! table checks PD, rights, bounds and wrap on every tagged access.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ddp::{Memory, PdId, RegionHandle, RegionSlots, RegionSpec, Stag, StagTable};
use mpa::Spacing;

use crate::memory::PinnedBuf;
use crate::sgl::Gather;
use crate::RegisterError;

pub use ddp::Access;

/// The memory behind a domain's regions, as ddp sees it: the registered regions, and the
/// gather regions of scatter-gather work requests in flight ([`crate::sgl`]). Looked up per
/// FPDU sent and placed (a registered region once per FPDU with markers too, a gather region
/// per run between markers), by handles this process made (not the wire's): by table slot,
/// no hash.
#[derive(Debug, Default)]
pub(crate) struct PdMemory {
    regions: RegionSlots<Arc<PinnedBuf>>,
    pub(crate) gathers: RegionSlots<Gather>,
}

impl Memory for PdMemory {
    fn write(&mut self, region: RegionHandle, offset: u64, data: &[u8]) {
        // ddp checked the bounds against the registered length; a vanished region drops the data.
        let Ok(off) = usize::try_from(offset) else {
            return;
        };
        if let Some(b) = self.regions.get(region) {
            let _ = b.write_at(off, data);
        } else if let Some(g) = self.gathers.get(region) {
            g.scatter(off, data);
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
        // One look-up and one bounds check per FPDU, not per run between markers.
        let done = usize::try_from(offset).ok().is_some_and(|off| {
            self.regions
                .get(region)
                .is_some_and(|b| b.write_spaced_at(off, src, len, spacing).is_some())
        });
        if !done {
            // A gather region, or nothing whole to write: run by run, as `write` does.
            spacing.for_each_run(len, |at, to, n| {
                self.write(region, offset + at as u64, &src[to..to + n])
            });
        }
    }

    fn read(&self, region: RegionHandle, offset: u64, out: &mut [u8]) {
        // A registered region first; only then the gather regions (one lookup per FPDU).
        let ok = match usize::try_from(offset) {
            Ok(off) => match self.regions.get(region) {
                Some(b) => b.read_at(off, out).is_some(),
                None => self.gathers.get(region).is_some_and(|g| g.gather(off, out)),
            },
            Err(_) => false,
        };
        if !ok {
            out.fill(0);
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
        // One look-up and one bounds check per FPDU, not per run between markers.
        let done = usize::try_from(offset).ok().is_some_and(|off| {
            self.regions
                .get(region)
                .is_some_and(|b| b.read_spaced_at(off, len, spacing, out).is_some())
        });
        if !done {
            // A gather region, or nothing whole to read: run by run, as `read` does.
            spacing.for_each_run(len, |at, to, n| {
                self.read(region, offset + at as u64, &mut out[to..to + n])
            });
        }
    }
}

/// The table and the memory, locked together (a connection needs both at once).
#[derive(Debug)]
pub(crate) struct PdState {
    pub(crate) tags: StagTable,
    pub(crate) mem: PdMemory,
}

static NEXT_PD: AtomicU32 = AtomicU32::new(1);

#[derive(Debug)]
pub(crate) struct PdInner {
    pub(crate) id: PdId,
    pub(crate) device_id: u64,
    state: Mutex<PdState>,
}

impl PdInner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, PdState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl PdState {
    /// Deregisters `handle` and every gather region that reaches into it: work still posted
    /// on any of them completes flushed when the engine reaches it and touches no memory
    /// (ddp checks each handle's generation).
    fn deregister(&mut self, handle: RegionHandle) {
        self.tags.deregister(handle);
        self.mem.regions.remove(handle);
        let tags = &mut self.tags;
        self.mem.gathers.retain(|g, gather| {
            let keep = !gather.reaches(handle);
            if !keep {
                tags.deregister(g);
            }
            keep
        });
    }
}

/// A protection domain as the AF_XDP engine's connections hold it: the endpoint locks its
/// table and memory for each received frame and each connection round. Opaque outside this
/// crate.
#[derive(Debug, Clone)]
pub struct PdHandle(Arc<PdInner>);

/// A locked [`PdHandle`].
pub struct PdGuard<'a>(MutexGuard<'a, PdState>);

impl endpoint::Domain for PdHandle {
    type Guard<'a> = PdGuard<'a>;

    fn id(&self) -> PdId {
        self.0.id
    }

    fn lock(&self) -> PdGuard<'_> {
        PdGuard(self.0.lock())
    }
}

impl endpoint::DomainGuard for PdGuard<'_> {
    fn parts(&mut self) -> (&mut StagTable, &mut dyn Memory) {
        let PdState { tags, mem } = &mut *self.0;
        (tags, mem)
    }
}

/// A protection domain. Cheap to clone; clones are the same domain.
#[derive(Debug, Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Arc<PdInner>,
}

/// Fills `buf` from the OS random source (getrandom(2), retried when interrupted).
pub(crate) fn os_random(buf: &mut [u8]) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // Safety: getrandom writes at most rest.len() bytes into the valid buffer rest.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
            continue;
        }
        done += n as usize;
    }
    Ok(())
}

/// 64 random bits from the OS (`getrandom(2)`), for keys and verifiers; an error when the OS
/// cannot give them (never a weaker fallback).
pub fn os_random_u64() -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    os_random(&mut b)?;
    Ok(u64::from_ne_bytes(b))
}

/// Where each protection domain's STag key seed comes from: a device's 128-bit key from the OS
/// random source, and SipHash-2-4 of the domain's id under it (a keyed PRF: one domain's keys
/// say nothing about another's).
#[derive(Clone)]
pub(crate) struct StagSeeds {
    key: (u64, u64),
}

impl std::fmt::Debug for StagSeeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StagSeeds(..)")
    }
}

impl StagSeeds {
    /// A key from the OS random source; failing to get one is an error.
    pub(crate) fn from_os() -> Result<Self, crate::DeviceError> {
        let rand = || os_random_u64().map_err(|e| crate::DeviceError::Random(e.kind()));
        Ok(StagSeeds {
            key: (rand()?, rand()?),
        })
    }

    /// The seed of domain `pd`.
    fn seed(&self, pd: PdId) -> u64 {
        use std::hash::Hasher;
        let mut h = siphasher::sip::SipHasher24::new_with_keys(self.key.0, self.key.1);
        h.write_u32(pd.0);
        h.finish()
    }

    #[cfg(test)]
    pub(crate) fn fixed_for_tests(k: u64) -> Self {
        StagSeeds { key: (k, !k) }
    }
}

impl ProtectionDomain {
    /// The domain as the AF_XDP engine's connections hold it.
    pub(crate) fn handle(&self) -> PdHandle {
        PdHandle(self.inner.clone())
    }

    pub(crate) fn new(device_id: u64, seeds: &StagSeeds) -> Self {
        let id = PdId(NEXT_PD.fetch_add(1, Ordering::Relaxed));
        Self {
            inner: Arc::new(PdInner {
                id,
                device_id,
                state: Mutex::new(PdState {
                    tags: StagTable::new(seeds.seed(id)),
                    mem: PdMemory::default(),
                }),
            }),
        }
    }

    /// Registers `len` zeroed bytes of pinned (page-aligned, mlock'ed) memory with `access`.
    /// Its tagged offsets (TO) start at 0.
    pub fn register(&self, len: usize, access: Access) -> Result<MemoryRegion, RegisterError> {
        self.register_buf(Arc::new(PinnedBuf::new(len)?), access)
    }

    pub(crate) fn register_buf(
        &self,
        buf: Arc<PinnedBuf>,
        access: Access,
    ) -> Result<MemoryRegion, RegisterError> {
        self.register_buf_at(buf, access, 0)
    }

    /// Registers `buf` with tagged offsets from `base_to`: a peer's TO `t` reaches octet
    /// `t - base_to`.
    fn register_buf_at(
        &self,
        buf: Arc<PinnedBuf>,
        access: Access,
        base_to: u64,
    ) -> Result<MemoryRegion, RegisterError> {
        if base_to.checked_add(buf.len() as u64).is_none() {
            return Err(RegisterError::TaggedOffsetWraps);
        }
        let spec = RegionSpec {
            base_to,
            len: buf.len() as u64,
            access,
            pd: self.inner.id,
            stream: None,
        };
        let mut st = self.inner.lock();
        let (handle, stag) = st.tags.register(spec).map_err(|_| RegisterError::NoStag)?;
        st.mem.regions.insert(handle, buf.clone());
        Ok(MemoryRegion {
            handle,
            stag,
            access,
            base_to,
            buf,
            pd: self.inner.clone(),
        })
    }

    /// Registers the first `len` bytes of `file`, mapped shared and locked: RDMA Writes and
    /// received data land in the page cache, RDMA Reads read the file. [`MemoryRegion::sync`]
    /// writes it back (for a storage COMMIT). The file must be open read-write and long enough.
    pub fn register_file(
        &self,
        file: &std::fs::File,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, RegisterError> {
        self.register_buf(Arc::new(PinnedBuf::map_file(file, len)?), access)
    }

    /// True when `mr` was registered in this protection domain (or in a clone of it): only
    /// such regions can be the local buffers of this domain's queue pairs.
    pub fn owns(&self, mr: &MemoryRegion) -> bool {
        Arc::ptr_eq(&mr.pd, &self.inner)
    }

    /// Registers the caller's buffer in place (no copy, unless turning a `Vec` with spare
    /// capacity into a `Box<[u8]>` shrinks it): its pages are locked into RAM
    /// (`mlock`) and the region owns the buffer until [`MemoryRegion::into_inner`] gives it
    /// back. Empty buffers are refused (and dropped).
    ///
    /// A page the buffer shares with another registered buffer is unlocked when either is
    /// given back: pinning is about residency here, never about soundness.
    pub fn register_owned(
        &self,
        buf: impl Into<Box<[u8]>>,
        access: Access,
    ) -> Result<MemoryRegion, RegisterError> {
        self.register_buf(Arc::new(PinnedBuf::from_boxed(buf.into())?), access)
    }

    /// Registers `len` bytes of the caller's memory at `ptr` in place, locked into RAM while
    /// registered. The memory stays the caller's: dropping the region deregisters and unlocks
    /// it, and frees nothing.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes and stay allocated until the region
    /// is dropped. Until then the caller touches it only through the region's methods: the
    /// engine reads and writes it at any time for work requests and for peers with this
    /// region's STag, so a Rust reference to it would alias those writes.
    pub unsafe fn register_raw(
        &self,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, RegisterError> {
        // Safety: the caller's promise on ptr/len, the same contract.
        unsafe { self.register_raw_at(ptr, len, access, 0) }
    }

    /// As [`register_raw`](Self::register_raw), with tagged offsets from `base_to` instead of
    /// 0: a peer's RDMA Write or Read at TO `t` reaches octet `t - base_to` of the region (verbs'
    /// `ibv_reg_mr_iova`: with `base_to` the buffer's own address, peers name its bytes by
    /// virtual address, as libibverbs applications send them). Local work requests still name
    /// octets from the region's start. Refused when `base_to + len` wraps.
    ///
    /// # Safety
    /// As [`register_raw`](Self::register_raw).
    pub unsafe fn register_raw_at(
        &self,
        ptr: *mut u8,
        len: usize,
        access: Access,
        base_to: u64,
    ) -> Result<MemoryRegion, RegisterError> {
        // Safety: the caller's promise on ptr/len (this function's contract).
        let buf = unsafe { PinnedBuf::from_raw(ptr, len) }?;
        self.register_buf_at(Arc::new(buf), access, base_to)
    }

    /// Registers pinned memory holding a copy of `data`.
    pub fn register_from(
        &self,
        data: &[u8],
        access: Access,
    ) -> Result<MemoryRegion, RegisterError> {
        let mr = self.register(data.len(), access)?;
        mr.buf.write_at(0, data);
        Ok(mr)
    }
}

/// A registered memory region. Dropping it deregisters it: its STag becomes invalid at once,
/// and work still posted on it completes flushed when the engine reaches it, without touching
/// memory (its handle names this registration only, never the next region in the slot).
#[derive(Debug)]
pub struct MemoryRegion {
    pub(crate) handle: RegionHandle,
    stag: Stag,
    access: Access,
    base_to: u64,
    pub(crate) buf: Arc<PinnedBuf>,
    pub(crate) pd: Arc<PdInner>,
}

impl MemoryRegion {
    /// The STag peers use to reach this region.
    pub fn stag(&self) -> u32 {
        self.stag.0
    }
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// Always false (empty regions cannot be registered).
    pub fn is_empty(&self) -> bool {
        false
    }
    /// Its access rights.
    pub fn access(&self) -> Access {
        self.access
    }
    /// The tagged offset of its first octet: 0, or what
    /// [`ProtectionDomain::register_raw_at`] was given.
    pub fn base_to(&self) -> u64 {
        self.base_to
    }
    /// Copies `src` in at `offset`; `None` if out of bounds.
    pub fn write(&self, offset: usize, src: &[u8]) -> Option<()> {
        self.buf.write_at(offset, src)
    }
    /// Copies bytes at `offset` out into `dst`; `None` if out of bounds.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Option<()> {
        self.buf.read_at(offset, dst)
    }
    /// A copy of `[offset, offset+len)`; `None` if out of bounds.
    pub fn read_vec(&self, offset: usize, len: usize) -> Option<Vec<u8>> {
        let mut v = vec![0; len];
        self.buf.read_at(offset, &mut v)?;
        Some(v)
    }
    /// Runs `f` over `[offset, offset+len)` in place (zero copy); `None` if out of bounds.
    /// Prefer [`read`](Self::read).
    ///
    /// # Safety
    /// While `f` runs nothing may write the range: no receive, RDMA Read sink or remotely
    /// writable STag covering it may be in use (the engine places into those at any time), and
    /// no other thread may write it.
    ///
    /// ```compile_fail,E0133
    /// # let pd = dataplane::Device::open(dataplane::Transport::Kernel).unwrap().alloc_pd();
    /// let mr = pd.register(8, dataplane::Access::ALL).unwrap();
    /// mr.with_slice(0, 8, |s| s.len()); // unsafe: the engine may write the bytes meanwhile
    /// ```
    pub unsafe fn with_slice<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        // Safety: the caller keeps every writer away from the range (this method's contract,
        // the same as PinnedBuf::with_slice's).
        unsafe { self.buf.with_slice(offset, len, f) }
    }
    /// Runs `f` over the mutable `[offset, offset+len)` in place (zero copy); `None` if out of
    /// bounds. Prefer [`write`](Self::write).
    ///
    /// # Safety
    /// While `f` runs nothing else may access the range: no work request on it may be in
    /// flight (a Send, Write or Read Response reading it, a receive or Read sink), no STag
    /// covering it may be usable by a peer, and no other thread may access it.
    ///
    /// ```compile_fail,E0133
    /// # let pd = dataplane::Device::open(dataplane::Transport::Kernel).unwrap().alloc_pd();
    /// let mr = pd.register(8, dataplane::Access::ALL).unwrap();
    /// mr.with_mut_slice(0, 8, |s| s.fill(1)); // unsafe: the engine may use the bytes meanwhile
    /// ```
    pub unsafe fn with_mut_slice<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        // Safety: the caller gives the range exclusive access (this method's contract, the
        // same as PinnedBuf::with_mut_slice's).
        unsafe { self.buf.with_mut_slice(offset, len, f) }
    }
    /// Start address of the pinned memory (page aligned).
    pub fn addr(&self) -> usize {
        self.buf.addr()
    }
    /// Writes a file-backed region back to its file and waits (`msync`); a no-op otherwise.
    pub fn sync(&self) -> Result<(), crate::memory::PinError> {
        self.buf.sync()
    }

    /// Deregisters the region and gives the caller's buffer back (a region made by
    /// [`ProtectionDomain::register_owned`]); `Err(self)`, still registered, for memory the
    /// domain allocated or the caller lent (`register`, `register_file`, `register_raw`).
    ///
    /// Never waits: from the deregistration on, no work request and no peer reaches the
    /// buffer; work still posted on it completes flushed (as dropping the region does).
    pub fn into_inner(self) -> Result<Vec<u8>, MemoryRegion> {
        if !self.buf.is_owned() {
            return Err(self);
        }
        let this = std::mem::ManuallyDrop::new(self);
        this.pd.lock().deregister(this.handle);
        // Safety: each field is read once out of a value that is never dropped.
        let (buf, pd) = unsafe { (std::ptr::read(&this.buf), std::ptr::read(&this.pd)) };
        drop(pd);
        // Deregistered under the domain's lock: the table and every gather region dropped their
        // references, so this handle holds the only one.
        let buf = Arc::into_inner(buf).expect("no reference to a deregistered buffer");
        let boxed = buf.into_boxed().expect("an owned buffer");
        Ok(boxed.into_vec())
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        self.pd.lock().deregister(self.handle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sgl::{Sge, WorkRequest};
    use crate::PostKind;

    /// Each domain's STag seed is a keyed PRF of its id under the device's
    /// random key: distinct per domain and per device key (no seed from an address or a clock).
    #[test]
    fn stag_seeds_differ_per_domain_and_per_device_key() {
        let (a, b) = (StagSeeds::fixed_for_tests(1), StagSeeds::fixed_for_tests(2));
        assert_ne!(a.seed(PdId(1)), a.seed(PdId(2)));
        assert_ne!(a.seed(PdId(1)), b.seed(PdId(1)));
        assert_eq!(a.seed(PdId(7)), a.seed(PdId(7)));
        let os = StagSeeds::from_os().expect("the OS random source");
        assert_ne!(os.key, StagSeeds::from_os().unwrap().key);
    }

    #[test]
    fn stags_are_unique_and_resolve() {
        let pd = ProtectionDomain::new(1, &StagSeeds::fixed_for_tests(1));
        let a = pd.register(100, Access::ALL).unwrap();
        let b = pd.register(100, Access::REMOTE_READ).unwrap();
        assert_ne!(a.stag(), b.stag());
        let st = pd.inner.lock();
        assert!(st.tags.lookup(Stag(a.stag())).is_some());
        // same index, other key: not valid (DDP-06 §8: STags must not be guessable)
        assert!(st
            .tags
            .lookup(Stag(a.stag() ^ 0x01))
            .is_none_or(|(_, r)| !r.valid));
    }

    #[test]
    fn drop_deregisters() {
        let pd = ProtectionDomain::new(1, &StagSeeds::fixed_for_tests(1));
        let a = pd.register(10, Access::ALL).unwrap();
        let s = Stag(a.stag());
        drop(a);
        assert!(pd.inner.lock().tags.lookup(s).is_none_or(|(_, r)| !r.valid));
    }

    #[test]
    fn memory_trait_reads_writes_and_tolerates_unknown_regions() {
        let pd = ProtectionDomain::new(1, &StagSeeds::fixed_for_tests(1));
        let a = pd.register_from(b"hello", Access::ALL).unwrap();
        let mut st = pd.inner.lock();
        st.mem.write(a.handle, 1, b"EL");
        let mut o = [0u8; 5];
        st.mem.read(a.handle, 0, &mut o);
        assert_eq!(&o, b"hELlo");
        let mut z = [9u8; 3];
        st.mem.read(RegionHandle::new(9999, 1), 0, &mut z);
        assert_eq!(z, [0; 3]);
        st.mem.write(RegionHandle::new(9999, 1), 0, b"x");
    }

    /// The domain's memory as ddp's default would use it: one `read`/`write` per run.
    struct PerRun<'a>(&'a mut PdMemory);

    impl Memory for PerRun<'_> {
        fn write(&mut self, region: RegionHandle, offset: u64, data: &[u8]) {
            self.0.write(region, offset, data)
        }
        fn read(&self, region: RegionHandle, offset: u64, out: &mut [u8]) {
            self.0.read(region, offset, out)
        }
    }

    /// The contents of `mr` (test helper).
    fn bytes(mr: &MemoryRegion) -> Vec<u8> {
        mr.read_vec(0, mr.len()).unwrap()
    }

    /// `PdMemory`'s spaced copies (one look-up and one bounds check per FPDU) move exactly the
    /// octets of one `read`/`write` per run, for a registered region and a gather region (a
    /// scatter-gather list across two regions), at every marker phase, leaving the holes
    /// alone; out of bounds they fall back to the per-run copies (zeros where nothing is read).
    #[test]
    fn spaced_copies_equal_one_copy_per_run() {
        let pd = ProtectionDomain::new(1, &StagSeeds::fixed_for_tests(1));
        let fill: Vec<u8> = (0..6000u32).map(|i| (i % 253) as u8 + 1).collect();
        let a = pd.register_from(&fill, Access::ALL).unwrap();
        let b = pd.register_from(&fill[..3000], Access::ALL).unwrap();
        let sgl = [Sge::new(&a, 100..1300), Sge::new(&b, 7..2907)];
        let wr = WorkRequest::new(1, PostKind::Recv, &sgl);
        let mut st = pd.inner.lock();
        let list = wr.local_buf(&mut st, &pd, 4100).unwrap().region;
        for region in [a.handle, list] {
            for first in [0usize, 2, 14, 300, 507, 508] {
                let sp = Spacing::new(first);
                for (offset, len) in [
                    (0u64, 1usize),
                    (5, 508),
                    (9, 1440),
                    (40, 4000),
                    (3000, 4000),
                ] {
                    let mut fast = vec![0xEEu8; sp.span(len) + 3];
                    let mut slow = fast.clone();
                    st.mem.read_spaced(region, offset, len, sp, &mut fast);
                    PerRun(&mut st.mem).read_spaced(region, offset, len, sp, &mut slow);
                    assert_eq!(fast, slow, "read first {first} offset {offset} len {len}");

                    let src: Vec<u8> = (0..sp.span(len)).map(|i| (i * 7) as u8).collect();
                    let before = (bytes(&a), bytes(&b));
                    st.mem.write_spaced(region, offset, &src, len, sp);
                    let fast_w = (bytes(&a), bytes(&b));
                    a.write(0, &before.0).unwrap();
                    b.write(0, &before.1).unwrap();
                    PerRun(&mut st.mem).write_spaced(region, offset, &src, len, sp);
                    assert!(
                        fast_w == (bytes(&a), bytes(&b)),
                        "write first {first} offset {offset} len {len}"
                    );
                }
            }
        }
    }

    #[test]
    fn empty_region_is_refused() {
        let pd = ProtectionDomain::new(1, &StagSeeds::fixed_for_tests(1));
        assert!(pd.register(0, Access::ALL).is_err());
    }
}
