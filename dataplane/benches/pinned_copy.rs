//! A jumbo payload (8948 octets) copied out of pinned memory into a frame, at two relative
//! alignments: the destination 512 octets past the source modulo 4096 (no aliasing), and 16
//! octets past it (4K aliasing). `PinnedBuf::read_at` (copies in 2 KiB pieces) beside one
//! `copy_from_slice` of the same octets: the single copy takes glibc's `rep movsb` path above
//! its threshold, which stalls on the aliased case on AMD Zen (see `afxdp::bulk_copy`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dataplane::memory::PinnedBuf;
use std::hint::black_box;

const LEN: usize = 8948;
const SRC_OFF: usize = 8192;

fn bench(c: &mut Criterion) {
    let buf = PinnedBuf::new(1 << 16).expect("pinned memory (RLIMIT_MEMLOCK)");
    let plain: Vec<u8> = vec![0x5A; 1 << 16];
    buf.write_at(SRC_OFF, &plain[..LEN]).unwrap();
    let mut frames = vec![0u8; 1 << 16];
    let mut g = c.benchmark_group("pinned_copy");
    g.throughput(Throughput::Bytes(LEN as u64));
    for distance in [512usize, 16] {
        // Where in `frames` the destination lies `distance` octets past the source, mod 4096.
        let want = (buf.addr() + SRC_OFF + distance) % 4096;
        let have = frames.as_ptr() as usize % 4096;
        let at = 8192 + (want + 4096 - have) % 4096;
        let src = &plain[SRC_OFF..SRC_OFF + LEN];
        g.bench_with_input(BenchmarkId::new("read_at", distance), &at, |b, &at| {
            b.iter(|| buf.read_at(black_box(SRC_OFF), &mut frames[at..at + LEN]))
        });
        let want = (src.as_ptr() as usize + distance) % 4096;
        let at = 8192 + (want + 4096 - have) % 4096;
        g.bench_with_input(
            BenchmarkId::new("copy_from_slice", distance),
            &at,
            |b, &at| b.iter(|| frames[at..at + LEN].copy_from_slice(black_box(src))),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
