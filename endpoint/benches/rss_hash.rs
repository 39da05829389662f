//! The RSS hash a lane hand-off computes per received packet when lanes follow a NIC's RSS:
//! `RssHash::queue_of` (nibble tables) beside the bitwise `toeplitz` definition, for IPv4 and
//! IPv6 flows, in one run.

use std::hint::black_box;
use std::net::SocketAddr;

use criterion::{criterion_group, criterion_main, Criterion};
use endpoint::{toeplitz, RssHash};

/// The key of Microsoft's RSS verification suite.
const KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The hash input of a flow, as `RssHash` builds it.
fn input(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let ip = |a: SocketAddr| match a {
        SocketAddr::V4(a) => a.ip().octets().to_vec(),
        SocketAddr::V6(a) => a.ip().octets().to_vec(),
    };
    [
        ip(src),
        ip(dst),
        src.port().to_be_bytes().to_vec(),
        dst.port().to_be_bytes().to_vec(),
    ]
    .concat()
}

fn bench(c: &mut Criterion) {
    let rss = RssHash::new(KEY.to_vec(), (0..128).map(|i| i % 4).collect()).unwrap();
    let flows: [(&str, SocketAddr, SocketAddr); 2] = [
        (
            "ipv4",
            "198.18.0.2:4791".parse().unwrap(),
            "198.18.0.1:40001".parse().unwrap(),
        ),
        (
            "ipv6",
            "[2001:db8::2]:4791".parse().unwrap(),
            "[2001:db8::1]:40001".parse().unwrap(),
        ),
    ];
    let mut g = c.benchmark_group("rss_hash");
    for (name, src, dst) in flows {
        g.bench_function(format!("{name}/queue_of (tables)"), |b| {
            b.iter(|| rss.queue_of(black_box(src), black_box(dst)))
        });
        let bytes = input(src, dst);
        g.bench_function(format!("{name}/toeplitz (bitwise)"), |b| {
            b.iter(|| toeplitz(black_box(&KEY), black_box(&bytes)))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
