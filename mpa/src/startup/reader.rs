//! Reading the peer's startup frame with the checks of rules 2, 3, 5, 8, 9 (and RFC 6581 §7.1
//! for Rev 2), and the plumbing both machines share.

use std::collections::VecDeque;
use std::time::Instant;

use super::{Negotiated, Role, StartupConfig, StartupEvent, UsageError};
use crate::enhanced::{EnhancedData, ENHANCED_LEN};
use crate::error::StartupError;
use crate::read_depths::ReadDepths;
use crate::revision::{Revisions, REVISION_ENHANCED};
use crate::startup_frame::{FrameKind, Packet, Repr, HEADER_LEN, KEY_REPLY, KEY_REQUEST};

/// Incremental reader of the peer's frame.
#[derive(Debug, Clone)]
pub(super) struct FrameReader {
    expect: FrameKind,
    accept: Revisions,
    max_pd: u16,
    buf: Vec<u8>,
}

impl FrameReader {
    /// Reads a frame of kind `expect` whose revision must be in `accept`.
    pub(super) fn new(expect: FrameKind, accept: Revisions, max_pd: u16) -> Self {
        FrameReader {
            expect,
            accept,
            max_pd,
            buf: Vec::with_capacity(HEADER_LEN),
        }
    }

    /// Takes octets up to the end of the frame. Returns (consumed, done) where done is the
    /// finished frame (as owned octets) or the first rule it broke.
    pub(super) fn feed(&mut self, data: &[u8]) -> (usize, Option<Result<Vec<u8>, StartupError>>) {
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
        if b.len() > 17 && !self.accept.contains(b[17]) {
            return Err(StartupError::BadRevision(b[17])); // MPA-102, RFC 5044 §7.1.1
        }
        if b.len() >= HEADER_LEN {
            let p = Packet::new_unchecked(b);
            let pd = p.pd_length();
            // RFC 6581 §7.1: the IRD/ORD octets come on top of the ULP's private data.
            let extra = if p.has_enhanced_data() {
                ENHANCED_LEN
            } else {
                0
            };
            if usize::from(pd) > usize::from(self.max_pd) + extra {
                return Err(StartupError::PrivateDataTooLong(pd));
            }
            if extra > 0 && usize::from(pd) < ENHANCED_LEN {
                return Err(StartupError::BadEnhancedData);
            }
        }
        Ok(())
    }
}

/// Common plumbing of both roles.
#[derive(Debug)]
pub(super) struct Common {
    pub(super) cfg: StartupConfig,
    pub(super) reader: FrameReader,
    pub(super) transmit: Vec<u8>,
    pub(super) events: VecDeque<StartupEvent>,
    pub(super) deadline: Option<Instant>,
    pub(super) done: bool,
    local_frame_len: u32,
}

impl Common {
    pub(super) fn new(cfg: StartupConfig, reader: FrameReader, now: Instant) -> Self {
        Common {
            cfg,
            reader,
            transmit: Vec::new(),
            events: VecDeque::new(),
            deadline: now.checked_add(cfg.timeout),
            done: false,
            local_frame_len: 0,
        }
    }

    /// Our frame: `revision`, Rev 2's `enhanced` octets (if any) and the ULP's `pd`.
    pub(super) fn frame(
        &self,
        kind: FrameKind,
        reject: bool,
        revision: u8,
        enhanced: Option<EnhancedData>,
        pd: &[u8],
    ) -> Result<Vec<u8>, UsageError> {
        if pd.len() > usize::from(self.cfg.max_private_data) {
            return Err(UsageError::PrivateDataTooLong);
        }
        if revision > REVISION_ENHANCED {
            return Err(UsageError::UnknownRevision);
        }
        Ok(Repr {
            kind,
            markers: self.cfg.want_markers,
            crc: self.cfg.want_crc,
            reject,
            revision,
            enhanced,
            private_data: pd,
        }
        .to_vec())
    }

    pub(super) fn send(&mut self, frame: Vec<u8>) {
        self.local_frame_len = frame.len() as u32;
        self.transmit.extend_from_slice(&frame);
    }

    pub(super) fn take_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.transmit.is_empty()).then(|| core::mem::take(&mut self.transmit))
    }

    pub(super) fn fail(&mut self, e: StartupError) {
        self.done = true;
        self.deadline = None;
        self.events.push_back(StartupEvent::Failed(e));
    }

    /// Feeds the reader while still waiting for the frame; returns consumed and the frame.
    pub(super) fn read(&mut self, data: &[u8]) -> (usize, Option<Vec<u8>>) {
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

    pub(super) fn handle_timeout(&mut self, now: Instant) {
        if let Some(d) = self.deadline {
            if now >= d && !self.done {
                self.fail(StartupError::Timeout);
            }
        }
    }

    pub(super) fn handle_close(&mut self) {
        if !self.done {
            self.fail(StartupError::ConnectionClosed);
        }
    }

    /// The outcome, from the peer's frame `peer` (`peer_frame_len` octets) and the RDMA
    /// parameters agreed.
    pub(super) fn negotiated(
        &self,
        role: Role,
        peer: &Repr<'_>,
        peer_frame_len: usize,
        read_depths: ReadDepths,
        rtr: Option<crate::enhanced::RtrType>,
    ) -> Negotiated {
        Negotiated {
            role,
            tx_markers: peer.markers,
            rx_markers: self.cfg.want_markers,
            crc: self.cfg.want_crc || peer.crc,
            revision: peer.revision,
            read_depths,
            peer_read_depths: peer.enhanced.map(|e| ReadDepths {
                ird: e.ird,
                ord: e.ord,
            }),
            rtr,
            peer_private_data: peer.private_data.to_vec(),
            local_frame_len: self.local_frame_len,
            peer_frame_len: peer_frame_len as u32,
        }
    }
}
