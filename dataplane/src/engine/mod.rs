//! The per-queue polling engine: the sans-IO [`endpoint::Endpoint`] (our TCP + MPA + DDP/RDMAP
//! for many connections) driven over a packet I/O (AF_XDP).
//!
//! ```text
//! Engine::poll(now):
//!   PacketIo::rx_batch ─ each frame, in place ─ Endpoint::handle_frame
//!   Endpoint::handle_timeout
//!   Endpoint::poll_transmit(FrameSink = the I/O's transmit frames: FPDUs framed straight in)
//!   PacketIo::flush
//! ```
//!
//! A [`FaultyIo`] wrapper injects seeded drops, duplicates, reordering and corruption on both
//! paths. The application calls [`Engine::poll`] (the verbs API's xdp transport does so from
//! its own engine thread, or from the application's calls in inline mode).

#[cfg(target_os = "linux")]
mod chain;
mod corrupt;
mod fault;
mod handoff;
mod io;
mod poll_loop;
#[cfg(target_os = "linux")]
mod xsk_io;

pub use crate::pd::PdHandle;
pub use fault::{FaultConfig, FaultCounters, FaultParseError, FaultyIo};
pub use handoff::{HandOff, HandOffCounters, LaneLink, INBOX_MAX};
pub use io::PacketIo;
pub use poll_loop::{Engine, CLOCK_EVERY_IDLE};
#[cfg(target_os = "linux")]
pub use xsk_io::XskIo;
