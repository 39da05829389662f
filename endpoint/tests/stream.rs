//! Plain TCP byte streams through the endpoint: both directions under loss
//! and reordering, half-close, and the TCP RDMA option (marks on the sender, a buffer per RID
//! on the receiver, bytes placed out of order before the hole fills, copies avoided; kind 25
//! on every data segment of the transfer in tshark).

mod pair;
use std::cell::RefCell;
use std::net::SocketAddrV4;
use std::rc::Rc;
use std::time::Duration;

use endpoint::{ConnId, EndpointError, EndpointEvent, StreamOptions};
use pair::*;
use tcp_offload::rdma::{PlacementError, Transfer};
use tcp_offload::CloseReason;

fn lossy() -> LinkConfig {
    link()
        .with_loss(0.01)
        .with_reorder(0.25, Duration::from_micros(300))
}

fn opts(tcp_rdma: bool) -> StreamOptions {
    StreamOptions {
        tcp_rdma,
        ..StreamOptions::default()
    }
}

/// B listens in stream mode on `port`, A connects; returns (conn at A, conn at B).
fn establish_stream(
    p: &mut Pair,
    port: u16,
    a: StreamOptions,
    b: StreamOptions,
) -> (ConnId, ConnId) {
    let l = p.b.stream_listen(port, b).expect("listen");
    let ca =
        p.a.stream_connect(p.now, SocketAddrV4::new(IP_B, port), a)
            .expect("connect");
    p.run_until(100_000, |p| {
        p.events_a
            .iter()
            .any(|e| matches!(e, EndpointEvent::StreamConnected { conn } if *conn == ca))
            && p.events_b
                .iter()
                .any(|e| matches!(e, EndpointEvent::Accepted { listener, .. } if *listener == l))
    });
    let cb = p
        .events_b
        .iter()
        .find_map(|e| match e {
            EndpointEvent::Accepted { conn, listener, .. } if *listener == l => Some(*conn),
            _ => None,
        })
        .unwrap();
    (ca, cb)
}

/// What one side still has to send and what it received.
struct Side {
    out: Vec<u8>,
    sent: usize,
    got: Vec<u8>,
}

impl Side {
    fn new(out: Vec<u8>) -> Side {
        Side {
            out,
            sent: 0,
            got: Vec::new(),
        }
    }
}

/// Sends `a.out` from A and `b.out` from B at once, reading both ends, until each side has
/// received what the other sent.
fn exchange(p: &mut Pair, ca: ConnId, cb: ConnId, a: &mut Side, b: &mut Side) {
    let (want_a, want_b) = (b.out.len(), a.out.len());
    let mut buf = vec![0u8; 64 * 1024];
    p.run_until(50_000_000, |p| {
        for (ep, c, s) in [(&mut p.a, ca, &mut *a), (&mut p.b, cb, &mut *b)] {
            if s.sent < s.out.len() {
                s.sent += ep.stream_send(c, &s.out[s.sent..]).expect("send");
            }
            loop {
                let n = ep.stream_recv(c, &mut buf).expect("recv");
                if n == 0 {
                    break;
                }
                s.got.extend_from_slice(&buf[..n]);
            }
        }
        a.got.len() >= want_a && b.got.len() >= want_b
    });
    assert!(a.got == b.out, "A received other octets than B sent");
    assert!(b.got == a.out, "B received other octets than A sent");
}

