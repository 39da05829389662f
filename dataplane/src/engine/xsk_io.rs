//! [`PacketIo`] over an AF_XDP queue ([`XskQueue`]): received frames are handled straight from
//! the UMEM (placement copies from there) and go back to the free pool after the batch;
//! transmit frames are taken from the pool, written in place, and queued on the tx ring.

use std::time::Instant;

use endpoint::{FrameSink, TxOutcome};

use super::io::PacketIo;
use crate::xdp::{Frame, XskQueue};

/// An engine's packet I/O on one AF_XDP socket.
pub struct XskIo {
    queue: XskQueue,
    rx: Vec<Frame>,
    tx: Vec<Frame>,
}

impl XskIo {
    /// Wraps a bound queue.
    pub fn new(queue: XskQueue) -> Self {
        XskIo {
            queue,
            rx: Vec::with_capacity(64),
            tx: Vec::with_capacity(64),
        }
    }
    /// The queue.
    pub fn queue(&self) -> &XskQueue {
        &self.queue
    }
    /// The queue, mutably.
    pub fn queue_mut(&mut self) -> &mut XskQueue {
        &mut self.queue
    }
}

impl PacketIo for XskIo {
    fn rx_batch(&mut self, _now: Instant, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let n = self.queue.recv(&mut self.rx, max);
        for frame in &self.rx {
            f(self.queue.data(frame));
        }
        self.queue.release(&mut self.rx);
        n
    }

    fn flush(&mut self, _now: Instant) {
        // `send` kicks the kernel for what it queued; in copy mode that `sendto` usually
        // completes the batch, so reclaim first and kick again only for what is left.
        self.queue.send(&mut self.tx);
        self.queue.reclaim();
        self.queue.kick_tx();
    }
}

impl FrameSink for XskIo {
    fn tx_frame(
        &mut self,
        _now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        if self.tx.len() >= 64 {
            self.queue.send(&mut self.tx);
        }
        let Some(mut frame) = self.queue.alloc() else {
            return TxOutcome::NoBuffer;
        };
        let written = fill(self.queue.data_mut_full(&mut frame));
        match written {
            Some(n) if self.queue.set_len(&mut frame, n).is_ok() => {
                self.tx.push(frame);
                TxOutcome::Queued
            }
            _ => {
                self.queue.release_one(frame);
                TxOutcome::Empty
            }
        }
    }
}
