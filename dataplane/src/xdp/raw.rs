//! Raw Ethernet/IPv4/TCP frames over AF_XDP, below any protocol: a ping-pong (the future
//! `raw_lat` of the bench) and an echo that turns received frames around in place (rx token ->
//! tx token, no copy). The frames carry a valid TCP header to a steered port so that the peer's
//! XDP program redirects them, and never reach either kernel.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use tcp_offload::checksum;

use afxdp::netlink::Mac;
use afxdp::next_hop::NextHop;
use afxdp::xsk::{Frame, XskQueue};
use afxdp::XdpError;

/// Ethernet + IPv4 + TCP header bytes of the frames built here (no options).
pub const HEADERS_LEN: usize = 14 + 20 + 20;
const ETHERTYPE_IPV4: u16 = 0x0800;
const TCP_PSH_ACK: u8 = 0x18;
/// How long a waiting ping-pong lets a sent frame sit before it kicks the tx ring again.
const KICK_AGAIN: Duration = Duration::from_millis(1);
/// First payload octets of the frame that asks a [`raw_sink`] for its count
/// ([`raw_sink_report`]); a run id follows.
const REPORT_ASK: [u8; 8] = *b"XWRAW?N\0";
/// First payload octets of a [`raw_sink`]'s answer: run id, frames, bytes, nanoseconds follow.
const REPORT_ANSWER: [u8; 8] = *b"XWRAW=N\0";
/// Payload length of the request and the answer.
const REPORT_LEN: usize = 8 + 4 * 8;

/// One end of a raw exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEndpoint {
    /// Ethernet address.
    pub mac: Mac,
    /// IPv4 address.
    pub ip: Ipv4Addr,
    /// TCP port (steered on the receiving side).
    pub port: u16,
}

impl RawEndpoint {
    /// Both ends of an exchange with `remote_ip`, addressed from a resolved next hop (IPv4
    /// only: `None` when the hop's source address is IPv6).
    pub fn pair_from_hop(
        hop: &NextHop,
        local_port: u16,
        remote_ip: Ipv4Addr,
        remote_port: u16,
    ) -> Option<(RawEndpoint, RawEndpoint)> {
        let IpAddr::V4(local_ip) = hop.src_ip else {
            return None;
        };
        Some((
            RawEndpoint {
                mac: hop.src_mac,
                ip: local_ip,
                port: local_port,
            },
            RawEndpoint {
                mac: hop.dst_mac,
                ip: remote_ip,
                port: remote_port,
            },
        ))
    }
}

/// Writes an Ethernet/IPv4/TCP frame (PSH|ACK, sequence `seq`) carrying `payload` into `buf`;
/// returns its length, or `None` when `buf` is too short or the payload too long for IPv4.
pub fn build_tcp_frame(
    buf: &mut [u8],
    src: &RawEndpoint,
    dst: &RawEndpoint,
    seq: u32,
    payload: &[u8],
) -> Option<usize> {
    let len = HEADERS_LEN + payload.len();
    let ip_len = u16::try_from(len - 14).ok()?;
    let frame = buf.get_mut(..len)?;
    // Ethernet
    frame[0..6].copy_from_slice(&dst.mac);
    frame[6..12].copy_from_slice(&src.mac);
    frame[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
    // IPv4
    let ip = &mut frame[14..34];
    ip[0] = 0x45;
    ip[1] = 0;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
    ip[8] = 64;
    ip[9] = 6; // TCP
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&src.ip.octets());
    ip[16..20].copy_from_slice(&dst.ip.octets());
    let ip_sum = checksum::field(ip, 0);
    ip[10..12].copy_from_slice(&ip_sum.to_be_bytes());
    // TCP
    let tcp_len = 20 + payload.len();
    let tcp = &mut frame[34..];
    tcp[0..2].copy_from_slice(&src.port.to_be_bytes());
    tcp[2..4].copy_from_slice(&dst.port.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].fill(0); // ack number
    tcp[12] = 5 << 4;
    tcp[13] = TCP_PSH_ACK;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    tcp[16..20].fill(0); // checksum, urgent pointer
    tcp[20..].copy_from_slice(payload);
    let pseudo = checksum::pseudo_v4(src.ip, dst.ip, tcp_len);
    let tcp_sum = checksum::field(tcp, pseudo);
    tcp[16..18].copy_from_slice(&tcp_sum.to_be_bytes());
    Some(len)
}

