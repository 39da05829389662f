//! The Startup Phase: Initiator and Responder state machines (draft §6.1 rules 1-10,
//! §6.1.1; digest §5.2). Sans-IO: feed received octets with `handle_input`, send what
//! `poll_transmit` returns, drive the deadline with `handle_timeout`, read `poll_event`.
//!
//! Received octets are consumed only up to the end of the peer's frame: `handle_input`
//! returns how many it took, and everything after that (FPDUs coalesced with the frame,
//! A17) belongs to the FPDU stream: hand it to [`Negotiated::stream_parser`].
//!
//! Stream coordinates: SeqStart of our send direction is the octet right after the last
//! octet `poll_transmit` gave out; SeqStart of the receive direction is the octet right
//! after the last octet `handle_input` consumed.

use crate::error::StartupError;
use crate::fpdu::FramingConfig;
use crate::framer::Framer;
use crate::startup_frame::{self, FrameKind, Packet, Repr, HEADER_LEN, KEY_REPLY, KEY_REQUEST};
use crate::stream::StreamParser;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Startup settings of one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupConfig {
    /// Rev sent and the only Rev accepted: 1 = RFC 5044 (default), 0 = strict draft -01.
    pub revision: u8,
    /// Largest private data accepted in the peer's frame and sent in ours (default 512, the
    /// RFC 5044 cap; the draft allows 65535). A longer PD_Length closes (MPA-91, A16).
    pub max_private_data: u16,
    /// M bit of our frame: we want markers on what we **receive** (default off).
    pub want_markers: bool,
    /// C bit of our frame (default on, MPA-43). CRC is on if either side asks (MPA-99).
    pub want_crc: bool,
    /// Longest wait for the peer's complete frame (MPA-90, MPA-92; A19: no value in the
    /// draft). Default 10 s.
    pub timeout: Duration,
}

impl Default for StartupConfig {
    fn default() -> Self {
        StartupConfig {
            revision: startup_frame::REVISION_RFC5044,
            max_private_data: 512,
            want_markers: false,
            want_crc: true,
            timeout: Duration::from_secs(10),
        }
    }
}

impl StartupConfig {
    /// Strict draft-01 peer: Rev 0, private data up to 65535 octets.
    pub fn strict_draft() -> Self {
        StartupConfig {
            revision: startup_frame::REVISION_DRAFT,
            max_private_data: u16::MAX,
            ..Self::default()
        }
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

/// The outcome of a successful startup: how each direction frames.
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
    /// The revision both frames carried.
    pub revision: u8,
    /// The peer's private data.
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
    /// arrives (call [`Framer::peer_fpdu_received`], MPA-85).
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

/// What the startup machines report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupEvent {
    /// Responder: a valid Request arrived; decide with [`Responder::accept`] or
    /// [`Responder::reject`] after checking the private data (MPA-80, MPA-81).
    RequestReceived {
        /// The Request's private data.
        private_data: Vec<u8>,
        /// The Initiator wants markers on what it receives (we will send markers).
        peer_wants_markers: bool,
        /// The Initiator asked for CRCs.
        peer_wants_crc: bool,
    },
    /// Full Operation may begin.
    Established(Negotiated),
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
}

/// Incremental reader of the peer's frame with the checks of rules 2, 3, 5, 8, 9.
#[derive(Debug, Clone)]
struct FrameReader {
    expect: FrameKind,
    revision: u8,
    max_pd: u16,
    buf: Vec<u8>,
}

impl FrameReader {
    fn new(expect: FrameKind, cfg: &StartupConfig) -> Self {
        FrameReader {
            expect,
            revision: cfg.revision,
            max_pd: cfg.max_private_data,
            buf: Vec::with_capacity(HEADER_LEN),
        }
    }

    /// Takes octets up to the end of the frame. Returns (consumed, done) where done is the
    /// finished frame (as owned octets) or the first rule it broke.
    fn feed(&mut self, data: &[u8]) -> (usize, Option<Result<Vec<u8>, StartupError>>) {
        let mut used = 0;
        while used < data.len() {
            let have = self.buf.len();
            // Header octets one at a time, so each check fires at the first octet that
            // breaks it (key, Rev, PD_Length); then the private data in one go.
            let want = if have < HEADER_LEN {
                have + 1
            } else {
                Packet::new_unchecked(&self.buf[..]).frame_len()
            };
            let take = (want - have).min(data.len() - used);
            self.buf.extend_from_slice(&data[used..used + take]);
            used += take;
            if let Err(e) = self.check_prefix() {
                return (used, Some(Err(e)));
            }
            if self.buf.len() >= HEADER_LEN
                && self.buf.len() == Packet::new_unchecked(&self.buf[..]).frame_len()
            {
                return (used, Some(Ok(core::mem::take(&mut self.buf))));
            }
        }
        (used, None)
    }

