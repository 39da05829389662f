//! One test per RFC 9293 state transition (figure 5 of §3.3.2 and the rules of §3.10), the RFC
//! section named on each.

mod harness;

use std::time::Duration;

use harness::script::{flags, Script};
use tcp_offload::wire::TcpOptions;
use tcp_offload::{CloseReason, Config, Event, State};

fn cfg() -> Config {
    Config {
        timestamps: false,
        sack: false,
        window_scale: None,
        recv_buffer: 65535,
        delayed_ack: None,
        ..Config::default()
    }
}

fn no_opts() -> TcpOptions {
    TcpOptions::default()
}

#[test]
fn rfc9293_s3_10_1_closed_to_syn_sent_on_active_open() {
    let mut s = Script::active(cfg());
    assert_eq!(s.c.state(), State::SynSent);
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].flags, flags("S"));
    assert_eq!(out[0].options.mss, Some(1460));
}

#[test]
fn rfc9293_s3_10_7_3_syn_sent_to_established_on_syn_ack() {
    let mut s = Script::establish_active(cfg(), no_opts());
    assert_eq!(s.c.poll_event(), Some(Event::Connected));
    assert_eq!(s.c.rcv_nxt().0, 7_000_001);
}

#[test]
fn rfc9293_s3_10_7_3_syn_sent_to_syn_received_on_bare_syn_simultaneous_open() {
    let mut s = Script::active(cfg());
    let syn = s.drain().remove(0);
    s.inject_raw(500, None, "S", no_opts(), b"");
    assert_eq!(s.c.state(), State::SynReceived);
    let out = s.drain();
    // RFC 9293 §3.5 figure 7: our SYN again, now with ACK of theirs, same ISS.
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.syn && out[0].ack == Some(501));
    assert_eq!(out[0].seq, syn.seq);
    // Their SYN-ACK completes the open.
    s.inject_raw(500, Some(syn.seq + 1), "SA", no_opts(), b"");
    assert_eq!(s.c.state(), State::Established);
}

#[test]
fn rfc9293_s3_10_7_3_syn_sent_rst_with_acceptable_ack_closes_refused() {
    let mut s = Script::active(cfg());
    let syn = s.drain().remove(0);
    s.inject_raw(0, Some(syn.seq + 1), "RA", no_opts(), b"");
    assert_eq!(s.c.state(), State::Closed);
    assert_eq!(s.c.poll_event(), Some(Event::Closed(CloseReason::Refused)));
}

#[test]
fn rfc9293_s3_10_7_3_syn_sent_rst_without_ack_is_ignored() {
    let mut s = Script::active(cfg());
    s.drain();
    s.inject_raw(0, None, "R", no_opts(), b"");
    assert_eq!(s.c.state(), State::SynSent);
}

#[test]
fn rfc9293_s3_10_7_3_syn_sent_unacceptable_ack_gets_rst() {
    let mut s = Script::active(cfg());
    let syn = s.drain().remove(0);
    s.inject_raw(9, Some(syn.seq.wrapping_add(100)), "SA", no_opts(), b"");
    assert_eq!(s.c.state(), State::SynSent);
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.rst);
    assert_eq!(out[0].seq, syn.seq.wrapping_add(100));
}

#[test]
fn rfc9293_s3_8_3_syn_sent_retransmits_then_times_out() {
    let mut s = Script::active(Config {
        syn_retries: 2,
        ..cfg()
    });
    let first = s.drain().remove(0);
    let mut syns = 1;
    for _ in 0..20 {
        s.advance(Duration::from_secs(70));
        syns += s.drain().iter().filter(|o| o.flags.syn).count();
        if s.c.state() == State::Closed {
            break;
        }
    }
    assert_eq!(syns, 3, "one SYN and two retransmissions");
    assert_eq!(s.c.state(), State::Closed);
    assert_eq!(s.c.poll_event(), Some(Event::Closed(CloseReason::TimedOut)));
    assert!(first.flags.syn);
}

#[test]
fn rfc9293_s3_10_7_2_listen_to_syn_received_on_syn() {
    let mut s = Script::passive(cfg());
    assert_eq!(s.c.state(), State::Listen);
    s.inject_raw(
        100,
        None,
        "S",
        TcpOptions {
            mss: Some(1000),
            ..no_opts()
        },
        b"",
    );
    assert_eq!(s.c.state(), State::SynReceived);
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.syn && out[0].ack == Some(101));
    assert_eq!(s.c.emss(), 1000);
}

