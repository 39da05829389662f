//! The protocol stack a connection runs: glue between the transport-facing [`Engine`] trait and
//! the sans-IO `mpa` and `ddp` crates.

use std::sync::Arc;
use std::time::Instant;

use crate::counters::Counters;
use crate::kernel::startup::Negotiated;
use crate::kernel::Engine;
use crate::qp::{QpError, WorkRequest};
use crate::{Completion, ConnectionConfig, ProtectionDomain};

/// Builds the engine for a freshly established connection.
pub(crate) fn new_engine(
    neg: Negotiated,
    config: &ConnectionConfig,
    pd: &ProtectionDomain,
    counters: Arc<Counters>,
) -> Box<dyn Engine> {
    let _ = (neg, config, pd, counters);
    Box::new(NoEngine)
}

/// Placeholder until the ddp queue-pair engine is available: fails every connection.
struct NoEngine;

impl Engine for NoEngine {
    fn post(&mut self, _now: Instant, _wr: WorkRequest) {}
    fn handle_rx(&mut self, _now: Instant, _bytes: &[u8]) {}
    fn poll_transmit(&mut self, _now: Instant, _out: &mut Vec<u8>) -> bool {
        false
    }
    fn poll_completion(&mut self) -> Option<Completion> {
        None
    }
    fn fatal(&self) -> Option<QpError> {
        Some(QpError::TerminateSent { layer: 0, etype: 0, code: 0 })
    }
    fn peer_closed(&mut self) {}
    fn flush(&mut self) -> Vec<Completion> {
        Vec::new()
    }
}