#[test]
fn stream_both_directions_under_loss_and_reorder_then_half_close() {
    let mut p = Pair::new(lossy(), lossy(), 21);
    let (ca, cb) = establish_stream(&mut p, 5000, opts(false), opts(false));
    assert_eq!(p.a.stream_rdma_enabled(ca), Ok(false));
    let mut a = Side::new(pattern(3 << 20, 1));
    let mut b = Side::new(pattern(2 << 20, 2));
    exchange(&mut p, ca, cb, &mut a, &mut b);
    let (ka, kb) = (p.a.counters(), p.b.counters());
    assert!(
        ka.retransmissions + kb.retransmissions > 0,
        "the link lost nothing"
    );

    // Half-close: A shuts its sending half; B reads the end and can still send.
    p.a.stream_shutdown(ca).unwrap();
    assert_eq!(p.a.stream_send(ca, b"late"), Err(EndpointError::NotReady));
    p.run_until(1_000_000, |p| p.b.stream_eof(cb) == Ok(true));
    assert!(p
        .events_b
        .iter()
        .any(|e| matches!(e, EndpointEvent::PeerClosed { conn } if *conn == cb)));
    let reply = pattern(100_000, 3);
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 8192];
    p.run_until(1_000_000, |p| {
        if sent < reply.len() {
            sent += p.b.stream_send(cb, &reply[sent..]).unwrap();
        }
        let n = p.a.stream_recv(ca, &mut buf).unwrap();
        got.extend_from_slice(&buf[..n]);
        got.len() == reply.len()
    });
    assert!(got == reply);
    p.b.stream_shutdown(cb).unwrap();
    p.run_until(1_000_000, |p| {
        closed(&p.events_b, cb).is_some() && p.a.stream_eof(ca) == Ok(true)
    });
    assert_eq!(closed(&p.events_b, cb), Some(CloseReason::Normal));
}

#[test]
fn stream_calls_refused_on_iwarp_connections_and_abort_resets_the_peer() {
    let mut p = Pair::clean();
    let (ia, _ib) = p.establish(4000, settings(false, true), settings(false, true));
    let mut buf = [0u8; 4];
    assert_eq!(
        p.a.stream_recv(ia, &mut buf),
        Err(EndpointError::NotAStream)
    );
    assert_eq!(p.a.stream_send(ia, b"x"), Err(EndpointError::NotAStream));

    let (ca, cb) = establish_stream(&mut p, 5001, opts(false), opts(false));
    p.a.abort(ca).unwrap();
    p.run_until(10_000, |p| closed(&p.events_b, cb).is_some());
    assert_eq!(closed(&p.events_b, cb), Some(CloseReason::Reset));
    assert_eq!(
        p.b.stream_recv(cb, &mut buf),
        Err(EndpointError::NoConnection)
    );
}

const HEADER: usize = 100;

/// B sends a 100-octet header, then `len` octets marked as transfer `rid` (total known); A
/// reads the header plainly and the rest with `stream_recv_transfer`. Returns A's buffer.
fn annotated_reply(p: &mut Pair, ca: ConnId, cb: ConnId, rid: u64, data: &[u8]) -> Vec<u8> {
    let len = data.len() as u32;
    p.a.stream_expect_transfer(ca, rid, vec![0; data.len()])
        .expect("expect");
    let mut out = pattern(HEADER, rid);
    let at = p.b.stream_send_position(cb).unwrap();
    p.b.stream_mark_message_start(cb, at).unwrap();
    p.b.stream_mark_transfer(
        cb,
        at + HEADER as u64,
        len,
        Transfer {
            rid,
            buffer_offset: 0,
            total: Some(len),
            unsolicited: false,
        },
    )
    .unwrap();
    out.extend_from_slice(data);
    let mut sent = 0;
    let mut header = Vec::new();
    let mut read = 0u32;
    let mut hbuf = [0u8; HEADER];
    p.run_until(50_000_000, |p| {
        if sent < out.len() {
            sent += p.b.stream_send(cb, &out[sent..]).unwrap();
        }
        while header.len() < HEADER {
            let n =
                p.a.stream_recv(ca, &mut hbuf[..HEADER - header.len()])
                    .unwrap();
            if n == 0 {
                break;
            }
            header.extend_from_slice(&hbuf[..n]);
        }
        if header.len() == HEADER && read < len {
            read += p.a.stream_recv_transfer(ca, rid, read, len - read).unwrap();
        }
        read == len
    });
    assert!(header == out[..HEADER], "header differs");
    let t =
        p.a.stream_take_transfer(ca, rid)
            .unwrap()
            .expect("transfer");
    assert!(!t.failed);
    assert_eq!(t.filled, vec![(0, len)]);
    t.buf
}