/// Where the TCP header starts in a frame that begins with Ethernet, IPv4 (no VLAN tag) and a
/// whole TCP header (the frame may be the first of a chain, whose IP length runs past it).
fn tcp_start(head: &[u8]) -> Option<usize> {
    let ihl = usize::from(*head.get(14)? & 0x0F) * 4;
    let ours = head.len() >= 14 + ihl + 20
        && head[12..14] == ETHERTYPE_IPV4.to_be_bytes()
        && head[14] >> 4 == 4
        && ihl >= 20
        && head[23] == 6;
    ours.then_some(14 + ihl)
}

/// The TCP payload of an Ethernet/IPv4/TCP frame (no VLAN tag), if it is one.
pub fn tcp_payload(frame: &[u8]) -> Option<&[u8]> {
    let tcp = tcp_start(frame)?;
    let ip_len = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    let ip_end = 14usize.checked_add(ip_len).filter(|&e| e <= frame.len())?;
    let doff = usize::from(frame[tcp + 12] >> 4) * 4;
    let start = tcp + doff;
    if doff < 20 || start > ip_end {
        return None;
    }
    Some(&frame[start..ip_end])
}

/// Turns the headers of an Ethernet/IPv4/TCP frame around in place: swaps MACs, IP addresses
/// and ports (the checksums stay valid: a checksum does not depend on the order of the words
/// it sums). With `whole`, the frame must be a whole packet ([`tcp_payload`]); else it may be
/// the first frame of a chain ([`tcp_start`]). Returns false, leaving the frame alone, when it
/// is not such a frame.
fn turn_around(frame: &mut [u8], whole: bool) -> bool {
    let Some(tcp) = tcp_start(frame).filter(|_| !whole || tcp_payload(frame).is_some()) else {
        return false;
    };
    let (dst, rest) = frame.split_at_mut(6);
    dst.swap_with_slice(&mut rest[..6]);
    let (src_ip, dst_ip) = frame[26..34].split_at_mut(4);
    src_ip.swap_with_slice(dst_ip);
    let (sp, dp) = frame[tcp..tcp + 4].split_at_mut(2);
    sp.swap_with_slice(dp);
    true
}

/// Turns an Ethernet/IPv4/TCP frame around in place: swaps MACs, IP addresses and ports (the
/// checksums stay valid). Returns false, leaving the frame alone, when it is not such a frame.
pub fn swap_addresses(frame: &mut [u8]) -> bool {
    turn_around(frame, true)
}

/// A receiver's place in a stream of frames that may form chains (multi-buffer): the verdict
/// on a packet is taken at its first frame and holds for the rest of its chain.
#[derive(Debug, Default)]
struct ChainVerdict {
    /// Inside a chain: the verdict its first frame got.
    rest_of: Option<bool>,
}

impl ChainVerdict {
    /// The verdict for the next frame, which `continues` into another or not: `judge()` for
    /// a packet's first frame, the first frame's verdict for the rest. Also whether this is a
    /// first frame.
    fn next(&mut self, continues: bool, judge: impl FnOnce() -> bool) -> (bool, bool) {
        let (verdict, first) = match self.rest_of {
            Some(v) => (v, false),
            None => (judge(), true),
        };
        self.rest_of = continues.then_some(verdict);
        (verdict, first)
    }
}

