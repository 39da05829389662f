//! Copies between pinned memory and packet frames (and of frames into buffers), handed to
//! `memcpy` in pieces of at most [`PIECE`] octets.
//!
//! glibc's `memcpy` switches to `rep movsb` above a size threshold
//! (`glibc.cpu.x86_rep_movsb_threshold`: 2112 octets on the AMD EPYC development host; glibc
//! derives it from the vector width, so it is larger elsewhere). On AMD Zen cores `rep movsb`
//! stalls on 4K aliasing: when the destination lies 1 to 31 octets past the source modulo
//! 4096, an 8948-octet copy took 3.4-5.5 µs instead of 0.13-0.2 µs there (25-40x). A region
//! and a packet frame sit at unrelated offsets, so a share of jumbo payload copies fell into
//! that window: at MTU 9000 the sender's `memmove` was 8.6 % of its core, 3.6 % in pieces
//! (`perf record`, write_bw 64 KiB over AF_XDP on veth). Pieces below every default threshold
//! take glibc's vector loop, which has no such stall and is as fast as `rep movsb` at its best
//! on cache-resident data (`cargo bench -p dataplane --bench pinned_copy`).

/// Largest piece given to one `memcpy`: below glibc's smallest default `rep movsb` threshold.
pub const PIECE: usize = 2048;

/// Copies `len` octets from `src` to `dst`, [`PIECE`] octets at a time.
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `len` octets, and the two ranges must
/// not overlap (the contract of [`std::ptr::copy_nonoverlapping`]).
pub unsafe fn copy_nonoverlapping(src: *const u8, dst: *mut u8, len: usize) {
    let mut at = 0;
    while at < len {
        let n = PIECE.min(len - at);
        // Safety: `[at, at + n)` lies within `[0, len)`, which the caller guarantees valid
        // and non-overlapping on both sides.
        unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), n) };
        at += n;
    }
}

/// `dst.copy_from_slice(src)` in [`PIECE`]-octet pieces (for copies into or out of frames that
/// may exceed the `rep movsb` threshold). Panics if the lengths differ, as `copy_from_slice` does.
pub fn copy_from_slice(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "bulk_copy: source and destination lengths differ"
    );
    for (d, s) in dst.chunks_mut(PIECE).zip(src.chunks(PIECE)) {
        d.copy_from_slice(s);
    }
}

/// `buf.extend_from_slice(src)` in [`PIECE`]-octet pieces.
pub fn extend_from_slice(buf: &mut Vec<u8>, src: &[u8]) {
    buf.reserve(src.len());
    for s in src.chunks(PIECE) {
        buf.extend_from_slice(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_octet_across_piece_boundaries() {
        let src: Vec<u8> = (0..4 * PIECE + 64).map(|i| (i * 131 + 7) as u8).collect();
        for len in [0, 1, PIECE - 1, PIECE, PIECE + 1, 2 * PIECE + 5, 4 * PIECE] {
            for shift in [0, 1, 31] {
                let mut dst = vec![0xEEu8; len + 2];
                let s = &src[shift..shift + len];
                // Safety: both ranges are inside their own vectors (len + 2 > len octets).
                unsafe { copy_nonoverlapping(s.as_ptr(), dst[1..].as_mut_ptr(), len) };
                assert_eq!(&dst[1..=len], s, "len {len} shift {shift}");
                assert_eq!(
                    (dst[0], dst[len + 1]),
                    (0xEE, 0xEE),
                    "wrote outside, len {len}"
                );
            }
        }
    }

    #[test]
    fn slice_forms_equal_the_std_ones() {
        let src: Vec<u8> = (0..3 * PIECE + 9).map(|i| (i * 7 + 1) as u8).collect();
        for len in [0, 5, PIECE, PIECE + 3, 3 * PIECE + 9] {
            let mut dst = vec![0u8; len];
            copy_from_slice(&mut dst, &src[..len]);
            assert_eq!(dst, src[..len]);
            let mut v = b"head".to_vec();
            extend_from_slice(&mut v, &src[..len]);
            assert_eq!((&v[..4], &v[4..]), (&b"head"[..], &src[..len]));
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn copy_from_slice_refuses_different_lengths() {
        copy_from_slice(&mut [0u8; 3], &[1, 2]);
    }
}