#[test]
fn tcp_rdma_option_places_out_of_order_and_avoids_copies() {
    let mut p = Pair::new(lossy(), lossy(), 22);
    let (ca, cb) = establish_stream(&mut p, 5002, opts(true), opts(true));
    assert_eq!(p.a.stream_rdma_enabled(ca), Ok(true));
    assert_eq!(p.b.stream_rdma_enabled(cb), Ok(true));
    for (i, len) in [1usize, 70_000, 4 << 20].into_iter().enumerate() {
        let data = pattern(len, 10 + i as u64);
        let rid = (i as u64 + 1) << 32 | 0x1234;
        assert!(
            annotated_reply(&mut p, ca, cb, rid, &data) == data,
            "{len} B differ"
        );
    }
    // The stream goes on as plain octets in both directions after the transfers.
    let mut a = Side::new(pattern(300_000, 4));
    let mut b = Side::new(pattern(200_000, 5));
    exchange(&mut p, ca, cb, &mut a, &mut b);
    let (ka, kb) = (p.a.counters(), p.b.counters());
    println!("a={ka:?}\nb={kb:?}");
    assert!(kb.rdma_segments_annotated > 0, "{kb:?}");
    assert!(ka.rdma_bytes_placed > 0, "{ka:?}");
    assert!(
        ka.rdma_ooo_bytes_placed > 0,
        "nothing placed before its hole filled: {ka:?}"
    );
    assert!(ka.rdma_copies_avoided > 0, "{ka:?}");
    // Every transfer octet was either placed (copy skipped) or copied once.
    let total = (1 + 70_000 + (4 << 20)) as u64;
    assert_eq!(
        ka.rdma_copies_avoided + ka.rdma_bytes_copied,
        total,
        "{ka:?}"
    );
    assert!(kb.retransmissions > 0);
}

/// The counters an endpoint takes from its connections' TCP (and queue pairs).
fn per_connection_counts(c: &endpoint::EndpointCounters) -> [u64; 12] {
    [
        c.retransmissions,
        c.rto_expiries,
        c.window_probes,
        c.keepalive_timeouts,
        c.fin_wait2_timeouts,
        c.persist_timeouts,
        c.rdma_segments_annotated,
        c.rdma_bytes_placed,
        c.rdma_ooo_bytes_placed,
        c.rdma_copies_avoided,
        c.rdma_bytes_copied,
        c.rx_after_close,
    ]
}

/// Regression: what a connection's TCP counted (retransmissions, the TCP RDMA option's
/// counters, the timeouts) reaches the endpoint's counters exactly once: summed while the
/// connection lives, added once when it is removed, so its removal neither drops nor doubles
/// any of it.
#[test]
fn connection_counters_survive_its_removal_once() {
    let mut p = Pair::new(lossy(), lossy(), 24);
    let (ca, cb) = establish_stream(&mut p, 5004, opts(true), opts(true));
    // Opened on each side: the active end counts its stream as the passive end does.
    assert_eq!(p.a.counters().connections_opened, 1);
    assert_eq!(p.b.counters().connections_opened, 1);
    let data = pattern(300_000, 11);
    assert!(annotated_reply(&mut p, ca, cb, 0x77, &data) == data);
    let (ka, kb) = (p.a.counters(), p.b.counters());
    assert!(
        kb.retransmissions > 0 && kb.rdma_segments_annotated > 0,
        "{kb:?}"
    );
    assert!(ka.rdma_bytes_placed > 0, "{ka:?}");
    assert_eq!(
        kb.retransmissions,
        p.b.tcp(cb).unwrap().counters().retransmits,
        "B's only connection"
    );
    p.a.abort(ca).unwrap();
    p.b.abort(cb).unwrap();
    p.poll_a();
    p.poll_b();
    assert!(
        p.a.tcp(ca).is_none() && p.b.tcp(cb).is_none(),
        "both removed"
    );
    assert_eq!(p.a.connection_count() + p.b.connection_count(), 0);
    assert_eq!(
        per_connection_counts(&p.a.counters()),
        per_connection_counts(&ka)
    );
    assert_eq!(
        per_connection_counts(&p.b.counters()),
        per_connection_counts(&kb)
    );
}

