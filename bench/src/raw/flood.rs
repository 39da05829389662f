//! Raw one-way traffic over AF_XDP (`raw_bw`): a flood of frames as fast as the tx ring takes
//! them, a sink that counts what arrives, and the sink's report of its count, asked for and
//! answered in frames of the same stream.

use std::time::{Duration, Instant};

use afxdp::{Frame, XdpError, XskQueue};
use testbed::tcp_frame::{
    build_tcp_frame, ends_of, tcp_payload, tcp_start, RawEndpoint, HEADERS_LEN,
};

use super::receive::{next_batch, ChainVerdict};

/// First payload octets of the frame that asks a [`raw_sink`] for its count
/// ([`raw_sink_report`]); a run id follows.
const REPORT_ASK: [u8; 8] = *b"XWRAW?N\0";
/// First payload octets of a [`raw_sink`]'s answer: run id, frames, bytes, nanoseconds follow.
const REPORT_ANSWER: [u8; 8] = *b"XWRAW=N\0";
/// Payload length of the request and the answer.
const REPORT_LEN: usize = 8 + 4 * 8;

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
        if next_batch(q, &mut rx, busy_poll)? == 0 {
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
