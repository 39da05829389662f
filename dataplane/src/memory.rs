//! Pinned memory: page-aligned, `mmap`-ed anonymous memory locked into RAM with `mlock`.
//!
//! A [`PinnedBuf`] is the storage behind a memory region. Remote peers (through the transport
//! threads) and the application both access it, exactly as a NIC and the CPU share a registered
//! buffer in verbs: the contract is that the application does not touch bytes a work request in
//! flight reads or writes.
//!
//! Because a careless application (or peer) can break that contract from safe code, no safe
//! method creates a Rust reference into the mapping: [`PinnedBuf::read_at`] and
//! [`PinnedBuf::write_at`] copy through raw pointers, and the transports do the same. Borrowing
//! the bytes in place ([`PinnedBuf::with_slice`], [`PinnedBuf::with_mut_slice`]) is `unsafe`,
//! with the contract on the method.

use afxdp::bulk_copy;
use mpa::Spacing;
use std::ptr::NonNull;

/// Why pinned memory could not be set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// Zero-length regions are not allowed.
    #[error("a memory region must not be empty")]
    Empty,
    /// The length rounded up to a page overflows.
    #[error("memory region too large")]
    TooLarge,
    /// `mmap` failed with this errno.
    #[error("mmap failed (errno {0})")]
    Map(i32),
    /// The file is shorter than the length to map.
    #[error("file shorter than the region")]
    FileTooShort,
    /// `msync` failed with this errno.
    #[error("msync failed (errno {0})")]
    Sync(i32),
    /// `mlock` failed with this errno (RLIMIT_MEMLOCK too small, or no CAP_IPC_LOCK).
    #[error("mlock failed (errno {0}); raise RLIMIT_MEMLOCK or run with CAP_IPC_LOCK")]
    Lock(i32),
}

/// Pinned memory of a fixed length: a mapping of ours, or the caller's memory locked in place.
#[derive(Debug)]
pub struct PinnedBuf {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

/// Where a [`PinnedBuf`]'s bytes come from, and what dropping it undoes.
#[derive(Debug)]
enum Backing {
    /// Our `mmap` of `map_len` bytes (anonymous or a file): unlocked and unmapped on drop.
    Mapped { map_len: usize },
    /// The caller's heap buffer, owned (from `Box::into_raw`): unlocked, then given back by
    /// [`PinnedBuf::into_boxed`] or freed on drop.
    Owned,
    /// Memory the caller keeps (an `unsafe` registration): only unlocked on drop.
    Borrowed,
}

// Safety: PinnedBuf owns its mapping (freed only in Drop); every safe access is a bounds-checked
// raw-pointer copy, so moving the owner to another thread moves nothing that aliases.
unsafe impl Send for PinnedBuf {}
// Safety: shared use from several threads only ever copies through raw pointers (no safe method
// creates a reference into the mapping); the `unsafe` borrowing methods put the exclusion on
// their callers.
unsafe impl Sync for PinnedBuf {}

/// The system page size (4096 when `sysconf` cannot say).
pub(crate) fn page_size() -> usize {
    // Safety: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl PinnedBuf {
    /// Maps `len` zeroed bytes (rounded up to whole pages) and locks them into RAM.
    pub fn new(len: usize) -> Result<Self, PinError> {
        Self::map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1)
    }

    /// Maps the first `len` bytes of `file` shared (writes land in the page cache, so RDMA
    /// placement writes the file) and locks them into RAM. The file must be at least `len`
    /// bytes long and open for reading and writing.
    pub fn map_file(file: &std::fs::File, len: usize) -> Result<Self, PinError> {
        use std::os::fd::AsRawFd;
        let size = file
            .metadata()
            .map_err(|e| PinError::Map(e.raw_os_error().unwrap_or(0)))?
            .len();
        if (size as u128) < len as u128 {
            return Err(PinError::FileTooShort);
        }
        Self::map(len, libc::MAP_SHARED, file.as_raw_fd())
    }

