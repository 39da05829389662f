//! A ring in plain memory, laid out as the kernel maps one, for tests that play the kernel's
//! side by hand: they move the kernel's index and read or write descriptors, then watch what
//! [`Ring`] makes of it (wrap-around, full and empty rings, an index that runs ahead).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::{Ring, RingDesc, RingMemory};

/// The ring layout this x86-64 kernel reports (`XDP_MMAP_OFFSETS`: the producer, consumer and
/// flags words on their own cache lines, the descriptors after them).
pub(crate) const OFFSETS: libc::xdp_ring_offset = libc::xdp_ring_offset {
    producer: 0,
    consumer: 128,
    desc: 320,
    flags: 196,
};

/// The ring's memory: zeroed u64 words (so every word and descriptor is aligned), written by
/// the ring and by the test through raw pointers only.
pub(crate) struct PlainRing {
    words: Box<[UnsafeCell<u64>]>,
    size: u32,
    desc_len: usize,
}

impl PlainRing {
    /// A ring of `size` (a power of two) descriptors of `T` whose producer and consumer
    /// indices both start at `start`: the kernel starts at 0, a test near 2^32 to cross the wrap.
    /// Returns the ring, built as the `producer_side` (fill, tx) or consumer side (rx,
    /// completion), and the memory, for the test's side.
    pub(crate) fn new<T: RingDesc>(
        size: u32,
        start: u32,
        producer_side: bool,
    ) -> (Ring<T>, Arc<PlainRing>) {
        assert!(size.is_power_of_two());
        let desc_len = std::mem::size_of::<T>();
        let bytes = OFFSETS.desc as usize + size as usize * desc_len;
        let words = (0..bytes.div_ceil(8)).map(|_| UnsafeCell::new(0)).collect();
        // Not `Sync`: the test and the ring use it on one thread. An `Arc` all the same, so
        // that its count stays sound wherever the ring (which is `Send`) goes.
        #[allow(clippy::arc_with_non_send_sync)]
        let mem = Arc::new(PlainRing {
            words,
            size,
            desc_len,
        });
        mem.index(OFFSETS.producer).store(start, Ordering::Relaxed);
        mem.index(OFFSETS.consumer).store(start, Ordering::Relaxed);
        // Safety: `base` is the start of `bytes` zeroed bytes, 8-aligned (u64 words) and
        // writable through the `UnsafeCell`s, alive as long as the `Arc` the ring holds; the
        // index words are aligned u32s the ring and `PlainRing` touch only atomically; the
        // descriptors start at a multiple of 8 (`OFFSETS.desc`), aligned for `u64` and
        // `xdp_desc`; `size` is a power of two (asserted above).
        let ring = unsafe {
            Ring::over(
                mem.base(),
                &OFFSETS,
                size,
                producer_side,
                RingMemory::Plain(mem.clone()),
            )
        };
        (ring, mem)
    }

    fn base(&self) -> std::ptr::NonNull<u8> {
        std::ptr::NonNull::new(UnsafeCell::raw_get(self.words.as_ptr()).cast())
            .expect("a boxed slice is not null")
    }

    fn index(&self, offset: u64) -> &AtomicU32 {
        // Safety: `offset` is one of `OFFSETS`' index words: inside the memory, 4-aligned,
        // accessed atomically only; the borrow lives no longer than `self`.
        unsafe {
            &*self
                .base()
                .as_ptr()
                .add(offset as usize)
                .cast::<AtomicU32>()
        }
    }

    /// The producer index (the kernel's on an rx or completion ring).
    pub(crate) fn producer(&self) -> u32 {
        self.index(OFFSETS.producer).load(Ordering::Acquire)
    }

    /// Sets the producer index, as the kernel publishes what it produced (or, misbehaving,
    /// anything at all).
    pub(crate) fn set_producer(&self, v: u32) {
        self.index(OFFSETS.producer).store(v, Ordering::Release);
    }

    /// The consumer index (the kernel's on a fill or tx ring).
    pub(crate) fn consumer(&self) -> u32 {
        self.index(OFFSETS.consumer).load(Ordering::Acquire)
    }

    /// Sets the consumer index, as the kernel hands slots back.
    pub(crate) fn set_consumer(&self, v: u32) {
        self.index(OFFSETS.consumer).store(v, Ordering::Release);
    }

    /// Sets or clears `XDP_RING_NEED_WAKEUP`.
    pub(crate) fn set_need_wakeup(&self, on: bool) {
        let flag = if on { libc::XDP_RING_NEED_WAKEUP } else { 0 };
        self.index(OFFSETS.flags).store(flag, Ordering::Relaxed);
    }

    fn desc_ptr<T: RingDesc>(&self, index: u32) -> *mut T {
        assert_eq!(std::mem::size_of::<T>(), self.desc_len, "descriptor type");
        let slot = (index & (self.size - 1)) as usize;
        // Safety: `slot` is masked into the ring's descriptors, which lie inside the memory.
        unsafe {
            self.base()
                .as_ptr()
                .add(OFFSETS.desc as usize + slot * self.desc_len)
        }
        .cast()
    }

    /// The descriptor in the slot of free-running index `index`.
    pub(crate) fn read<T: RingDesc>(&self, index: u32) -> T {
        // Safety: an aligned descriptor slot inside the memory (`desc_ptr`); any bits are a
        // valid `T` (`RingDesc`); `PlainRing` is not `Sync` and the ring that shares the memory
        // runs on this thread too, so nobody writes it meanwhile.
        unsafe { self.desc_ptr::<T>(index).read_volatile() }
    }

    /// Writes `d` into the slot of free-running index `index`.
    pub(crate) fn write<T: RingDesc>(&self, index: u32, d: T) {
        // Safety: as in `read`; nobody reads it meanwhile.
        unsafe { self.desc_ptr::<T>(index).write_volatile(d) }
    }

    /// The kernel's side of a producer ring (fill, tx): takes up to `max` descriptors we
    /// published and moves the consumer index past them.
    pub(crate) fn take<T: RingDesc>(&self, max: usize) -> Vec<T> {
        let (prod, cons) = (self.producer(), self.consumer());
        let n = prod.wrapping_sub(cons).min(max as u32);
        let out = (0..n).map(|i| self.read(cons.wrapping_add(i))).collect();
        self.set_consumer(cons.wrapping_add(n));
        out
    }

    /// The kernel's side of a consumer ring (rx, completion): writes `descs` after the
    /// producer index and publishes them (however full the ring: a test may overfill it).
    pub(crate) fn put<T: RingDesc>(&self, descs: &[T]) {
        let prod = self.producer();
        for (i, d) in descs.iter().enumerate() {
            self.write(prod.wrapping_add(i as u32), *d);
        }
        self.set_producer(prod.wrapping_add(descs.len() as u32));
    }
}
