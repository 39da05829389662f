//! A seeded fault injector on an engine's receive and transmit paths: drop, duplicate,
//! reorder (hold a frame back behind the next one) and corrupt (flip one bit of the TCP
//! payload, with the TCP checksum left stale or mended so that only the MPA CRC can tell).
//! Off by default; deterministic per seed. [`FaultConfig`] also reads itself from text
//! (`seed=7,rx_drop=0.001,...`, the field names), for the daemon's test hook.

use std::time::Instant;

use endpoint::{FrameSink, TxOutcome};

use super::corrupt;
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
    /// Receive side: flip one bit of a frame's TCP payload, the TCP checksum left stale.
    pub rx_corrupt: f64,
    /// Receive side: flip one bit of a frame's TCP payload and mend the TCP checksum.
    pub rx_corrupt_past_checksum: f64,
    /// Transmit side: flip one bit of a frame's TCP payload, the TCP checksum left stale.
    pub tx_corrupt: f64,
    /// Transmit side: flip one bit of a frame's TCP payload and mend the TCP checksum.
    pub tx_corrupt_past_checksum: f64,
}

impl FaultConfig {
    /// The probabilities, each with its field's name (the names its text form uses).
    fn rates_mut(&mut self) -> [(&'static str, &mut f64); 10] {
        [
            ("rx_drop", &mut self.rx_drop),
            ("rx_duplicate", &mut self.rx_duplicate),
            ("rx_reorder", &mut self.rx_reorder),
            ("rx_corrupt", &mut self.rx_corrupt),
            (
                "rx_corrupt_past_checksum",
                &mut self.rx_corrupt_past_checksum,
            ),
            ("tx_drop", &mut self.tx_drop),
            ("tx_duplicate", &mut self.tx_duplicate),
            ("tx_reorder", &mut self.tx_reorder),
            ("tx_corrupt", &mut self.tx_corrupt),
            (
                "tx_corrupt_past_checksum",
                &mut self.tx_corrupt_past_checksum,
            ),
        ]
    }

    /// The probabilities, with their names.
    fn rates(&self) -> [(&'static str, f64); 10] {
        let mut copy = *self;
        copy.rates_mut().map(|(name, p)| (name, *p))
    }

    /// Whether any fault is injected.
    pub fn enabled(&self) -> bool {
        self.rates().iter().any(|(_, p)| *p > 0.0)
    }

    fn rate_mut(&mut self, name: &str) -> Option<&mut f64> {
        self.rates_mut()
            .into_iter()
            .find_map(|(n, p)| (n == name).then_some(p))
    }
}

/// Why a fault list did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{item:?}: {expected}")]
pub struct FaultParseError {
    /// The offending `name=value` item.
    pub item: String,
    /// What was expected instead.
    pub expected: &'static str,
}

impl std::str::FromStr for FaultConfig {
    type Err = FaultParseError;

    /// `name=value` items separated by commas (or spaces): `seed` an integer, every other
    /// name a field of [`FaultConfig`] with a probability from 0 to 1. Unnamed fields stay 0.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut cfg = FaultConfig::default();
        for item in s.split([',', ' ']).filter(|i| !i.is_empty()) {
            let err = |expected| FaultParseError {
                item: item.to_string(),
                expected,
            };
            let (name, value) = item.split_once('=').ok_or(err("name=value"))?;
            if name == "seed" {
                cfg.seed = value
                    .parse()
                    .map_err(|_| err("a seed from 0 to 2^64 - 1"))?;
                continue;
            }
            let rate = cfg.rate_mut(name).ok_or(err(
                "seed or a FaultConfig field (rx_drop, tx_corrupt, ...)",
            ))?;
            *rate = value
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..=1.0).contains(p))
                .ok_or(err("a probability from 0 to 1"))?;
        }
        Ok(cfg)
    }
}

impl std::fmt::Display for FaultConfig {
    /// The text its `FromStr` reads: the seed and every probability above 0.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seed={}", self.seed)?;
        for (name, p) in self.rates().iter().filter(|(_, p)| *p > 0.0) {
            write!(f, ",{name}={p}")?;
        }
        Ok(())
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
    /// Frames with a bit of TCP payload flipped and the TCP checksum left stale (rx, tx).
    pub corrupted: [u64; 2],
    /// Frames with a bit of TCP payload flipped and the TCP checksum mended (rx, tx).
    pub corrupted_past_checksum: [u64; 2],
}