    fn map(len: usize, flags: libc::c_int, fd: libc::c_int) -> Result<Self, PinError> {
        if len == 0 {
            return Err(PinError::Empty);
        }
        let page = page_size();
        let map_len = len.checked_add(page - 1).ok_or(PinError::TooLarge)? / page * page;
        // Safety: a fresh mapping with no address hint (anonymous, or of a file descriptor the
        // caller keeps open for the duration of the call); the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(PinError::Map(errno()));
        }
        // Safety: ptr/map_len describe the mapping just created.
        if unsafe { libc::mlock(ptr, map_len) } != 0 {
            let e = errno();
            // Safety: unmapping the mapping we own and have not shared.
            unsafe { libc::munmap(ptr, map_len) };
            return Err(PinError::Lock(e));
        }
        Ok(Self {
            // mmap never returns null on success (MAP_FAILED is checked above).
            ptr: NonNull::new(ptr.cast()).ok_or(PinError::Map(0))?,
            len,
            backing: Backing::Mapped { map_len },
        })
    }

    /// Takes ownership of the caller's buffer and locks its pages into RAM (`mlock` of the
    /// pages it spans). [`PinnedBuf::into_boxed`] gives it back. Empty buffers are refused.
    pub fn from_boxed(buf: Box<[u8]>) -> Result<Self, PinError> {
        if buf.is_empty() {
            return Err(PinError::Empty);
        }
        let len = buf.len();
        let raw = Box::into_raw(buf).cast::<u8>();
        // Safety: raw/len describe the live allocation just released by the Box.
        if let Err(e) = unsafe { lock_range(raw, len) } {
            // Safety: raw came from Box::into_raw of a [u8] of this length, not freed since.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(raw, len)) });
            return Err(e);
        }
        Ok(Self {
            ptr: NonNull::new(raw).ok_or(PinError::Map(0))?,
            len,
            backing: Backing::Owned,
        })
    }

    /// Locks the caller's `len` bytes at `ptr` into RAM without taking them over.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes, and must stay allocated and be
    /// accessed by nothing but this buffer's methods (and the transports, through them) until
    /// this `PinnedBuf` is dropped.
    pub unsafe fn from_raw(ptr: *mut u8, len: usize) -> Result<Self, PinError> {
        if len == 0 {
            return Err(PinError::Empty);
        }
        let ptr = NonNull::new(ptr).ok_or(PinError::Map(libc::EFAULT))?;
        // Safety: the caller vouches for ptr/len (this function's contract).
        unsafe { lock_range(ptr.as_ptr(), len) }?;
        Ok(Self {
            ptr,
            len,
            backing: Backing::Borrowed,
        })
    }

    /// True for a buffer the caller gave ([`PinnedBuf::from_boxed`]).
    pub fn is_owned(&self) -> bool {
        matches!(self.backing, Backing::Owned)
    }

    /// The caller's buffer back, unlocked; `Err(self)` for memory that is not a buffer the
    /// caller gave ([`PinnedBuf::from_boxed`]).
    pub fn into_boxed(self) -> Result<Box<[u8]>, Self> {
        if !matches!(self.backing, Backing::Owned) {
            return Err(self);
        }
        let this = std::mem::ManuallyDrop::new(self);
        // Safety: the pages we locked in from_boxed; an unlock failure leaves them locked only.
        unsafe { libc::munlock(this.ptr.as_ptr().cast(), this.len) };
        let slice = std::ptr::slice_from_raw_parts_mut(this.ptr.as_ptr(), this.len);
        // Safety: an Owned buffer's pointer and length come from Box::into_raw (from_boxed),
        // and `this` is never dropped, so the allocation has exactly one owner again.
        Ok(unsafe { Box::from_raw(slice) })
    }

    /// Writes a file mapping's dirty pages back to the file and waits (`msync(MS_SYNC)`).
    /// A no-op for anonymous memory.
    pub fn sync(&self) -> Result<(), PinError> {
        let Backing::Mapped { map_len } = self.backing else {
            return Ok(());
        };
        // Safety: ptr/map_len describe our live mapping.
        if unsafe { libc::msync(self.ptr.as_ptr().cast(), map_len, libc::MS_SYNC) } != 0 {
            return Err(PinError::Sync(errno()));
        }
        Ok(())
    }

    /// Usable length in bytes (as requested, not rounded).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty buffers cannot be created.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start address (page aligned for memory we allocated).
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    fn check(&self, offset: usize, len: usize) -> Option<()> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then_some(())
    }

    /// Copies `src` into the buffer at `offset` (in pieces of at most 2 KiB: see `bulk_copy`).
    /// Returns `None` (and copies nothing) when out of bounds.
    pub fn write_at(&self, offset: usize, src: &[u8]) -> Option<()> {
        self.check(offset, src.len())?;
        // Safety: [offset, offset+len) is inside the mapping (checked above); src is a distinct
        // Rust slice, so the ranges cannot overlap.
        unsafe {
            bulk_copy::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len())
        };
        Some(())
    }

    /// Copies bytes at `offset` into `dst` (in pieces of at most 2 KiB: see `bulk_copy`).
    /// Returns `None` (and copies nothing) when out of bounds.
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> Option<()> {
        self.check(offset, dst.len())?;
        // Safety: the source range is inside the mapping (checked above); dst is a distinct slice.
        unsafe {
            bulk_copy::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Some(())
    }

    /// Copies `len` bytes at `offset` into the runs of `out` that `spacing` describes (an
    /// FPDU's ULPDU between its marker slots), leaving the holes as they are: the same bytes
    /// as one [`PinnedBuf::read_at`] per run, with the bounds checked once. Returns `None`
    /// (and copies nothing) when out of bounds here or in `out`.
    pub fn read_spaced_at(
        &self,
        offset: usize,
        len: usize,
        spacing: Spacing,
        out: &mut [u8],
    ) -> Option<()> {
        self.check(offset, len)?;
        if out.len() < spacing.span(len) {
            return None;
        }
        let (src, dst) = (self.ptr.as_ptr(), out.as_mut_ptr());
        spacing.for_each_run(len, |at, to, n| {
            // Safety: every run lies inside `[offset, offset+len)` of the mapping and inside
            // `out[..spacing.span(len)]` (both checked above); `out` is a distinct slice.
            unsafe { bulk_copy::copy_nonoverlapping(src.add(offset + at), dst.add(to), n) }
        });
        Some(())
    }

    /// Copies the runs of `src` that `spacing` describes (`len` bytes between marker slots)
    /// to `offset`: the same bytes as one [`PinnedBuf::write_at`] per run, with the bounds
    /// checked once. Returns `None` (and copies nothing) when out of bounds here or in `src`.
    pub fn write_spaced_at(
        &self,
        offset: usize,
        src: &[u8],
        len: usize,
        spacing: Spacing,
    ) -> Option<()> {
        self.check(offset, len)?;
        if src.len() < spacing.span(len) {
            return None;
        }
        let (from, dst) = (src.as_ptr(), self.ptr.as_ptr());
        spacing.for_each_run(len, |at, to, n| {
            // Safety: every run lies inside `src[..spacing.span(len)]` and inside
            // `[offset, offset+len)` of the mapping (both checked above); `src` is a
            // distinct slice.
            unsafe { bulk_copy::copy_nonoverlapping(from.add(to), dst.add(offset + at), n) }
        });
        Some(())
    }

    /// Runs `f` over the bytes `[offset, offset+len)` in place. `None` when out of bounds.
    ///
    /// # Safety
    /// While `f` runs, nothing may write these bytes: no work request that places data in the
    /// range (a posted receive, an RDMA Read's sink, a region a peer may RDMA Write) may be in
    /// flight, and no other thread may write the range (`write_at` or `with_mut_slice`).
    pub unsafe fn with_slice<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        self.check(offset, len)?;
        // Safety: the range is inside the live mapping (checked above), the slice does not
        // escape `f`, and the caller guarantees nothing writes the range meanwhile.
        let s = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(offset), len) };
        Some(f(s))
    }

    /// Runs `f` over the mutable bytes `[offset, offset+len)` in place. `None` when out of
    /// bounds.
    ///
    /// # Safety
    /// While `f` runs, nothing else may read or write these bytes: no work request on the range
    /// may be in flight (a Send, Write or Read Response reading it, a receive or Read placing
    /// into it, a region a peer may RDMA Read or Write), and no other thread may access it.
    pub unsafe fn with_mut_slice<R>(
        &self,
        offset: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        self.check(offset, len)?;
        // Safety: the range is inside the live mapping (checked above), the slice does not
        // escape `f`, and the caller guarantees exclusive access to the range meanwhile.
        let s = unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(offset), len) };
        Some(f(s))
    }
}

