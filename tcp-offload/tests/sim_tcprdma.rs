//! The TCP RDMA option between two of our connections over
//! the seeded simulated link (`netsim::Link`) under loss, reordering and duplication.
//!
//! The server sends a stream of RPC-like replies (header, transfer bytes, trailer) and marks the
//! transfer bytes and message starts; the client registers a buffer per RID and, once the data
//! is in, reads the stream as a ULP would: headers and trailers with `recv`, transfer bytes with
//! `recv_transfer`, which skips what was placed. Every packet the server sends (first
//! transmissions and retransmissions) is checked on the wire against the layout.

use std::time::Duration;

use tcp_offload::Timestamp;

use netsim::{Link, LinkConfig, SimTime};
use tcp_offload::rdma::{RdmaOption, Transfer};
use tcp_offload::{wire, Config, Connection, FourTuple, IsnGenerator, State};

const HEADER: usize = 28;
const TRAILER: usize = 4;

/// One reply: its transfer's RID and length, and the stream offset of its header.
#[derive(Clone, Copy, Debug)]
struct Reply {
    rid: u64,
    at: u64,
    len: u32,
}

impl Reply {
    fn data_at(&self) -> u64 {
        self.at + HEADER as u64
    }
}

/// The stream the server sends and the replies in it.
fn layout(seed: u64, n: usize) -> (Vec<u8>, Vec<Reply>) {
    let mut stream = Vec::new();
    let mut replies = Vec::new();
    let mut x = seed | 1;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = 1 + (x % 12_000) as u32;
        let r = Reply {
            rid: (1 << 32) | (0xC0DE_0000 + i as u64),
            at: stream.len() as u64,
            len,
        };
        stream.extend(testkit::pattern(HEADER, seed + i as u64 * 3));
        stream.extend(testkit::pattern(len as usize, seed + i as u64 * 3 + 1));
        stream.extend(testkit::pattern(TRAILER, seed + i as u64 * 3 + 2));
        replies.push(r);
    }
    (stream, replies)
}

fn tuple() -> FourTuple {
    FourTuple {
        local: "198.18.7.1:40000".parse().unwrap(),
        remote: "198.18.7.2:2049".parse().unwrap(),
    }
}

/// Checks one packet from the server against the layout: transfer bytes imply the option with
/// the right RID, offsets and total (TCPRDMA-11), never two runs (TCPRDMA-13), A exactly on
/// message starts (TCPRDMA-09). Returns true when it carried transfer bytes.
fn audit(packet: &[u8], isn: u32, replies: &[Reply]) -> bool {
    let s = wire::parse(packet).expect("our packets parse");
    if s.payload.is_empty() || s.flags.syn {
        return false;
    }
    let off = u64::from(s.seq.0.wrapping_sub(isn).wrapping_sub(1));
    let end = off + s.payload.len() as u64;
    let runs: Vec<&Reply> = replies
        .iter()
        .filter(|r| r.data_at() < end && r.data_at() + u64::from(r.len) > off)
        .collect();
    assert!(runs.len() <= 1, "segment [{off}, {end}) mixes runs");
    let starts_message = replies.iter().any(|r| r.at == off);
    assert_eq!(
        s.options.rdma.is_some_and(|o| o.aligned()),
        starts_message,
        "A bit at {off}"
    );
    let Some(r) = runs.first() else {
        assert!(!matches!(s.options.rdma, Some(RdmaOption::Transfer(_))));
        return false;
    };
    let Some(RdmaOption::Transfer(t)) = s.options.rdma else {
        panic!("segment [{off}, {end}) carries transfer bytes without the option");
    };
    let from = r.data_at().max(off);
    let to = (r.data_at() + u64::from(r.len)).min(end);
    assert_eq!(t.rid, r.rid);
    assert_eq!(u64::from(t.data_offset), from - off);
    assert_eq!(u64::from(t.data_len), to - from);
    assert_eq!(u64::from(t.buffer_offset), from - r.data_at());
    assert_eq!(t.total, Some(r.len));
    assert!(!t.unsolicited);
    true
}

struct Outcome {
    client: tcp_offload::TcpCounters,
    server: tcp_offload::TcpCounters,
    annotated_retransmits: u64,
    /// Every packet sent: when, by the server or not, its octets.
    packets: Vec<(SimTime, bool, Vec<u8>)>,
}

/// Runs one transfer over links built from `link` (both directions) with `seed`.
fn run(link: LinkConfig, seed: u64, replies_n: usize) -> Outcome {
    run_with(link, seed, replies_n, true)
}

