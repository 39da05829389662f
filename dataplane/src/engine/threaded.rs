//! Threaded mode: the engine busy-polls on its own thread (pinned to a core when asked) and
//! talks to the application through two lock-free SPSC rings: commands in (closures run on the
//! engine thread against [`EngineCore`]), completions, events and replies out.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use ddp::WorkCompletion;

use super::conn::ConnId;
use super::core::{Engine, EngineCore, EngineEvent};
use super::io::PacketIo;
use super::spsc::{spsc, Consumer, Producer};

type Command = Box<dyn FnOnce(&mut EngineCore, Instant) -> Box<dyn Any + Send> + Send>;

enum Output {
    Completion(ConnId, WorkCompletion),
    Event(EngineEvent),
    Reply(Box<dyn Any + Send>),
}

/// Ring sizes.
const RING: usize = 4096;

/// An engine running on its own thread.
pub struct ThreadedEngine {
    commands: Producer<Command>,
    outputs: Consumer<Output>,
    completions: VecDeque<(ConnId, WorkCompletion)>,
    events: VecDeque<EngineEvent>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ThreadedEngine {
    /// Moves `engine` to a new thread, pinned to `core` (a `core_affinity` core index) if given.
    pub fn spawn<I: PacketIo + Send + 'static>(mut engine: Engine<I>, core: Option<usize>) -> Self {
        let (commands, mut cmd_rx) = spsc::<Command>(RING);
        let (mut out_tx, outputs) = spsc::<Output>(RING);
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            if let Some(id) = core {
                if !core_affinity::set_for_current(core_affinity::CoreId { id }) {
                    tracing::warn!(core = id, "engine thread could not be pinned");
                }
            }
            let mut pending: VecDeque<Output> = VecDeque::new();
            while !stop2.load(Ordering::Acquire) {
                let now = Instant::now();
                while let Some(cmd) = cmd_rx.pop() {
                    pending.push_back(Output::Reply(cmd(&mut engine, now)));
                }
                let got = engine.poll(now);
                while let Some((c, wc)) = engine.poll_completion() {
                    pending.push_back(Output::Completion(c, wc));
                }
                while let Some(e) = engine.poll_event() {
                    pending.push_back(Output::Event(e));
                }
                while let Some(o) = pending.pop_front() {
                    if let Err(o) = out_tx.push(o) {
                        pending.push_front(o);
                        break;
                    }
                }
                if got == 0 {
                    std::thread::yield_now();
                }
            }
        });
        ThreadedEngine {
            commands,
            outputs,
            completions: VecDeque::new(),
            events: VecDeque::new(),
            stop,
            thread: Some(thread),
        }
    }

    fn drain(&mut self) -> Option<Box<dyn Any + Send>> {
        let mut reply = None;
        while let Some(o) = self.outputs.pop() {
            match o {
                Output::Completion(c, wc) => self.completions.push_back((c, wc)),
                Output::Event(e) => self.events.push_back(e),
                Output::Reply(r) => {
                    reply = Some(r);
                    break;
                }
            }
        }
        reply
    }

    /// Runs `f` on the engine thread (post work, register memory, read a region, ...) and
    /// returns its result. Spins until the engine answers.
    pub fn call<R: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut EngineCore, Instant) -> R + Send + 'static,
    ) -> R {
        let mut cmd: Command = Box::new(move |e, now| Box::new(f(e, now)) as Box<dyn Any + Send>);
        loop {
            match self.commands.push(cmd) {
                Ok(()) => break,
                Err(c) => {
                    cmd = c;
                    self.drain();
                    std::thread::yield_now();
                }
            }
        }
        loop {
            if let Some(r) = self.drain() {
                return *r.downcast::<R>().expect("reply of the command just sent");
            }
            std::thread::yield_now();
        }
    }

    /// The next completion.
    pub fn poll_completion(&mut self) -> Option<(ConnId, WorkCompletion)> {
        if self.completions.is_empty() {
            self.drain();
        }
        self.completions.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<EngineEvent> {
        if self.events.is_empty() {
            self.drain();
        }
        self.events.pop_front()
    }
}

impl Drop for ThreadedEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
