//! SACK-based loss recovery (RFC 6675): NextSeg rules (3) and (4) (the rescue retransmission),
//! driven by a scripted peer that drops chosen segments and reports the rest in SACK blocks.

mod harness;

use std::time::Duration;

use harness::script::{Out, Script};
use tcp_offload::wire::TcpOptions;
use tcp_offload::{Config, SeqNum};

const MSS: usize = 1000;
const RTT: Duration = Duration::from_millis(10);

/// Established with SACK (no timestamps, no delayed ACKs), MSS 1000; `n` full segments sent.
fn flight(n: usize) -> (Script, Vec<Out>) {
    let cfg = Config {
        delayed_ack: None,
        timestamps: false,
        ..Config::default()
    };
    let opts = TcpOptions {
        sack_permitted: true,
        mss: Some(MSS as u16),
        window_scale: Some(0),
        ..TcpOptions::default()
    };
    let mut s = Script::establish_active(cfg, opts);
    assert!(s.c.sack_enabled());
    let out = send_flight(&mut s, n);
    (s, out)
}

/// Queues `n` segments' worth of data and returns the data segments sent for it.
fn send_flight(s: &mut Script, n: usize) -> Vec<Out> {
    s.c.send(&vec![7u8; n * MSS]).unwrap();
    let out = data(s.drain());
    assert_eq!(out.len(), n, "the whole flight fits the initial window");
    assert!(out.iter().all(|o| o.payload.len() == MSS));
    out
}

fn data(v: Vec<Out>) -> Vec<Out> {
    v.into_iter().filter(|o| !o.payload.is_empty()).collect()
}

fn end(o: &Out) -> u32 {
    o.seq.wrapping_add(o.payload.len() as u32)
}

/// A duplicate (or partial) ACK for `ack` from the peer with the given SACK blocks.
fn ack_with_sack(s: &mut Script, ack: u32, blocks: &[(u32, u32)]) -> Vec<Out> {
    let mut o = TcpOptions::default();
    for (k, &(l, r)) in blocks.iter().enumerate() {
        o.sack[k] = (SeqNum(l), SeqNum(r));
    }
    o.sack_count = blocks.len() as u8;
    s.inject_raw(s.p_nxt, Some(ack), "A", o, b"");
    data(s.drain())
}

/// The peer receives `out[k]` for each `k` in `got` (in order), answering each with a duplicate
/// ACK for `out[0]` whose SACK blocks cover what it holds. Returns everything resent meanwhile.
fn dupacks_for(s: &mut Script, out: &[Out], got: &[usize]) -> Vec<Out> {
    let mut have: Vec<usize> = Vec::new();
    let mut resent = Vec::new();
    for &k in got {
        have.push(k);
        have.sort_unstable();
        // Contiguous runs of held segments, newest block first (RFC 2018 §4).
        let mut blocks: Vec<(u32, u32)> = Vec::new();
        for &h in &have {
            match blocks.last_mut() {
                Some(b) if b.1 == out[h].seq => b.1 = end(&out[h]),
                _ => blocks.push((out[h].seq, end(&out[h]))),
            }
        }
        if let Some(i) = blocks
            .iter()
            .position(|b| b.0 <= out[k].seq && out[k].seq < b.1)
        {
            blocks.swap(0, i);
        }
        blocks.truncate(3);
        resent.extend(ack_with_sack(s, out[0].seq, &blocks));
    }
    resent
}

#[test]
fn rfc6675_s4_nextseg_rule4_rescue_recovers_tail_loss_before_the_rto() {
    // Segments 0 and 7 (the last of the flight) are lost; 1..=6 arrive and are SACKed. Nothing new
    // is queued, so the tail is only resent at once by the rescue retransmission.
    let (mut s, out) = flight(8);
    let sent_at = s.now;
    let rto = s.c.rto();
    s.advance(RTT);
    let resent = dupacks_for(&mut s, &out, &[1, 2, 3, 4, 5, 6]);
    assert!(s.c.in_recovery());
    let seqs: Vec<u32> = resent.iter().map(|o| o.seq).collect();
    assert_eq!(
        seqs,
        vec![out[0].seq, out[7].seq],
        "rule 1 resends the hole, rule 4 the tail, once each"
    );
    assert!(
        resent.iter().all(|o| o.payload.len() == MSS),
        "original boundaries"
    );
    let c = *s.c.counters();
    assert_eq!(
        (c.retransmits, c.fast_retransmits, c.rescue_retransmits),
        (2, 2, 1)
    );
    assert_eq!(c.sack_rule3_retransmits, 0);
    // Both retransmissions arrive: one round trip later everything is acknowledged.
    s.advance(RTT);
    let more = ack_with_sack(&mut s, end(&out[7]), &[]);
    assert!(more.is_empty(), "nothing left to send: {more:?}");
    assert!(
        !s.c.in_recovery(),
        "full ACK ends the episode (RFC 6675 §5)"
    );
    assert_eq!(s.c.bytes_in_flight(), 0);
    assert_eq!(s.c.counters().rto_expiries, 0);
    assert!(
        s.now - sent_at < rto,
        "recovered after {:?}, before the RTO of {rto:?} would have fired",
        s.now - sent_at
    );
    assert_eq!(s.c.poll_timeout(), None, "no retransmission timer left");
}

