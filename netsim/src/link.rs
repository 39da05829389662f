//! One direction of a simulated IP link: delay, jitter, reordering, loss, duplication,
//! corruption, MTU and an optional bottleneck rate with a bounded queue, all drawn from a seeded
//! ChaCha stream so a run is reproduced exactly by its seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::time::SimTime;

/// The faults and limits of one link direction. Probabilities are in `[0, 1]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Fixed one-way propagation delay.
    pub delay: Duration,
    /// Extra delay drawn uniformly from `[0, jitter]` per packet; packets whose draws differ by
    /// more than their spacing arrive reordered.
    pub jitter: Duration,
    /// Probability that a packet is held back by an extra [`LinkConfig::reorder_delay`].
    pub reorder: f64,
    /// Hold-back applied to the packets picked by [`LinkConfig::reorder`].
    pub reorder_delay: Duration,
    /// Probability that a packet is lost.
    pub loss: f64,
    /// Probability that a packet is delivered twice (the copy draws its own jitter).
    pub duplicate: f64,
    /// Probability that a delivered packet has [`LinkConfig::corrupt_bits`] bits flipped.
    pub corrupt: f64,
    /// Bits flipped in a corrupted packet, at distinct random positions. One flip is always
    /// caught by the IPv4 and TCP checksums; more may cancel out in the ones' complement sum.
    pub corrupt_bits: u32,
    /// Largest packet carried (IP total length); larger ones are dropped and counted.
    pub mtu: usize,
    /// Bottleneck rate in bytes per second: a packet occupies the link for `len / rate`.
    pub rate: Option<u64>,
    /// Bytes that may wait for the bottleneck; a packet that does not fit is tail-dropped.
    /// Only meaningful with [`LinkConfig::rate`].
    pub queue_limit: Option<usize>,
}

impl Default for LinkConfig {
    /// A perfect link: 5 ms one way, MTU 1500, no faults, no rate limit.
    fn default() -> Self {
        LinkConfig {
            delay: Duration::from_millis(5),
            jitter: Duration::ZERO,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            loss: 0.0,
            duplicate: 0.0,
            corrupt: 0.0,
            corrupt_bits: 1,
            mtu: 1500,
            rate: None,
            queue_limit: None,
        }
    }
}

/// Why a [`LinkConfig`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkConfigError {
    /// A probability outside `[0, 1]` (or NaN); the field is named.
    Probability(&'static str),
    /// MTU below the IPv4 minimum of 68.
    MtuTooSmall,
    /// A rate of zero bytes per second.
    ZeroRate,
}

impl LinkConfig {
    /// A perfect link with the given one-way delay.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
    /// Uniform jitter in `[0, jitter]`.
    pub fn with_jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }
    /// Hold back a fraction `p` of packets by `extra`.
    pub fn with_reorder(mut self, p: f64, extra: Duration) -> Self {
        self.reorder = p;
        self.reorder_delay = extra;
        self
    }
    /// Lose a fraction `p` of packets.
    pub fn with_loss(mut self, p: f64) -> Self {
        self.loss = p;
        self
    }
    /// Deliver a fraction `p` of packets twice.
    pub fn with_duplicate(mut self, p: f64) -> Self {
        self.duplicate = p;
        self
    }
    /// Flip one bit in a fraction `p` of packets.
    pub fn with_corrupt(mut self, p: f64) -> Self {
        self.corrupt = p;
        self
    }
    /// Drop packets longer than `mtu`.
    pub fn with_mtu(mut self, mtu: usize) -> Self {
        self.mtu = mtu;
        self
    }
    /// A bottleneck of `bytes_per_sec` with `queue_bytes` of buffer.
    pub fn with_rate(mut self, bytes_per_sec: u64, queue_bytes: usize) -> Self {
        self.rate = Some(bytes_per_sec);
        self.queue_limit = Some(queue_bytes);
        self
    }

    /// Checks the fields; [`Link::new`] refuses what this refuses.
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        for (name, p) in [
            ("reorder", self.reorder),
            ("loss", self.loss),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(LinkConfigError::Probability(name));
            }
        }
        if self.mtu < 68 {
            return Err(LinkConfigError::MtuTooSmall);
        }
        if self.rate == Some(0) {
            return Err(LinkConfigError::ZeroRate);
        }
        Ok(())
    }
}

