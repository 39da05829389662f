//! Joins two connections back to back (no loss, no delay, all at one instant): for tests,
//! benchmarks and examples that need an open connection pair without a simulated link.

use tcp_offload::{Connection, Timestamp};

/// Delivers every packet each side sends to the other until both are quiet (at most `rounds`
/// round trips). Returns the number of packets moved.
pub fn exchange(a: &mut Connection, b: &mut Connection, now: Timestamp, rounds: usize) -> usize {
    let mut buf = vec![0u8; 70_000];
    let mut moved = 0;
    for _ in 0..rounds {
        let before = moved;
        while let Some(n) = a.poll_transmit(now, &mut buf) {
            let _ = b.handle_packet(now, &buf[..n]);
            moved += 1;
        }
        while let Some(n) = b.poll_transmit(now, &mut buf) {
            let _ = a.handle_packet(now, &buf[..n]);
            moved += 1;
        }
        if moved == before {
            break;
        }
    }
    moved
}
