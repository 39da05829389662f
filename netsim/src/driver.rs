//! The simulation driver: two endpoints joined by a two-way [`Link`], run in virtual time until
//! both say they are done.
//!
//! One step: let each endpoint's application act and drain its outgoing packets onto the link;
//! stop if both are done (or one failed); otherwise jump to the earliest of the next arrival and
//! the endpoints' timeouts, deliver what has arrived by then, and fire the timeouts that are due.

use std::fmt;

use super::link::{Link, LinkConfig, LinkConfigError, LinkStats};
use super::time::SimTime;

/// A host on the simulated link: a transport (TCP/IP) plus whatever application drives it.
///
/// Call order per step, as the driver makes it: `poll_app`, then `poll_transmit` until `None`;
/// later `handle_packet` for each arrived packet and `handle_timeout` when `poll_timeout` is due.
/// `now` never goes backwards.
pub trait SimEndpoint {
    /// An IPv4 packet (maybe corrupted) arrived from the link.
    fn handle_packet(&mut self, now: SimTime, packet: &[u8]);
    /// The next IPv4 packet to put on the link.
    fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>>;
    /// When `handle_timeout` wants to run next (a time at or before `now` means at once).
    fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime>;
    /// A deadline given by `poll_timeout` has passed.
    fn handle_timeout(&mut self, now: SimTime);
    /// The application's turn: write and read stream data, look at connection events.
    fn poll_app(&mut self, now: SimTime);
    /// True once the endpoint has finished all it set out to do.
    fn is_done(&self) -> bool;
    /// Something the endpoint found wrong (bad data, reset, ...): ends the run with an error.
    fn failure(&self) -> Option<String> {
        None
    }
}

/// One of the two endpoints; also names the link direction it sends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SimSide {
    /// The first endpoint given to [`Sim::new`].
    A,
    /// The second endpoint given to [`Sim::new`].
    B,
}

impl SimSide {
    /// The other side.
    pub fn peer(self) -> SimSide {
        match self {
            SimSide::A => SimSide::B,
            SimSide::B => SimSide::A,
        }
    }
}

/// Limits of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Virtual time after which the run fails with [`SimError::TimeLimit`].
    pub time_limit: SimTime,
    /// Steps allowed without time advancing before the run fails with [`SimError::Livelock`].
    pub max_steps_per_instant: u32,
}

impl Default for SimConfig {
    /// Ten virtual minutes; 100 000 steps per instant.
    fn default() -> Self {
        SimConfig {
            time_limit: SimTime::from_secs(600),
            max_steps_per_instant: 100_000,
        }
    }
}

/// How a run ended when both endpoints finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimReport {
    /// Virtual time when both were done.
    pub end: SimTime,
    /// Link counters, A to B.
    pub a_to_b: LinkStats,
    /// Link counters, B to A.
    pub b_to_a: LinkStats,
    /// Driver steps taken.
    pub steps: u64,
}

/// Why a run did not finish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// An endpoint reported a failure.
    Endpoint {
        /// Which one.
        side: SimSide,
        /// What it said.
        reason: String,
        /// When.
        at: SimTime,
    },
    /// Nothing in flight and no timer armed, but not done: nothing can happen any more.
    Stalled {
        /// When.
        at: SimTime,
    },
    /// The next event lies past [`SimConfig::time_limit`].
    TimeLimit {
        /// Time of the last step.
        at: SimTime,
    },
    /// Time stopped advancing (an endpoint keeps asking for an immediate timeout).
    Livelock {
        /// The stuck instant.
        at: SimTime,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Endpoint { side, reason, at } => {
                write!(f, "endpoint {side:?} failed at {at}: {reason}")
            }
            SimError::Stalled { at } => {
                write!(f, "stalled at {at}: no packet in flight, no timer armed")
            }
            SimError::TimeLimit { at } => write!(f, "time limit reached at {at}"),
            SimError::Livelock { at } => write!(f, "livelock at {at}: time stopped advancing"),
        }
    }
}

impl std::error::Error for SimError {}

/// Observer of every packet an endpoint hands to the link, before the link's faults.
pub type Tap = Box<dyn FnMut(SimSide, SimTime, &[u8])>;

