//! One AF_XDP ring: a single-producer single-consumer queue of descriptors shared with the
//! kernel (Documentation/networking/af_xdp.rst, "Rings"), mapped from its socket, or laid out
//! in plain memory by the tests (`plain`), which then play the kernel's side.
//!
//! We are the producer of the fill and tx rings and the consumer of the rx and completion rings.
//! The producer writes descriptors, then publishes them with a release store of its index; the
//! consumer reads the other side's index with an acquire load before it reads descriptors, and
//! hands slots back with a release store of its own index. Indices run freely (u32, wrapping) and
//! are masked into the ring. Each side keeps a cached copy of the other's index and reloads it
//! only when the cached one says the ring is full (or empty).
//!
//! The kernel's index is checked once per reload, never trusted: its producer may be at most a
//! ring's size ahead of our consumer, and its consumer may neither pass our producer nor fall
//! more than a ring's size behind it (in wrapping arithmetic both are one comparison). An index
//! outside that is refused (the ring then looks empty, or full, as before the reload) and
//! counted ([`Ring::index_errors`]). What the descriptors hold is the queue's to check.

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::XdpError;

#[cfg(test)]
pub(crate) mod plain;
#[cfg(test)]
mod tests;

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

/// One ring of `T` (see the module docs).
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
    /// Reloads of the kernel's index that were refused.
    index_errors: u64,
    memory: RingMemory,
}

/// Where a ring's memory comes from, and how it is given back.
enum RingMemory {
    /// The socket's ring, mapped by [`Ring::map`]: unmapped when the ring drops.
    Mapped {
        map: NonNull<libc::c_void>,
        len: usize,
    },
    /// A test's plain memory, kept alive (and freed) by its reference count.
    #[cfg(test)]
    Plain(#[allow(dead_code)] std::sync::Arc<plain::PlainRing>),
}

// Safety: the ring's memory lives as long as the ring (a mapping it unmaps on drop, or a test's
// memory it holds a reference to), and the other side (the kernel, or a test playing it on the
// ring's thread) touches it only as the ring protocol says: the index words atomically, a
// descriptor slot only while the indices give it to that side. The `Ring` is a unique handle
// (not Clone) used from one thread at a time, like any owned value.
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
        if !size.is_power_of_two() {
            return Err(XdpError::Invalid("ring size must be a power of two"));
        }
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        // Safety: a fresh shared mapping of the socket's ring (the kernel checks the offset and
        // the length against the ring it allocated); nothing else is mapped at the address the
        // kernel picks.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
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
        // Safety: the mapping is `len` bytes laid out as the kernel's `off` says (its
        // producer, consumer and flags words are u32s the kernel aligns and accesses
        // atomically), readable and writable, and lives until the ring unmaps it on drop;
        // `size` is a power of two (checked above).
        Ok(unsafe {
            Ring::over(
                map.cast(),
                off,
                size,
                producer_side,
                RingMemory::Mapped { map, len },
            )
        })
    }

    /// A ring over memory at `base` laid out as `off` says, with `size` descriptors of `T`;
    /// `memory` is what keeps it alive.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `off.desc + size * size_of::<T>()` bytes
    /// for as long as `memory` lives; the words at `off.producer`, `off.consumer` and
    /// `off.flags` must be aligned u32s that everyone accesses atomically only, the
    /// descriptors at `off.desc` aligned for `T`; `size` must be a power of two.
    unsafe fn over(
        base: NonNull<u8>,
        off: &libc::xdp_ring_offset,
        size: u32,
        producer_side: bool,
        memory: RingMemory,
    ) -> Self {
        let at = |o: u64| -> NonNull<u8> {
            // Safety: the offsets lie inside the memory (the caller's contract).
            unsafe { base.add(o as usize) }
        };
        let mut ring = Ring {
            producer: at(off.producer).cast(),
            consumer: at(off.consumer).cast(),
            flags: at(off.flags).cast(),
            descs: at(off.desc).cast(),
            mask: size - 1,
            cached_prod: 0,
            cached_cons: 0,
            index_errors: 0,
            memory,
        };
        ring.cached_prod = ring.producer().load(Ordering::Relaxed);
        ring.cached_cons = ring.consumer().load(Ordering::Relaxed);
        if producer_side {
            ring.cached_cons = ring.cached_cons.wrapping_add(size);
        }
        ring
    }

    fn producer(&self) -> &AtomicU32 {
        // Safety: an aligned u32 inside the ring's memory, which lives as long as `self`; the
        // kernel and we only ever access it atomically.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // Safety: as in `producer`.
        unsafe { self.consumer.as_ref() }
    }

    fn size(&self) -> u32 {
        self.mask + 1
    }

    /// Whether the kernel asks to be woken up for this ring (`XDP_RING_NEED_WAKEUP`; only
    /// set on sockets bound with `XDP_USE_NEED_WAKEUP`).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // Safety: as in `producer`.
        let flags = unsafe { self.flags.as_ref() };
        flags.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// How many times the kernel's index was refused (see the module docs).
    pub(crate) fn index_errors(&self) -> u64 {
        self.index_errors
    }

    /// Producer: slots free for us now (reloading the kernel's index when fewer than `want`).
    fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        let cons = self
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.size());
        // The kernel's consumer lies between our producer minus the size and our producer:
        // then `cons + size - prod` is at most the size. Past our producer, or further
        // behind, it wraps beyond the size.
        if cons.wrapping_sub(self.cached_prod) > self.size() {
            self.index_errors += 1;
            return free;
        }
        self.cached_cons = cons;
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
            // ours (between the kernel's consumer index, checked in `free`, and our producer
            // index the ring is free); the kernel reads it only after the release store below.
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
            let prod = self.producer().load(Ordering::Acquire);
            let ahead = prod.wrapping_sub(self.cached_cons);
            // The kernel's producer is at most a ring ahead of our consumer (and never behind
            // it, which wraps to more than a ring).
            if ahead > self.size() {
                self.index_errors += 1;
            } else {
                self.cached_prod = prod;
                avail = ahead;
            }
        }
        let n = avail.min(want);
        for (i, slot_out) in out[..n as usize].iter_mut().enumerate() {
            let slot = self.cached_cons.wrapping_add(i as u32) & self.mask;
            // Safety: masked into the ring; the kernel published this slot before its release
            // store of the producer index, which our acquire load above saw (and checked: the
            // slot lies between our consumer index and that producer index).
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
        match self.memory {
            // Safety: the mapping made in `map`, unmapped once; no reference into it outlives
            // `self` (all accessors borrow `self`).
            RingMemory::Mapped { map, len } => unsafe {
                libc::munmap(map.as_ptr(), len);
            },
            #[cfg(test)]
            RingMemory::Plain(_) => {}
        }
    }
}
