//! The TCP RDMA option on whole connections (lossless, back to back): negotiation of the TCP
//! RDMA option in SYN / SYN-ACK (TCPRDMA-14) and what SYN cookies do with it, the API refusing
//! annotations when it is off, the copy fallback for RIDs without a buffer, and a transfer
//! whose annotations overrun the buffer (TCPRDMA-31): the stream stays intact.

use tcp_offload::Timestamp;

use tcp_offload::rdma::{AnnotateError, PlacementError, RdmaOption, Transfer};
use tcp_offload::{
    wire, Config, Connection, FourTuple, IsnGenerator, LeanSegment, ListenerConfig, State,
    TcpListener,
};

fn tuple() -> FourTuple {
    FourTuple {
        local: "198.18.9.1:40001".parse().unwrap(),
        remote: "198.18.9.2:2049".parse().unwrap(),
    }
}

fn cfg(on: bool) -> Config {
    Config {
        tcp_rdma: on,
        ..Config::default()
    }
}

fn transfer(rid: u64, total: u32) -> Transfer {
    Transfer {
        rid,
        buffer_offset: 0,
        total: Some(total),
        unsolicited: false,
    }
}

/// Opens a pair back to back; returns the client, the server and the RDMA options of the SYN
/// and the SYN-ACK.
fn open(client_on: bool, server_on: bool) -> (Connection, Connection, [Option<RdmaOption>; 2]) {
    open_with(cfg(client_on), cfg(server_on))
}

/// [`open`] with whole configurations.
fn open_with(client: Config, server: Config) -> (Connection, Connection, [Option<RdmaOption>; 2]) {
    let t0 = Timestamp::ZERO;
    let gen = IsnGenerator::new([3; 16], t0);
    let mut c = Connection::connect(client, tuple(), &gen, t0).expect("valid TCP settings");
    let mut s = Connection::listen(server, tuple().remote, &gen, t0).expect("valid TCP settings");
    let mut buf = vec![0u8; 2048];
    let n = c.poll_transmit(t0, &mut buf).unwrap();
    let syn = wire::parse(&buf[..n]).unwrap().options.rdma;
    s.handle_packet(t0, &buf[..n]).unwrap();
    let n = s.poll_transmit(t0, &mut buf).unwrap();
    let synack = wire::parse(&buf[..n]).unwrap().options.rdma;
    c.handle_packet(t0, &buf[..n]).unwrap();
    netsim::exchange(&mut c, &mut s, t0, 10);
    assert_eq!(
        (c.state(), s.state()),
        (State::Established, State::Established)
    );
    (c, s, [syn, synack])
}

/// TCPRDMA-14: on only when both SYNs carried the length-2 form; off by default.
#[test]
fn tcprdma_14_negotiated_only_when_both_offer() {
    assert!(!Config::default().tcp_rdma, "off by default");
    let neg = Some(RdmaOption::Negotiate);
    let (c, s, opts) = open(true, true);
    assert_eq!(opts, [neg, neg]);
    assert!(c.rdma_enabled() && s.rdma_enabled());
    let (c, s, opts) = open(true, false);
    assert_eq!(opts, [neg, None], "a server without it does not echo it");
    assert!(!c.rdma_enabled() && !s.rdma_enabled());
    let (c, s, opts) = open(false, true);
    assert_eq!(
        opts,
        [None, None],
        "a SYN-ACK echoes only what the SYN offered"
    );
    assert!(!c.rdma_enabled() && !s.rdma_enabled());
    let (c, s, opts) = open(false, false);
    assert_eq!(opts, [None, None]);
    assert!(!c.rdma_enabled() && !s.rdma_enabled());
}

/// Without negotiation the API refuses annotations and registrations, and nothing carries the
/// option.
#[test]
fn tcprdma_14_not_negotiated_refuses_marks_and_sends_no_option() {
    let (mut c, mut s, _) = open(true, false);
    let t = Transfer {
        rid: 1,
        buffer_offset: 0,
        total: Some(10),
        unsolicited: false,
    };
    assert_eq!(c.mark_transfer(0, 10, t), Err(AnnotateError::NotNegotiated));
    assert_eq!(c.mark_message_start(0), Err(AnnotateError::NotNegotiated));
    assert_eq!(
        s.expect_transfer(1, vec![0; 10]),
        Err(PlacementError::NotNegotiated)
    );
    let now = Timestamp::ZERO;
    c.send(&[5; 3000]).unwrap();
    let mut buf = vec![0u8; 2048];
    let mut n_data = 0;
    while let Some(n) = c.poll_transmit(now, &mut buf) {
        let seg = wire::parse(&buf[..n]).unwrap();
        assert_eq!(seg.options.rdma, None);
        n_data += usize::from(!seg.payload.is_empty());
        s.handle_packet(now, &buf[..n]).unwrap();
    }
    assert!(n_data >= 2);
}

