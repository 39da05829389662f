//! An [`XskQueue`] over plain memory with the test as the kernel: it takes fill entries, hands
//! frames back on the rx ring, takes transmit descriptors and completes them, across the wrap
//! of the ring indices at 2^32; and it misbehaves (an address outside the UMEM, a frame handed
//! back twice or through the wrong ring, an index that runs ahead), which the queue must
//! refuse and count, never turn into a token.

use std::sync::Arc;

use super::{
    Frame, Opened, TxChecksumOffload, UmemArea, UmemLayout, XskConfig, XskQueue, XskRefused,
    XskSocket, UMEM_HEADROOM,
};
use crate::ring::plain::PlainRing;

/// The kernel's side of the four rings.
struct Kernel {
    fill: Arc<PlainRing>,
    comp: Arc<PlainRing>,
    rx: Arc<PlainRing>,
    tx: Arc<PlainRing>,
}

/// Three slots before the ring indices wrap.
const NEAR_WRAP: u32 = u32::MAX - 2;

/// Sixteen 2 KiB frames, rings of eight (the fill ring gets eight).
fn small() -> XskConfig {
    XskConfig {
        frame_count: 16,
        ring_size: 8,
        ..XskConfig::default()
    }
}

impl XskQueue {
    /// A queue made with `cfg` over plain rings whose indices start at `start` (copy mode, no
    /// offloads; a receive strip when `cfg` asks for one and binds in copy mode), its fill
    /// ring filled.
    fn over_plain(cfg: XskConfig, start: u32) -> (XskQueue, Kernel) {
        let (socket, [fill, comp, rx, tx]) = XskSocket::plain(cfg.ring_size, start);
        // No driver to ask: a strip only where the queue is sure to run in copy mode.
        let with_strip = super::rx_run::strip_for(&cfg, || None);
        let layout = UmemLayout::new(&cfg, TxChecksumOffload::Off, with_strip);
        let umem = UmemArea::new(layout.len() as usize, false).expect("an anonymous UMEM");
        let opened = Opened {
            queue_id: 0,
            zero_copy: false,
            tx_checksum: TxChecksumOffload::Off,
            tx_budget: cfg.ring_size,
        };
        let q = XskQueue::assemble(socket, umem, layout, &cfg, opened);
        (q, Kernel { fill, comp, rx, tx })
    }
}

fn rx_desc(addr: u64, len: u32) -> libc::xdp_desc {
    libc::xdp_desc {
        addr,
        len,
        options: 0,
    }
}

impl Kernel {
    /// Receives `n` packets of `len` octets into the next fill entries (in aligned mode the
    /// data sits behind the headroom of the chunk). Returns their data addresses.
    fn receive(&self, n: usize, len: u32) -> Vec<u64> {
        let chunks: Vec<u64> = self.fill.take(n);
        let addrs: Vec<u64> = chunks
            .iter()
            .map(|c| c + u64::from(UMEM_HEADROOM))
            .collect();
        let descs: Vec<_> = addrs.iter().map(|&a| rx_desc(a, len)).collect();
        self.rx.put(&descs);
        addrs
    }

    /// Transmits what the tx ring holds and completes it. Returns the descriptors.
    fn transmit_all(&self) -> Vec<libc::xdp_desc> {
        let sent: Vec<libc::xdp_desc> = self.tx.take(64);
        let done: Vec<u64> = sent.iter().map(|d| d.addr).collect();
        self.comp.put(&done);
        sent
    }
}

fn addrs(frames: &[Frame]) -> Vec<u64> {
    frames.iter().map(|f| f.addr).collect()
}

#[test]
fn frames_go_round_fill_rx_tx_and_completion_across_the_index_wrap() {
    let (mut q, k) = XskQueue::over_plain(small(), NEAR_WRAP);
    assert_eq!(q.occupancy().in_fill, 8);
    let mut got = Vec::new();
    for round in 0..40u8 {
        let arrived = k.receive(3, 60);
        assert_eq!(q.recv(&mut got, 16), 3, "round {round}");
        assert_eq!(addrs(&got), arrived);
        for f in got.iter_mut() {
            q.data_mut(f)[0] = round;
        }
        // Each goes straight back out (the kernel sees the byte written).
        assert_eq!(q.send(&mut got), 3);
        let sent = k.transmit_all();
        assert_eq!(sent.len(), 3);
        assert_eq!(q.reclaim(), 3);
        let f = q.alloc().expect("a free frame");
        assert_eq!(q.data(&f).len(), 0);
        q.release_one(f);
    }
    assert!(k.rx.producer() < NEAR_WRAP, "the indices wrapped");
    assert!(k.tx.producer() < NEAR_WRAP);
    let o = q.occupancy();
    assert_eq!((o.free + o.in_fill, o.in_tx), (16, 0), "{o:?}");
    assert_eq!(q.refused(), XskRefused::default());
}