/// A raw ping-pong run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingPongConfig {
    /// This end.
    pub local: RawEndpoint,
    /// The echoing end.
    pub remote: RawEndpoint,
    /// TCP payload bytes per frame (at least 8: the sequence number).
    pub payload_len: usize,
    /// Round trips.
    pub iterations: u32,
    /// How long to wait for one reply before giving up.
    pub reply_timeout: Duration,
    /// Spin on the rx ring (lowest latency with a core to spare) instead of sleeping in
    /// `poll(2)` (better when the kernel's softirq work shares the cores).
    pub busy_poll: bool,
}

/// Round-trip times of a ping-pong, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PingPongReport {
    /// One per iteration.
    pub rtts: Vec<Duration>,
}

impl PingPongReport {
    /// The `q`-quantile (0.0..=1.0) of the round-trip times.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let mut v = self.rtts.clone();
        v.sort_unstable();
        let i = ((v.len().checked_sub(1)?) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        v.get(i).copied()
    }
}

/// Sends `iterations` frames one at a time and waits for each to come back (from
/// [`raw_echo`] on the peer). Replies are matched by the sequence number in the payload.
pub fn raw_ping_pong(q: &mut XskQueue, cfg: &PingPongConfig) -> Result<PingPongReport, XdpError> {
    if cfg.payload_len < 8 || HEADERS_LEN + cfg.payload_len > q.frame_capacity() {
        return Err(XdpError::Invalid(
            "payload must be 8.. bytes and fit a frame",
        ));
    }
    let mut payload = vec![0u8; cfg.payload_len];
    let mut rx = Vec::with_capacity(64);
    let mut tx = Vec::with_capacity(1);
    let mut report = PingPongReport::default();
    for i in 0..cfg.iterations {
        let seq = u64::from(i);
        payload[..8].copy_from_slice(&seq.to_le_bytes());
        let mut f = q.alloc().ok_or(XdpError::Invalid("no free frame"))?;
        let len = build_tcp_frame(
            q.data_mut_full(&mut f),
            &cfg.local,
            &cfg.remote,
            i,
            &payload,
        )
        .ok_or(XdpError::Invalid("frame too short"))?;
        q.set_len(&mut f, len)?;
        let start = Instant::now();
        tx.push(f);
        while q.send(&mut tx) == 0 {
            q.reclaim();
            if start.elapsed() > cfg.reply_timeout {
                return Err(XdpError::Invalid("tx ring stayed full"));
            }
        }
        // One kick per frame: in copy mode that sendto transmits it. The wait below makes no
        // system call (busy_poll) unless the frame is still not out after KICK_AGAIN.
        q.kick_tx();
        let mut kicked = start;
        let rtt = loop {
            if q.recv(&mut rx, 64) == 0 {
                let now = Instant::now();
                if now - kicked > KICK_AGAIN {
                    q.reclaim();
                    q.kick_tx();
                    kicked = now;
                }
                if now - start > cfg.reply_timeout {
                    return Err(XdpError::Invalid("no reply within the timeout"));
                }
                if !cfg.busy_poll {
                    q.poll_rx(1)?;
                }
                continue;
            }
            let now = Instant::now();
            let matched = rx.iter().any(|f| {
                tcp_payload(q.data(f)).and_then(|p| p.get(..8)) == Some(&seq.to_le_bytes()[..])
            });
            q.release(&mut rx);
            if matched {
                break now - start;
            }
        };
        report.rtts.push(rtt);
        q.reclaim();
    }
    Ok(report)
}

