//! Raw ping-pong over AF_XDP (`raw_lat`): one frame at a time to the peer's [`raw_echo`], which
//! turns received frames around in place (rx token -> tx token, no copy).

use std::time::{Duration, Instant};

use afxdp::{Frame, XdpError, XskQueue};
use testbed::tcp_frame::{build_tcp_frame, tcp_payload, turn_around, RawEndpoint, HEADERS_LEN};

use super::receive::{next_batch, ChainVerdict};

/// How long a waiting ping-pong lets a sent frame sit before it kicks the tx ring again.
const KICK_AGAIN: Duration = Duration::from_millis(1);

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
        if next_batch(q, &mut rx, busy_poll)? == 0 {
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