/// What happened to the packets handed to one link direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets handed to the link.
    pub sent: u64,
    /// Bytes handed to the link.
    pub bytes_sent: u64,
    /// Packets delivered to the far end (duplicates included).
    pub delivered: u64,
    /// Packets lost at random.
    pub lost: u64,
    /// Packets dropped for exceeding the MTU.
    pub dropped_mtu: u64,
    /// Packets tail-dropped at the bottleneck queue.
    pub dropped_queue: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Packets delivered with flipped bits.
    pub corrupted: u64,
    /// Packets delivered after a packet handed to the link later than them.
    pub reordered: u64,
}

impl LinkStats {
    /// Every packet that did not make it (loss, MTU, queue).
    pub fn dropped(&self) -> u64 {
        self.lost + self.dropped_mtu + self.dropped_queue
    }

    /// Field-wise sum, for totals over many runs.
    pub fn add(&mut self, o: &LinkStats) {
        self.sent += o.sent;
        self.bytes_sent += o.bytes_sent;
        self.delivered += o.delivered;
        self.lost += o.lost;
        self.dropped_mtu += o.dropped_mtu;
        self.dropped_queue += o.dropped_queue;
        self.duplicated += o.duplicated;
        self.corrupted += o.corrupted;
        self.reordered += o.reordered;
    }
}

/// The fate of one packet handed to [`Link::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// Scheduled for delivery (possibly corrupted, possibly twice).
    Scheduled {
        /// When the (first) copy arrives.
        arrives: SimTime,
        /// Whether a second copy was scheduled too.
        duplicated: bool,
        /// Whether the first copy carries flipped bits.
        corrupted: bool,
    },
    /// Lost at random.
    Lost,
    /// Longer than the MTU.
    TooBig,
    /// No room in the bottleneck queue.
    QueueFull,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    arrives: SimTime,
    /// Order in which copies were handed to the link: ties on `arrives` keep this order, and a
    /// copy delivered after one with a larger id counts as reordered.
    id: u64,
    data: Vec<u8>,
}

/// One direction of the link. Deterministic: the same seed and the same sequence of `send`
/// calls give the same deliveries at the same times.
#[derive(Debug)]
pub struct Link {
    cfg: LinkConfig,
    rng: ChaCha8Rng,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    next_id: u64,
    highest_delivered: Option<u64>,
    busy_until: SimTime,
    stats: LinkStats,
}