#[test]
fn a_descriptor_outside_the_umem_is_refused_and_counted() {
    let (mut q, k) = XskQueue::over_plain(small(), 0);
    let end = 16 * 2048;
    k.fill.take::<u64>(2);
    k.rx.put(&[rx_desc(end + 256, 60), rx_desc(u64::MAX, 60)]);
    let mut got = Vec::new();
    assert_eq!(
        q.recv(&mut got, 16),
        0,
        "no token for memory outside the UMEM"
    );
    assert_eq!(q.refused().outside_umem, 2);
    // The same on the completion ring, after a real send.
    let mut out = vec![q.alloc().unwrap()];
    q.write(&mut out[0], &[1; 60]).unwrap();
    assert_eq!(q.send(&mut out), 1);
    let sent: Vec<libc::xdp_desc> = k.tx.take(8);
    k.comp.put(&[end + 256, sent[0].addr]);
    // (A reclaim reads at most as many completions as frames are out: one, then the other.)
    assert_eq!(q.reclaim(), 0);
    assert_eq!(q.reclaim(), 1, "only the frame that was sent");
    assert_eq!(
        q.refused(),
        XskRefused {
            outside_umem: 3,
            ..XskRefused::default()
        }
    );
}

#[test]
fn a_frame_handed_back_twice_or_through_the_wrong_ring_is_refused_and_counted() {
    let (mut q, k) = XskQueue::over_plain(small(), NEAR_WRAP);
    let mut got = Vec::new();
    // The rx ring hands the same frame back twice: one token.
    let a = k.receive(1, 60)[0];
    k.rx.put(&[rx_desc(a, 60)]);
    assert_eq!(q.recv(&mut got, 16), 1);
    assert_eq!(q.refused().not_lent, 1);
    // A frame we hold (the token just taken) sent out; the rx ring hands it back as received.
    assert_eq!(q.send(&mut got), 1);
    k.rx.put(&[rx_desc(a, 60)]);
    assert_eq!(
        q.recv(&mut got, 16),
        0,
        "it is with the tx ring, not the fill ring"
    );
    assert_eq!(q.refused().not_lent, 2);
    // Completed twice: it comes back to the pool once. (Another frame is out too: a reclaim
    // reads at most as many completions as frames are out.)
    let mut out = vec![q.alloc().unwrap()];
    assert_eq!(q.send(&mut out), 1);
    let sent: Vec<libc::xdp_desc> = k.tx.take(8);
    assert_eq!(sent[0].addr, a);
    k.comp.put(&[a, a, sent[1].addr]);
    assert_eq!(q.reclaim(), 1, "the first completion of the frame");
    assert_eq!(q.refused().not_lent, 3, "the second");
    assert_eq!(q.reclaim(), 1, "the other frame");
    let mut out = vec![q.alloc().unwrap()];
    assert_eq!(q.send(&mut out), 1);
    // A frame still in the fill ring "completed": never sent.
    let in_fill: Vec<u64> = k.fill.take(1);
    k.comp.put(&[in_fill[0]]);
    assert_eq!(q.reclaim(), 0);
    // The frame that was sent completes normally.
    k.transmit_all();
    assert_eq!(q.reclaim(), 1);
    assert_eq!(q.occupancy().in_tx, 0);
    assert_eq!(
        q.refused(),
        XskRefused {
            not_lent: 4,
            ..XskRefused::default()
        }
    );
}

#[test]
fn ring_indices_that_run_ahead_are_refused_and_counted() {
    let (mut q, k) = XskQueue::over_plain(small(), 0);
    // The rx producer claims nine packets in an eight-slot ring.
    k.rx.set_producer(9);
    let mut got = Vec::new();
    assert_eq!(q.recv(&mut got, 16), 0);
    assert_eq!(q.refused().ring_indices, 1);
    // Two real packets; then the fill ring's consumer claims twelve of the eight entries we
    // produced, so the refill after the receive finds no room.
    k.rx.set_producer(0);
    k.receive(2, 60);
    k.fill.set_consumer(12);
    assert_eq!(q.recv(&mut got, 16), 2);
    assert_eq!(
        q.occupancy().in_fill,
        6,
        "nothing refilled on a bogus index"
    );
    assert_eq!(
        q.refused(),
        XskRefused {
            ring_indices: 2,
            ..XskRefused::default()
        }
    );
}

#[test]
fn receive_strip_positions_are_checked_like_frames() {
    let cfg = XskConfig {
        frame_size: 4096,
        multi_buffer: true,
        rx_strip: true,
        bind_mode: super::BindMode::Copy,
        ..small()
    };
    let (mut q, k) = XskQueue::over_plain(cfg, 0);
    assert!(q.has_rx_strip());
    // Unaligned-chunk mode: the chunk's address, the data's offset in the upper bits.
    let chunk: Vec<u64> = k.fill.take(1);
    let encoded = chunk[0] | (u64::from(UMEM_HEADROOM) << libc::XSK_UNALIGNED_BUF_OFFSET_SHIFT);
    k.rx.put(&[rx_desc(encoded, 100), rx_desc(encoded, 100)]);
    let mut got = Vec::new();
    assert_eq!(q.recv(&mut got, 16), 1);
    assert_eq!(got[0].addr, chunk[0] + u64::from(UMEM_HEADROOM));
    assert_eq!(q.refused().not_lent, 1, "the position handed back twice");
    q.release(&mut got);
}