/// SYN cookies: the cookie SYN-ACK does not echo the option (the listener keeps no state to
/// remember the offer), so the connection rebuilt from the cookie and the client both have it
/// off, and data flows unannotated.
#[test]
fn tcprdma_14_syn_cookie_connections_have_the_option_off() {
    let t0 = Timestamp::ZERO;
    let gen = IsnGenerator::new([4; 16], t0);
    let lcfg = ListenerConfig {
        max_half_open: 0,
        ..ListenerConfig::default()
    };
    let mut l =
        TcpListener::new(cfg(true), lcfg, tuple().remote, gen.clone()).expect("valid TCP settings");
    let mut c = Connection::connect(cfg(true), tuple(), &gen, t0).expect("valid TCP settings");
    let mut buf = vec![0u8; 2048];
    let n = c.poll_transmit(t0, &mut buf).unwrap();
    assert_eq!(
        wire::parse(&buf[..n]).unwrap().options.rdma,
        Some(RdmaOption::Negotiate)
    );
    l.handle_packet(t0, &buf[..n]).unwrap();
    let n = l.poll_transmit(t0, &mut buf).unwrap();
    assert_eq!(l.counters().cookies_sent, 1);
    assert_eq!(wire::parse(&buf[..n]).unwrap().options.rdma, None);
    c.handle_packet(t0, &buf[..n]).unwrap();
    while let Some(n) = c.poll_transmit(t0, &mut buf) {
        l.handle_packet(t0, &buf[..n]).unwrap();
    }
    let s = l.accept().expect("cookie connection");
    assert_eq!(l.counters().cookies_accepted, 1);
    assert_eq!(c.state(), State::Established);
    assert!(!c.rdma_enabled() && !s.rdma_enabled());
}

/// Sends `data` from `s` to `c` back to back.
fn pump(s: &mut Connection, c: &mut Connection, data: &[u8]) {
    let now = Timestamp::ZERO;
    let mut queued = 0;
    for _ in 0..10_000 {
        if queued < data.len() {
            queued += s.send(&data[queued..]).unwrap();
        }
        netsim::exchange(s, c, now, 4);
        if queued == data.len() && s.send_queued() == 0 {
            return;
        }
    }
    panic!("no progress");
}

/// A RID without a registered buffer is not placed (counted); the ULP reads it with `recv`.
/// A registered one is placed. The stream is the same either way.
#[test]
fn tcprdma_32_unregistered_rid_falls_back_to_the_stream() {
    let (mut c, mut s, _) = open(true, true);
    let data = testkit::pattern(20_000, 11);
    let t = |rid, len| Transfer {
        rid,
        buffer_offset: 0,
        total: Some(len),
        unsolicited: false,
    };
    s.mark_transfer(0, 10_000, t(7, 10_000)).unwrap();
    s.mark_transfer(10_000, 10_000, t(8, 10_000)).unwrap();
    c.expect_transfer(8, vec![0; 10_000]).unwrap();
    pump(&mut s, &mut c, &data);
    assert!(c.counters().rdma_unmatched > 0);
    assert_eq!(c.counters().rdma_bytes_placed, 10_000);
    let mut first = vec![0u8; 10_000];
    assert_eq!(c.recv(&mut first), 10_000);
    assert_eq!(first, data[..10_000]);
    assert_eq!(c.recv_transfer(8, 0, 10_000), Ok(10_000));
    assert_eq!(c.counters().rdma_copies_avoided, 10_000);
    let t8 = c.take_transfer(8).unwrap();
    assert_eq!(t8.buf, data[10_000..]);
}

/// TCPRDMA-31: annotations that point past the registered buffer fail the transfer and write
/// nothing out of bounds; the ULP copies from the stream and gets the right bytes.
#[test]
fn tcprdma_31_annotation_past_the_buffer_fails_and_the_stream_wins() {
    let (mut c, mut s, _) = open(true, true);
    let data = testkit::pattern(6_000, 12);
    let hostile = Transfer {
        rid: 9,
        buffer_offset: 0xFFFF_0000,
        total: None,
        unsolicited: false,
    };
    s.mark_transfer(0, 6_000, hostile).unwrap();
    c.expect_transfer(9, vec![0; 4096 + 1904]).unwrap();
    pump(&mut s, &mut c, &data);
    assert!(c.counters().rdma_placement_failed > 0);
    assert_eq!(c.counters().rdma_bytes_placed, 0);
    assert_eq!(c.recv_transfer(9, 0, 6_000), Ok(6_000));
    assert_eq!(c.counters().rdma_bytes_copied, 6_000);
    let t = c.take_transfer(9).unwrap();
    assert!(t.failed);
    assert_eq!(t.buf, data);
    assert_eq!(
        c.recv_transfer(9, 0, 1),
        Err(PlacementError::Unknown),
        "taken"
    );
}

