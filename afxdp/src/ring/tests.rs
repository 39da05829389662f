//! The ring over plain memory, with the test as the kernel: indices across 2^32, full and empty
//! rings, and kernel indices that run ahead or behind, which must be refused and counted.

use super::plain::PlainRing;
use super::Ring;

const SIZE: u32 = 8;
/// Where indices start in the wrap-around tests: three slots before 2^32.
const NEAR_WRAP: u32 = u32::MAX - 2;

/// A fill ring (we produce addresses) and its kernel side.
fn fill(start: u32) -> (Ring<u64>, std::sync::Arc<PlainRing>) {
    PlainRing::new(SIZE, start, true)
}

/// An rx ring (the kernel produces descriptors) and its kernel side.
fn rx(start: u32) -> (Ring<libc::xdp_desc>, std::sync::Arc<PlainRing>) {
    PlainRing::new(SIZE, start, false)
}

fn desc(addr: u64) -> libc::xdp_desc {
    libc::xdp_desc {
        addr,
        len: 60,
        options: 0,
    }
}

#[test]
fn producing_across_the_wrap_of_the_indices_keeps_order_and_room() {
    let (mut ring, kernel) = fill(NEAR_WRAP);
    let mut next = 0u64;
    // Twenty rounds of five: the indices pass 2^32 in the first round.
    for _ in 0..20 {
        let batch: Vec<u64> = (next..next + 5).collect();
        assert_eq!(ring.produce(&batch), 5);
        assert_eq!(kernel.take::<u64>(16), batch, "in order across the wrap");
        next += 5;
    }
    assert_eq!(kernel.producer(), NEAR_WRAP.wrapping_add(100));
    assert!(kernel.producer() < NEAR_WRAP, "the index wrapped");
    assert_eq!(ring.room(SIZE), SIZE);
    assert_eq!(ring.index_errors(), 0);
}

#[test]
fn consuming_across_the_wrap_of_the_indices_keeps_order() {
    let (mut ring, kernel) = rx(NEAR_WRAP);
    let mut out = [desc(0); 8];
    let mut next = 0u64;
    for _ in 0..20 {
        let batch: Vec<_> = (next..next + 3).map(desc).collect();
        kernel.put(&batch);
        assert_eq!(ring.consume(&mut out), 3);
        let got: Vec<u64> = out[..3].iter().map(|d| d.addr).collect();
        assert_eq!(got, (next..next + 3).collect::<Vec<_>>());
        assert_eq!(kernel.consumer(), kernel.producer(), "slots handed back");
        next += 3;
    }
    assert_eq!(ring.index_errors(), 0);
}

#[test]
fn a_full_ring_takes_nothing_until_the_kernel_consumes() {
    for start in [0, NEAR_WRAP] {
        let (mut ring, kernel) = fill(start);
        let addrs: Vec<u64> = (0..12).collect();
        // A ring's worth goes in, the rest waits.
        assert_eq!(ring.produce(&addrs), SIZE as usize);
        assert_eq!(ring.room(1), 0);
        assert_eq!(ring.produce(&addrs[8..]), 0);
        // The kernel takes three: exactly three more fit.
        assert_eq!(kernel.take::<u64>(3), [0, 1, 2]);
        assert_eq!(ring.produce(&addrs[8..]), 3);
        assert_eq!(ring.room(1), 0);
        assert_eq!(kernel.take::<u64>(16), [3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(ring.index_errors(), 0);
    }
}

#[test]
fn an_empty_ring_gives_nothing_and_a_full_one_gives_a_ring() {
    for start in [0, NEAR_WRAP] {
        let (mut ring, kernel) = rx(start);
        let mut out = [desc(0); 16];
        assert_eq!(ring.consume(&mut out), 0);
        let all: Vec<_> = (0..SIZE as u64).map(desc).collect();
        kernel.put(&all);
        assert_eq!(ring.consume(&mut out[..5]), 5);
        assert_eq!(ring.consume(&mut out), 3);
        assert_eq!(ring.consume(&mut out), 0);
        assert_eq!(ring.index_errors(), 0);
    }
}

#[test]
fn a_kernel_producer_running_ahead_of_the_ring_is_refused_and_counted() {
    for start in [0, NEAR_WRAP] {
        let (mut ring, kernel) = rx(start);
        let mut out = [desc(0); 16];
        // Nine descriptors in an eight-slot ring: the index claims more than the ring holds.
        kernel.set_producer(start.wrapping_add(SIZE + 1));
        assert_eq!(ring.consume(&mut out), 0, "nothing read past the ring");
        assert_eq!(ring.index_errors(), 1);
        assert_eq!(kernel.consumer(), start, "no slot handed back");
        // Behind our consumer (which wraps to far ahead): refused too.
        kernel.set_producer(start.wrapping_sub(1));
        assert_eq!(ring.consume(&mut out), 0);
        assert_eq!(ring.index_errors(), 2);
        // A sane index again: the ring carries on.
        kernel.set_producer(start);
        kernel.put(&[desc(7), desc(8)]);
        assert_eq!(ring.consume(&mut out), 2);
        assert_eq!((out[0].addr, out[1].addr), (7, 8));
        assert_eq!(ring.index_errors(), 2);
    }
}

#[test]
fn a_kernel_consumer_passing_our_producer_or_falling_behind_is_refused_and_counted() {
    for start in [0, NEAR_WRAP] {
        let (mut ring, kernel) = fill(start);
        let addrs: Vec<u64> = (0..8).collect();
        assert_eq!(ring.produce(&addrs), 8);
        // The kernel claims it consumed ten of our eight.
        kernel.set_consumer(start.wrapping_add(10));
        assert_eq!(ring.room(1), 0, "no room from a consumer past our producer");
        assert_eq!(ring.index_errors(), 1);
        // Or that it went back before where it started: more outstanding than the ring.
        kernel.set_consumer(start.wrapping_sub(1));
        assert_eq!(ring.produce(&addrs), 0);
        assert_eq!(ring.index_errors(), 2);
        // It consumes four, honestly: four slots, no more.
        kernel.set_consumer(start.wrapping_add(4));
        assert_eq!(ring.room(8), 4);
        assert_eq!(ring.index_errors(), 2);
    }
}

#[test]
fn need_wakeup_is_read_from_the_flags_word() {
    let (ring, kernel) = fill(0);
    assert!(!ring.needs_wakeup());
    kernel.set_need_wakeup(true);
    assert!(ring.needs_wakeup());
}
