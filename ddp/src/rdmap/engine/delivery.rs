//! In-order delivery: completions, Read Responses, remote invalidation, Terminates.

use super::*;

impl RdmapEngine {
    pub(super) fn deliver(&mut self, tags: &mut StagTable, rec: RxRecord) {
        match rec {
            RxRecord::SendLast {
                msn,
                len,
                opcode,
                inv,
                seg,
            } => {
                // Every earlier message has been delivered, so an earlier MSN still open means
                // its L segment never came: the MSN is out of range.
                if msn != self.rq_first_msn || self.rq.is_empty() {
                    self.fail_stream(seg.terminate(DdpError::MsnRange.term_code(), None));
                    return;
                }
                let Some(rqe) = self.rq.pop_front() else {
                    return;
                };
                self.rq_first_msn = self.rq_first_msn.wrapping_add(1);
                let mut invalidated = None;
                if opcode.carries_invalidate() {
                    // RFC 5040: invalidate before delivering; siw's EType choice on failure.
                    match tags.invalidate_remote(inv, self.cfg.pd, self.cfg.stream) {
                        Ok(_) => invalidated = Some(inv),
                        Err(f) => {
                            let code = match f {
                                InvalidateFault::NotAssociated => {
                                    RdmapError::CannotInvalidateProtection
                                }
                                InvalidateFault::Invalid => RdmapError::CannotInvalidate,
                            };
                            self.rq.push_front(rqe);
                            self.fail_stream(seg.terminate(code.term_code(), None));
                            return;
                        }
                    }
                }
                // A buffer deregistered since it was posted got none of the data.
                let placed = tags.is_registered(rqe.buf.region);
                self.complete(WorkCompletion {
                    wr_id: rqe.wr_id,
                    opcode: WcOpcode::Recv,
                    status: if placed {
                        WcStatus::Success
                    } else {
                        WcStatus::Flushed
                    },
                    byte_len: if placed { len } else { 0 },
                    invalidated,
                    solicited: opcode.solicited(),
                });
            }
            RxRecord::ReadRequest { msn, req, seg } => {
                if msn != self.rr_next_msn {
                    self.fail_stream(seg.terminate(DdpError::MsnRange.term_code(), None));
                    return;
                }
                self.rr_next_msn = self.rr_next_msn.wrapping_add(1);
                let source = if req.size == 0 {
                    TxSource::Inline
                } else {
                    match tags.check_remote(
                        req.src_stag,
                        req.src_to,
                        u64::from(req.size),
                        Access::REMOTE_READ,
                        self.cfg.pd,
                        self.cfg.stream,
                    ) {
                        Ok(p) => TxSource::Region {
                            region: p.region,
                            offset: p.offset,
                        },
                        Err(f) => {
                            self.fail_stream(
                                seg.terminate(read_source_code(f), Some(req.to_bytes())),
                            );
                            return;
                        }
                    }
                };
                self.irq_in_use += 1;
                self.responses.push_back(TxMsg {
                    header: TxHeader::Tagged {
                        opcode: RdmapOpcode::RdmaReadResponse,
                        stag: req.sink_stag,
                        to: req.sink_to,
                    },
                    source,
                    total: req.size,
                    sent: 0,
                    after: TxAfter::ResponseSent,
                });
            }
            RxRecord::ReadResponseLast { seg } => {
                let Some(o) = self.orq.pop_front() else {
                    self.fail_stream(seg.terminate(RdmapError::UnexpectedOpcode.term_code(), None));
                    return;
                };
                if let Some(e) = o
                    .seq
                    .and_then(|seq| seq.checked_sub(self.sq_base_seq))
                    .and_then(|i| self.sq.get_mut(i as usize))
                {
                    // A sink deregistered since the Read was posted got none of the data.
                    let gone = o.sink.is_some_and(|s| !tags.is_registered(s.region));
                    e.status = Some(if gone {
                        WcStatus::Flushed
                    } else {
                        WcStatus::Success
                    });
                }
                self.drain_sq();
            }
            RxRecord::Terminate(t) => {
                self.term_next_msn = self.term_next_msn.wrapping_add(1);
                self.events.push_back(match t {
                    Some(t) => RdmapEvent::TerminateReceived(t),
                    None => RdmapEvent::MalformedTerminateReceived,
                });
                self.enter_error();
            }
            RxRecord::Error(t) => self.fail_stream(t),
        }
    }
}

/// The Terminate code for a Read Request whose Data Source fails its checks: RDMAP Remote
/// Protection errors (RFC 5040 §7).
fn read_source_code(f: TaggedFault) -> TermCode {
    let e = match f {
        TaggedFault::AccessRights => RdmapError::AccessRights,
        TaggedFault::Ddp(DdpError::StagNotAssociated) => RdmapError::StagNotAssociated,
        TaggedFault::Ddp(DdpError::BaseBounds) => RdmapError::BaseBounds,
        TaggedFault::Ddp(DdpError::ToWrap) => RdmapError::ToWrap,
        TaggedFault::Ddp(_) => RdmapError::InvalidStag,
    };
    e.term_code()
}
