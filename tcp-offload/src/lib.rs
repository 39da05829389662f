//! xwarp's MPA-aware TCP, sans-IO (quinn-proto shape: `handle_*` / `poll_*`).
//!
//! # What is here
//!
//! * [`Connection`]: one TCP connection. RFC 9293 state machine (active, passive, simultaneous
//!   open; every close state, TIME-WAIT with a configurable 2*MSL; RST sent and handled), RFC 5961
//!   challenge ACKs and ACK validation, RFC 6528 ISNs ([`IsnGenerator`]), MSS / window scale /
//!   timestamps (PAWS, RTT) / SACK options, RFC 6298 RTO, fast retransmit with NewReno (RFC 6582)
//!   or SACK-based recovery (RFC 6675), CUBIC (RFC 9438, default) or NewReno congestion control,
//!   delayed ACKs with a quick-ACK phase, persist timer and zero-window probes, keepalive.
//! * [`TcpListener`]: passive opens with a bounded half-open table, SYN cookies and an accept queue.
//! * [`wire`]: parse and emit IPv4+TCP and IPv6+TCP (no extension headers), header bytes direct;
//!   malformed packets are classified (not ours / malformed: drop and count).
//! * The fast path ([`Config::fast_path`], on by default): header prediction for in-order data
//!   and pure ACKs of ESTABLISHED connections ([`Connection::handle_lean`] for a segment read in
//!   place by [`LeanSegment::parse`], or inside `handle_segment*`), and segments written from a
//!   per-connection header template. Each is a shortcut to the full path's result.
//!
//! # MPA awareness
//!
//! * Transmit: after [`Connection::enter_record_mode`], the upper layer hands in *records* (FPDUs):
//!   [`Connection::send_record`] takes `(len, id)` and a [`RecordSource`] writes the bytes into the
//!   outgoing frame at every (re)transmission, so no retransmit copy is kept;
//!   [`Connection::send_record_bytes`] keeps a copy instead. Every new segment begins with a record
//!   and holds only whole records (several when they fit); retransmissions resend the original
//!   segments unchanged. The MPA §5.3 exceptions (record > EMSS; window < record with nothing in
//!   flight) split a record and are counted in [`TcpCounters::split_emss`] / [`TcpCounters::split_window`].
//! * Receive: in record mode every range that passed all TCP checks is committed once and handed up
//!   at once with its sequence number and the in-order point ([`RxChunk`], via
//!   [`Connection::poll_recv`]), in order or not. Committed octets are never handed up again and never
//!   change. [`Connection::handle_segment_with`] hands the same chunks to an [`RxSink`] during the
//!   call instead, borrowed from the packet ([`RxRef`]): no copy and no allocation in TCP, so the
//!   upper layer can place straight from the receive frame. Out-of-order memory is bounded per connection ([`Config::max_ooo_bytes`],
//!   [`Config::max_ooo_ranges`]) and in total ([`OooBudget`], shared by a [`TcpListener`]).
//! * Byte-stream mode (the default, for the MPA startup frames): [`Connection::send`] /
//!   [`Connection::recv`] as in ordinary TCP.
//!
//! # The TCP RDMA option (draft-csapuntz-tcprdma-00, [`rdma`])
//!
//! With [`Config::tcp_rdma`] on both ends (negotiated in SYN / SYN-ACK), a byte-stream sender
//! marks transfer bytes ([`Connection::mark_transfer`]) and message starts
//! ([`Connection::mark_message_start`]); every segment with transfer bytes carries the option
//! (one run per segment). A receiver registers a buffer per RID
//! ([`Connection::expect_transfer`]); annotated runs are placed there as TCP accepts them, in
//! order or not, and [`Connection::recv_transfer`] consumes those stream octets without a copy
//! ([`Connection::take_transfer`] hands the buffer back).
//!
//! # Call order (per connection, per poll of the engine)
//!
//! 1. For each received packet: [`Connection::handle_packet`] (or parse with [`wire::parse`] and call
//!    [`Connection::handle_segment`] after demultiplexing by [`TcpSegment::tuple`]; in record mode
//!    `handle_segment_with` / `handle_packet_with` deliver the data to a sink right there).
//! 2. If `now >= poll_timeout()`: [`Connection::handle_timeout`]`(now)`.
//! 3. Drain [`Connection::poll_event`] and the received data ([`Connection::recv`] /
//!    [`Connection::poll_recv`]); queue new data ([`Connection::send`] / `send_record*`).
//! 4. Call [`Connection::poll_transmit`] (or `poll_transmit_with` when external records are queued)
//!    until it returns `None`, sending each packet.
//! 5. Sleep until [`Connection::poll_timeout`] or the next packet.
//!
//! Any order of these calls is safe; the order above gives the fewest wasted packets (ACKs piggyback
//! on data queued in step 3). `now` must not go backwards. Times are [`Timestamp`]s: nanoseconds
//! since an epoch the caller fixes (no clock is read here).
//!
//! A [`TcpListener`] is driven the same way (`handle_packet` / `handle_timeout` / `poll_transmit` /
//! `poll_timeout`); established connections come out of [`TcpListener::accept`] and are then driven
//! on their own.
//!
//! # Not (yet) here
//!
//! IPv6 extension headers; D-SACK (RFC 2883); HyStart for CUBIC; PMTU discovery (the EMSS comes
//! from the configured MTU and the peer's MSS). RFC 6675 loss recovery has all four NextSeg rules
//! (rule 4: one rescue retransmission per episode, RescueRxt), with whole original segments as the
//! "segment of up to SMSS" (MPA-61); HighRxt is kept as per-segment flags, not a sequence pointer.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
pub mod checksum;
pub mod config;
pub mod connection;
pub mod counters;
pub mod isn;
mod lean;
pub mod listener;
pub mod rdma;
pub mod rtt;
pub mod rx;
mod rx_placed;
pub mod seq;
mod template;
pub mod time;
pub mod tx;
pub mod wire;

pub use checksum::TxChecksum;
pub use config::{Config, CongestionAlgo, Keepalive, TcpConfigError, SHORT_SEGMENT_SLACK};
pub use connection::{emit_rst_for, CloseReason, Connection, Event, RecordQueue, SendError, State};
pub use counters::{ListenerCounters, TcpCounters};
pub use isn::{FourTuple, IsnGenerator};
pub use lean::{Ends, LeanSegment, SegmentHeader};
pub use listener::{ListenerConfig, TcpListener};
pub use rx::{OooBudget, RxChunk, RxRef, RxSink};
pub use seq::SeqNum;
pub use time::Timestamp;
pub use tx::{NoRecordSource, RecordId, RecordSource};
pub use wire::{TcpSegment, WireError};