/// Echoes frames back to their sender until `count` have been echoed or `timeout` has passed
/// since the start; returns how many were echoed. Frames that are not Ethernet/IPv4/TCP are
/// dropped (returned to the pool). `busy_poll` as in [`PingPongConfig::busy_poll`].
pub fn raw_echo(
    q: &mut XskQueue,
    count: u64,
    timeout: Duration,
    busy_poll: bool,
) -> Result<u64, XdpError> {
    let start = Instant::now();
    let mut rx: Vec<Frame> = Vec::with_capacity(64);
    let mut tx: Vec<Frame> = Vec::with_capacity(64);
    let mut echoed = 0u64;
    let mut chains = ChainVerdict::default();
    let mut pending: Vec<Frame> = Vec::new();
    while echoed < count && start.elapsed() < timeout {
        q.reclaim();
        if q.recv(&mut rx, 64) == 0 {
            q.kick_tx();
            if !busy_poll {
                q.poll_rx(1)?;
            }
            continue;
        }
        for mut f in rx.drain(..) {
            // A chain (multi-buffer) goes back whole: its head turned around, the rest as is.
            let continues = f.continues();
            let (keep, _) = chains.next(continues, || turn_around(q.data_mut(&mut f), !continues));
            if !keep {
                q.release_one(f);
                continue;
            }
            // A chain is queued only once its last frame is here (it may end in a later batch).
            pending.push(f);
            if !continues {
                tx.append(&mut pending);
            }
        }
        echoed += q.send(&mut tx) as u64;
        // What the tx ring did not take goes back to the pool (counted as not echoed).
        q.release(&mut tx);
    }
    q.release(&mut pending);
    q.kick_tx();
    Ok(echoed)
}

/// Frames and bytes moved by a one-way run, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawRun {
    /// Frames sent or received.
    pub frames: u64,
    /// Their bytes on the wire (Ethernet header included, no FCS).
    pub bytes: u64,
    /// From the first frame to the last.
    pub elapsed: Duration,
}

/// Sends `count` packets of `payload_len` bytes from `local` to `remote` as fast as the tx ring
/// takes them; returns what was queued for transmission (what arrived: [`raw_sink_report`]).
/// A packet longer than a frame goes as a chain of frames (multi-buffer sockets only); the
/// report counts packets. Gives up after `timeout`.
pub fn raw_flood(
    q: &mut XskQueue,
    local: &RawEndpoint,
    remote: &RawEndpoint,
    payload_len: usize,
    count: u64,
    timeout: Duration,
) -> Result<RawRun, XdpError> {
    if payload_len < 8 || HEADERS_LEN + payload_len > q.max_packet() {
        return Err(XdpError::Invalid(
            "payload must be 8.. bytes and fit a frame (or a chain of them: multi-buffer)",
        ));
    }
    // A packet longer than a frame is built once per packet in `chain` and scattered over
    // frames (multi-buffer); a shorter one is built in its frame.
    let chained = HEADERS_LEN + payload_len > q.frame_capacity();
    let mut chain = vec![0u8; HEADERS_LEN + payload_len];
    let mut payload = vec![0u8; payload_len];
    let mut batch: Vec<Frame> = Vec::with_capacity(64);
    let start = Instant::now();
    let mut sent = 0u64;
    // Packets built into `batch` and not yet queued (`send` queues whole packets from the
    // front; the rest wait in `batch`).
    let mut packets = 0u64;
    while sent < count && start.elapsed() < timeout {
        q.reclaim();
        let want = (count - sent).min(64);
        while packets < want {
            payload[..8].copy_from_slice(&(sent + packets).to_le_bytes());
            if chained {
                build_tcp_frame(&mut chain, local, remote, 0, &payload)
                    .ok_or(XdpError::Invalid("frame too short"))?;
                if q.scatter(&chain, &mut batch).is_none() {
                    break;
                }
            } else {
                let Some(mut f) = q.alloc() else { break };
                let len = build_tcp_frame(q.data_mut_full(&mut f), local, remote, 0, &payload)
                    .ok_or(XdpError::Invalid("frame too short"))?;
                q.set_len(&mut f, len)?;
                batch.push(f);
            }
            packets += 1;
        }
        q.send(&mut batch);
        let left = batch.iter().filter(|f| !f.continues()).count() as u64;
        sent += packets - left;
        packets = left;
        q.kick_tx();
    }
    q.release(&mut batch);
    let frames = sent;
    Ok(RawRun {
        frames,
        bytes: frames * (HEADERS_LEN + payload_len) as u64,
        elapsed: start.elapsed(),
    })
}