/// The EMSS follows the negotiated timestamp option (MPA §3.1.1: 12 octets less with it) and
/// the peer's MSS.
#[test]
fn mpa_s3_1_1_emss_follows_the_peers_mss_and_timestamps() {
    for (ts, mss, emss) in [(false, 1000, 1000), (true, 1000, 988), (true, 9000, 1448)] {
        let mut s = Script::passive(Config {
            timestamps: true,
            mtu: 1500,
            ..cfg()
        });
        s.inject_raw(
            100,
            None,
            "S",
            TcpOptions {
                mss: Some(mss),
                timestamps: ts.then_some((7, 0)),
                ..no_opts()
            },
            b"",
        );
        assert_eq!(s.c.state(), State::SynReceived);
        assert_eq!(s.c.emss(), emss, "timestamps {ts}, MSS {mss}");
    }
}

#[test]
fn rfc9293_s3_10_7_2_listen_answers_ack_with_rst_and_ignores_rst() {
    let mut s = Script::passive(cfg());
    s.inject_raw(100, Some(555), "A", no_opts(), b"");
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.rst && out[0].seq == 555);
    s.inject_raw(100, None, "R", no_opts(), b"");
    assert!(s.drain().is_empty());
    assert_eq!(s.c.state(), State::Listen);
}

fn passive_syn_received() -> (Script, u32) {
    let mut s = Script::passive(cfg());
    s.inject_raw(100, None, "S", no_opts(), b"");
    let synack = s.drain().remove(0);
    s.p_nxt = 101;
    (s, synack.seq)
}

#[test]
fn rfc9293_s3_10_7_4_syn_received_to_established_on_ack() {
    let (mut s, iss) = passive_syn_received();
    s.inject_raw(101, Some(iss + 1), "A", no_opts(), b"hi");
    assert_eq!(s.c.state(), State::Established);
    let mut b = [0u8; 4];
    assert_eq!(s.c.recv(&mut b), 2);
}

#[test]
fn rfc9293_s3_10_7_4_syn_received_unacceptable_ack_gets_rst() {
    let (mut s, iss) = passive_syn_received();
    s.inject_raw(101, Some(iss + 50), "A", no_opts(), b"");
    assert_eq!(s.c.state(), State::SynReceived);
    let out = s.drain();
    assert!(out[0].flags.rst && out[0].seq == iss + 50);
}

#[test]
fn rfc9293_s3_10_7_4_syn_received_rst_returns_to_listen_when_passive() {
    let (mut s, _) = passive_syn_received();
    s.inject_raw(101, None, "R", no_opts(), b"");
    assert_eq!(s.c.state(), State::Listen);
}

#[test]
fn rfc9293_s3_10_7_4_syn_received_duplicate_syn_resends_syn_ack() {
    let (mut s, iss) = passive_syn_received();
    s.inject_raw(100, None, "S", no_opts(), b"");
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.syn && out[0].seq == iss);
}

#[test]
fn rfc9293_s3_10_7_4_established_to_close_wait_on_fin() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.inject("FA", b"bye", false);
    assert_eq!(s.c.state(), State::CloseWait);
    let out = s.drain();
    assert_eq!(out.last().unwrap().ack, Some(7_000_005));
    let ev: Vec<_> = std::iter::from_fn(|| s.c.poll_event()).collect();
    assert!(ev.contains(&Event::PeerClosed));
}

#[test]
fn rfc9293_s3_10_4_established_to_fin_wait_1_on_close_and_fin_wait_2_on_ack() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.c.close(s.now);
    assert_eq!(s.c.state(), State::FinWait1);
    let out = s.drain();
    assert!(out[0].flags.fin);
    s.inject("A", b"", false);
    assert_eq!(s.c.state(), State::FinWait2);
}

#[test]
fn rfc9293_s3_10_7_4_fin_wait_2_to_time_wait_on_fin_then_closed_after_2msl() {
    let mut s = Script::establish_active(
        Config {
            time_wait: Duration::from_secs(3),
            ..cfg()
        },
        no_opts(),
    );
    s.c.close(s.now);
    s.drain();
    s.inject("A", b"", false);
    s.inject("FA", b"", false);
    assert_eq!(s.c.state(), State::TimeWait);
    assert!(s.drain().iter().any(|o| o.is_pure_ack()));
    s.advance(Duration::from_secs(2));
    assert_eq!(s.c.state(), State::TimeWait);
    s.advance(Duration::from_millis(1001));
    assert_eq!(s.c.state(), State::Closed);
}

