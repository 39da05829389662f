//! The connection driver: one thread per connection moving bytes between a non-blocking kernel
//! TCP socket and the protocol [`Engine`], and work requests / completions between the
//! application and the engine.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::engine::Engine;
use super::waker::wait;
use crate::counters::Counters;
use crate::qp::{QpError, QpShared};
use crate::{Completion, Opcode};

/// Driver options that shape how bytes reach the wire.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DriverOptions {
    /// Give every chunk from the engine its own TCP segment: before writing a chunk, wait until
    /// the kernel has sent everything written before (SIOCOUTQNSD == 0). Slow; for wire captures.
    pub(crate) segment_per_chunk: bool,
}

const RX_BUF: usize = 256 * 1024;
/// How long a closing connection may take to flush its queued bytes.
const LINGER: Duration = Duration::from_secs(2);

fn deliver(shared: &QpShared, c: Completion) {
    if c.opcode == Opcode::Recv {
        shared.recv_cq.inner.push(c);
    } else {
        shared.send_cq.inner.push(c);
    }
}

fn unsent_bytes(sock: &TcpStream) -> i32 {
    let mut n: libc::c_int = 0;
    // Safety: SIOCOUTQNSD writes one int into n, a valid c_int.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCOUTQNSD as _, &mut n) };
    if r < 0 {
        0
    } else {
        n
    }
}

struct TxQueue {
    chunks: std::collections::VecDeque<Vec<u8>>,
    off: usize,
}

impl TxQueue {
    fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }
}

/// Runs the connection until it closes. Never panics on peer input; errors end up in
/// `shared.error`, the counters, and flushed completions.
pub(crate) fn run(
    mut sock: TcpStream,
    mut engine: Box<dyn Engine>,
    shared: Arc<QpShared>,
    counters: Arc<Counters>,
    opts: DriverOptions,
) {
    let result = drive(&mut sock, &mut *engine, &shared, &counters, opts);
    if let Err(e) = result {
        shared.set_error(e);
        Counters::inc(&counters.connection_errors);
    }
    while let Some(c) = engine.poll_completion() {
        deliver(&shared, c);
    }
    // Anything the application posted after we stopped looking, and everything in flight.
    let leftovers: Vec<_> = shared.pending.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect();
    let now = Instant::now();
    for wr in leftovers {
        engine.post(now, wr);
    }
    for c in engine.flush() {
        deliver(&shared, c);
    }
    let _ = sock.shutdown(Shutdown::Both);
    shared.finished.store(true, Ordering::Release);
}

fn drive(
    sock: &mut TcpStream,
    engine: &mut dyn Engine,
    shared: &QpShared,
    counters: &Counters,
    opts: DriverOptions,
) -> Result<(), QpError> {
    sock.set_nonblocking(true).map_err(|e| QpError::Io(e.kind()))?;
    let fd = sock.as_raw_fd();
    let mut rx = vec![0u8; RX_BUF];
    let mut tx = TxQueue { chunks: Default::default(), off: 0 };
    let mut closing_since: Option<Instant> = None;
    loop {
        let now = Instant::now();
        // 1. Work the application posted.
        let posted: Vec<_> = shared.pending.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect();
        for wr in posted {
            engine.post(now, wr);
        }
        // 2. Bytes the engine wants to send.
        loop {
            let mut chunk = Vec::new();
            if !engine.poll_transmit(now, &mut chunk) {
                break;
            }
            if !chunk.is_empty() {
                tx.chunks.push_back(chunk);
            }
        }
        let mut blocked = false;
        while let Some(front) = tx.chunks.front() {
            if opts.segment_per_chunk && tx.off == 0 && unsent_bytes(sock) > 0 {
                blocked = true;
                break;
            }
            match sock.write(&front[tx.off..]) {
                Ok(n) => {
                    Counters::add(&counters.tx_bytes, n as u64);
                    tx.off += n;
                    if tx.off == front.len() {
                        tx.chunks.pop_front();
                        tx.off = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(QpError::Io(e.kind())),
            }
        }
        // 3. Completions.
        while let Some(c) = engine.poll_completion() {
            deliver(shared, c);
        }
        // 4. Fatal error or close request: flush the queue (a Terminate), then stop.
        let fatal = engine.fatal();
        let close = shared.close_requested.load(Ordering::Acquire);
        if fatal.is_some() || close {
            let since = *closing_since.get_or_insert(now);
            if tx.is_empty() || now.duration_since(since) > LINGER {
                if let Some(e) = fatal {
                    return Err(e);
                }
                let _ = sock.shutdown(Shutdown::Write);
                return Ok(());
            }
        }
        // 5. Wait for input, room to write, or the application.
        let timeout = if blocked && opts.segment_per_chunk { 0 } else if closing_since.is_some() { 10 } else { 200 };
        if blocked && opts.segment_per_chunk {
            std::thread::sleep(Duration::from_micros(20));
        }
        let ready = wait(fd, blocked && !opts.segment_per_chunk, &shared.waker, timeout)
            .map_err(|e| QpError::Io(e.kind()))?;
        if ready.woken {
            shared.waker.drain();
        }
        if ready.readable || ready.hangup {
            loop {
                match sock.read(&mut rx) {
                    Ok(0) => {
                        engine.peer_closed();
                        while let Some(c) = engine.poll_completion() {
                            deliver(shared, c);
                        }
                        if shared.close_requested.load(Ordering::Acquire) {
                            return Ok(());
                        }
                        return Err(engine.fatal().unwrap_or(QpError::PeerClosed));
                    }
                    Ok(n) => {
                        Counters::add(&counters.rx_bytes, n as u64);
                        engine.handle_rx(Instant::now(), &rx[..n]);
                        if engine.fatal().is_some() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(QpError::Io(e.kind())),
                }
            }
        }
    }
}
