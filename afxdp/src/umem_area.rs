//! The memory of one UMEM: an anonymous mapping split into equal frames, registered with an
//! AF_XDP socket. Only [`super::XskQueue`] touches it, through its frame tokens.

use std::ptr::NonNull;

use super::XdpError;

/// An anonymous, page-aligned mapping of `len` bytes (huge pages on request), unmapped on drop.
pub(crate) struct UmemArea {
    base: NonNull<u8>,
    len: usize,
}

// Safety: the mapping is owned by this value alone; moving it to another thread moves the
// only handle.
unsafe impl Send for UmemArea {}

impl UmemArea {
    /// Maps `len` bytes of zeroed memory, populated up front; on 2 MiB huge pages with
    /// `huge_pages` (`len` is rounded up to a whole page by the kernel).
    pub(crate) fn new(len: usize, huge_pages: bool) -> Result<Self, XdpError> {
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if huge_pages {
            flags |= libc::MAP_HUGETLB;
        }
        // Safety: a fresh anonymous mapping at an address the kernel picks; it aliases nothing.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(XdpError::last_os(if huge_pages {
                "map UMEM on huge pages (reserve them: deploy/host-setup --hugepages N)"
            } else {
                "map UMEM"
            }));
        }
        let base = NonNull::new(ptr.cast()).ok_or(XdpError::Invalid("mmap returned null"))?;
        Ok(UmemArea { base, len })
    }

    /// The start address (for `XDP_UMEM_REG`).
    pub(crate) fn addr(&self) -> u64 {
        self.base.as_ptr() as u64
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// `len` bytes at UMEM offset `addr`, shared.
    ///
    /// # Safety
    /// `addr + len <= self.len()`, and nobody (neither the kernel nor a `&mut` from
    /// [`UmemArea::bytes_mut`]) writes those bytes while the returned borrow lives.
    pub(crate) unsafe fn bytes(&self, addr: u64, len: usize) -> &[u8] {
        debug_assert!(addr as usize + len <= self.len);
        // Safety: in bounds by the caller's contract, and not written meanwhile.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(addr as usize), len) }
    }

    /// `len` bytes at UMEM offset `addr`, writable.
    ///
    /// # Safety
    /// `addr + len <= self.len()`, and nobody else (the kernel, another borrow) reads or writes
    /// those bytes while the returned borrow lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self, addr: u64, len: usize) -> &mut [u8] {
        debug_assert!(addr as usize + len <= self.len);
        // Safety: in bounds and exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(addr as usize), len) }
    }
}

impl Drop for UmemArea {
    fn drop(&mut self) {
        // Safety: the mapping made in `new`, unmapped once; the socket that registered it is
        // closed first (field order in `XskQueue`), and no borrow outlives `self`.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
