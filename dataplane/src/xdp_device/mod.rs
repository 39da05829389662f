//! The `xdp` transport behind the verbs API: one AF_XDP engine per receive queue (a lane, an
//! `XdpLane`), the lanes of a device behind one XDP program ([`XdpLanes`]), shared by its
//! listeners, queue pairs and completion queues.
//!
//! ```text
//! Device::open_xdp ── XdpLanes ─┬─ XdpLane (lane 0) ── Mutex<State { Engine<XskIo>, routes, ... }>
//!                               ├─ XdpLane (lane 1) ...       ▲ poll + route (engine thread, or the
//!                               └─ SharedProgram, HandOff      │ application's threads in inline mode)
//!   QueuePair ── XdpQp (its lane) ── post_* ──────────────────┘ (lock order: lane state -> PD)
//!   Listener ── XdpListener ── a listener per lane; accept_timeout takes a routed ConnectRequest
//!   CompletionQueue ◄── routed completions (pushed under the lane's state lock)
//! ```
//!
//! Each lane's completions and events are routed after every poll: completions to the queue
//! pair's completion queues, MPA outcomes to waiting `connect` calls and listeners, stream
//! errors and closes to the queue pair's status. Connections reach their protection domain's
//! regions directly (the one copy: UMEM frame to region).

mod assist;
mod lanes;
mod open;
mod route;
mod shared_program;
mod xdp_listener;
mod xdp_qp;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) use lanes::{wait_on_lanes, XdpLanes};
pub(crate) use route::State;
pub(crate) use xdp_listener::{XdpIncoming, XdpListener};
pub(crate) use xdp_qp::XdpQp;

use afxdp::netns::NetNs;

/// Idle polls of the engine thread before it starts sleeping between polls.
const IDLE_SPINS: u32 = 2000;
/// The engine thread's sleep while idle.
const IDLE_SLEEP: Duration = Duration::from_micros(50);
/// How long past the last close deadline a dropped device keeps driving its engine (the
/// abort itself takes a round).
const DRAIN_GRACE: Duration = Duration::from_millis(100);

/// What the engine thread and the handles share.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Application threads waiting for the state lock: the engine thread steps aside.
    waiters: AtomicUsize,
    /// The application drives the engine (no engine thread).
    pub(crate) inline: bool,
    /// An engine thread runs, and the application's polls and posts drive the engine too
    /// ([`crate::XdpConfig::assist`]).
    pub(crate) assisted: bool,
    /// Who drives an assisted engine: its thread or the application's calls.
    assist: assist::Assist,
    /// This engine's lane (index) among the device's.
    pub(crate) lane: u16,
    /// The device's other lanes (set once all are open): an inline lane's waits drive them
    /// too, since packets of its flows may arrive on their queues (the hand-off).
    pub(crate) siblings: std::sync::OnceLock<Vec<std::sync::Weak<Shared>>>,
    /// The interface's network namespace (next-hop look-ups run there).
    pub(crate) netns: NetNs,
    pub(crate) ip: std::net::IpAddr,
    /// What the device was set up with.
    pub(crate) info: crate::XdpInfo,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpShared")
            .field("ip", &self.ip)
            .field("inline", &self.inline)
            .finish()
    }
}

