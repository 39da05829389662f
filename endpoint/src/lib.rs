//! The sans-IO iWARP host: everything a host does that needs no I/O. Many connections, each our
//! TCP (`tcp_offload`) + MPA (`mpa`) + DDP/RDMAP (`ddp::Qp`); frame demultiplexing, listeners,
//! local ports, neighbours, timers, counters. No sockets, no threads, no clock: the caller
//! feeds frames and time and polls for frames, events, completions and the next timeout
//! (quinn-proto's `Endpoint` shape).
//!
//! ```text
//! handle_frame(now, frame) ─ classify ─ Ethernet ─ IPv4/TCP (tcp_offload::wire) ─ flow table ─┬─ Connection
//!                                                                                  listeners ─┘ (Listener)
//!   in order      ─ Qp::handle_rx_bytes (MPA parser, place + deliver), straight from the frame
//!   out of order  ─ Qp::handle_segment (MPA locator: markers or the length chain, MPA-70;
//!                   placed now, delivered when the gap fills; else held for in-order delivery)
//! post(wr) ─ Qp::claim_fpdus ─ Connection::send_record(len, id = stream offset)
//! poll_transmit(now, FrameSink) ─ Connection::poll_transmit_with(FpduSource)
//!   ─ Qp::rebuild_fpdu straight into the sink's frame (markers + CRC; retransmissions rebuild
//!     from the region)
//! snd_una ─ Qp::on_acked ─ Send/Write completions ─ poll_completion
//! handle_timeout(now) ─ TimerWheel (TCP's RTO, delayed ACK, persist, keepalive, TIME-WAIT;
//!                       the MPA startup timeout)
//! ```
//!
//! Which frames are ours is defined once, in [`classify`] (the XDP program applies the same
//! table); `handle_frame` makes its first decision with it, except for the fast path
//! (`EndpointConfig::tcp.fast_path`): a segment of a connection in the flow table, in the common
//! layout and to our address, goes straight to its TCP's header prediction, and an in-order
//! FPDU is placed and delivered at once (`ddp::RdmapEngine::handle_ulpdu_in_order`).
//!
//! A connection reaches memory through a protection domain the caller owns ([`Domain`]: an
//! STag table and the memory behind its regions, locked for a round), or through the endpoint's
//! own table and memory ([`Endpoint::register`]). Its secrets (ISN key, STag seed) are the
//! caller's ([`Secrets`]). Bad input is counted ([`EndpointCounters`])
//! and never panics; a protocol error ends only its own connection.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod classify;
mod clock;
mod config;
mod conn;
mod conn_table;
mod counters;
mod domain;
mod endpoint;
mod error;
pub mod ethernet;
mod event;
mod fair_backlog;
mod frame_sink;
mod lane;
mod local_ports;
mod neighbours;
mod rss;
mod secrets;
mod timer_wheel;

pub use classify::{classify, flow_of, FrameVerdict, OwnedAddrs};
pub use config::{EndpointConfig, EndpointLimits, QpSettings};
pub use conn::ConnId;
pub use counters::EndpointCounters;
pub use domain::{Domain, DomainGuard, NoDomain};
pub use endpoint::listeners::ListenerId;
pub use endpoint::stream::StreamOptions;
pub use endpoint::{Endpoint, FastMap};
pub use error::EndpointError;
pub use event::EndpointEvent;
pub use fair_backlog::{
    Admitted, BacklogRefusal, FairBacklog, PendingSlot, SourceKey, SourcePrefix, SourceShare,
};
pub use frame_sink::{FrameSink, TxOutcome};
pub use lane::Lane;
pub use rss::{toeplitz, RssHash, RssLanes};
pub use secrets::Secrets;
pub use timer_wheel::TimerWheel;