impl Link {
    /// A link direction drawing its faults from `seed`.
    pub fn new(cfg: LinkConfig, seed: u64) -> Result<Link, LinkConfigError> {
        cfg.validate()?;
        Ok(Link {
            cfg,
            rng: ChaCha8Rng::seed_from_u64(seed),
            in_flight: BinaryHeap::new(),
            next_id: 0,
            highest_delivered: None,
            busy_until: SimTime::ZERO,
            stats: LinkStats::default(),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Copies scheduled but not yet delivered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.gen::<f64>() < p
    }

    fn jitter(&mut self) -> Duration {
        let max = u64::try_from(self.cfg.jitter.as_nanos()).unwrap_or(u64::MAX);
        if max == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(self.rng.gen_range(0..=max))
        }
    }

    fn flip_bits(&mut self, data: &mut [u8]) {
        let bits = data.len() * 8;
        if bits == 0 {
            return;
        }
        let flips = (self.cfg.corrupt_bits as usize).clamp(1, bits);
        let mut chosen: Vec<usize> = Vec::with_capacity(flips);
        while chosen.len() < flips {
            let bit = self.rng.gen_range(0..bits);
            if !chosen.contains(&bit) {
                chosen.push(bit);
                data[bit / 8] ^= 1 << (bit % 8);
            }
        }
    }

    fn schedule(&mut self, arrives: SimTime, data: Vec<u8>) {
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight.push(Reverse(InFlight { arrives, id, data }));
    }

    /// Hands a packet to the link at `now` and decides its fate.
    pub fn send(&mut self, now: SimTime, mut packet: Vec<u8>) -> SendOutcome {
        self.stats.sent += 1;
        self.stats.bytes_sent += packet.len() as u64;
        if packet.len() > self.cfg.mtu {
            self.stats.dropped_mtu += 1;
            return SendOutcome::TooBig;
        }
        // Bottleneck: serialisation behind what is already queued, tail drop when full.
        let mut departs = now;
        if let Some(rate) = self.cfg.rate {
            let start = self.busy_until.max(now);
            let backlog = (u128::from((start - now).as_nanos() as u64) * u128::from(rate)
                / 1_000_000_000) as u64;
            if let Some(limit) = self.cfg.queue_limit {
                if backlog + packet.len() as u64 > limit as u64 {
                    self.stats.dropped_queue += 1;
                    return SendOutcome::QueueFull;
                }
            }
            let tx_nanos = (packet.len() as u128 * 1_000_000_000).div_ceil(u128::from(rate)) as u64;
            departs = start + Duration::from_nanos(tx_nanos);
            self.busy_until = departs;
        }
        if self.chance(self.cfg.loss) {
            self.stats.lost += 1;
            return SendOutcome::Lost;
        }
        let base = departs + self.cfg.delay;
        let mut arrives = base + self.jitter();
        if self.chance(self.cfg.reorder) {
            arrives += self.cfg.reorder_delay;
        }
        let duplicated = self.chance(self.cfg.duplicate);
        let copy = duplicated.then(|| packet.clone());
        let corrupted = self.chance(self.cfg.corrupt);
        if corrupted {
            self.flip_bits(&mut packet);
            self.stats.corrupted += 1;
        }
        self.schedule(arrives, packet);
        if let Some(copy) = copy {
            self.stats.duplicated += 1;
            let copy_arrives = base + self.jitter();
            self.schedule(copy_arrives, copy);
        }
        SendOutcome::Scheduled {
            arrives,
            duplicated,
            corrupted,
        }
    }

    /// When the next copy arrives, if any is in flight.
    pub fn next_arrival(&self) -> Option<SimTime> {
        self.in_flight.peek().map(|Reverse(p)| p.arrives)
    }

    /// The next copy that has arrived by `now`, in arrival order.
    pub fn pop_arrived(&mut self, now: SimTime) -> Option<Vec<u8>> {
        if self.next_arrival()? > now {
            return None;
        }
        let Reverse(p) = self.in_flight.pop()?;
        self.stats.delivered += 1;
        match self.highest_delivered {
            Some(h) if p.id < h => self.stats.reordered += 1,
            _ => self.highest_delivered = Some(p.id),
        }
        Some(p.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(link: &mut Link) -> Vec<(SimTime, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(t) = link.next_arrival() {
            let p = link.pop_arrived(t).expect("due packet");
            out.push((t, p));
        }
        out
    }

    fn numbered(n: u32) -> Vec<u8> {
        n.to_be_bytes().repeat(25)
    }

    #[test]
    fn perfect_link_delivers_in_order_after_the_delay() {
        let mut link = Link::new(LinkConfig::default(), 1).unwrap();
        for i in 0..10 {
            link.send(SimTime::from_millis(i.into()), numbered(i));
        }
        assert_eq!(
            link.pop_arrived(SimTime::from_millis(4)),
            None,
            "nothing before the delay"
        );
        let got = drain(&mut link);
        assert_eq!(got.len(), 10);
        for (i, (t, p)) in got.iter().enumerate() {
            assert_eq!(*t, SimTime::from_millis(i as u64 + 5));
            assert_eq!(p, &numbered(i as u32));
        }
        assert_eq!(link.stats().reordered, 0);
        assert_eq!(link.stats().delivered, 10);
    }

    #[test]
    fn same_seed_same_fate_different_seed_different_fate() {
        let cfg = LinkConfig::default()
            .with_loss(0.2)
            .with_jitter(Duration::from_millis(3))
            .with_duplicate(0.1)
            .with_corrupt(0.1);
        let run = |seed| {
            let mut link = Link::new(cfg.clone(), seed).unwrap();
            for i in 0..500 {
                link.send(SimTime::from_micros(u64::from(i) * 100), numbered(i));
            }
            (drain(&mut link), *link.stats())
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7).0, run(8).0);
    }

    #[test]
    fn loss_rate_is_close_to_the_configured_probability() {
        let mut link = Link::new(LinkConfig::default().with_loss(0.05), 3).unwrap();
        for i in 0..20_000 {
            link.send(SimTime::ZERO, numbered(i));
        }
        let lost = link.stats().lost;
        assert!(
            (800..1200).contains(&lost),
            "lost {lost} of 20000 at p=0.05"
        );
        assert_eq!(drain(&mut link).len() as u64, 20_000 - lost);
    }

    #[test]
    fn oversize_packets_are_dropped_and_counted() {
        let mut link = Link::new(LinkConfig::default().with_mtu(576), 1).unwrap();
        assert_eq!(link.send(SimTime::ZERO, vec![0; 577]), SendOutcome::TooBig);
        assert!(matches!(
            link.send(SimTime::ZERO, vec![0; 576]),
            SendOutcome::Scheduled { .. }
        ));
        assert_eq!(link.stats().dropped_mtu, 1);
        assert_eq!(drain(&mut link).len(), 1);
    }

    #[test]
    fn jitter_reorders_and_the_reorder_counter_sees_it() {
        let cfg = LinkConfig::default().with_jitter(Duration::from_millis(10));
        let mut link = Link::new(cfg, 11).unwrap();
        for i in 0..200 {
            link.send(SimTime::from_micros(u64::from(i) * 100), numbered(i));
        }
        let got = drain(&mut link);
        let order: Vec<u32> = got
            .iter()
            .map(|(_, p)| u32::from_be_bytes(p[..4].try_into().unwrap()))
            .collect();
        let late = order.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(late > 0, "10 ms jitter over 100 us spacing must reorder");
        assert!(link.stats().reordered > 0);
        // Arrival times never go backwards.
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            (0..200).collect::<Vec<_>>(),
            "every packet exactly once"
        );
    }

    #[test]
    fn reorder_probability_holds_packets_back() {
        let cfg = LinkConfig::default().with_reorder(0.5, Duration::from_millis(20));
        let mut link = Link::new(cfg, 5).unwrap();
        for i in 0..100 {
            link.send(SimTime::from_millis(u64::from(i)), numbered(i));
        }
        drain(&mut link);
        let r = link.stats().reordered;
        assert!(
            r > 10,
            "half the packets held 20 ms behind 1 ms spacing: {r} reordered"
        );
    }

    #[test]
    fn duplicates_are_exact_copies() {
        let mut link = Link::new(LinkConfig::default().with_duplicate(1.0), 2).unwrap();
        link.send(SimTime::ZERO, numbered(9));
        let got = drain(&mut link);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1, got[1].1);
        assert_eq!(link.stats().duplicated, 1);
    }