/// Receives frames until `count` have arrived or nothing arrived for `idle` (the receiving
/// side of [`raw_flood`]); counts Ethernet/IPv4/TCP packets only (a chain of frames on a
/// multi-buffer socket is one packet with the bytes of all its frames). A request of
/// [`raw_sink_report`] is answered with what arrived since the previous request (the same
/// answer again for a repeated request), and counting starts anew.
pub fn raw_sink(
    q: &mut XskQueue,
    count: u64,
    idle: Duration,
    busy_poll: bool,
) -> Result<RawRun, XdpError> {
    let mut rx: Vec<Frame> = Vec::with_capacity(64);
    let mut total = RawRun::default();
    let mut run = RawRun::default();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    let mut answered: Option<(u64, RawRun)> = None;
    let mut chains = ChainVerdict::default();
    while total.frames < count && last.elapsed() < idle {
        q.reclaim();
        if q.recv(&mut rx, 64) == 0 {
            q.kick_tx();
            if !busy_poll {
                q.poll_rx(1)?;
            }
            continue;
        }
        last = Instant::now();
        let mut asked = None;
        for f in &rx {
            let data = q.data(f);
            let continues = f.continues();
            // A chain's first frame holds all its headers but not its length.
            let (counted, first_frame) = chains.next(continues, || {
                if continues {
                    return tcp_start(data).is_some();
                }
                let Some(payload) = tcp_payload(data) else {
                    return false;
                };
                match report_request(payload) {
                    Some(id) => {
                        asked = Some((id, ends_of(data)));
                        false
                    }
                    None => true,
                }
            });
            if counted {
                if first_frame {
                    first.get_or_insert(last);
                    run.frames += 1;
                }
                run.bytes += data.len() as u64;
            }
        }
        q.release(&mut rx);
        if let Some((id, Some((from, to)))) = asked {
            let figures = match answered {
                Some((done, figures)) if done == id => figures,
                _ => {
                    run.elapsed = first.map(|f| last - f).unwrap_or_default();
                    total.frames += run.frames;
                    total.bytes += run.bytes;
                    let figures = std::mem::take(&mut run);
                    first = None;
                    answered = Some((id, figures));
                    figures
                }
            };
            send_report(q, &to, &from, id, &figures)?;
        }
    }
    total.frames += run.frames;
    total.bytes += run.bytes;
    total.elapsed = first.map(|f| last - f).unwrap_or_default();
    Ok(total)
}

/// Asks the [`raw_sink`] at `remote` what arrived since the previous request (`id` must differ
/// from the previous request's), resending the request until the answer comes or `timeout`
/// passes: the receiver's count, bytes and first-to-last time, the figures a bandwidth test
/// reports.
pub fn raw_sink_report(
    q: &mut XskQueue,
    local: &RawEndpoint,
    remote: &RawEndpoint,
    id: u64,
    timeout: Duration,
) -> Result<RawRun, XdpError> {
    let start = Instant::now();
    let mut rx: Vec<Frame> = Vec::with_capacity(64);
    let mut asked: Option<Instant> = None;
    while start.elapsed() < timeout {
        q.reclaim();
        if asked.is_none_or(|t| t.elapsed() > Duration::from_millis(20)) {
            let mut payload = [0u8; REPORT_LEN];
            payload[..8].copy_from_slice(&REPORT_ASK);
            payload[8..16].copy_from_slice(&id.to_le_bytes());
            send_frame(q, local, remote, &payload)?;
            asked = Some(Instant::now());
        }
        if q.recv(&mut rx, 64) == 0 {
            continue;
        }
        let answer = rx
            .iter()
            .find_map(|f| tcp_payload(q.data(f)).and_then(report_answer));
        q.release(&mut rx);
        if let Some((got, run)) = answer {
            if got == id {
                return Ok(run);
            }
        }
    }
    Err(XdpError::Invalid(
        "the sink did not report within the timeout",
    ))
}

/// The run id of a report request.
fn report_request(payload: &[u8]) -> Option<u64> {
    (payload.len() >= REPORT_LEN && payload[..8] == REPORT_ASK)
        .then(|| u64::from_le_bytes(payload[8..16].try_into().unwrap_or_default()))
}