    /// Checks key, revision and PD_Length as soon as their octets are in.
    fn check_prefix(&self) -> Result<(), StartupError> {
        let b = &self.buf[..];
        let k = b.len().min(16);
        let (mine, other) = match self.expect {
            FrameKind::Request => (&KEY_REQUEST, &KEY_REPLY),
            FrameKind::Reply => (&KEY_REPLY, &KEY_REQUEST),
        };
        if b[..k] != mine[..k] {
            if b[..k] == other[..k] {
                if k == 16 {
                    return Err(match self.expect {
                        FrameKind::Request => StartupError::PeerIsResponder,
                        FrameKind::Reply => StartupError::PeerIsInitiator,
                    });
                }
            } else {
                return Err(StartupError::BadKey);
            }
        }
        if b.len() > 17 && b[17] != self.revision {
            return Err(StartupError::BadRevision(b[17]));
        }
        if b.len() >= HEADER_LEN {
            let pd = Packet::new_unchecked(b).pd_length();
            if pd > self.max_pd {
                return Err(StartupError::PrivateDataTooLong(pd));
            }
        }
        Ok(())
    }
}

/// Common plumbing of both roles.
#[derive(Debug)]
struct Common {
    cfg: StartupConfig,
    reader: FrameReader,
    transmit: Vec<u8>,
    events: VecDeque<StartupEvent>,
    deadline: Option<Instant>,
    done: bool,
    local_frame_len: u32,
}

impl Common {
    fn new(cfg: StartupConfig, expect: FrameKind, now: Instant) -> Self {
        Common {
            cfg,
            reader: FrameReader::new(expect, &cfg),
            transmit: Vec::new(),
            events: VecDeque::new(),
            deadline: now.checked_add(cfg.timeout),
            done: false,
            local_frame_len: 0,
        }
    }

    fn frame(&self, kind: FrameKind, reject: bool, pd: &[u8]) -> Result<Vec<u8>, UsageError> {
        if pd.len() > usize::from(self.cfg.max_private_data) {
            return Err(UsageError::PrivateDataTooLong);
        }
        Ok(Repr {
            kind,
            markers: self.cfg.want_markers,
            crc: self.cfg.want_crc,
            reject,
            revision: self.cfg.revision,
            private_data: pd,
        }
        .to_vec())
    }

    fn send(&mut self, frame: Vec<u8>) {
        self.local_frame_len = frame.len() as u32;
        self.transmit.extend_from_slice(&frame);
    }

    fn fail(&mut self, e: StartupError) {
        self.done = true;
        self.deadline = None;
        self.events.push_back(StartupEvent::Failed(e));
    }

    /// Feeds the reader while still waiting for the frame; returns consumed and the frame.
    fn read(&mut self, data: &[u8]) -> (usize, Option<Vec<u8>>) {
        let (used, res) = self.reader.feed(data);
        match res {
            None => (used, None),
            Some(Err(e)) => {
                self.fail(e);
                (used, None)
            }
            Some(Ok(frame)) => {
                self.deadline = None;
                (used, Some(frame))
            }
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(d) = self.deadline {
            if now >= d && !self.done {
                self.fail(StartupError::Timeout);
            }
        }
    }

    fn handle_close(&mut self) {
        if !self.done {
            self.fail(StartupError::ConnectionClosed);
        }
    }

    fn negotiated(&self, role: Role, peer: &Repr<'_>, peer_frame_len: usize) -> Negotiated {
        Negotiated {
            role,
            tx_markers: peer.markers,
            rx_markers: self.cfg.want_markers,
            crc: self.cfg.want_crc || peer.crc,
            revision: self.cfg.revision,
            peer_private_data: peer.private_data.to_vec(),
            local_frame_len: self.local_frame_len,
            peer_frame_len: peer_frame_len as u32,
        }
    }
}

/// The MPA Initiator: sends the Request, waits for the Reply (rules 1, 3, 5, 8, 9, 10).
#[derive(Debug)]
pub struct Initiator {
    c: Common,
}

impl Initiator {
    /// Starts: queues the Request (MPA-77) with our M/C bits and `private_data`, and arms
    /// the startup deadline at `now + timeout`.
    pub fn new(cfg: StartupConfig, now: Instant, private_data: &[u8]) -> Result<Self, UsageError> {
        let mut c = Common::new(cfg, FrameKind::Reply, now);
        let frame = c.frame(FrameKind::Request, false, private_data)?;
        c.send(frame);
        Ok(Initiator { c })
    }

    /// Octets to send, if any (the Request, once).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.c.transmit.is_empty()).then(|| core::mem::take(&mut self.c.transmit))
    }

    /// Feeds received octets; returns how many belong to the Reply. The rest is FPDU stream.
    pub fn handle_input(&mut self, _now: Instant, data: &[u8]) -> usize {
        if self.c.done {
            return 0;
        }
        let (used, frame) = self.c.read(data);
        if let Some(frame) = frame {
            self.c.done = true;
            let p = Packet::new_unchecked(&frame[..]);
            // The reader has checked key, length, revision and PD_Length.
            let Ok(rep) = Repr::parse(&p) else {
                self.c.fail(StartupError::BadKey);
                return used;
            };
            let ev = if rep.reject {
                StartupEvent::Rejected {
                    private_data: rep.private_data.to_vec(),
                }
            } else {
                StartupEvent::Established(self.c.negotiated(Role::Initiator, &rep, frame.len()))
            };
            self.c.events.push_back(ev);
        }
        used
    }

