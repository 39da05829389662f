//! The loop that drives an endpoint over packet I/O: receive a batch, run the timers, transmit
//! into the I/O's frames, flush.

use std::time::Instant;

use endpoint::{ConnId, Endpoint, EndpointConfig, EndpointError};

use super::fault::{release_held_tx, FaultConfig, FaultCounters, FaultyIo};
use super::io::PacketIo;
use crate::pd::PdHandle;
use crate::stage_times::{self, Stage};

/// Frames taken per receive batch.
const RX_BATCH: usize = 64;
/// [`Engine::poll_spinning`] reads the clock on every this many idle rounds (and on every
/// round that receives): timers fire at most this many idle rounds late (microseconds).
pub const CLOCK_EVERY_IDLE: u32 = 64;

/// One queue's engine: an [`Endpoint`] (whose connections live in the verbs API's protection
/// domains, or in its own memory) driven over packet I/O `I`, with a fault injector between
/// them (off unless configured).
pub struct Engine<I: PacketIo> {
    io: FaultyIo<I>,
    endpoint: Endpoint<PdHandle>,
    last_now: Instant,
    /// Idle rounds of [`Engine::poll_spinning`] since it last read the clock.
    idle_rounds: u32,
}

impl<I: PacketIo> Engine<I> {
    /// An engine over `io`, with `now` as the clock's origin. Refuses a configuration the
    /// endpoint refuses ([`Endpoint::new`]).
    pub fn new(cfg: EndpointConfig, io: I, now: Instant) -> Result<Self, EndpointError> {
        Self::with_faults(cfg, io, FaultConfig::default(), now)
    }

    /// An engine over `io` with `fault` injected on both paths.
    pub fn with_faults(
        cfg: EndpointConfig,
        io: I,
        fault: FaultConfig,
        now: Instant,
    ) -> Result<Self, EndpointError> {
        Ok(Engine {
            io: FaultyIo::new(io, fault),
            endpoint: Endpoint::new(cfg, now)?,
            last_now: now,
            idle_rounds: 0,
        })
    }

    /// The endpoint: connections, memory, work requests, completions, events, counters.
    pub fn endpoint(&self) -> &Endpoint<PdHandle> {
        &self.endpoint
    }
    /// The endpoint, mutably.
    pub fn endpoint_mut(&mut self) -> &mut Endpoint<PdHandle> {
        &mut self.endpoint
    }
    /// What the fault injector did.
    pub fn fault_counters(&self) -> FaultCounters {
        self.io.counters()
    }
    /// Whether the fault injector injects anything.
    pub fn faults_enabled(&self) -> bool {
        self.io.enabled()
    }
    /// The packet I/O.
    pub fn io(&self) -> &I {
        self.io.inner()
    }
    /// The packet I/O, mutably.
    pub fn io_mut(&mut self) -> &mut I {
        self.io.inner_mut()
    }

    /// When to call [`Engine::poll`] next at the latest (the endpoint's timeout, a pending
    /// frame of an in-memory link, or `now` when work is left); `None` when idle.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let t = [self.endpoint.poll_timeout(), self.io.next_rx()]
            .into_iter()
            .flatten()
            .min();
        if self.io.holding() {
            // A frame held back by the fault injector: poll again at once ("now" is the
            // caller's last one).
            return Some(t.map_or(self.last_now, |t| t.min(self.last_now)));
        }
        t
    }

    /// Transmits what `conn` has to send now, without a receive round: for work posted on an
    /// idle connection (nothing in flight), where waiting for the next round only adds latency.
    pub fn transmit_now(&mut self, now: Instant, conn: ConnId) {
        self.last_now = now;
        let t = stage_times::now();
        self.endpoint.transmit_conn(now, conn, &mut self.io);
        self.io.flush(now);
        stage_times::record(Stage::TransmitNow, t);
    }

    /// [`Engine::poll`] for a caller that spins on it (an inline application, the engine
    /// thread): the receive ring is looked at first and the clock read only when frames
    /// arrived, or work or a timer may be due. An idle round compares the timers with the last
    /// reading, refreshed every [`CLOCK_EVERY_IDLE`] idle rounds, so it costs no clock read.
    /// A batch that left its connections nothing to send ends the call once their completions
    /// are queued ([`endpoint::Endpoint::service_received`]): the rest of the round (other
    /// timers, the flush) waits for the next call.
    pub fn poll_spinning(&mut self) -> usize {
        self.poll_spinning_with(&mut Instant::now)
    }

    /// [`Engine::poll_spinning`] reading time from `clock` (tests pass a virtual clock and
    /// count its readings).
    pub fn poll_spinning_with(&mut self, clock: &mut dyn FnMut() -> Instant) -> usize {
        let stale = self.last_now;
        let mut fresh: Option<Instant> = None;
        let Engine { io, endpoint, .. } = self;
        let batch = stage_times::now();
        let n = io.rx_batch(stale, RX_BATCH, &mut |f: &[u8]| {
            let now = *fresh.get_or_insert_with(&mut *clock);
            let t = stage_times::now();
            endpoint.handle_frame(now, f);
            stage_times::record(Stage::HandleFrame, t);
        });
        if n == 0 && !io.holding() {
            self.idle_rounds += 1;
            let due = self.endpoint.poll_timeout().is_some_and(|t| t <= stale);
            if !due && self.idle_rounds < CLOCK_EVERY_IDLE {
                self.io.flush(stale);
                return 0;
            }
        }
        self.idle_rounds = 0;
        let now = fresh.unwrap_or_else(clock);
        self.last_now = now;
        if n == 0 {
            return self.finish_round(now, n);
        }
        let received = stage_times::record(Stage::RxBatch, batch);
        // What the batch placed is the caller's first (the latency path): when it left its
        // connections nothing to send, their completions are queued and their timers armed
        // now, and the rest of the round (other timers, the flush) waits for the next call.
        let n = if !self.io.holding() && self.endpoint.service_received() {
            n
        } else {
            self.finish_round(now, n)
        };
        stage_times::round_ended(stage_times::record(Stage::EngineRound, received));
        n
    }

    /// One round of run-to-completion work: receive a batch, run expired timers, service every
    /// connection that has something to do, transmit. Returns the frames received.
    pub fn poll(&mut self, now: Instant) -> usize {
        self.last_now = now;
        let Engine { io, endpoint, .. } = self;
        // 1. Receive: each frame is handled in place (placement copies straight from it).
        let n = io.rx_batch(now, RX_BATCH, &mut |f: &[u8]| endpoint.handle_frame(now, f));
        self.finish_round(now, n)
    }

    /// The rest of a round after its receive batch of `n` frames: timers, transmit, flush.
    fn finish_round(&mut self, now: Instant, n: usize) -> usize {
        let Engine { io, endpoint, .. } = self;
        // Idle round: nothing arrived, no frame held back, and by the endpoint's own account
        // (`poll_timeout`: no timer due, no work left) nothing to do. Only completed
        // transmissions are reclaimed: a busy-polling engine spends its idle time here.
        if n == 0 && !io.holding() && endpoint.poll_timeout().is_none_or(|t| t > now) {
            io.flush(now);
            return 0;
        }
        // 2. Timers.
        endpoint.handle_timeout(now);
        // 3. Listeners and connections into frames.
        let t = stage_times::now();
        endpoint.poll_transmit(now, io);
        if n > 0 {
            stage_times::record(Stage::PollTransmit, t);
        }
        release_held_tx(io, now);
        io.flush(now);
        n
    }
}