/// The run id and figures of a report answer.
fn report_answer(payload: &[u8]) -> Option<(u64, RawRun)> {
    if payload.len() < REPORT_LEN || payload[..8] != REPORT_ANSWER {
        return None;
    }
    let word = |i: usize| {
        u64::from_le_bytes(
            payload[8 + 8 * i..16 + 8 * i]
                .try_into()
                .unwrap_or_default(),
        )
    };
    Some((
        word(0),
        RawRun {
            frames: word(1),
            bytes: word(2),
            elapsed: Duration::from_nanos(word(3)),
        },
    ))
}

/// Source and destination of an Ethernet/IPv4/TCP frame (checked by [`tcp_payload`] first).
fn ends_of(frame: &[u8]) -> Option<(RawEndpoint, RawEndpoint)> {
    tcp_payload(frame)?;
    let ihl = usize::from(frame[14] & 0x0F) * 4;
    let port = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
    let ip = |at: usize| Ipv4Addr::new(frame[at], frame[at + 1], frame[at + 2], frame[at + 3]);
    let mac = |at: usize| -> Mac { frame[at..at + 6].try_into().unwrap_or_default() };
    Some((
        RawEndpoint {
            mac: mac(6),
            ip: ip(26),
            port: port(14 + ihl),
        },
        RawEndpoint {
            mac: mac(0),
            ip: ip(30),
            port: port(14 + ihl + 2),
        },
    ))
}

/// Sends the answer to report request `id`.
fn send_report(
    q: &mut XskQueue,
    from: &RawEndpoint,
    to: &RawEndpoint,
    id: u64,
    run: &RawRun,
) -> Result<(), XdpError> {
    let mut payload = [0u8; REPORT_LEN];
    payload[..8].copy_from_slice(&REPORT_ANSWER);
    let nanos = u64::try_from(run.elapsed.as_nanos()).unwrap_or(u64::MAX);
    for (i, w) in [id, run.frames, run.bytes, nanos].into_iter().enumerate() {
        payload[8 + 8 * i..16 + 8 * i].copy_from_slice(&w.to_le_bytes());
    }
    send_frame(q, from, to, &payload)
}