#[test]
fn rfc9293_s3_10_7_4_time_wait_retransmitted_fin_is_acked_and_restarts_2msl() {
    let mut s = Script::establish_active(
        Config {
            time_wait: Duration::from_secs(3),
            ..cfg()
        },
        no_opts(),
    );
    s.c.close(s.now);
    s.drain();
    s.inject("A", b"", false);
    s.inject("FA", b"", false);
    s.drain();
    s.advance(Duration::from_secs(2));
    // The peer did not get our ACK: its FIN again.
    s.p_nxt -= 1;
    s.inject("FA", b"", false);
    assert!(s.drain().iter().any(|o| o.is_pure_ack()));
    s.advance(Duration::from_secs(2));
    assert_eq!(s.c.state(), State::TimeWait, "2 MSL restarted");
    s.advance(Duration::from_secs(2));
    assert_eq!(s.c.state(), State::Closed);
}

#[test]
fn rfc9293_s3_6_fin_wait_1_to_closing_on_fin_then_time_wait_on_ack() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.c.close(s.now);
    let fin = s.drain().remove(0);
    // Peer's FIN crosses ours: it does not ack our FIN yet.
    s.inject_raw(s.p_nxt, Some(fin.seq), "FA", no_opts(), b"");
    s.p_nxt += 1;
    assert_eq!(s.c.state(), State::Closing);
    s.inject_raw(s.p_nxt, Some(fin.seq + 1), "A", no_opts(), b"");
    assert_eq!(s.c.state(), State::TimeWait);
}

#[test]
fn rfc9293_s3_10_7_4_fin_wait_1_fin_with_ack_of_our_fin_goes_to_time_wait() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.c.close(s.now);
    s.drain();
    s.inject("FA", b"", false);
    assert_eq!(s.c.state(), State::TimeWait);
}

#[test]
fn rfc9293_s3_10_4_close_wait_to_last_ack_then_closed_on_ack() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.inject("FA", b"", false);
    assert_eq!(s.c.state(), State::CloseWait);
    s.c.close(s.now);
    assert_eq!(s.c.state(), State::LastAck);
    let out = s.drain();
    assert!(out.iter().any(|o| o.flags.fin));
    s.inject("A", b"", false);
    assert_eq!(s.c.state(), State::Closed);
    let ev: Vec<_> = std::iter::from_fn(|| s.c.poll_event()).collect();
    assert!(ev.contains(&Event::Closed(CloseReason::Normal)));
}

#[test]
fn rfc9293_s3_10_7_4_in_sequence_rst_resets_established() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.inject_raw(s.p_nxt, None, "R", no_opts(), b"");
    assert_eq!(s.c.state(), State::Closed);
    let ev: Vec<_> = std::iter::from_fn(|| s.c.poll_event()).collect();
    assert!(ev.contains(&Event::Closed(CloseReason::Reset)));
}

#[test]
fn rfc9293_s3_10_5_abort_sends_rst_and_closes() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.c.abort();
    assert_eq!(s.c.state(), State::Closed);
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.rst);
}

#[test]
fn rfc9293_s3_10_7_1_closed_answers_with_rst() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.c.abort();
    s.drain();
    // Segment without ACK: RST with ACK = SEQ + LEN.
    s.inject_raw(42, None, "", no_opts(), b"abc");
    let out = s.drain();
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.rst && out[0].ack == Some(45) && out[0].seq == 0);
    // Segment with ACK: RST with SEQ = SEG.ACK.
    s.inject_raw(42, Some(99), "A", no_opts(), b"");
    let out = s.drain();
    assert!(out[0].flags.rst && out[0].seq == 99 && out[0].ack.is_none());
}

#[test]
fn rfc9293_s3_10_3_data_in_close_wait_direction_still_sends() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.inject("FA", b"", false);
    assert_eq!(s.c.send(b"late data").unwrap(), 9);
    let out = s.drain();
    assert!(out.iter().any(|o| o.payload == b"late data"));
}

#[test]
fn rfc9293_s3_10_7_4_data_after_fin_wait_2_is_accepted() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.c.close(s.now);
    s.drain();
    s.inject("A", b"", false);
    assert_eq!(s.c.state(), State::FinWait2);
    s.inject("A", b"more", false);
    let mut b = [0u8; 8];
    assert_eq!(s.c.recv(&mut b), 4);
}

#[test]
fn rfc9293_s3_10_7_4_out_of_order_fin_waits_for_the_gap() {
    let mut s = Script::establish_active(cfg(), no_opts());
    let base = s.p_nxt;
    let ack = s.c_snd_nxt();
    s.inject_raw(base + 3, Some(ack), "FA", no_opts(), b"def");
    assert_eq!(s.c.state(), State::Established);
    s.inject_raw(base, Some(ack), "A", no_opts(), b"abc");
    assert_eq!(s.c.state(), State::CloseWait);
    assert_eq!(s.c.rcv_nxt().0, base + 7);
}