/// Sends `payload` to `c` as the peer `s` would, with `rdma` among the options.
fn inject(c: &mut Connection, rdma: Option<RdmaOption>, payload: &[u8]) {
    let now = Timestamp::ZERO;
    let repr = wire::SegmentRepr {
        tuple: FourTuple {
            local: c.tuple().remote,
            remote: c.tuple().local,
        },
        seq: c.rcv_nxt(),
        ack: Some(c.send_seq_of_offset(c.send_position())),
        flags: wire::Flags::default(),
        window: 1000,
        options: wire::TcpOptions {
            rdma,
            ..Default::default()
        },
    };
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr
        .emit(&mut buf, payload.len(), |p| p.copy_from_slice(payload))
        .unwrap();
    c.handle_packet(now, &buf[..n]).unwrap();
}

/// TCPRDMA-14: a length-2 option on a data segment causes no transfer; a connection that did
/// not negotiate the option never acts on kind 25 (it may mean something else), even with a
/// buffer-shaped annotation; the data arrives as plain stream bytes either way.
#[test]
fn tcprdma_14_negotiate_form_on_data_and_unnegotiated_kind25_are_ignored() {
    let run = tcp_offload::rdma::RdmaAnnotation {
        aligned: true,
        unsolicited: false,
        rid: 3,
        buffer_offset: 0,
        data_offset: 0,
        data_len: 8,
        total: Some(8),
    };
    let (mut c, _s, _) = open(true, true);
    c.expect_transfer(3, vec![0; 8]).unwrap();
    inject(&mut c, Some(RdmaOption::Negotiate), b"12345678");
    assert_eq!(c.counters().rdma_bytes_placed, 0);
    inject(&mut c, Some(RdmaOption::Transfer(run)), b"abcdefgh");
    assert_eq!(
        c.counters().rdma_bytes_placed,
        8,
        "the same run annotated is placed"
    );
    let mut got = [0u8; 16];
    assert_eq!(c.recv(&mut got), 16);
    assert_eq!(&got, b"12345678abcdefgh");

    let (mut c, _s, _) = open(false, true);
    inject(&mut c, Some(RdmaOption::Transfer(run)), b"abcdefgh");
    let k = c.counters();
    assert_eq!(
        (
            k.rdma_bytes_placed,
            k.rdma_unmatched,
            k.rdma_options_ignored
        ),
        (0, 0, 0)
    );
    assert_eq!(c.recv(&mut got), 8);
    assert_eq!(&got[..8], b"abcdefgh");
}

/// TCPRDMA-21: `mark_transfer` with length 0 (a failed READ reply) puts the option with data
/// length 0 and total 0 on the segment that starts there; the receiver places nothing and
/// reads the reply from the stream.
#[test]
fn tcprdma_21_zero_length_transfer_on_the_wire() {
    let (mut c, mut s, _) = open(true, true);
    let t = Transfer {
        rid: 0x42,
        buffer_offset: 0,
        total: Some(0),
        unsolicited: false,
    };
    let at = s.send_position();
    s.mark_message_start(at).unwrap();
    s.mark_transfer(at, 0, t).unwrap();
    let reply = [7u8; 40];
    assert_eq!(s.send(&reply).unwrap(), 40);
    let mut buf = vec![0u8; 2048];
    let n = s.poll_transmit(Timestamp::ZERO, &mut buf).unwrap();
    let seg = wire::parse(&buf[..n]).unwrap();
    assert_eq!(seg.payload.len(), 40);
    match seg.options.rdma {
        Some(RdmaOption::Transfer(a)) => {
            assert_eq!(
                (a.rid, a.data_offset, a.data_len, a.total, a.aligned),
                (0x42, 0, 0, Some(0), true)
            );
        }
        other => panic!("no zero-length transfer option: {other:?}"),
    }
    c.expect_transfer(0x42, vec![0; 100]).unwrap();
    c.handle_packet(Timestamp::ZERO, &buf[..n]).unwrap();
    let mut got = [0u8; 40];
    assert_eq!(c.recv(&mut got), 40);
    assert_eq!(got, reply);
    assert_eq!(c.counters().rdma_bytes_placed, 0);
    assert_eq!(c.take_transfer(0x42).unwrap().filled_len(), 0);
}

