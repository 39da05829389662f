//! A file served as a memory region (the backing file of a block store). [`MappedFile`] opens
//! and sizes it; [`MappedFile::register`] maps it shared (`MAP_SHARED`, mlock'ed) and registers
//! that mapping in a protection domain ([`FileRegion`]), so RDMA places bytes straight into the
//! page cache and sends them straight out of it: a killed server loses nothing that was placed,
//! and [`FileRegion::sync`] (msync + fdatasync) makes a range durable against power loss.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use crate::memory::page_size;
use crate::{Access, MemoryRegion, ProtectionDomain, RegisterError};

/// A store file, open read-write and at its final size, not yet mapped.
#[derive(Debug)]
pub struct MappedFile {
    file: File,
    len: usize,
}

impl MappedFile {
    /// Opens (creating if missing) `path`. With `size`, a shorter file is extended (zeros) to
    /// `size` bytes; a longer one is kept as it is. Without `size` the file must exist and be
    /// non-empty.
    ///
    /// Every block of the file is allocated here (`posix_fallocate`): the store is written
    /// through a shared mapping, where a filesystem out of space can only answer a page fault
    /// with SIGBUS. Allocating up front turns that into this error (`StorageFull`) at start.
    pub fn open(path: &Path, size: Option<u64>) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(size.is_some())
            .truncate(false)
            .open(path)?;
        let cur = file.metadata()?.len();
        if let Some(want) = size {
            if cur < want {
                file.set_len(want)?;
            }
        }
        let len = file.metadata()?.len();
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the store file is empty: give a size (--size)",
            ));
        }
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "store file too large"))?;
        allocate(&file, len)?;
        Ok(Self { file, len })
    }

    /// Size of the store in bytes.
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Always false: empty files are refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maps the whole file shared and registers it in `pd` for local access only (no peer gets
    /// an STag for it): the server's RDMA Writes read it, its RDMA Reads land in it.
    pub fn register(self, pd: &ProtectionDomain) -> Result<FileRegion, RegisterError> {
        let region = pd.register_file(&self.file, self.len, Access::LOCAL_WRITE)?;
        Ok(FileRegion {
            region,
            file: self.file,
        })
    }
}

/// Allocates the blocks of `[0, len)` of `file` (holes included), so that writes through a
/// shared mapping never need the filesystem to find space.
fn allocate(file: &File, len: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let off_len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "store file too large"))?;
    // Safety: `file` is an open descriptor for the whole call; posix_fallocate touches no memory
    // of ours.
    let r = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, off_len) };
    match r {
        0 => Ok(()),
        libc::ENOSPC => Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!("no space on the filesystem for a {len}-byte store file"),
        )),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// A [`MappedFile`] as a registered memory region of a protection domain; the mapping and the
/// registration last as long as this value.
#[derive(Debug)]
pub struct FileRegion {
    region: MemoryRegion,
    file: File,
}

impl FileRegion {
    /// Size of the store in bytes.
    pub fn len(&self) -> u64 {
        self.region.len() as u64
    }

    /// Always false: empty files are refused.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The registered region: the local buffer of every RDMA Write and Read of the service.
    pub fn region(&self) -> &MemoryRegion {
        &self.region
    }

    /// Registers the same mapping again in `pd`, for local access only (no peer gets an STag
    /// for it), so queue pairs of another protection domain can use the file as their local
    /// buffer too (a server with one domain per client connection). Costs one STag in `pd`'s
    /// table: no new mapping, no more locked memory. The mapping stays while any registration
    /// of it lives; dropping the returned region deregisters only that one.
    pub fn register_in(&self, pd: &ProtectionDomain) -> Result<MemoryRegion, RegisterError> {
        pd.register_buf(self.region.buf.clone(), Access::LOCAL_WRITE)
    }

    /// `[offset, offset+len)` as a region range, `None` when out of bounds.
    pub fn range(&self, offset: u64, len: u32) -> Option<std::ops::Range<usize>> {
        let off = usize::try_from(offset).ok()?;
        let end = off.checked_add(len as usize)?;
        (end <= self.region.len()).then_some(off..end)
    }

    /// Makes `[offset, offset+len)` durable (the whole file when `len` is 0): msync(MS_SYNC) of
    /// its pages, then fdatasync of the file.
    pub fn sync(&self, offset: u64, len: u64) -> io::Result<()> {
        let size = self.region.len();
        let (start, end) = if len == 0 {
            (0, size)
        } else {
            let s = usize::try_from(offset).unwrap_or(size).min(size);
            let e = usize::try_from(offset.saturating_add(len))
                .unwrap_or(size)
                .min(size);
            (s, e)
        };
        if end > start {
            let page = page_size();
            let aligned = start / page * page;
            // Safety: the region's mapping starts page aligned at `addr()` and stays mapped while
            // `self.region` lives; [aligned, end) lies inside it and `aligned` is page aligned.
            let r = unsafe {
                libc::msync(
                    (self.region.addr() + aligned) as *mut libc::c_void,
                    end - aligned,
                    libc::MS_SYNC,
                )
            };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, Transport};

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("xwarp-mapped-{}-{name}", std::process::id()))
    }

    #[test]
    fn region_is_the_file_creates_extends_and_bounds_checks() {
        let p = tmp("a");
        let _ = std::fs::remove_file(&p);
        let m = MappedFile::open(&p, Some(10_000)).unwrap();
        assert_eq!(m.len(), 10_000);
        let pd = Device::open(Transport::Kernel).unwrap().alloc_pd();
        let f = m.register(&pd).unwrap();
        assert_eq!(f.len(), 10_000);
        assert_eq!(f.range(9_990, 10), Some(9_990..10_000));
        assert_eq!(f.range(9_991, 10), None);
        assert_eq!(f.range(u64::MAX, 1), None);
        f.region().write(9_990, b"0123456789").unwrap();
        // A shared mapping: the bytes are in the page cache before any sync.
        assert_eq!(&std::fs::read(&p).unwrap()[9_990..], b"0123456789");
        f.sync(9_990, 10).unwrap();
        f.sync(0, 0).unwrap();
        // A second domain's registration is the same memory under its own STag.
        let pd2 = Device::open(Transport::Kernel).unwrap().alloc_pd();
        let alias = f.register_in(&pd2).unwrap();
        assert!(pd2.owns(&alias) && !pd.owns(&alias));
        assert_eq!(alias.addr(), f.region().addr());
        alias.write(0, b"ab").unwrap();
        assert_eq!(&std::fs::read(&p).unwrap()[..2], b"ab");
        drop(f);
        // The mapping outlives the first registration while another one lives.
        let mut o = [0u8; 2];
        alias.read(9_998, &mut o).unwrap();
        assert_eq!(&o, b"89");
        drop(alias);
        // Reopening with a smaller size does not shrink the file and keeps its contents.
        let m = MappedFile::open(&p, Some(100)).unwrap();
        assert_eq!(m.len(), 10_000);
        let f = m.register(&pd).unwrap();
        let mut o = [0u8; 4];
        f.region().read(9_996, &mut o).unwrap();
        assert_eq!(&o, b"6789");
        drop(f);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn missing_or_empty_file_without_size_is_an_error() {
        let p = tmp("b");
        let _ = std::fs::remove_file(&p);
        assert!(MappedFile::open(&p, None).is_err());
        std::fs::write(&p, b"").unwrap();
        let e = MappedFile::open(&p, None).unwrap_err();
        assert!(e.to_string().contains("--size"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }
}
