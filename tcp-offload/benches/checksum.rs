//! The Internet checksum's sum over the sizes the data path sees: an IPv4 header (20 B), a
//! small message's TCP segment (116 B: 64 B write, DDP/MPA headers, CRC, TCP header with
//! timestamps), a full MTU 1500 segment and a jumbo one.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use tcp_offload::checksum;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("checksum_sum");
    for len in [20usize, 116, 1460, 8960] {
        let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(format!("{len}"), |b| {
            b.iter(|| checksum::fold(checksum::sum(black_box(&data), black_box(0x1234))))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