    #[test]
    fn corruption_flips_exactly_the_configured_number_of_bits() {
        for bits in [1u32, 3] {
            let mut cfg = LinkConfig::default().with_corrupt(1.0);
            cfg.corrupt_bits = bits;
            let mut link = Link::new(cfg, 4).unwrap();
            let original = numbered(0x5a5a_0ff0);
            for _ in 0..50 {
                link.send(SimTime::ZERO, original.clone());
            }
            for (_, p) in drain(&mut link) {
                let flipped: u32 = p
                    .iter()
                    .zip(&original)
                    .map(|(a, b)| (a ^ b).count_ones())
                    .sum();
                assert_eq!(flipped, bits);
            }
            assert_eq!(link.stats().corrupted, 50);
        }
    }

    #[test]
    fn bottleneck_serialises_and_tail_drops() {
        // 1 MB/s: a 1000-byte packet takes 1 ms; 3000 bytes of queue.
        let cfg = LinkConfig::default()
            .with_delay(Duration::ZERO)
            .with_rate(1_000_000, 3000);
        let mut link = Link::new(cfg, 1).unwrap();
        let outcomes: Vec<_> = (0..6)
            .map(|_| link.send(SimTime::ZERO, vec![0; 1000]))
            .collect();
        let arrivals: Vec<_> = outcomes
            .iter()
            .filter_map(|o| match o {
                SendOutcome::Scheduled { arrives, .. } => Some(*arrives),
                _ => None,
            })
            .collect();
        assert_eq!(
            arrivals,
            (1..=3).map(SimTime::from_millis).collect::<Vec<_>>(),
            "three fit (one on the wire, two queued)"
        );
        assert_eq!(link.stats().dropped_queue, 3);
        // Once the queue drained, packets fit again.
        assert!(matches!(
            link.send(SimTime::from_millis(3), vec![0; 1000]),
            SendOutcome::Scheduled { .. }
        ));
    }

    #[test]
    fn invalid_configs_are_refused() {
        assert_eq!(
            Link::new(LinkConfig::default().with_loss(1.5), 0).unwrap_err(),
            LinkConfigError::Probability("loss")
        );
        assert_eq!(
            Link::new(LinkConfig::default().with_corrupt(f64::NAN), 0).unwrap_err(),
            LinkConfigError::Probability("corrupt")
        );
        assert_eq!(
            Link::new(LinkConfig::default().with_mtu(10), 0).unwrap_err(),
            LinkConfigError::MtuTooSmall
        );
        assert_eq!(
            Link::new(LinkConfig::default().with_rate(0, 10), 0).unwrap_err(),
            LinkConfigError::ZeroRate
        );
    }
}
