//! A bounded lock-free single-producer single-consumer ring (the threaded engine's link to the
//! application): one atomic head, one atomic tail, slots written only by their owner side.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

struct Ring<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    /// Next slot the consumer reads (only the consumer stores it).
    head: AtomicUsize,
    /// Next slot the producer writes (only the producer stores it).
    tail: AtomicUsize,
}

// Safety: a slot is accessed by the producer only while it is outside [head, tail) and by the
// consumer only while inside; the Acquire/Release pairs on head and tail order those accesses.
unsafe impl<T: Send> Sync for Ring<T> {}
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        let (mut h, t) = (*self.head.get_mut(), *self.tail.get_mut());
        while h != t {
            let i = h % self.slots.len();
            // Safety: slots in [head, tail) hold initialised values nobody else can reach now.
            unsafe { (*self.slots[i].get()).assume_init_drop() };
            h = h.wrapping_add(1);
        }
    }
}

/// The sending end.
pub struct Producer<T> {
    ring: Arc<Ring<T>>,
}

/// The receiving end.
pub struct Consumer<T> {
    ring: Arc<Ring<T>>,
}

/// A ring of `capacity` slots.
pub fn spsc<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(1);
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let ring = Arc::new(Ring {
        slots,
        head: AtomicUsize::new(0),
        tail: AtomicUsize::new(0),
    });
    (Producer { ring: ring.clone() }, Consumer { ring })
}

impl<T> Producer<T> {
    /// Appends `v`, or gives it back when the ring is full.
    pub fn push(&mut self, v: T) -> Result<(), T> {
        let r = &*self.ring;
        let t = r.tail.load(Ordering::Relaxed);
        let h = r.head.load(Ordering::Acquire);
        if t.wrapping_sub(h) >= r.slots.len() {
            return Err(v);
        }
        // Safety: slot `t` is outside [head, tail): the consumer does not touch it.
        unsafe { (*r.slots[t % r.slots.len()].get()).write(v) };
        r.tail.store(t.wrapping_add(1), Ordering::Release);
        Ok(())
    }
}

impl<T> Consumer<T> {
    /// Takes the oldest value.
    pub fn pop(&mut self) -> Option<T> {
        let r = &*self.ring;
        let h = r.head.load(Ordering::Relaxed);
        let t = r.tail.load(Ordering::Acquire);
        if h == t {
            return None;
        }
        // Safety: slot `h` is inside [head, tail): initialised by the producer (Release/Acquire
        // on tail), and the producer will not reuse it until head moves past it.
        let v = unsafe { (*r.slots[h % r.slots.len()].get()).assume_init_read() };
        r.head.store(h.wrapping_add(1), Ordering::Release);
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_full_and_empty() {
        let (mut p, mut c) = spsc(2);
        assert!(c.pop().is_none());
        p.push(1).unwrap();
        p.push(2).unwrap();
        assert_eq!(p.push(3), Err(3));
        assert_eq!(c.pop(), Some(1));
        p.push(3).unwrap();
        assert_eq!((c.pop(), c.pop(), c.pop()), (Some(2), Some(3), None));
    }

    #[test]
    fn across_threads_every_value_once_in_order() {
        let (mut p, mut c) = spsc::<u64>(16);
        let t = std::thread::spawn(move || {
            for i in 0..100_000u64 {
                let mut v = i;
                while let Err(back) = p.push(v) {
                    v = back;
                    std::hint::spin_loop();
                }
            }
        });
        let mut next = 0;
        while next < 100_000 {
            if let Some(v) = c.pop() {
                assert_eq!(v, next);
                next += 1;
            }
        }
        t.join().unwrap();
    }

    #[test]
    fn drop_releases_queued_values() {
        let v = Arc::new(());
        let (mut p, c) = spsc(4);
        p.push(v.clone()).unwrap();
        p.push(v.clone()).unwrap();
        drop((p, c));
        assert_eq!(Arc::strong_count(&v), 1);
    }
}