#[test]
fn tcp_rdma_option_not_negotiated_when_one_side_does_not_offer_it() {
    for (a_offers, b_offers) in [(true, false), (false, true)] {
        let mut p = Pair::new(lossy(), lossy(), 23);
        let (ca, cb) = establish_stream(&mut p, 5003, opts(a_offers), opts(b_offers));
        assert_eq!(p.a.stream_rdma_enabled(ca), Ok(false));
        assert_eq!(p.b.stream_rdma_enabled(cb), Ok(false));
        assert_eq!(
            p.a.stream_expect_transfer(ca, 7, vec![0; 10]),
            Err(EndpointError::Placement(PlacementError::NotNegotiated))
        );
        let mut a = Side::new(pattern(500_000, 6));
        let mut b = Side::new(pattern(700_000, 7));
        exchange(&mut p, ca, cb, &mut a, &mut b);
        let (ka, kb) = (p.a.counters(), p.b.counters());
        assert_eq!(ka.rdma_segments_annotated + kb.rdma_segments_annotated, 0);
        assert_eq!(ka.rdma_bytes_placed + kb.rdma_bytes_placed, 0);
    }
}

/// The frames both wires carried (taps before the links: what each side sent, lost ones too).
fn record_frames(p: &mut Pair) -> Rc<RefCell<Vec<Vec<u8>>>> {
    let frames = Rc::new(RefCell::new(Vec::new()));
    for wire in [&mut p.ab, &mut p.ba] {
        let f = frames.clone();
        wire.tap = Some(Box::new(move |frame: &mut Vec<u8>| {
            f.borrow_mut().push(frame.clone());
            true
        }));
    }
    frames
}

/// Wireshark on the pair's frames, B's transfer sent over a lossy link: every data segment B
/// sent (retransmissions included) carries option kind 25, and tshark finds no error.
#[test]
fn tcp_rdma_option_on_every_data_segment_in_tshark() {
    let test = "tcp_rdma_option_on_every_data_segment_in_tshark";
    if !testkit::require_tool(test, "tshark") {
        return;
    }
    let mut p = Pair::new(link(), lossy(), 24);
    let frames = record_frames(&mut p);
    let (ca, cb) = establish_stream(&mut p, 5004, opts(true), opts(true));
    let data = pattern(1 << 20, 30);
    assert!(annotated_reply(&mut p, ca, cb, 5 << 32 | 9, &data) == data);
    assert!(p.b.counters().retransmissions > 0, "the link lost nothing");
    let path = testkit::unique_temp_path("stream-rdma.pcap");
    std::fs::write(&path, testkit::pcap_file(frames.borrow().iter())).unwrap();
    let ts = testkit::Tshark::read(&path);
    let data_from_b = format!("ip.src == {IP_B} && tcp.len > 0");
    let annotated = ts.count(&format!("{data_from_b} && tcp.option_kind == 25"));
    let plain = ts.count(&format!("{data_from_b} && !(tcp.option_kind == 25)"));
    let resent = ts.count(&format!(
        "{data_from_b} && tcp.analysis.retransmission && tcp.option_kind == 25"
    ));
    let errors = ts.count("_ws.expert.severity >= 8388608");
    println!("B's data segments: {annotated} with kind 25 ({resent} resent), {plain} without; {errors} errors");
    assert!(annotated >= (1 << 20) / 1460, "{annotated}");
    assert_eq!(
        plain,
        0,
        "data segments without the option in {}",
        path.display()
    );
    assert!(resent > 0, "no annotated retransmission");
    assert_eq!(errors, 0, "tshark reports errors in {}", path.display());
    // A's segments (the handshake's offer aside) carry none: A sends no transfer.
    let from_a = ts.count(&format!(
        "ip.src == {IP_A} && tcp.len > 0 && tcp.option_kind == 25"
    ));
    assert_eq!(from_a, 0);
    let _ = std::fs::remove_file(&path);
}

