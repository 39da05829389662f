//! Throughput of two queue pairs joined in memory (no network): RDMA Write of `SIZE` octets,
//! repeated, through MPA framing (markers on/off, CRC on/off), placement and completion.
//! Measures the protocol stack's own cost per octet on this machine.
//!
//! `cargo run --release -p ddp --example loopback_throughput`

use ddp::WorkRequest;
use ddp::{
    Access, LocalBuf, PdId, Qp, QpConfig, RegionSpec, RemoteBuf, StagTable, StreamId, VecMemory,
};
use std::time::Instant;

const SIZE: usize = 16 << 20;
const ROUNDS: usize = 16;

struct End {
    qp: Qp,
    tags: StagTable,
    mem: VecMemory,
}

fn pump(a: &mut End, b: &mut End, buf: &mut [u8]) -> u64 {
    let mut wire = 0u64;
    loop {
        let mut moved = false;
        for a_sends in [true, false] {
            let (x, y) = if a_sends {
                (&mut *a, &mut *b)
            } else {
                (&mut *b, &mut *a)
            };
            while let Some(n) = x.qp.poll_transmit(&x.tags, &x.mem, buf) {
                y.qp.handle_rx_bytes(&mut y.tags, &mut y.mem, Instant::now(), &buf[..n]);
                wire += n as u64;
                moved = true;
            }
            x.qp.on_acked(x.qp.tx_offset());
        }
        if !moved {
            return wire;
        }
    }
}

fn main() {
    println!(
        "{:>8} {:>5} {:>12} {:>10}",
        "markers", "crc", "Gbit/s", "FPDUs/s"
    );
    for (markers, crc) in [(false, false), (false, true), (true, false), (true, true)] {
        let now = Instant::now();
        let cfg = |s| {
            let mut c = QpConfig::default();
            c.engine.stream = StreamId(s);
            c.engine.pd = PdId(1);
            c.startup.want_markers = markers;
            c.startup.want_crc = crc;
            c.emss = 8960; // jumbo-frame MSS: larger FPDUs
            c
        };
        let mut a = End {
            qp: Qp::new_initiator(cfg(1), now).unwrap(),
            tags: StagTable::new(1),
            mem: VecMemory::new(),
        };
        let mut b = End {
            qp: Qp::new_responder(cfg(2), now),
            tags: StagTable::new(2),
            mem: VecMemory::new(),
        };
        let spec = |access| RegionSpec {
            base_to: 0,
            len: SIZE as u64,
            access,
            pd: PdId(1),
            stream: None,
        };
        let (src, _) = a.tags.register(spec(Access::LOCAL_WRITE)).unwrap();
        a.mem.insert(src, (0..SIZE).map(|i| i as u8).collect());
        let (dst, stag) = b.tags.register(spec(Access::REMOTE_WRITE)).unwrap();
        b.mem.insert(dst, vec![0; SIZE]);
        let mut buf = vec![0u8; 70_000];
        pump(&mut a, &mut b, &mut buf);
        let t = Instant::now();
        let mut wire = 0;
        for i in 0..ROUNDS {
            let l = LocalBuf {
                region: src,
                offset: 0,
                len: SIZE as u32,
            };
            a.qp.post(
                &a.tags,
                WorkRequest::write(i as u64, l, RemoteBuf { stag, to: 0 }),
            )
            .unwrap();
            wire += pump(&mut a, &mut b, &mut buf);
            assert!(a.qp.poll_completion().is_some());
        }
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(b.mem.get(dst).unwrap()[SIZE - 1], (SIZE - 1) as u8);
        let fpdus = a.qp.stats().tx_ulpdus as f64;
        let gbit = (SIZE * ROUNDS) as f64 * 8.0 / secs / 1e9;
        println!(
            "{markers:>8} {crc:>5} {gbit:>12.2} {:>10.0}   ({} wire octets)",
            fpdus / secs,
            wire
        );
    }
}
