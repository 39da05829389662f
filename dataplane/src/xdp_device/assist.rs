//! Who drives an assisted engine ([`crate::XdpConfig::assist`]): its thread, or the
//! application's polls and posts. A program waiting in a poll loop for a ping-pong's answer
//! is served fastest by its own thread: no hand-off between threads, no second thread
//! competing for the core. A bulk transfer keeps the engine thread busy, and there the
//! application's thread is best out of its way.
//!
//! The engine thread decides, in windows of [`STAND_DOWN`]: it stands down (sleeps a window,
//! the application's polls then run the rounds and its posts transmit at once) when the
//! application polled at least [`STAND_DOWN_POLLS`] times in a window in which the engine
//! spent under a quarter of the time in rounds that found work. After a window stood down it
//! stays down while the application's rounds mostly found nothing (at least 8 idle ones per
//! busy one: a ping-pong's waits), and resumes otherwise (a transfer began). While the engine
//! thread runs, the application's polls only count themselves, and yield while the engine
//! thread's last round found work.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A window of the engine thread's decision, and how long it sleeps when it stands down.
pub(crate) const STAND_DOWN: Duration = Duration::from_micros(500);
/// The application's empty polls within one window that can make the engine thread stand
/// down: a program waiting in a poll loop makes thousands; one that polls now and then and
/// otherwise waits on memory for what the engine places keeps its engine thread.
pub(crate) const STAND_DOWN_POLLS: u64 = 32;
/// What a round of the application's that found work adds to its count, as a mark (the low
/// half counts polls and rounds that found nothing).
const BUSY_ROUND: u64 = 1 << 32;

/// What the application's threads and the engine thread share.
#[derive(Debug, Default)]
pub(crate) struct Assist {
    /// The application's empty polls and idle rounds (low half) and busy rounds (high half).
    app: AtomicU64,
    /// The engine thread's last round found work.
    engine_busy: AtomicBool,
    /// The engine thread is standing down: the application's calls drive.
    standing_down: AtomicBool,
}

/// What an application's empty poll should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AppStep {
    /// Run a round (then report it with [`Assist::app_round`]).
    Drive,
    /// Give the core to the busy engine thread.
    Yield,
    /// Return to the application.
    Return,
}

impl Assist {
    /// An application's poll found nothing: what it does now (counted as a wait unless it
    /// drives).
    pub(crate) fn app_poll(&self) -> AppStep {
        if self.standing_down.load(Ordering::Relaxed) {
            return AppStep::Drive;
        }
        self.app.fetch_add(1, Ordering::Relaxed);
        if self.engine_busy.load(Ordering::Relaxed) {
            AppStep::Yield
        } else {
            AppStep::Return
        }
    }

    /// The application ran a round, which found work or not.
    pub(crate) fn app_round(&self, busy: bool) {
        let n = if busy { BUSY_ROUND } else { 1 };
        self.app.fetch_add(n, Ordering::Relaxed);
    }

    /// Whether the application's posts transmit at once (the engine thread stands down).
    pub(crate) fn posts_transmit(&self) -> bool {
        self.standing_down.load(Ordering::Relaxed)
    }

    fn app_count(&self) -> u64 {
        self.app.load(Ordering::Relaxed)
    }
}

/// The engine thread's side: the current window.
#[derive(Debug)]
pub(crate) struct EngineWindow {
    start: Instant,
    /// Time spent in rounds that found work, in this window.
    busy: Duration,
    /// The application's count at the start of this window (or of the stand-down).
    app_at_start: u64,
    /// The last window was stood down.
    stood_down: bool,
}

impl EngineWindow {
    /// A first window, starting `now`.
    pub(crate) fn new(assist: &Assist, now: Instant) -> Self {
        EngineWindow {
            start: now,
            busy: Duration::ZERO,
            app_at_start: assist.app_count(),
            stood_down: false,
        }
    }

    /// The engine thread ran a round that took `took` and found work or not.
    pub(crate) fn round(&mut self, assist: &Assist, busy: bool, took: Duration) {
        assist.engine_busy.store(busy, Ordering::Relaxed);
        if busy {
            self.busy += took;
        }
    }