/// [`run`] with the fast path on or off.
fn run_with(link: LinkConfig, seed: u64, replies_n: usize, fast_path: bool) -> Outcome {
    let (stream, replies) = layout(seed, replies_n);
    let cfg = Config {
        tcp_rdma: true,
        fast_path,
        ..Config::default()
    };
    let t0 = Timestamp::ZERO;
    let gen = IsnGenerator::new([seed as u8; 16], t0);
    let mut client =
        Connection::connect(cfg.clone(), tuple(), &gen, t0).expect("valid TCP settings");
    let mut server = Connection::listen(cfg, tuple().remote, &gen, t0).expect("valid TCP settings");
    let mut to_server = Link::new(link.clone(), seed * 2 + 1).unwrap();
    let mut to_client = Link::new(link, seed * 2 + 2).unwrap();
    let mut buf = vec![0u8; 2048];
    let mut now = SimTime::ZERO;
    let mut queued = 0usize;
    let mut marked = false;
    let mut registered = false;
    let mut server_isn = None;
    let mut seen = std::collections::HashSet::new();
    let mut annotated_retransmits = 0;
    let mut packets = Vec::new();
    let deadline = SimTime::from_secs(600);
    loop {
        let at = t0 + now.since_start();
        if client.state() == State::Established && !registered {
            assert!(client.rdma_enabled(), "negotiated on the client");
            for r in &replies {
                client
                    .expect_transfer(r.rid, vec![0u8; r.len as usize])
                    .unwrap();
            }
            registered = true;
        }
        if server.state() == State::Established && !marked {
            assert!(server.rdma_enabled(), "negotiated on the server");
            let base = server.send_position();
            for r in &replies {
                server.mark_message_start(base + r.at).unwrap();
                let t = Transfer {
                    rid: r.rid,
                    buffer_offset: 0,
                    total: Some(r.len),
                    unsolicited: false,
                };
                server.mark_transfer(base + r.data_at(), r.len, t).unwrap();
            }
            marked = true;
        }
        if marked && queued < stream.len() {
            queued += server.send(&stream[queued..]).unwrap();
        }
        if client.poll_timeout().is_some_and(|t| t <= at) {
            client.handle_timeout(at);
        }
        if server.poll_timeout().is_some_and(|t| t <= at) {
            server.handle_timeout(at);
        }
        while let Some(n) = client.poll_transmit(at, &mut buf) {
            packets.push((now, false, buf[..n].to_vec()));
            let _ = to_server.send(now, buf[..n].to_vec());
        }
        while let Some(n) = server.poll_transmit(at, &mut buf) {
            let p = &buf[..n];
            if server_isn.is_none() {
                server_isn = wire::parse(p).ok().filter(|s| s.flags.syn).map(|s| s.seq.0);
            }
            if let Some(isn) = server_isn {
                if audit(p, isn, &replies) {
                    let seq = wire::parse(p).unwrap().seq.0;
                    if !seen.insert(seq) {
                        annotated_retransmits += 1;
                    }
                }
            }
            packets.push((now, true, p.to_vec()));
            let _ = to_client.send(now, p.to_vec());
        }
        while let Some(p) = to_server.pop_arrived(now) {
            let _ = server.handle_packet(at, &p);
        }
        while let Some(p) = to_client.pop_arrived(now) {
            let _ = client.handle_packet(at, &p);
        }
        if queued == stream.len()
            && server.send_queued() == 0
            && client.recv_ready() == stream.len()
        {
            break;
        }
        assert!(now < deadline, "seed {seed}: no progress by {now:?}");
        // Next event: a link arrival, a timer, or 1 ms.
        let mut next = now + Duration::from_millis(1);
        for t in [to_server.next_arrival(), to_client.next_arrival()]
            .into_iter()
            .flatten()
        {
            next = next.min(t);
        }
        for t in [client.poll_timeout(), server.poll_timeout()]
            .into_iter()
            .flatten()
        {
            next = next.min(SimTime::from_nanos(t.nanos_since(t0)));
        }
        now = next.max(now + Duration::from_micros(1));
    }
    // The ULP reads the stream: headers and trailers copied, transfer bytes skipped when placed.
    let mut header = [0u8; HEADER + TRAILER];
    let mut rebuilt = Vec::with_capacity(stream.len());
    for r in &replies {
        assert_eq!(client.recv(&mut header[..HEADER]), HEADER);
        rebuilt.extend_from_slice(&header[..HEADER]);
        let mut done = 0;
        while done < r.len {
            done += client.recv_transfer(r.rid, done, r.len - done).unwrap();
        }
        let placed = client.take_transfer(r.rid).unwrap();
        assert!(!placed.failed, "seed {seed}: transfer {:#x} failed", r.rid);
        assert_eq!(placed.filled, vec![(0, r.len)]);
        rebuilt.extend_from_slice(&placed.buf);
        assert_eq!(client.recv(&mut header[..TRAILER]), TRAILER);
        rebuilt.extend_from_slice(&header[..TRAILER]);
    }
    assert_eq!(client.recv_ready(), 0);
    // Every byte where it belongs, and the TCP stream unchanged.
    assert!(rebuilt == stream, "seed {seed}: stream or buffers differ");
    Outcome {
        client: *client.counters(),
        server: *server.counters(),
        annotated_retransmits,
        packets,
    }
}

