//! The backing file of a block store, mapped shared (`MAP_SHARED`) so every byte the service
//! places lands in the page cache at once: a killed server loses nothing it copied in, and
//! [`MappedFile::sync`] (msync + fdatasync) makes a range durable against power loss.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::ptr::NonNull;

/// A file mapped read-write and shared.
#[derive(Debug)]
pub struct MappedFile {
    file: File,
    ptr: NonNull<u8>,
    len: usize,
}

// Safety: MappedFile owns the mapping; every access is a bounds-checked raw copy. Callers that
// copy into overlapping ranges from several threads get unspecified bytes there (as two NFS
// clients writing the same block), never access outside the mapping.
unsafe impl Send for MappedFile {}
// Safety: as above; no reference into the mapping escapes a method call.
unsafe impl Sync for MappedFile {}

fn page_size() -> usize {
    // Safety: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p <= 0 {
        4096
    } else {
        p as usize
    }
}

impl MappedFile {
    /// Opens (creating if missing) `path` and maps it. With `size`, a shorter file is extended
    /// (sparse, zeros) to `size` bytes; a longer one is kept as it is. Without `size` the file
    /// must exist and be non-empty.
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
        // Safety: a fresh shared mapping of an fd we own, no address hint; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Self { file, ptr, len })
    }

    /// Size of the store in bytes.
    pub fn len(&self) -> u64 {
        self.len as u64
    }

    /// Always false: empty files are refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn range(&self, offset: u64, len: usize) -> Option<usize> {
        let off = usize::try_from(offset).ok()?;
        (off.checked_add(len)? <= self.len).then_some(off)
    }

    /// Copies `dst.len()` bytes at `offset` out; `None` (nothing copied) when out of bounds.
    pub fn read_at(&self, offset: u64, dst: &mut [u8]) -> Option<()> {
        let off = self.range(offset, dst.len())?;
        // Safety: [off, off+len) lies inside the live mapping (checked); dst is a distinct slice.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        };
        Some(())
    }

    /// Copies `src` in at `offset`; `None` (nothing copied) when out of bounds.
    pub fn write_at(&self, offset: u64, src: &[u8]) -> Option<()> {
        let off = self.range(offset, src.len())?;
        // Safety: [off, off+len) lies inside the live mapping (checked); src is a distinct slice.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(off), src.len())
        };
        Some(())
    }

    /// Makes `[offset, offset+len)` durable (the whole file when `len` is 0): msync(MS_SYNC) of
    /// the pages, then fdatasync of the file.
    pub fn sync(&self, offset: u64, len: u64) -> io::Result<()> {
        let (start, end) = if len == 0 {
            (0, self.len)
        } else {
            let s = usize::try_from(offset).unwrap_or(self.len).min(self.len);
            let e = usize::try_from(offset.saturating_add(len))
                .unwrap_or(self.len)
                .min(self.len);
            (s, e)
        };
        if end > start {
            let page = page_size();
            let aligned = start / page * page;
            // Safety: [aligned, end) is inside the mapping and `aligned` is page aligned.
            let r = unsafe {
                libc::msync(
                    self.ptr.as_ptr().add(aligned).cast(),
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

impl Drop for MappedFile {
    fn drop(&mut self) {
        // Safety: we own the mapping and nothing references it any more.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("xwarp-mapped-{}-{name}", std::process::id()))
    }

    #[test]
    fn creates_extends_and_bounds_checks() {
        let p = tmp("a");
        let _ = std::fs::remove_file(&p);
        let m = MappedFile::open(&p, Some(10_000)).unwrap();
        assert_eq!(m.len(), 10_000);
        m.write_at(9_990, b"0123456789").unwrap();
        assert!(m.write_at(9_991, b"0123456789").is_none());
        assert!(m.read_at(u64::MAX, &mut [0u8; 1]).is_none());
        m.sync(9_990, 10).unwrap();
        drop(m);
        // What went through the mapping is in the file.
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[9_990..], b"0123456789");
        // Reopening without a size keeps the contents; a smaller size does not shrink it.
        let m = MappedFile::open(&p, Some(100)).unwrap();
        assert_eq!(m.len(), 10_000);
        let mut o = [0u8; 4];
        m.read_at(9_996, &mut o).unwrap();
        assert_eq!(&o, b"6789");
        drop(m);
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
