//! The per-queue polling engine: our TCP + MPA + DDP/RDMAP over a packet I/O (AF_XDP or an
//! in-memory link).
//!
//! ```text
//! PacketIo::rx_batch ─ frame ─ Ethernet ─ IPv4/TCP (tcp_offload::wire) ─ flow table ─┬─ Connection
//!                                                                         listeners ─┘ (Listener)
//! Connection::poll_recv ─ in order ─ Qp::handle_rx_bytes (MPA parser, place + deliver)
//!                       └ out of order ─ Qp::handle_segment (MPA locator: aligned start or
//!                         markers; placed now, delivered when the gap fills)
//! work requests ─ Qp::poll_transmit ─ Connection::send_record(len, id = stream offset)
//! Connection::poll_transmit_with(FpduSource) ─ Qp::rebuild_fpdu straight into the frame
//!                                               (markers + CRC; retransmissions rebuild from
//!                                               the region) ─ PacketIo::tx_frame
//! snd_una ─ Qp::on_acked ─ Send/Write completions
//! ```
//!
//! Timers (RTO, delayed ACK, keepalive, persist, TIME-WAIT: tcp-offload's; MPA startup timeout:
//! the Qp's) are armed in a [`TimerWheel`]. A [`FaultyIo`] wrapper injects seeded drops,
//! duplicates and reordering on both paths. Bad input is counted ([`EngineCounters`]) and never
//! panics; a protocol error ends only its own connection.
//!
//! The application calls [`Engine::poll`] (the verbs API's xdp transport does so from its own
//! engine thread, or from the application's calls in inline mode).

mod conn;
mod core;
mod counters;
pub mod ethernet;
mod fault;
mod io;
mod mem_link;
mod timer_wheel;
#[cfg(target_os = "linux")]
mod xsk_io;

pub(crate) use self::core::FastMap;
pub use self::core::{
    Engine, EngineConfig, EngineCore, EngineError, EngineEvent, ListenerId, QpSettings,
};
pub use conn::ConnId;
pub use counters::EngineCounters;
pub use fault::{FaultConfig, FaultCounters, FaultyIo};
pub use io::{PacketIo, TxOutcome};
pub use mem_link::{mem_link, MemPort, MEM_FRAME_LEN};
pub use timer_wheel::TimerWheel;
#[cfg(target_os = "linux")]
pub use xsk_io::XskIo;
