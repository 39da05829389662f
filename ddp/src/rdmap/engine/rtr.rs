//! What MPA Rev 2 negotiated for the engine (RFC 6581 §5): the RDMA Read queue depths, and
//! peer-to-peer mode's ready-to-receive (RTR) message, which the Initiator sends before any
//! work of its ULP and the Responder consumes without surfacing it.

use super::*;

impl RdmapEngine {
    /// The read depths in force from now on: at most `ord` Read Requests outstanding (the
    /// peer's IRD), up to `ird` served at once.
    pub fn set_read_depths(&mut self, ird: u32, ord: u32) {
        self.cfg.ird = ird;
        self.cfg.ord = ord;
    }

    /// Initiator: queue the RTR message `t` ahead of everything posted: a zero-length Send
    /// (MSN 1 of QN 0), a zero-length RDMA Write to STag 0, TO 0, or a zero-length RDMA Read
    /// Request (sink and source STag 0). None of them completes a work request.
    pub fn send_rtr(&mut self, t: RtrType) {
        let msg = match t {
            RtrType::Send => TxMsg {
                header: TxHeader::Untagged {
                    opcode: RdmapOpcode::Send,
                    qn: qn::SEND,
                    msn: 0,
                    inv: 0,
                },
                source: TxSource::Inline,
                total: 0,
                sent: 0,
                after: TxAfter::Rtr,
            },
            RtrType::Write => TxMsg {
                header: TxHeader::Tagged {
                    opcode: RdmapOpcode::RdmaWrite,
                    stag: Stag(0),
                    to: 0,
                },
                source: TxSource::Inline,
                total: 0,
                sent: 0,
                after: TxAfter::Rtr,
            },
            RtrType::Read => TxMsg {
                header: TxHeader::Untagged {
                    opcode: RdmapOpcode::RdmaReadRequest,
                    qn: qn::READ_REQUEST,
                    msn: 0,
                    inv: 0,
                },
                source: TxSource::Inline,
                total: READ_REQUEST_HEADER_LEN as u32,
                sent: 0,
                after: TxAfter::ReadRequest,
            },
        };
        if t == RtrType::Read {
            // No work request and no sink (zero length).
            self.reads_queued.push_front(ReadQueued {
                req: ReadRequestRepr {
                    sink_stag: Stag(0),
                    sink_to: 0,
                    size: 0,
                    src_stag: Stag(0),
                    src_to: 0,
                },
                entry: OrqEntry {
                    seq: None,
                    sink: None,
                },
            });
        }
        self.sq_pending.push_front(msg);
    }

    /// Responder: the RTR message `t` will be the Initiator's first.
    pub fn expect_rtr(&mut self, t: RtrType) {
        self.rtr_expected = Some(t);
    }
}