/// B shuts its sending half before reading what A sent (A's FIN included): TCP ends in order
/// (LAST-ACK acknowledged) while octets are unread; they stay readable, then the end of
/// stream, then the connection is gone.
#[test]
fn octets_unread_when_tcp_ends_stay_readable() {
    let mut p = Pair::clean();
    let (ca, cb) = establish_stream(&mut p, 5005, opts(false), opts(false));
    let data = pattern(20_000, 40);
    assert_eq!(p.a.stream_send(ca, &data), Ok(data.len()));
    p.a.stream_shutdown(ca).unwrap();
    p.run_until(10_000, |p| p.b.stream_recv_ready(cb) == Ok(data.len()));
    p.run_until(10_000, |p| {
        p.events_b
            .iter()
            .any(|e| matches!(e, EndpointEvent::PeerClosed { conn } if *conn == cb))
    });
    p.b.stream_shutdown(cb).unwrap();
    p.run_until(10_000, |p| {
        p.b.tcp_state(cb) == Some(tcp_offload::State::Closed)
    });
    assert_eq!(closed(&p.events_b, cb), None, "closed with octets unread");
    for _ in 0..10 {
        p.step();
    }
    let mut got = vec![0u8; 2 * data.len()];
    let n = p.b.stream_recv(cb, &mut got).unwrap();
    assert!(got[..n] == data[..]);
    assert_eq!(p.b.stream_eof(cb), Ok(true));
    p.run_until(10, |p| closed(&p.events_b, cb).is_some());
    assert_eq!(closed(&p.events_b, cb), Some(CloseReason::Normal));
    assert_eq!(
        p.b.stream_recv(cb, &mut got),
        Err(EndpointError::NoConnection)
    );
}

#[test]
fn stream_flushed_once_the_peer_acknowledged_the_octets_and_then_the_fin() {
    let mut p = Pair::new(lossy(), lossy(), 23);
    let (ca, cb) = establish_stream(&mut p, 5003, opts(false), opts(false));
    assert_eq!(p.a.stream_flushed(ca), Ok(true), "nothing written yet");
    let data = pattern(256 << 10, 4);
    assert_eq!(p.a.stream_send(ca, &data), Ok(data.len()));
    assert_eq!(
        p.a.stream_flushed(ca),
        Ok(false),
        "queued, not acknowledged"
    );
    p.run_until(5_000_000, |p| p.a.stream_flushed(ca) == Ok(true));
    // Acknowledged means held by B's TCP: all of it is ready to read there.
    assert_eq!(p.b.stream_recv_ready(cb), Ok(data.len()));

    p.a.stream_shutdown(ca).unwrap();
    assert_eq!(
        p.a.stream_flushed(ca),
        Ok(false),
        "the FIN is not acknowledged yet"
    );
    p.run_until(1_000_000, |p| p.a.stream_flushed(ca) == Ok(true));
    let mut got = vec![0u8; data.len()];
    let mut n = 0;
    while n < got.len() {
        n += p.b.stream_recv(cb, &mut got[n..]).unwrap();
    }
    assert!(got == data);
    assert_eq!(p.b.stream_eof(cb), Ok(true), "B has the FIN");
}