impl Shared {
    /// The state, for an application thread: the engine thread yields to it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.waiters.fetch_add(1, Ordering::AcqRel);
        let g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.waiters.fetch_sub(1, Ordering::AcqRel);
        g
    }

    /// Whether the application's calls drive the engine: inline, or assisted.
    pub(crate) fn calls_drive(&self) -> bool {
        self.inline || self.assisted
    }

    /// Whether a post on an idle connection goes out from the posting thread at once: inline,
    /// or assisted while the engine thread stands down (a ping-pong's answer). While the
    /// engine thread runs, it sends: a bulk sender's posts only queue, and the thread that
    /// frames them is not kept spinning on the lock while the application's thread does.
    pub(crate) fn posts_transmit(&self) -> bool {
        self.inline || (self.assisted && self.assist.posts_transmit())
    }

    /// One round of engine work and routing for an application's poll that found nothing
    /// (inline or assisted mode; a no-op when only an engine thread runs it). Assisted, as
    /// [`assist`] decides: a round while the engine thread stands down, else the poll is
    /// counted (and yields while the engine thread's last round found work).
    pub(crate) fn drive(&self) {
        if self.inline {
            self.lock().poll_spinning();
        } else {
            self.try_drive();
        }
    }

    /// [`Shared::drive`], skipping the round if another thread holds the state (it is
    /// driving, or using, the engine right now).
    pub(crate) fn try_drive(&self) {
        if self.inline {
            if let Ok(mut st) = self.state.try_lock() {
                st.poll_spinning();
            }
        } else if self.assisted {
            match self.assist.app_poll() {
                assist::AppStep::Drive => {
                    if let Ok(mut st) = self.state.try_lock() {
                        let busy = st.poll_spinning();
                        self.assist.app_round(busy);
                    }
                }
                assist::AppStep::Yield => std::thread::yield_now(),
                assist::AppStep::Return => {}
            }
        }
    }

    /// One round of each other inline lane that no thread holds right now.
    pub(crate) fn drive_siblings(&self) {
        for s in self.siblings.get().into_iter().flatten() {
            if let Some(s) = s.upgrade() {
                s.try_drive();
            }
        }
    }

    /// Drives the engine until the connections the application closed have finished (FIN
    /// exchanged, or reset at their close timeout): the last handle of a device is often
    /// dropped right after its queue pairs were closed.
    fn drain_closing(&self) {
        loop {
            let now = Instant::now();
            if self.inline {
                self.drive_siblings();
            }
            let mut st = self.lock();
            st.poll(now);
            match st.engine.endpoint().lingering_until() {
                Some(until) if now <= until + DRAIN_GRACE => {}
                _ => return,
            }
            drop(st);
            std::thread::sleep(IDLE_SLEEP);
        }
    }

    /// Runs `f` on the state until it returns `Some` or `deadline` passes, driving the engine
    /// meanwhile in inline mode.
    pub(crate) fn wait_until<T>(
        &self,
        deadline: Instant,
        f: impl FnMut(&mut State) -> Option<T>,
    ) -> Option<T> {
        self.wait_paced(deadline, None, f)
    }

    /// [`Shared::wait_until`], sleeping `pace` between rounds in inline mode instead of only
    /// yielding: for waits that may last long beside other threads driving the same engine
    /// (an acceptor beside the connections it accepted).
    pub(crate) fn wait_paced<T>(
        &self,
        deadline: Instant,
        pace: Option<Duration>,
        mut f: impl FnMut(&mut State) -> Option<T>,
    ) -> Option<T> {
        loop {
            let now = Instant::now();
            {
                let mut st = self.lock();
                if self.inline {
                    st.poll(Instant::now());
                }
                if let Some(t) = f(&mut st) {
                    return Some(t);
                }
            }
            if now >= deadline {
                return None;
            }
            if self.inline {
                self.drive_siblings();
                match pace {
                    Some(d) => std::thread::sleep(d),
                    None => std::thread::yield_now(),
                }
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }
}

/// One lane of an open AF_XDP device: the engine of one receive queue, with its AF_XDP socket
/// and, unless inline, its engine thread. Dropping the last handle stops the thread, drives the
/// closing connections to their end and closes the socket (freeing the UMEM). The XDP program
/// is the device's, shared by its lanes: it detaches when the last lane goes.
pub(crate) struct XdpLane {
    pub(crate) shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for XdpLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.shared.fmt(f)
    }
}

impl XdpLane {
    fn start(shared: Arc<Shared>, core: Option<usize>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = (!shared.inline).then(|| {
            let (s, stop) = (shared.clone(), stop.clone());
            crate::library_thread::spawn("xwarp-engine", move || engine_thread(&s, &stop, core))
                .expect("spawn the engine thread")
        });
        XdpLane {
            shared,
            stop,
            thread,
        }
    }
}

impl Drop for XdpLane {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shared.drain_closing();
    }
}

/// The engine thread: busy-polls, steps aside for application threads that want the state,
/// and sleeps briefly after a long idle stretch. On an assisted engine it stands down (sleeps
/// [`assist::STAND_DOWN`] at a time) while the application waits in a poll loop and the
/// engine has little to do: the two would otherwise compete for the core the application
/// spins on.
fn engine_thread(shared: &Shared, stop: &AtomicBool, core: Option<usize>) {
    if let Some(id) = core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id }) {
            tracing::warn!(core = id, "engine thread could not be pinned");
        }
    }
    let mut idle = 0u32;
    // Test hook, debug builds only: XWARP_TEST_PANIC=engine makes this thread panic in its
    // first busy round (supervision tests of the daemon).
    let inject_panic =
        cfg!(debug_assertions) && std::env::var("XWARP_TEST_PANIC").is_ok_and(|v| v == "engine");
    let mut window = assist::EngineWindow::new(&shared.assist, Instant::now());
    while !stop.load(Ordering::Acquire) {
        let started = if shared.assisted {
            let now = Instant::now();
            if window.stand_down(&shared.assist, now) {
                std::thread::sleep(assist::STAND_DOWN);
                window.woke(&shared.assist, Instant::now());
                continue;
            }
            Some(now)
        } else {
            None
        };
        let busy = {
            let mut st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            st.poll_spinning()
        };
        if let Some(t0) = started {
            window.round(&shared.assist, busy, t0.elapsed());
        }
        if busy && inject_panic {
            panic!("injected by XWARP_TEST_PANIC=engine");
        }
        while shared.waiters.load(Ordering::Acquire) > 0 {
            std::hint::spin_loop();
        }
        if busy {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            if idle > IDLE_SPINS {
                std::thread::sleep(IDLE_SLEEP);
            } else {
                std::thread::yield_now();
            }
        }
    }
}