#[test]
fn rfc6675_s4_nextseg_rule3_resends_an_unsacked_segment_not_yet_lost() {
    // Segment 0 is lost, segment 4 is late (not lost), 1..=3 and 5 are SACKed. After rule 1
    // resends segment 0 there is no lost segment and no new data: rule 3 resends segment 4
    // (below the highest SACKed octet, above HighRxt, but not IsLost: one SACKed segment above).
    let (mut s, out) = flight(6);
    s.advance(RTT);
    let mut resent = dupacks_for(&mut s, &out, &[1, 2]);
    assert!(resent.is_empty() && !s.c.in_recovery());
    resent.extend(ack_with_sack(
        &mut s,
        out[0].seq,
        &[(out[5].seq, end(&out[5])), (out[1].seq, end(&out[3]))],
    ));
    assert!(s.c.in_recovery());
    let seqs: Vec<u32> = resent.iter().map(|o| o.seq).collect();
    assert_eq!(
        seqs,
        vec![out[0].seq, out[4].seq],
        "rule 1 then rule 3; no rescue: segment 4 is the highest unSACKed one and already resent"
    );
    let c = *s.c.counters();
    assert_eq!(
        (
            c.retransmits,
            c.sack_rule3_retransmits,
            c.rescue_retransmits
        ),
        (2, 1, 0)
    );
    // Segment 4 is counted twice in pipe now (original and retransmission, RFC 6675 §4): further
    // duplicate ACKs without new SACK information send nothing more.
    let again = ack_with_sack(
        &mut s,
        out[0].seq,
        &[(out[5].seq, end(&out[5])), (out[1].seq, end(&out[3]))],
    );
    assert!(again.is_empty(), "{again:?}");
    s.advance(RTT);
    assert!(ack_with_sack(&mut s, end(&out[5]), &[]).is_empty());
    assert!(!s.c.in_recovery());
    assert_eq!(s.c.bytes_in_flight(), 0);
    assert_eq!(s.c.counters().rto_expiries, 0);
}

#[test]
fn rfc6675_s4_nextseg_rule4_fires_at_most_once_per_episode() {
    // Segments 0, 5 and 9 lost; 1..=4 and 6..=8 SACKed. Rule 1 resends 0 and 5, rule 4 rescues 9.
    let (mut s, out) = flight(10);
    s.advance(RTT);
    let resent = dupacks_for(&mut s, &out, &[1, 2, 3, 4, 6, 7, 8]);
    let seqs: Vec<u32> = resent.iter().map(|o| o.seq).collect();
    assert_eq!(
        seqs.iter().filter(|&&q| q == out[9].seq).count(),
        1,
        "{seqs:?}"
    );
    assert!(seqs.contains(&out[0].seq) && seqs.contains(&out[5].seq));
    assert_eq!(s.c.counters().rescue_retransmits, 1);
    // The resent segment 0 arrives: a partial ACK up to segment 5, SACK for 6..=8. Segment 9 is
    // again the highest unSACKed segment with room in cwnd, but HighACK <= RescueRxt
    // (= RecoveryPoint): no second rescue in this episode.
    s.advance(RTT);
    let after = ack_with_sack(&mut s, out[5].seq, &[(out[6].seq, end(&out[8]))]);
    assert!(s.c.in_recovery(), "partial ACK");
    // pipe = segment 5's retransmission + segment 9 (the rescue is not counted, §4 rule 4).
    assert!(
        s.c.cwnd() as usize >= 3 * MSS,
        "cwnd - pipe >= 1 SMSS: §5 (C) would allow another segment"
    );
    assert!(after.is_empty(), "no second rescue: {after:?}");
    let again = ack_with_sack(&mut s, out[5].seq, &[(out[6].seq, end(&out[8]))]);
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(s.c.counters().rescue_retransmits, 1);
    // Everything arrives; the episode ends.
    s.advance(RTT);
    assert!(ack_with_sack(&mut s, end(&out[9]), &[]).is_empty());
    assert!(!s.c.in_recovery());

    // A new episode (RFC 6675 §5 entry) gets its own rescue: lose the first and last again.
    s.advance(RTT);
    let out = send_flight(&mut s, 6);
    s.advance(RTT);
    let resent = dupacks_for(&mut s, &out, &[1, 2, 3, 4]);
    let seqs: Vec<u32> = resent.iter().map(|o| o.seq).collect();
    assert_eq!(seqs, vec![out[0].seq, out[5].seq]);
    assert_eq!(s.c.counters().rescue_retransmits, 2);
    assert_eq!(s.c.counters().recoveries, 2);
    assert_eq!(s.c.counters().rto_expiries, 0);
}