    /// Whether the engine thread stands down now (for one [`STAND_DOWN`]); if so the caller
    /// sleeps, then calls [`EngineWindow::woke`].
    pub(crate) fn stand_down(&mut self, assist: &Assist, now: Instant) -> bool {
        let delta = assist.app_count().wrapping_sub(self.app_at_start);
        let (app_busy, app_idle) = (delta >> 32, delta & 0xffff_ffff);
        let down = if self.stood_down {
            // The application drove the last window: on while its rounds mostly waited.
            app_idle >= STAND_DOWN_POLLS && app_idle >= app_busy * 8
        } else {
            let took = now.saturating_duration_since(self.start);
            if took < STAND_DOWN {
                return false;
            }
            app_idle >= STAND_DOWN_POLLS && self.busy * 4 < took
        };
        self.start = now;
        self.busy = Duration::ZERO;
        self.app_at_start = assist.app_count();
        self.stood_down = down;
        if down {
            assist.engine_busy.store(false, Ordering::Relaxed);
            assist.standing_down.store(true, Ordering::Relaxed);
        }
        down
    }

    /// Back from standing down, `now`: the engine thread runs the rounds again unless the
    /// next [`EngineWindow::stand_down`] says otherwise.
    pub(crate) fn woke(&mut self, assist: &Assist, now: Instant) {
        assist.standing_down.store(false, Ordering::Relaxed);
        self.start = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn polls(a: &Assist, n: u64) -> Vec<AppStep> {
        (0..n).map(|_| a.app_poll()).collect()
    }

    /// A program waiting in a poll loop beside an engine thread that finds little work:
    /// the thread stands down, the program's polls drive and its posts transmit; it stays
    /// down while the program's rounds mostly wait.
    #[test]
    fn a_polling_program_beside_an_idle_engine_takes_over() {
        let a = Assist::default();
        let t = Instant::now();
        let mut w = EngineWindow::new(&a, t);
        w.round(&a, true, Duration::from_micros(20));
        w.round(&a, false, Duration::from_micros(1));
        assert!(polls(&a, 100).iter().all(|s| *s == AppStep::Return));
        assert!(
            !w.stand_down(&a, t + STAND_DOWN / 2),
            "before the window ends"
        );
        assert!(w.stand_down(&a, t + STAND_DOWN));
        assert!(a.posts_transmit());
        assert_eq!(a.app_poll(), AppStep::Drive);
        for _ in 0..5 {
            a.app_round(true);
            (0..40).for_each(|_| a.app_round(false));
        }
        w.woke(&a, t + 2 * STAND_DOWN);
        assert!(!a.posts_transmit());
        assert!(w.stand_down(&a, t + 2 * STAND_DOWN), "a ping-pong's waits");
    }

    /// A bulk transfer: the engine thread spends most of its window in busy rounds; however
    /// much the program polls, it keeps the engine, and the polls yield to it.
    #[test]
    fn a_busy_engine_thread_keeps_its_rounds() {
        let a = Assist::default();
        let t = Instant::now();
        let mut w = EngineWindow::new(&a, t);
        w.round(&a, true, STAND_DOWN / 2);
        assert!(polls(&a, 10_000).iter().all(|s| *s == AppStep::Yield));
        assert!(!w.stand_down(&a, t + STAND_DOWN));
        assert!(!a.posts_transmit());
        // Nor with too few polls beside an idle engine (a program waiting on memory).
        w.round(&a, false, Duration::from_micros(1));
        polls(&a, STAND_DOWN_POLLS - 1);
        assert!(!w.stand_down(&a, t + 2 * STAND_DOWN));
    }

    /// Standing down, the program's rounds start finding work (a transfer began): the engine
    /// thread resumes after the window.
    #[test]
    fn the_engine_thread_resumes_when_the_programs_rounds_find_work() {
        let a = Assist::default();
        let t = Instant::now();
        let mut w = EngineWindow::new(&a, t);
        polls(&a, 1000);
        assert!(w.stand_down(&a, t + STAND_DOWN));
        for _ in 0..50 {
            a.app_round(true);
            (0..3).for_each(|_| a.app_round(false));
        }
        w.woke(&a, t + 2 * STAND_DOWN);
        assert!(!w.stand_down(&a, t + 2 * STAND_DOWN));
        assert_eq!(
            a.app_poll(),
            AppStep::Return,
            "the engine thread drives again"
        );
    }
}
