//! The Startup Phase: Initiator and Responder state machines (draft §6.1 rules 1-10,
//! §6.1.1; RFC 5044 §7.1; RFC 6581 §5 for Rev 2). Sans-IO: feed received octets
//! with `handle_input`, send what `poll_transmit` returns, drive the deadline with
//! `handle_timeout`, read `poll_event`.
//!
//! Received octets are consumed only up to the end of the peer's frame: `handle_input`
//! returns how many it took, and everything after that (FPDUs coalesced with the frame,
//! A17) belongs to the FPDU stream: hand it to [`Negotiated::stream_parser`].
//!
//! Stream coordinates: SeqStart of our send direction is the octet right after the last
//! octet `poll_transmit` gave out; SeqStart of the receive direction is the octet right
//! after the last octet `handle_input` consumed.
//!
//! Revisions ([`crate::revision`]): the Initiator sends `revision`; the Responder answers a
//! Request whose revision is in `accept` with a Reply of the same revision and closes on any
//! other. Rev 2 frames carry IRD/ORD and the peer-to-peer choice ([`crate::read_depths`]); the
//! ULP only ever sees its own private data.
//!
//! Files: this one holds the settings and what the machines report; `reader.rs` reads the
//! peer's frame, `initiator.rs` and `responder.rs` are the two machines.

use crate::enhanced::{RtrType, RtrTypes};
use crate::error::StartupError;
use crate::fpdu::FramingConfig;
use crate::framer::Framer;
use crate::read_depths::ReadDepths;
use crate::revision::{Revisions, REVISION_DRAFT, REVISION_ENHANCED, REVISION_RFC5044};
use crate::stream::StreamParser;
use std::time::Duration;
use thiserror::Error;

mod initiator;
mod reader;
mod responder;

pub use initiator::Initiator;
pub use responder::Responder;

/// Startup settings of one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupConfig {
    /// Rev of our Request (Initiator): 2 = RFC 6581 (default, as Linux siw and Chelsio send),
    /// 1 = RFC 5044, 0 = strict draft -01.
    pub revision: u8,
    /// Revisions accepted from the peer. Responder: the Requests it answers (default 1 and 2);
    /// any other closes TCP (MPA-102). Initiator: the Replies it takes, never above its own
    /// Request's revision (a Rev 1 Reply to a Rev 2 Request is a Responder choosing Rev 1).
    pub accept: Revisions,
    /// Largest private data of the ULP's accepted in the peer's frame and sent in ours
    /// (default 512, the RFC 5044 cap; the draft allows 65535). A longer PD_Length closes
    /// (MPA-91, A16). Rev 2 frames carry 4 more octets (IRD/ORD) on top.
    pub max_private_data: u16,
    /// M bit of our frame: we want markers on what we **receive** (default off).
    pub want_markers: bool,
    /// C bit of our frame (default on, MPA-43). CRC is on if either side asks (MPA-99).
    pub want_crc: bool,
    /// Longest wait for the peer's complete frame (MPA-90, MPA-92; A19: no value in the
    /// draft). Default 10 s.
    pub timeout: Duration,
    /// Initiator, Rev 2: ask for peer-to-peer mode offering these RTR types (RFC 6581 §5);
    /// empty (the default) asks for none.
    pub p2p_offer: RtrTypes,
    /// Responder, Rev 2: the RTR types it takes when an Initiator asks for peer-to-peer mode
    /// (default all three; it chooses in the order of [`RtrType::PREFERENCE`]).
    pub p2p_accept: RtrTypes,
}

impl Default for StartupConfig {
    fn default() -> Self {
        StartupConfig {
            revision: REVISION_ENHANCED,
            accept: Revisions::RFC,
            max_private_data: 512,
            want_markers: false,
            want_crc: true,
            timeout: Duration::from_secs(10),
            p2p_offer: RtrTypes::NONE,
            p2p_accept: RtrTypes::ALL,
        }
    }
}

impl StartupConfig {
    /// Strict draft-01 peer: Rev 0 sent and accepted, private data up to 65535 octets.
    pub fn strict_draft() -> Self {
        StartupConfig {
            revision: REVISION_DRAFT,
            accept: Revisions::only(REVISION_DRAFT),
            max_private_data: u16::MAX,
            ..Self::default()
        }
    }

    /// RFC 5044 only: Rev 1 sent and accepted.
    pub fn rfc5044() -> Self {
        StartupConfig {
            revision: REVISION_RFC5044,
            accept: Revisions::only(REVISION_RFC5044),
            ..Self::default()
        }
    }

    /// RFC 6581 §8: an RFC 5044 Responder closes TCP on a Rev 2 Request (MPA-102). When this
    /// Initiator sent Rev 2 and takes Rev 1, the settings to retry with once, on a new TCP
    /// connection, after the peer closed before its Reply ([`StartupError::ConnectionClosed`]).
    pub fn rev1_fallback(&self) -> Option<StartupConfig> {
        (self.revision == REVISION_ENHANCED && self.accept.contains(REVISION_RFC5044)).then_some(
            StartupConfig {
                revision: REVISION_RFC5044,
                ..*self
            },
        )
    }
}