    /// Fails with [`StartupError::Timeout`] once `now` reaches the deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.c.handle_timeout(now);
    }

    /// TCP closed or reset during startup.
    pub fn handle_close(&mut self) {
        self.c.handle_close();
    }

    /// When to call [`Self::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.c.done {
            None
        } else {
            self.c.deadline
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<StartupEvent> {
        self.c.events.pop_front()
    }

    /// True once the startup has ended (established, rejected or failed).
    pub fn is_done(&self) -> bool {
        self.c.done
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResponderState {
    AwaitingRequest,
    Deciding,
    Done,
}

/// The MPA Responder: waits for the Request, lets the ULP decide, sends the Reply
/// (rules 2, 4, 5, 6, 8, 9, 10).
#[derive(Debug)]
pub struct Responder {
    c: Common,
    state: ResponderState,
    request: Option<(Vec<u8>, usize)>,
}

impl Responder {
    /// Starts waiting for a Request, with the deadline at `now + timeout`.
    pub fn new(cfg: StartupConfig, now: Instant) -> Self {
        Responder {
            c: Common::new(cfg, FrameKind::Request, now),
            state: ResponderState::AwaitingRequest,
            request: None,
        }
    }

    /// Queues a last streaming-mode message to go out before MPA mode (MPA-105, §6.1.4).
    pub fn with_last_streaming_message(mut self, msg: &[u8]) -> Self {
        self.c.transmit.extend_from_slice(msg);
        self
    }

    /// Octets to send, if any (the Reply after a decision).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.c.transmit.is_empty()).then(|| core::mem::take(&mut self.c.transmit))
    }

    /// Feeds received octets; returns how many belong to the Request. Octets after it are
    /// FPDU stream: keep them for [`Negotiated::stream_parser`].
    pub fn handle_input(&mut self, _now: Instant, data: &[u8]) -> usize {
        if self.state != ResponderState::AwaitingRequest || self.c.done {
            return 0;
        }
        let (used, frame) = self.c.read(data);
        if self.c.done {
            self.state = ResponderState::Done;
        }
        if let Some(frame) = frame {
            let Ok(req) = Repr::parse(&Packet::new_unchecked(&frame[..])) else {
                self.c.fail(StartupError::BadKey);
                self.state = ResponderState::Done;
                return used;
            };
            self.c.events.push_back(StartupEvent::RequestReceived {
                private_data: req.private_data.to_vec(),
                peer_wants_markers: req.markers,
                peer_wants_crc: req.crc,
            });
            let len = frame.len();
            self.request = Some((frame, len));
            self.state = ResponderState::Deciding;
        }
        used
    }

    /// Accepts the Request: queues a Reply with R=0 and `private_data` and reports
    /// [`StartupEvent::Established`] (MPA-81).
    pub fn accept(&mut self, private_data: &[u8]) -> Result<(), UsageError> {
        self.decide(false, private_data)
    }

    /// Rejects the Request: queues a Reply with R=1 and `private_data`, leaves MPA and keeps
    /// TCP open: reports [`StartupEvent::Rejected`] (MPA-80).
    pub fn reject(&mut self, private_data: &[u8]) -> Result<(), UsageError> {
        self.decide(true, private_data)
    }

    fn decide(&mut self, reject: bool, pd: &[u8]) -> Result<(), UsageError> {
        if self.state != ResponderState::Deciding {
            return Err(UsageError::NotDeciding);
        }
        let frame = self.c.frame(FrameKind::Reply, reject, pd)?;
        self.c.send(frame);
        self.state = ResponderState::Done;
        self.c.done = true;
        let ev = match &self.request {
            Some((req, len)) if !reject => {
                let Ok(req) = Repr::parse(&Packet::new_unchecked(&req[..])) else {
                    return Err(UsageError::NotDeciding);
                };
                StartupEvent::Established(self.c.negotiated(Role::Responder, &req, *len))
            }
            _ => StartupEvent::Rejected {
                private_data: pd.to_vec(),
            },
        };
        self.c.events.push_back(ev);
        Ok(())
    }

    /// Fails with [`StartupError::Timeout`] once `now` reaches the deadline while waiting
    /// for the Request (Responder/Responder detection, MPA-90).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state == ResponderState::AwaitingRequest {
            self.c.handle_timeout(now);
            if self.c.done {
                self.state = ResponderState::Done;
            }
        }
    }

    /// TCP closed or reset during startup.
    pub fn handle_close(&mut self) {
        self.c.handle_close();
        self.state = ResponderState::Done;
    }

    /// When to call [`Self::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.state == ResponderState::AwaitingRequest {
            self.c.deadline
        } else {
            None
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<StartupEvent> {
        self.c.events.pop_front()
    }

    /// True once the startup has ended (established, rejected or failed).
    pub fn is_done(&self) -> bool {
        self.state == ResponderState::Done
    }
}