fn transfer_bytes(seed: u64, n: usize) -> u64 {
    layout(seed, n).1.iter().map(|r| u64::from(r.len)).sum()
}

/// Runs `seeds` seeds of a link and checks the counters common to every case.
fn case(name: &str, link: LinkConfig, seeds: u64) -> Vec<Outcome> {
    (1..=seeds)
        .map(|seed| {
            let o = run(link.clone(), seed, 40);
            let total = transfer_bytes(seed, 40);
            let c = &o.client;
            eprintln!(
                "{name} seed {seed}: placed {} (ooo {}), avoided {}, copied {}, retransmits {} ({} annotated), ignored {}",
                c.rdma_bytes_placed, c.rdma_ooo_bytes_placed, c.rdma_copies_avoided,
                c.rdma_bytes_copied, o.server.retransmits, o.annotated_retransmits,
                c.rdma_options_ignored
            );
            // Every transfer byte was either placed (and its copy avoided) or copied once.
            assert_eq!(c.rdma_copies_avoided + c.rdma_bytes_copied, total);
            assert_eq!(c.rdma_copies_avoided, c.rdma_bytes_placed);
            assert!(c.rdma_copies_avoided > 0);
            assert_eq!(c.rdma_unmatched, 0);
            assert_eq!(c.rdma_placement_failed, 0);
            o
        })
        .collect()
}

fn seeds() -> u64 {
    if cfg!(debug_assertions) {
        3
    } else {
        12
    }
}

/// A clean link: every transfer byte is placed (nothing copied).
#[test]
fn tcprdma_08_clean_link_places_every_transfer_byte() {
    for o in case("clean", LinkConfig::default(), 2) {
        assert_eq!(o.client.rdma_bytes_copied, 0);
        assert_eq!(o.client.rdma_ooo_bytes_placed, 0);
    }
}

/// Loss: retransmissions carry the right option (audited on the wire), out-of-order segments
/// behind a hole are placed before it fills.
#[test]
fn tcprdma_11_loss_retransmissions_are_annotated_and_ooo_placed() {
    let out = case("loss5", LinkConfig::default().with_loss(0.05), seeds());
    assert!(out.iter().map(|o| o.annotated_retransmits).sum::<u64>() > 0);
    assert!(
        out.iter()
            .map(|o| o.client.rdma_ooo_bytes_placed)
            .sum::<u64>()
            > 0
    );
}

/// Reordering: segments arriving ahead of a hole are placed at once (counter > 0).
#[test]
fn tcprdma_08_reordering_places_out_of_order_segments_before_the_hole_fills() {
    let link = LinkConfig::default()
        .with_reorder(0.2, Duration::from_millis(3))
        .with_jitter(Duration::from_micros(300));
    let out = case("reorder", link, seeds());
    assert!(out.iter().all(|o| o.client.rdma_ooo_bytes_placed > 0));
}

/// Duplication (with loss and reordering): duplicates are harmless, nothing placed twice.
#[test]
fn tcprdma_08_duplication_loss_and_reordering_together() {
    let link = LinkConfig::default()
        .with_duplicate(0.1)
        .with_loss(0.02)
        .with_reorder(0.1, Duration::from_millis(2));
    let out = case("dup+loss+reorder", link, seeds());
    assert!(out.iter().any(|o| o.client.duplicate_bytes > 0));
    assert!(
        out.iter()
            .map(|o| o.client.rdma_ooo_bytes_placed)
            .sum::<u64>()
            > 0
    );
}

/// The fast path is a shortcut to the full path's result with the option too (its runs placed
/// on the fast path, segments annotated from the header template): loss, reordering and
/// duplication, the same packets at the same times either way, and the fast path taken.
#[test]
fn tcprdma_fast_path_on_and_off_send_the_same_packets() {
    let link = LinkConfig::default()
        .with_delay(Duration::from_millis(2))
        .with_loss(0.02)
        .with_jitter(Duration::from_millis(1))
        .with_reorder(0.1, Duration::from_millis(4))
        .with_duplicate(0.02);
    for seed in 1..=2 {
        let fast = run_with(link.clone(), seed, 20, true);
        let full = run_with(link.clone(), seed, 20, false);
        assert_eq!(fast.packets.len(), full.packets.len(), "seed {seed}");
        if let Some(i) = fast
            .packets
            .iter()
            .zip(&full.packets)
            .position(|(f, s)| f != s)
        {
            panic!("seed {seed}: packet {i} differs");
        }
        assert!(fast.client.segs_in_fast > 0 && fast.server.segs_out_fast > 0);
        assert!(fast.client.rdma_bytes_placed > 0 && fast.server.rdma_segments_annotated > 0);
        assert_eq!(full.client.segs_in_fast + full.server.segs_out_fast, 0);
        assert_eq!(fast.client.rdma_bytes_placed, full.client.rdma_bytes_placed);
        assert_eq!(
            fast.server.rdma_segments_annotated,
            full.server.rdma_segments_annotated
        );
    }
}
