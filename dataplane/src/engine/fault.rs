//! A seeded fault injector on an engine's receive and transmit paths: drop, duplicate and
//! reorder (hold a frame back behind the next one). Off by default; deterministic per seed.

use std::time::Instant;

use endpoint::{FrameSink, TxOutcome};

use super::io::PacketIo;

/// Fault probabilities in `[0, 1]`, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultConfig {
    /// Seed of the random stream.
    pub seed: u64,
    /// Receive side: drop a frame.
    pub rx_drop: f64,
    /// Receive side: deliver a frame twice.
    pub rx_duplicate: f64,
    /// Receive side: hold a frame back behind the next one.
    pub rx_reorder: f64,
    /// Transmit side: drop a frame.
    pub tx_drop: f64,
    /// Transmit side: send a frame twice.
    pub tx_duplicate: f64,
    /// Transmit side: hold a frame back behind the next one.
    pub tx_reorder: f64,
}

impl FaultConfig {
    fn enabled(&self) -> bool {
        [
            self.rx_drop,
            self.rx_duplicate,
            self.rx_reorder,
            self.tx_drop,
            self.tx_duplicate,
            self.tx_reorder,
        ]
        .iter()
        .any(|p| *p > 0.0)
    }
}

/// What the injector did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounters {
    /// Frames dropped (rx, tx).
    pub dropped: [u64; 2],
    /// Frames duplicated (rx, tx).
    pub duplicated: [u64; 2],
    /// Frames held back (rx, tx).
    pub reordered: [u64; 2],
}

/// SplitMix64: small, fast, good enough for fault decisions.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// A [`PacketIo`] wrapper that injects faults; a transparent pass-through when all are zero.
pub struct FaultyIo<I> {
    inner: I,
    cfg: FaultConfig,
    on: bool,
    rng: Rng,
    held_rx: Option<Vec<u8>>,
    held_tx: Option<Vec<u8>>,
    counters: FaultCounters,
}

impl<I: PacketIo> FaultyIo<I> {
    /// Wraps `inner`.
    pub fn new(inner: I, cfg: FaultConfig) -> Self {
        FaultyIo {
            inner,
            on: cfg.enabled(),
            rng: Rng(cfg.seed),
            cfg,
            held_rx: None,
            held_tx: None,
            counters: FaultCounters::default(),
        }
    }
    /// The wrapped I/O.
    pub fn inner(&self) -> &I {
        &self.inner
    }
    /// The wrapped I/O, mutably.
    pub fn inner_mut(&mut self) -> &mut I {
        &mut self.inner
    }
    /// What was injected.
    pub fn counters(&self) -> FaultCounters {
        self.counters
    }
    /// True while a frame is held back (the engine should poll again soon).
    pub fn holding(&self) -> bool {
        self.held_rx.is_some() || self.held_tx.is_some()
    }

    fn send_copy(&mut self, now: Instant, frame: &[u8]) {
        self.inner.tx_frame(now, &mut |buf: &mut [u8]| {
            let n = frame.len().min(buf.len());
            buf[..n].copy_from_slice(&frame[..n]);
            Some(n)
        });
    }
}

impl<I: PacketIo> PacketIo for FaultyIo<I> {
    fn rx_batch(&mut self, now: Instant, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        if !self.on {
            return self.inner.rx_batch(now, max, f);
        }
        let cfg = self.cfg;
        let FaultyIo {
            inner,
            rng,
            held_rx,
            counters,
            ..
        } = self;
        let n = inner.rx_batch(now, max, &mut |frame: &[u8]| {
            if rng.chance(cfg.rx_drop) {
                counters.dropped[0] += 1;
                return;
            }
            if held_rx.is_none() && rng.chance(cfg.rx_reorder) {
                counters.reordered[0] += 1;
                *held_rx = Some(frame.to_vec());
                return;
            }
            f(frame);
            if rng.chance(cfg.rx_duplicate) {
                counters.duplicated[0] += 1;
                f(frame);
            }
            if let Some(h) = held_rx.take() {
                f(&h);
            }
        });
        if n == 0 {
            // Nothing came behind the held frame this time: let it go now.
            if let Some(h) = self.held_rx.take() {
                f(&h);
            }
        }
        n
    }

    fn flush(&mut self, now: Instant) {
        self.inner.flush(now);
    }

    fn next_rx(&self) -> Option<Instant> {
        self.inner.next_rx()
    }
}

impl<I: PacketIo> FrameSink for FaultyIo<I> {
    fn tx_frame(
        &mut self,
        now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        if !self.on {
            return self.inner.tx_frame(now, fill);
        }
        let cfg = self.cfg;
        let mut dup: Option<Vec<u8>> = None;
        let mut faulted = false;
        let FaultyIo {
            inner,
            rng,
            held_tx,
            counters,
            ..
        } = self;
        let r = inner.tx_frame(now, &mut |buf: &mut [u8]| {
            let n = fill(buf)?;
            if rng.chance(cfg.tx_drop) {
                counters.dropped[1] += 1;
                faulted = true;
                return None;
            }
            if held_tx.is_none() && rng.chance(cfg.tx_reorder) {
                counters.reordered[1] += 1;
                *held_tx = Some(buf[..n].to_vec());
                faulted = true;
                return None;
            }
            if rng.chance(cfg.tx_duplicate) {
                counters.duplicated[1] += 1;
                dup = Some(buf[..n].to_vec());
            }
            Some(n)
        });
        if r == TxOutcome::Queued {
            if let Some(d) = dup {
                self.send_copy(now, &d);
            }
            if let Some(h) = self.held_tx.take() {
                self.send_copy(now, &h);
            }
        }
        if faulted {
            // The frame was produced (and is lost or held): to the caller it went out.
            return TxOutcome::Queued;
        }
        r
    }
}

/// Releases a held transmit frame that nothing followed (called once per engine poll).
pub(crate) fn release_held_tx<I: PacketIo>(io: &mut FaultyIo<I>, now: Instant) {
    if let Some(h) = io.held_tx.take() {
        io.send_copy(now, &h);
    }
}