/// Two endpoints, a link each way, virtual time.
pub struct Sim<A, B> {
    /// Endpoint A.
    pub a: A,
    /// Endpoint B.
    pub b: B,
    a_to_b: Link,
    b_to_a: Link,
    now: SimTime,
    cfg: SimConfig,
    taps: Vec<Tap>,
    steps: u64,
    steps_this_instant: u32,
    pause_at: Option<SimTime>,
}

/// Seeds for the two link directions, derived from the run's seed.
fn direction_seed(seed: u64, side: SimSide) -> u64 {
    let salt = match side {
        SimSide::A => 0x5349_4d5f_415f_4232,
        SimSide::B => 0x5349_4d5f_425f_4132,
    };
    super::verify::mix64(seed ^ salt)
}

impl<A: SimEndpoint, B: SimEndpoint> Sim<A, B> {
    /// A simulation whose faults all derive from `seed`.
    pub fn new(
        seed: u64,
        a: A,
        b: B,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Result<Self, LinkConfigError> {
        Ok(Sim {
            a,
            b,
            a_to_b: Link::new(a_to_b, direction_seed(seed, SimSide::A))?,
            b_to_a: Link::new(b_to_a, direction_seed(seed, SimSide::B))?,
            now: SimTime::ZERO,
            cfg: SimConfig::default(),
            taps: Vec::new(),
            steps: 0,
            steps_this_instant: 0,
            pause_at: None,
        })
    }

    /// Replaces the limits.
    pub fn with_config(mut self, cfg: SimConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// Adds an observer of every packet sent (as sent, before loss or corruption).
    pub fn add_tap(&mut self, tap: impl FnMut(SimSide, SimTime, &[u8]) + 'static) {
        self.taps.push(Box::new(tap));
    }

    /// Current virtual time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The link direction `from` sends on.
    pub fn link(&self, from: SimSide) -> &Link {
        match from {
            SimSide::A => &self.a_to_b,
            SimSide::B => &self.b_to_a,
        }
    }

    /// The link direction `from` sends on, e.g. to inject a packet by hand.
    pub fn link_mut(&mut self, from: SimSide) -> &mut Link {
        match from {
            SimSide::A => &mut self.a_to_b,
            SimSide::B => &mut self.b_to_a,
        }
    }

    /// Counters so far.
    pub fn report(&self) -> SimReport {
        SimReport {
            end: self.now,
            a_to_b: *self.a_to_b.stats(),
            b_to_a: *self.b_to_a.stats(),
            steps: self.steps,
        }
    }

    fn pump(&mut self, side: SimSide) {
        let now = self.now;
        let (ep, link): (&mut dyn SimEndpoint, &mut Link) = match side {
            SimSide::A => (&mut self.a, &mut self.a_to_b),
            SimSide::B => (&mut self.b, &mut self.b_to_a),
        };
        ep.poll_app(now);
        while let Some(packet) = ep.poll_transmit(now) {
            for tap in &mut self.taps {
                tap(side, now, &packet);
            }
            link.send(now, packet);
        }
    }

    fn failure(&self) -> Option<SimError> {
        let at = self.now;
        if let Some(reason) = self.a.failure() {
            return Some(SimError::Endpoint {
                side: SimSide::A,
                reason,
                at,
            });
        }
        self.b.failure().map(|reason| SimError::Endpoint {
            side: SimSide::B,
            reason,
            at,
        })
    }

    /// One step (see the module doc). `Ok(true)` once both endpoints are done.
    pub fn step(&mut self) -> Result<bool, SimError> {
        self.steps += 1;
        self.pump(SimSide::A);
        self.pump(SimSide::B);
        if let Some(e) = self.failure() {
            return Err(e);
        }
        if self.a.is_done() && self.b.is_done() {
            return Ok(true);
        }
        let now = self.now;
        let next = [
            self.a_to_b.next_arrival(),
            self.b_to_a.next_arrival(),
            self.a.poll_timeout(now),
            self.b.poll_timeout(now),
            self.pause_at,
        ]
        .into_iter()
        .flatten()
        .min()
        .ok_or(SimError::Stalled { at: now })?;
        if next > self.cfg.time_limit {
            return Err(SimError::TimeLimit { at: now });
        }
        if next > now {
            self.now = next;
            self.steps_this_instant = 0;
        } else {
            self.steps_this_instant += 1;
            if self.steps_this_instant > self.cfg.max_steps_per_instant {
                return Err(SimError::Livelock { at: now });
            }
        }
        let now = self.now;
        while let Some(p) = self.a_to_b.pop_arrived(now) {
            self.b.handle_packet(now, &p);
        }
        while let Some(p) = self.b_to_a.pop_arrived(now) {
            self.a.handle_packet(now, &p);
        }
        if self.a.poll_timeout(now).is_some_and(|t| t <= now) {
            self.a.handle_timeout(now);
        }
        if self.b.poll_timeout(now).is_some_and(|t| t <= now) {
            self.b.handle_timeout(now);
        }
        Ok(false)
    }

    /// Steps until both endpoints are done.
    pub fn run(&mut self) -> Result<SimReport, SimError> {
        while !self.step()? {}
        Ok(self.report())
    }

    /// Steps until virtual time reaches `until` (or both are done); for tests that intervene.
    /// Time lands exactly on `until`.
    pub fn run_until(&mut self, until: SimTime) -> Result<bool, SimError> {
        self.pause_at = Some(until);
        let mut result = Ok(false);
        while self.now < until {
            match self.step() {
                Ok(false) => {}
                other => {
                    result = other;
                    break;
                }
            }
        }
        self.pause_at = None;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    /// A toy stop-and-wait sender: sends packet `i` until it hears `i` echoed, `count` times.
    struct StopAndWait {
        count: u32,
        next: u32,
        deadline: Option<SimTime>,
        resend: bool,
        sends: u32,
    }

    /// Echoes every packet back.
    #[derive(Default)]
    struct Echo {
        out: Vec<Vec<u8>>,
        seen: u32,
    }

    impl SimEndpoint for StopAndWait {
        fn handle_packet(&mut self, _now: SimTime, packet: &[u8]) {
            if packet == self.next.to_be_bytes() {
                self.next += 1;
                self.deadline = None;
                self.resend = self.next < self.count;
            }
        }
        fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>> {
            if !std::mem::take(&mut self.resend) {
                return None;
            }
            self.sends += 1;
            self.deadline = Some(now + Duration::from_millis(50));
            Some(self.next.to_be_bytes().to_vec())
        }
        fn poll_timeout(&mut self, _now: SimTime) -> Option<SimTime> {
            self.deadline
        }
        fn handle_timeout(&mut self, _now: SimTime) {
            self.deadline = None;
            self.resend = true;
        }
        fn poll_app(&mut self, _now: SimTime) {}
        fn is_done(&self) -> bool {
            self.next == self.count
        }
    }

    impl SimEndpoint for Echo {
        fn handle_packet(&mut self, _now: SimTime, packet: &[u8]) {
            self.seen += 1;
            self.out.push(packet.to_vec());
        }
        fn poll_transmit(&mut self, _now: SimTime) -> Option<Vec<u8>> {
            self.out.pop()
        }
        fn poll_timeout(&mut self, _now: SimTime) -> Option<SimTime> {
            None
        }
        fn handle_timeout(&mut self, _now: SimTime) {}
        fn poll_app(&mut self, _now: SimTime) {}
        fn is_done(&self) -> bool {
            true
        }
    }

    fn sender(count: u32) -> StopAndWait {
        StopAndWait {
            count,
            next: 0,
            deadline: None,
            resend: true,
            sends: 0,
        }
    }

    #[test]
    fn runs_to_completion_in_virtual_time() {
        let mut sim = Sim::new(
            1,
            sender(10),
            Echo::default(),
            LinkConfig::default(),
            LinkConfig::default(),
        )
        .unwrap();
        let report = sim.run().unwrap();
        // 10 round trips of 2 x 5 ms each, nothing lost.
        assert_eq!(report.end, SimTime::from_millis(100));
        assert_eq!(sim.a.sends, 10);
        assert_eq!(report.a_to_b.delivered, 10);
        assert_eq!(report.b_to_a.delivered, 10);
    }

    #[test]
    fn timeouts_recover_losses_and_runs_repeat_by_seed() {
        let lossy = LinkConfig::default().with_loss(0.3);
        let run = |seed| {
            let mut sim = Sim::new(
                seed,
                sender(50),
                Echo::default(),
                lossy.clone(),
                lossy.clone(),
            )
            .unwrap();
            let report = sim.run().unwrap();
            (report, sim.a.sends)
        };
        let (report, sends) = run(42);
        assert!(sends > 50, "losses force resends");
        assert!(report.a_to_b.lost + report.b_to_a.lost > 0);
        assert_eq!(run(42), (report, sends), "same seed, same run");
        assert_ne!(run(43).0, report, "another seed, another run");
    }

    #[test]
    fn tap_sees_every_packet_as_sent() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let log = Rc::clone(&seen);
        let mut cfg = LinkConfig::default().with_corrupt(1.0);
        cfg.corrupt_bits = 8;
        let mut sim = Sim::new(3, sender(1), Echo::default(), LinkConfig::default(), cfg).unwrap();
        sim.add_tap(move |side, now, p| log.borrow_mut().push((side, now, p.to_vec())));
        // The echo comes back corrupted, so the sender keeps resending: stop after a while.
        assert_eq!(sim.run_until(SimTime::from_millis(120)), Ok(false));
        assert_eq!(sim.now(), SimTime::from_millis(120));
        let seen = seen.borrow();
        assert_eq!(
            seen[0],
            (SimSide::A, SimTime::ZERO, 0u32.to_be_bytes().to_vec())
        );
        assert_eq!(
            seen[1],
            (
                SimSide::B,
                SimTime::from_millis(5),
                0u32.to_be_bytes().to_vec()
            )
        );
        assert_eq!(
            seen.iter().filter(|s| s.0 == SimSide::A).count(),
            3,
            "sent at 0, 50, 100 ms"
        );
    }

    #[test]
    fn a_dead_link_stalls_or_hits_the_time_limit() {
        // Nobody ever sends: stalled.
        let idle = StopAndWait {
            count: 1,
            next: 0,
            deadline: None,
            resend: false,
            sends: 0,
        };
        let mut sim = Sim::new(
            1,
            idle,
            Echo::default(),
            LinkConfig::default(),
            LinkConfig::default(),
        )
        .unwrap();
        assert_eq!(sim.run(), Err(SimError::Stalled { at: SimTime::ZERO }));
        // Everything lost: the sender retries until the time limit.
        let dead = LinkConfig::default().with_loss(1.0);
        let mut sim = Sim::new(1, sender(1), Echo::default(), dead, LinkConfig::default())
            .unwrap()
            .with_config(SimConfig {
                time_limit: SimTime::from_secs(1),
                ..SimConfig::default()
            });
        assert!(matches!(sim.run(), Err(SimError::TimeLimit { .. })));
    }

    #[test]
    fn an_endpoint_that_never_lets_time_advance_is_a_livelock() {
        struct Spin;
        impl SimEndpoint for Spin {
            fn handle_packet(&mut self, _: SimTime, _: &[u8]) {}
            fn poll_transmit(&mut self, _: SimTime) -> Option<Vec<u8>> {
                None
            }
            fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime> {
                Some(now)
            }
            fn handle_timeout(&mut self, _: SimTime) {}
            fn poll_app(&mut self, _: SimTime) {}
            fn is_done(&self) -> bool {
                false
            }
        }
        let mut sim = Sim::new(
            1,
            Spin,
            Echo::default(),
            LinkConfig::default(),
            LinkConfig::default(),
        )
        .unwrap()
        .with_config(SimConfig {
            max_steps_per_instant: 10,
            ..SimConfig::default()
        });
        assert_eq!(sim.run(), Err(SimError::Livelock { at: SimTime::ZERO }));
    }

    #[test]
    fn an_endpoint_failure_ends_the_run() {
        struct Broken;
        impl SimEndpoint for Broken {
            fn handle_packet(&mut self, _: SimTime, _: &[u8]) {}
            fn poll_transmit(&mut self, _: SimTime) -> Option<Vec<u8>> {
                None
            }
            fn poll_timeout(&mut self, _: SimTime) -> Option<SimTime> {
                None
            }
            fn handle_timeout(&mut self, _: SimTime) {}
            fn poll_app(&mut self, _: SimTime) {}
            fn is_done(&self) -> bool {
                false
            }
            fn failure(&self) -> Option<String> {
                Some("bad octet".into())
            }
        }
        let mut sim = Sim::new(
            1,
            sender(1),
            Broken,
            LinkConfig::default(),
            LinkConfig::default(),
        )
        .unwrap();
        assert_eq!(
            sim.run(),
            Err(SimError::Endpoint {
                side: SimSide::B,
                reason: "bad octet".into(),
                at: SimTime::ZERO
            })
        );
    }
}