/// `mlock`s the pages that `len` bytes at `ptr` span.
///
/// # Safety
/// `ptr..ptr+len` must be one live allocation.
unsafe fn lock_range(ptr: *mut u8, len: usize) -> Result<(), PinError> {
    // Safety: the caller's range (this function's contract); mlock rounds to whole pages.
    if unsafe { libc::mlock(ptr.cast(), len) } != 0 {
        return Err(PinError::Lock(errno()));
    }
    Ok(())
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        let ptr = self.ptr.as_ptr();
        match self.backing {
            // Safety: we own the mapping; munmap also drops the lock. Nothing references it
            // any more.
            Backing::Mapped { map_len } => unsafe {
                libc::munlock(ptr.cast(), map_len);
                libc::munmap(ptr.cast(), map_len);
            },
            // Safety: the Box's allocation (from_boxed), owned by us alone and unlocked first.
            Backing::Owned => unsafe {
                libc::munlock(ptr.cast(), self.len);
                drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                    ptr, self.len,
                )));
            },
            // Safety: the caller's live range (from_raw's contract); only the lock is ours.
            Backing::Borrowed => unsafe {
                libc::munlock(ptr.cast(), self.len);
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_refused() {
        assert_eq!(PinnedBuf::new(0).unwrap_err(), PinError::Empty);
    }

    #[test]
    fn page_aligned_zeroed_and_bounds_checked() {
        let b = PinnedBuf::new(5000).unwrap();
        assert_eq!(b.addr() % page_size(), 0);
        assert_eq!(b.len(), 5000);
        let mut out = [0xffu8; 8];
        b.read_at(4992, &mut out).unwrap();
        assert_eq!(out, [0; 8]);
        assert!(b.read_at(4993, &mut out).is_none());
        assert!(b.write_at(usize::MAX, &[1]).is_none());
        b.write_at(10, b"abc").unwrap();
        // Safety: nothing else uses `b` in this test.
        let abc = unsafe { b.with_slice(10, 3, |s| s.to_vec()) };
        assert_eq!(abc.unwrap(), b"abc");
        // Safety: as above.
        unsafe { b.with_mut_slice(0, 2, |s| s.copy_from_slice(b"xy")) }.unwrap();
        // Safety: as above.
        assert!(unsafe { b.with_slice(4999, 2, |_| ()) }.is_none());
        b.read_at(0, &mut out[..2]).unwrap();
        assert_eq!(&out[..2], b"xy");
    }

    #[test]
    fn file_mapping_writes_reach_the_file() {
        use std::io::{Read, Seek, Write};
        let path = std::env::temp_dir().join(format!("xwarp-pin-{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        f.write_all(&[0u8; 8192]).unwrap();
        assert_eq!(
            PinnedBuf::map_file(&f, 8193).unwrap_err(),
            PinError::FileTooShort
        );
        let b = PinnedBuf::map_file(&f, 8192).unwrap();
        b.write_at(4000, b"on disk").unwrap();
        b.sync().unwrap();
        let mut got = [0u8; 7];
        f.seek(std::io::SeekFrom::Start(4000)).unwrap();
        f.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"on disk");
        drop(b);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_callers_buffer_is_locked_used_and_given_back() {
        let b = PinnedBuf::from_boxed(vec![7u8; 10_000].into_boxed_slice()).unwrap();
        b.write_at(9_998, b"ok").unwrap();
        assert!(b.write_at(9_999, b"no").is_none());
        assert!(b.sync().is_ok(), "a no-op for heap memory");
        let back = b.into_boxed().unwrap();
        assert_eq!(back.len(), 10_000);
        assert_eq!(&back[9_996..], &[7, 7, b'o', b'k']);
        assert_eq!(
            PinnedBuf::from_boxed(Box::new([])).unwrap_err(),
            PinError::Empty
        );
        let mapped = PinnedBuf::new(10).unwrap();
        assert!(
            mapped.into_boxed().is_err(),
            "only the caller's buffer goes back"
        );
    }

    #[test]
    fn raw_memory_is_used_in_place_and_stays_the_callers() {
        let mut mine = vec![0u8; 64];
        // Safety: `mine` outlives `b` and is not touched while `b` lives.
        let b = unsafe { PinnedBuf::from_raw(mine.as_mut_ptr(), mine.len()) }.unwrap();
        b.write_at(1, b"raw").unwrap();
        drop(b);
        assert_eq!(&mine[..4], b"\0raw");
        // Safety: a null pointer is refused before any use.
        assert!(unsafe { PinnedBuf::from_raw(std::ptr::null_mut(), 1) }.is_err());
    }

    #[test]
    fn huge_length_fails_cleanly() {
        assert!(PinnedBuf::new(usize::MAX).is_err());
    }
}