#[test]
fn rfc9293_s3_10_7_1_after_last_ack_old_duplicates_are_dropped_and_new_segments_reset() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.inject("FA", b"", false);
    s.c.close(s.now);
    s.drain();
    s.inject("A", b"", false);
    assert_eq!(s.c.state(), State::Closed);
    // The peer's FIN again (reordered or spuriously retransmitted): already acknowledged, dropped.
    s.p_nxt -= 1;
    s.inject("FA", b"", false);
    assert!(
        s.drain().is_empty(),
        "no RST for an old duplicate after an orderly close"
    );
    // Something new: RST.
    s.inject("A", b"new", false);
    let out = s.drain();
    assert!(out.len() == 1 && out[0].flags.rst);
}

/// Regression (sim_matrix ours->smoltcp on `reorder`, seed 7 before 91f008b): the peer's
/// pure ACK sent before its FIN, held back by the link, arrives after our LAST-ACK closed. It is an
/// old duplicate of a stream we still know, so it is dropped: answering it with RST (as a port
/// without connection would, RFC 9293 §3.10.7.1) put RSTs on the wire after every orderly close
/// that met reordering. A segment with new data still gets the RST.
#[test]
fn rfc9293_s3_10_7_1_after_last_ack_a_late_ack_from_before_the_peers_fin_gets_no_rst() {
    let mut s = Script::establish_active(cfg(), no_opts());
    s.c.send(b"hello").unwrap();
    s.drain();
    let before_data = s.c.snd_una().0;
    let peer_fin = s.p_nxt;
    s.inject("A", b"", false); // acknowledges the data
    s.inject("FA", b"", false);
    s.c.close(s.now);
    s.drain();
    s.inject("A", b"", false);
    assert_eq!(s.c.state(), State::Closed);
    // The late copies: an ACK of nothing new, and one from before the data was acknowledged.
    for ack in [s.c_snd_nxt().wrapping_sub(1), before_data] {
        s.inject_raw(peer_fin, Some(ack), "A", TcpOptions::default(), b"");
        assert!(
            s.drain().is_empty(),
            "no RST for a late duplicate ACK (ack {ack}) after an orderly close"
        );
    }
    s.inject_raw(
        peer_fin + 1,
        Some(s.c_snd_nxt()),
        "A",
        TcpOptions::default(),
        b"new",
    );
    let out = s.drain();
    assert!(
        out.len() == 1 && out[0].flags.rst,
        "new data after close: RST"
    );
}

#[test]
fn rfc9293_s3_10_4_close_in_syn_sent_deletes_the_connection() {
    let mut s = Script::active(cfg());
    s.drain();
    s.c.close(s.now);
    assert_eq!(s.c.state(), State::Closed);
    assert!(s.drain().is_empty());
}

#[test]
fn rfc9293_s3_10_4_close_in_syn_received_sends_fin_once_established() {
    let (mut s, iss) = passive_syn_received();
    s.c.close(s.now);
    assert_eq!(
        s.c.state(),
        State::SynReceived,
        "the FIN waits for ESTABLISHED"
    );
    assert!(s.drain().iter().all(|o| !o.flags.fin));
    s.inject_raw(101, Some(iss + 1), "A", no_opts(), b"");
    assert_eq!(s.c.state(), State::FinWait1);
    let out = s.drain();
    assert!(out.iter().any(|o| o.flags.fin && o.seq == iss + 1));
}

#[test]
fn rfc9293_s3_10_7_4_fin_in_syn_received_goes_to_close_wait() {
    let (mut s, iss) = passive_syn_received();
    s.inject_raw(101, Some(iss + 1), "FA", no_opts(), b"");
    assert_eq!(s.c.state(), State::CloseWait);
}

#[test]
fn rfc9293_s3_5_simultaneous_open_between_two_active_connections() {
    use harness::{gen, tuple_a, tuple_b};
    use tcp_offload::Connection;
    let t0 = tcp_offload::Timestamp::ZERO;
    let g = gen(t0);
    let mut a = Connection::connect(cfg(), tuple_a(), &g, t0).expect("valid TCP settings");
    let mut b = Connection::connect(cfg(), tuple_b(), &g, t0).expect("valid TCP settings");
    let mut buf = vec![0u8; 2000];
    // Both SYNs cross.
    let na = a.poll_transmit(t0, &mut buf).unwrap();
    let syn_a = buf[..na].to_vec();
    let nb = b.poll_transmit(t0, &mut buf).unwrap();
    let syn_b = buf[..nb].to_vec();
    a.handle_packet(t0, &syn_b).unwrap();
    b.handle_packet(t0, &syn_a).unwrap();
    assert_eq!(
        (a.state(), b.state()),
        (State::SynReceived, State::SynReceived)
    );
    netsim::exchange(&mut a, &mut b, t0, 4);
    assert_eq!(
        (a.state(), b.state()),
        (State::Established, State::Established)
    );
}