/// Builds and sends one frame (kicking the tx ring); a full ring drops it (the asker retries).
fn send_frame(
    q: &mut XskQueue,
    from: &RawEndpoint,
    to: &RawEndpoint,
    payload: &[u8],
) -> Result<(), XdpError> {
    let Some(mut f) = q.alloc() else {
        return Ok(());
    };
    let len = build_tcp_frame(q.data_mut_full(&mut f), from, to, 0, payload)
        .ok_or(XdpError::Invalid("frame too short"))?;
    q.set_len(&mut f, len)?;
    let mut tx = vec![f];
    q.send(&mut tx);
    q.release(&mut tx);
    q.kick_tx();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::internet_checksum;

    /// The IPv4 pseudo header's bytes (RFC 9293 §3.1), for the independent checksum.
    fn pseudo_header(src: &RawEndpoint, dst: &RawEndpoint, tcp_len: usize) -> Vec<u8> {
        let mut v = [src.ip.octets(), dst.ip.octets()].concat();
        v.extend_from_slice(&[0, 6]);
        v.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        v
    }

    fn ends() -> (RawEndpoint, RawEndpoint) {
        (
            RawEndpoint {
                mac: [2, 0, 0, 0, 0, 1],
                ip: Ipv4Addr::new(198, 18, 0, 1),
                port: 40000,
            },
            RawEndpoint {
                mac: [2, 0, 0, 0, 0, 2],
                ip: Ipv4Addr::new(198, 18, 0, 2),
                port: 4791,
            },
        )
    }

    #[test]
    fn built_frame_has_valid_checksums_and_payload() {
        let (a, b) = ends();
        let mut buf = [0u8; 128];
        let len = build_tcp_frame(&mut buf, &a, &b, 7, b"hello, xwarp").unwrap();
        let f = &buf[..len];
        assert_eq!(len, HEADERS_LEN + 12);
        assert_eq!(
            internet_checksum(&[&f[14..34]]),
            0,
            "IPv4 header checksum verifies"
        );
        let pseudo = pseudo_header(&a, &b, len - 34);
        assert_eq!(
            internet_checksum(&[&pseudo, &f[34..]]),
            0,
            "TCP checksum verifies"
        );
        assert_eq!(tcp_payload(f), Some(&b"hello, xwarp"[..]));
    }

    #[test]
    fn odd_length_payload_checksum_verifies() {
        let (a, b) = ends();
        let mut buf = [0u8; 128];
        let len = build_tcp_frame(&mut buf, &a, &b, 1, b"abc").unwrap();
        let pseudo = pseudo_header(&a, &b, len - 34);
        assert_eq!(internet_checksum(&[&pseudo, &buf[34..len]]), 0);
    }

    #[test]
    fn swap_turns_the_frame_around_and_keeps_checksums() {
        let (a, b) = ends();
        let mut fwd = [0u8; 96];
        let mut back = [0u8; 96];
        let len = build_tcp_frame(&mut fwd, &a, &b, 3, b"ping").unwrap();
        build_tcp_frame(&mut back, &b, &a, 3, b"ping").unwrap();
        assert!(swap_addresses(&mut fwd[..len]));
        // The reply built from scratch and the swapped frame are the same bytes.
        assert_eq!(fwd[..len], back[..len]);
    }

    #[test]
    fn a_chain_keeps_the_verdict_of_its_first_frame() {
        let mut v = ChainVerdict::default();
        let judged = std::cell::Cell::new(0);
        let judge = |verdict: bool| {
            let judged = &judged;
            move || {
                judged.set(judged.get() + 1);
                verdict
            }
        };
        // A whole packet, a chain of three (accepted), a chain of two (refused), a packet.
        assert_eq!(v.next(false, judge(true)), (true, true));
        assert_eq!(v.next(true, judge(true)), (true, true));
        assert_eq!(v.next(true, judge(false)), (true, false));
        assert_eq!(v.next(false, judge(false)), (true, false));
        assert_eq!(v.next(true, judge(false)), (false, true));
        assert_eq!(v.next(false, judge(true)), (false, false));
        assert_eq!(v.next(false, judge(false)), (false, true));
        assert_eq!(judged.get(), 4, "judged once per packet");
    }

    #[test]
    fn the_first_frame_of_a_chain_is_turned_around_without_its_length() {
        let (a, b) = ends();
        let mut fwd = [0u8; 96];
        let mut back = [0u8; 96];
        let len = build_tcp_frame(&mut fwd, &a, &b, 3, &[7; 40]).unwrap();
        build_tcp_frame(&mut back, &b, &a, 3, &[7; 40]).unwrap();
        // Cut after the TCP header: the IP length runs past the frame.
        let head = HEADERS_LEN + 4;
        assert!(!turn_around(&mut fwd[..head], true), "not a whole packet");
        assert!(turn_around(&mut fwd[..head], false));
        assert_eq!(fwd[..head], back[..head]);
        assert!(
            !turn_around(&mut fwd[..HEADERS_LEN - 1], false),
            "TCP header cut"
        );
        assert!(len > head);
    }

    #[test]
    fn too_small_buffer_is_refused() {
        let (a, b) = ends();
        let mut buf = [0u8; HEADERS_LEN + 3];
        assert_eq!(build_tcp_frame(&mut buf, &a, &b, 0, b"four"), None);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x = 0x1234_5678u32;
        for len in 0..200 {
            let mut buf: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            if len > 23 {
                buf[12] = 8;
                buf[13] = 0;
                buf[14] = 0x45;
                buf[23] = 6;
            }
            let _ = tcp_payload(&buf);
            let _ = swap_addresses(&mut buf);
        }
    }
}