/// The fast path leaves placed octets out of the receive buffer; whichever way the ULP then
/// reads the stream it gets what the full path gives: `recv` across a placed run, the rest of
/// the run with `recv_transfer` (no copy), a transfer taken before its stream octets are read,
/// another RID's placed octets copied by `recv_transfer` into a buffer they were not placed in.
#[test]
fn placed_octets_read_the_same_with_the_fast_path_on_and_off() {
    let data = testkit::pattern(31_000, 14);
    let outcome = |fast_path: bool| {
        let on = Config {
            fast_path,
            ..cfg(true)
        };
        let (mut c, mut s, _) = open_with(on.clone(), on);
        // Stream: 100 header octets, then a 10,000-octet run of RIDs 1, 2 and 3 each.
        for rid in 1..=3u64 {
            let at = 100 + (rid - 1) * 10_100;
            s.mark_transfer(at, 10_000, transfer(rid, 10_000)).unwrap();
            c.expect_transfer(rid, vec![0; 10_000]).unwrap();
        }
        pump(&mut s, &mut c, &data);
        let mut reads = Vec::new();
        let mut read = |c: &mut Connection, n: usize| {
            let mut b = vec![0u8; n];
            assert_eq!(c.recv(&mut b), n);
            reads.push(b);
        };
        read(&mut c, 5_100);
        assert_eq!(c.recv_transfer(1, 5_000, 5_000), Ok(5_000));
        let t2 = c.take_transfer(2).unwrap();
        read(&mut c, 10_200);
        assert_eq!(c.recv_transfer(1, 0, 2_000), Ok(2_000));
        assert_eq!(c.recv_transfer(3, 2_000, 8_000), Ok(8_000));
        read(&mut c, 700);
        assert_eq!(c.recv_ready(), 0);
        let t1 = c.take_transfer(1).unwrap();
        let t3 = c.take_transfer(3).unwrap();
        let mut k = *c.counters();
        let fast = k.segs_in_fast;
        (k.segs_in_fast, k.segs_out_fast) = (0, 0);
        (reads, [t1, t2, t3], k, fast)
    };
    let (on, off) = (outcome(true), outcome(false));
    assert!(
        on.3 > 0 && off.3 == 0,
        "the fast path was taken only when on"
    );
    assert_eq!(on.0, off.0);
    assert_eq!(on.1, off.1);
    assert_eq!(on.2, off.2);
    let (reads, [t1, t2, t3], k, _) = on;
    assert_eq!(reads[0], data[..5_100]);
    assert_eq!(reads[1], data[10_100..20_300]);
    assert_eq!(reads[2], data[30_300..]);
    assert_eq!(t2.buf, data[10_200..20_200]);
    assert_eq!(t3.buf, data[20_300..30_300]);
    assert_eq!(
        t1.buf[..2_000],
        data[20_300..22_300],
        "copied over what was placed"
    );
    assert_eq!(t1.buf[5_000..], data[5_100..10_100]);
    assert!(t1.failed);
    assert_eq!(k.rdma_bytes_placed, 30_000);
}

/// After record mode is entered, the segments that continue the run placed last (the ones the
/// placement shortcut expected) arrive whole among the records, as the full path has them:
/// the same records and counters with the fast path on and off; the octets placed before come
/// back into the stream.
#[test]
fn record_mode_after_a_placed_run_gets_the_segments_whole() {
    let data = testkit::pattern(20_000, 15);
    let outcome = |fast_path: bool| {
        let on = Config {
            fast_path,
            ..cfg(true)
        };
        let (mut c, mut s, _) = open_with(on.clone(), on);
        s.mark_transfer(0, 20_000, transfer(4, 20_000)).unwrap();
        c.expect_transfer(4, vec![0; 20_000]).unwrap();
        pump(&mut s, &mut c, &data[..10_000]);
        assert_eq!(c.counters().rdma_bytes_placed, 10_000);
        c.enter_record_mode();
        // The records read as they come (none queued: the next segment may take the fast path).
        let mut got = Vec::new();
        let mut read = |c: &mut Connection| {
            while let Some(chunk) = c.poll_recv() {
                got.extend_from_slice(&chunk.data);
            }
        };
        read(&mut c);
        // Read in place as the endpoint reads them (the option's octets where they lie).
        let (now, mut buf) = (Timestamp::ZERO, vec![0u8; 2048]);
        let rest = &data[10_000..];
        let mut queued = 0;
        for _ in 0..10_000 {
            if queued < rest.len() {
                queued += s.send(&rest[queued..]).unwrap();
            }
            while let Some(n) = s.poll_transmit(now, &mut buf) {
                let lean = LeanSegment::parse(&buf[..n]);
                if !lean.is_some_and(|l| c.handle_lean(now, &l, None)) {
                    c.handle_packet(now, &buf[..n]).unwrap();
                }
                read(&mut c);
            }
            netsim::exchange(&mut c, &mut s, now, 1);
        }
        let mut k = *c.counters();
        (k.segs_in_fast, k.segs_out_fast) = (0, 0);
        (got, k)
    };
    let (on, off) = (outcome(true), outcome(false));
    assert!(on.0 == data, "the stream, whole, in the records");
    assert_eq!(on.1, off.1);
}
