//! DDP (draft-ietf-rddp-ddp-06): the two header models, the STag table, and the forms of a
//! segment that segmentation and placement work on.
//!
//! - wire: [`control`] (the DDP Control Field), [`tagged`] and [`untagged`] (the two header
//!   models), [`segment`] (either model, chosen by the T bit), [`header_error`] (why a header did
//!   not parse).
//! - resources: [`stag`], [`stag_table`] (regions, rights, PD/stream association, invalidation,
//!   the -06 §7.1 tagged checks), [`memory`] (the caller's memory behind region handles).
//! - segments: [`segmentation`] (messages into segments no larger than MULPDU), [`tx_segment`]
//!   (one outgoing segment: header octets and where its payload lives), `rx_segment` (a received
//!   segment as the pieces between MPA markers, placed without a reassembly copy).
//! - [`error`]: the DDP errors of -06 §7.2.
//!
//! The per-stream engine that validates and places segments is RDMAP's ([`crate::rdmap::engine`]);
//! DDP's numbers travel in RDMAP's Terminate ([`crate::rdmap::term_code`]).

pub mod control;
pub mod error;
pub mod header_error;
pub mod memory;
pub mod region_slots;
pub(crate) mod rx_segment;
pub mod segment;
pub mod segmentation;
pub mod stag;
pub mod stag_table;
pub mod tagged;
pub mod tx_segment;
pub mod untagged;