/// Which side of the startup exchange we are (chosen by the ULP, unrelated to TCP roles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sends the Request.
    Initiator,
    /// Sends the Reply; must not send FPDUs before receiving one (MPA-85).
    Responder,
}

/// The outcome of a successful startup: how each direction frames, and the RDMA parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Our role.
    pub role: Role,
    /// We insert markers (the peer's frame had M=1, MPA-98).
    pub tx_markers: bool,
    /// The peer inserts markers (our frame had M=1).
    pub rx_markers: bool,
    /// CRCs generated and checked both ways (C=1 in either frame, MPA-99).
    pub crc: bool,
    /// The revision of the Reply (the connection's).
    pub revision: u8,
    /// Our RDMA Read depths from now on: `ord` never above the peer's IRD, `ird` what we
    /// serve. Without a Rev 2 exchange, the local ones.
    pub read_depths: ReadDepths,
    /// The IRD and ORD the peer's Rev 2 frame carried.
    pub peer_read_depths: Option<ReadDepths>,
    /// Peer-to-peer mode: the ready-to-receive message the Initiator sends first (RFC 6581 §5).
    pub rtr: Option<RtrType>,
    /// The peer's private data (the ULP's, without Rev 2's IRD/ORD octets).
    pub peer_private_data: Vec<u8>,
    /// Octets of our frame.
    pub local_frame_len: u32,
    /// Octets of the peer's frame.
    pub peer_frame_len: u32,
}

impl Negotiated {
    /// Framing of what we send.
    pub fn tx_config(&self) -> FramingConfig {
        FramingConfig {
            markers: self.tx_markers,
            crc: self.crc,
        }
    }
    /// Framing of what we receive.
    pub fn rx_config(&self) -> FramingConfig {
        FramingConfig {
            markers: self.rx_markers,
            crc: self.crc,
        }
    }
    /// A sender starting at SeqStart; a Responder's is gated until the first valid FPDU
    /// arrives (call [`Framer::peer_fpdu_received`], MPA-85; in peer-to-peer mode that is the
    /// Initiator's RTR message).
    pub fn framer(&self) -> Framer {
        match self.role {
            Role::Initiator => Framer::new(self.tx_config(), 0),
            Role::Responder => Framer::new_gated(self.tx_config(), 0),
        }
    }
    /// An in-order receive parser starting at the peer's SeqStart.
    pub fn stream_parser(&self) -> StreamParser {
        StreamParser::new(self.rx_config(), 0)
    }
}

/// What a Responder learns from a valid Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The Request's private data (the ULP's).
    pub private_data: Vec<u8>,
    /// The Initiator wants markers on what it receives (we will send markers).
    pub peer_wants_markers: bool,
    /// The Initiator asked for CRCs.
    pub peer_wants_crc: bool,
    /// The Request's revision (the Reply will carry it).
    pub revision: u8,
    /// Rev 2: the Initiator's IRD and ORD.
    pub peer_read_depths: Option<ReadDepths>,
    /// Rev 2: the RTR types offered with peer-to-peer mode (empty: not asked).
    pub p2p_offer: RtrTypes,
}

/// What the startup machines report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupEvent {
    /// Responder: a valid Request arrived; decide with [`Responder::accept`] or
    /// [`Responder::reject`] after checking the private data (MPA-80, MPA-81).
    RequestReceived(RequestInfo),
    /// Full Operation may begin.
    Established(Negotiated),
    /// Initiator: the Reply accepted, MPA is in Full Operation with `negotiated`, but its RDMA
    /// parameters cannot work (RFC 6581 §5): send a Terminate with `error`'s code (layer LLP,
    /// type MPA) and close ([`crate::ErrorAction::Terminate`]).
    Refused {
        /// How the stream frames (for the Terminate).
        negotiated: Negotiated,
        /// [`StartupError::InsufficientIrd`] or [`StartupError::NoMatchingRtr`].
        error: StartupError,
    },
    /// The connection was rejected (Reply with R=1, received or sent). MPA is left and TCP
    /// stays **open**: the ULP decides (MPA-80, MPA-83, A2).
    Rejected {
        /// Private data of the Reply (the peer's for an Initiator, ours for a Responder).
        private_data: Vec<u8>,
    },
    /// Startup failed; the error's [`StartupError::action`] says what to do (close TCP).
    Failed(StartupError),
}

/// Misuse of [`Responder::accept`] / [`Responder::reject`] or of an Initiator's private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum UsageError {
    /// No Request is waiting for a decision.
    #[error("no MPA Request awaits a decision")]
    NotDeciding,
    /// Private data longer than the configured limit.
    #[error("private data above the configured limit")]
    PrivateDataTooLong,
    /// A revision above 2 to send.
    #[error("no MPA revision above 2")]
    UnknownRevision,
}