impl FaultCounters {
    /// Adds `other`'s counts (the lanes of a device, summed).
    pub fn add(&mut self, other: &FaultCounters) {
        for d in 0..2 {
            self.dropped[d] += other.dropped[d];
            self.duplicated[d] += other.duplicated[d];
            self.reordered[d] += other.reordered[d];
            self.corrupted[d] += other.corrupted[d];
            self.corrupted_past_checksum[d] += other.corrupted_past_checksum[d];
        }
    }
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

    /// A number below `n` (> 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Whether to corrupt the next frame: with probability `stale` leaving the checksum as it
    /// was (`Some(false)`), or `mended` mending it (`Some(true)`).
    fn corruption(&mut self, (stale, mended): (f64, f64)) -> Option<bool> {
        if self.chance(stale) {
            Some(false)
        } else if self.chance(mended) {
            Some(true)
        } else {
            None
        }
    }

    /// Flips one bit of `frame`'s TCP payload, mending the checksum with `mend`, and counts it
    /// in `counters` for direction `dir`. Frames without payload stay whole.
    fn corrupt(&mut self, frame: &mut [u8], mend: bool, counters: &mut FaultCounters, dir: usize) {
        let Some((tcp, payload)) = corrupt::tcp_payload(frame) else {
            return;
        };
        let at = payload.start + self.below(payload.len());
        let bit = self.next() as u32;
        corrupt::flip(frame, tcp, &payload, at, bit, mend);
        if mend {
            counters.corrupted_past_checksum[dir] += 1;
        } else {
            counters.corrupted[dir] += 1;
        }
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
    /// A received frame's copy, when it is corrupted.
    scratch: Vec<u8>,
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
            scratch: Vec::new(),
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
    /// Whether any fault is injected.
    pub fn enabled(&self) -> bool {
        self.on
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
            scratch,
            counters,
            ..
        } = self;
        let corrupt = (cfg.rx_corrupt, cfg.rx_corrupt_past_checksum);
        let n = inner.rx_batch(now, max, &mut |frame: &[u8]| {
            if rng.chance(cfg.rx_drop) {
                counters.dropped[0] += 1;
                return;
            }
            let frame = match rng.corruption(corrupt) {
                Some(mend) => {
                    scratch.clear();
                    scratch.extend_from_slice(frame);
                    rng.corrupt(scratch, mend, counters, 0);
                    &scratch[..]
                }
                None => frame,
            };
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
        let corrupt = (cfg.tx_corrupt, cfg.tx_corrupt_past_checksum);
        let r = inner.tx_frame(now, &mut |buf: &mut [u8]| {
            let n = fill(buf)?;
            if let Some(mend) = rng.corruption(corrupt) {
                rng.corrupt(&mut buf[..n], mend, counters, 1);
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_lists_read_back_what_they_print_and_refuse_nonsense() {
        let cfg: FaultConfig = "seed=7,rx_drop=0.01, tx_corrupt_past_checksum=0.5"
            .parse()
            .unwrap();
        assert_eq!(
            cfg,
            FaultConfig {
                seed: 7,
                rx_drop: 0.01,
                tx_corrupt_past_checksum: 0.5,
                ..FaultConfig::default()
            }
        );
        assert!(cfg.enabled());
        assert_eq!(cfg.to_string().parse::<FaultConfig>(), Ok(cfg));
        // Every field by its own name: each gets a rate of its own, and all read back.
        let mut all = FaultConfig::default();
        for (i, (_, p)) in all.rates_mut().into_iter().enumerate() {
            *p = (i + 1) as f64 / 16.0;
        }
        assert_eq!(all.to_string().parse::<FaultConfig>(), Ok(all));
        assert_eq!("".parse::<FaultConfig>(), Ok(FaultConfig::default()));
        assert!(!FaultConfig::default().enabled());
        for bad in ["rx_drop", "rx_drop=2", "rx_drop=-0.1", "loss=0.1", "seed=x"] {
            let e = bad.parse::<FaultConfig>().unwrap_err();
            assert_eq!(e.item, bad, "{e}");
        }
    }
}
