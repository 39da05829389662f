//! Framing + CRC throughput: encode (gather list, markers, CRC in one pass), in-order
//! decode and out-of-order location, for MULPDU-sized ULPDUs.
//! Run: `cargo bench -p mpa --bench framing`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mpa::locate::{locate, LocateOptions};
use mpa::{decode_fpdu, encode_fpdu, fpdu_wire_len, mulpdu, Decoded, FramingConfig};
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    for emss in [1460u32, 8960] {
        for markers in [false, true] {
            let cfg = FramingConfig { markers, crc: true };
            let n = mulpdu(emss, markers);
            let hdr = [0x41u8; 18];
            let payload: Vec<u8> = (0..n - 18).map(|i| i as u8).collect();
            let offset = 0x1ec;
            let mut out = vec![0u8; fpdu_wire_len(cfg, offset, n)];
            let tag = format!("ulpdu{n}/markers={markers}");
            let mut g = c.benchmark_group("mpa");
            g.throughput(Throughput::Bytes(n as u64));
            g.bench_function(format!("encode/{tag}"), |b| {
                b.iter(|| encode_fpdu(cfg, black_box(offset), &[&hdr, &payload], &mut out).unwrap())
            });
            encode_fpdu(cfg, offset, &[&hdr, &payload], &mut out).unwrap();
            g.bench_function(format!("decode/{tag}"), |b| {
                b.iter(|| match decode_fpdu(cfg, black_box(offset), &out) {
                    Ok(Decoded::Complete(f)) => f.ulpdu_len(),
                    _ => unreachable!(),
                })
            });
            let mut dst = vec![0u8; n];
            g.bench_function(format!("locate+copy/{tag}"), |b| {
                b.iter_batched(
                    || (),
                    |_| {
                        let opts = LocateOptions {
                            known_start: Some(offset),
                        };
                        for f in locate(cfg, offset, black_box(&out), opts) {
                            f.unwrap().copy_ulpdu(&mut dst).unwrap();
                        }
                    },
                    BatchSize::SmallInput,
                )
            });
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
