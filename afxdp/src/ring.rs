//! One AF_XDP ring mapped from its socket: a single-producer single-consumer queue of
//! descriptors shared with the kernel (Documentation/networking/af_xdp.rst, "Rings").
//!
//! We are the producer of the fill and tx rings and the consumer of the rx and completion rings.
//! The producer writes descriptors, then publishes them with a release store of its index; the
//! consumer reads the other side's index with an acquire load before it reads descriptors, and
//! hands slots back with a release store of its own index. Indices run freely (u32, wrapping) and
//! are masked into the ring. Each side keeps a cached copy of the other's index and reloads it
//! only when the cached one says the ring is full (or empty).

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::XdpError;

/// A descriptor type that may live in a ring: plain old data the kernel reads and writes.
///
/// # Safety
/// Every bit pattern must be a valid value, and the size and layout must be the kernel's for
/// the ring (`u64` for fill/completion, `xdp_desc` for rx/tx).
pub(crate) unsafe trait RingDesc: Copy {}

// Safety: a u64 UMEM address, any bits valid.
unsafe impl RingDesc for u64 {}
// Safety: `libc::xdp_desc` is the kernel's `struct xdp_desc` (u64, u32, u32), any bits valid.
unsafe impl RingDesc for libc::xdp_desc {}

/// One mapped ring of `T` (see the module docs).
pub(crate) struct Ring<T: RingDesc> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<T>,
    mask: u32,
    /// Our view of the producer index (ours on a producer ring, the kernel's on a consumer one).
    cached_prod: u32,
    /// Our view of the consumer index (on a producer ring: the kernel's plus the ring's size,
    /// so that `cached_cons - cached_prod` is the free room).
    cached_cons: u32,
    map: NonNull<libc::c_void>,
    map_len: usize,
}

// Safety: the ring's memory belongs to the socket, which lives as long as the mapping; the
// `Ring` is a unique handle (not Clone) used from one thread at a time, like any owned value.
unsafe impl<T: RingDesc> Send for Ring<T> {}

impl<T: RingDesc> Ring<T> {
    /// Maps the ring of `size` entries at page offset `pgoff` of socket `fd`, whose layout
    /// the kernel gave in `off` (`XDP_MMAP_OFFSETS`). `producer_side`: we produce into it.
    pub(crate) fn map(
        fd: RawFd,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
        producer_side: bool,
    ) -> Result<Self, XdpError> {
        let map_len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // Safety: a fresh shared mapping of the socket's ring (the kernel checks the offset and
        // the length against the ring it allocated); nothing else is mapped at the address the
        // kernel picks.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(XdpError::last_os("mmap AF_XDP ring"));
        }
        let map = NonNull::new(ptr).ok_or(XdpError::Invalid("mmap returned null"))?;
        let at = |o: u64| -> NonNull<u8> {
            // Safety: the kernel's offsets lie inside the mapping of `map_len` bytes.
            unsafe { map.cast::<u8>().add(o as usize) }
        };
        let mut ring = Ring {
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            descs: at(off.desc).cast(),
            mask: size - 1,
            cached_prod: 0,
            cached_cons: 0,
            map,
            map_len,
        };
        ring.cached_prod = ring.producer().load(Ordering::Relaxed);
        ring.cached_cons = ring.consumer().load(Ordering::Relaxed);
        if producer_side {
            ring.cached_cons = ring.cached_cons.wrapping_add(size);
        }
        Ok(ring)
    }

    fn producer(&self) -> &AtomicU32 {
        // Safety: an aligned u32 inside the mapping, which lives as long as `self`; the kernel
        // and we only ever access it atomically.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // Safety: as in `producer`.
        unsafe { self.consumer.as_ref() }
    }

    /// Whether the kernel asks to be woken up for this ring (`XDP_RING_NEED_WAKEUP`; only
    /// set on sockets bound with `XDP_USE_NEED_WAKEUP`).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // Safety: as in `producer`.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Producer: slots free for us now (reloading the kernel's index when fewer than `want`).
    fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        let size = self.mask + 1;
        self.cached_cons = self.consumer().load(Ordering::Acquire).wrapping_add(size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Producer: slots free for us now, at most `want`.
    pub(crate) fn room(&mut self, want: u32) -> u32 {
        self.free(want).min(want)
    }

    /// Producer: writes as many descriptors from the front of `items` as there are free slots
    /// ([`Ring::room`] says how many beforehand) and publishes them. Returns how many.
    pub(crate) fn produce(&mut self, items: &[T]) -> usize {
        let want = u32::try_from(items.len()).unwrap_or(u32::MAX);
        let n = self.room(want);
        for (i, item) in items[..n as usize].iter().enumerate() {
            let slot = self.cached_prod.wrapping_add(i as u32) & self.mask;
            // Safety: `slot` is masked into the ring's `mask + 1` descriptors, and the slot is
            // ours (between the kernel's consumer index and our producer index the ring is
            // free); the kernel reads it only after the release store below.
            unsafe { self.descs.add(slot as usize).write_volatile(*item) };
        }
        if n > 0 {
            self.cached_prod = self.cached_prod.wrapping_add(n);
            self.producer().store(self.cached_prod, Ordering::Release);
        }
        n as usize
    }

    /// Consumer: reads up to `out.len()` descriptors into `out` and hands their slots back.
    /// Returns how many.
    pub(crate) fn consume(&mut self, out: &mut [T]) -> usize {
        let want = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let mut avail = self.cached_prod.wrapping_sub(self.cached_cons);
        if avail < want {
            self.cached_prod = self.producer().load(Ordering::Acquire);
            avail = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        let n = avail.min(want);
        for (i, slot_out) in out[..n as usize].iter_mut().enumerate() {
            let slot = self.cached_cons.wrapping_add(i as u32) & self.mask;
            // Safety: masked into the ring; the kernel published this slot before its release
            // store of the producer index, which our acquire load above saw.
            *slot_out = unsafe { self.descs.add(slot as usize).read_volatile() };
        }
        if n > 0 {
            self.cached_cons = self.cached_cons.wrapping_add(n);
            self.consumer().store(self.cached_cons, Ordering::Release);
        }
        n as usize
    }
}

impl<T: RingDesc> Drop for Ring<T> {
    fn drop(&mut self) {
        // Safety: the mapping made in `map`, unmapped once; no reference into it outlives
        // `self` (all accessors borrow `self`).
        unsafe { libc::munmap(self.map.as_ptr(), self.map_len) };
    }
}
