//! The connection driver: moves bytes between a non-blocking kernel TCP socket and ddp's sans-IO
//! queue pair, and turns its completions and events into completion-queue entries, counters and
//! the queue pair's error state. Threaded devices run it on one thread per connection, blocking
//! in poll(2) between rounds ([`run`]); inline devices run it in steps from the application's
//! own calls ([`Driver::step`], see `inline.rs`).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ddp::QpEvent;

use super::waker::{wait, Ready};
use crate::counters::DeviceCounters;
use crate::qp_events::{startup_error, stream_error};
use crate::queue_pair::{Established, QpError, QpShared};
use crate::ConnectError;

/// Driver options that shape how bytes reach the wire and how a connection ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DriverOptions {
    /// Give every chunk (one FPDU, or a startup frame) its own TCP segment: before writing a
    /// chunk, wait until the kernel has sent everything written before (SIOCOUTQNSD == 0).
    pub(crate) segment_per_chunk: bool,
    /// How long a closing connection may take to flush its queued bytes and see the peer's
    /// FIN before it is reset.
    pub(crate) close_timeout: Duration,
}

impl DriverOptions {
    /// The options `config` asks for.
    pub(crate) fn of(config: &crate::ConnectionConfig) -> Self {
        DriverOptions {
            segment_per_chunk: config.segment_per_fpdu,
            close_timeout: config.close_timeout,
        }
    }
}

/// Where the driver reports how MPA startup ended: the peer's private data and what was
/// negotiated, or why not.
pub(crate) type EstablishedTx = SyncSender<Result<Established, ConnectError>>;

const RX_BUF: usize = 256 * 1024;
/// Bytes of framed output the driver holds for the socket: FPDUs are framed straight into one
/// buffer and written with one `write`, so TCP builds large segments (GSO) instead of one small
/// skb per FPDU.
const TX_BUF: usize = 256 * 1024;
/// Frame more only while fewer bytes than this wait for the socket (it is not keeping up).
const TX_REFILL_BELOW: usize = 64 * 1024;

/// Framed bytes waiting for the socket: `buf[start..end]`, reused without allocation. With
/// one segment per chunk, `chunk_ends` holds where each chunk (FPDU or startup frame) ends.
struct TxBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    chunk_ends: VecDeque<usize>,
}

impl TxBuf {
    fn new() -> Self {
        Self {
            buf: vec![0u8; TX_BUF.max(mpa::MAX_FPDU_LEN)],
            start: 0,
            end: 0,
            chunk_ends: VecDeque::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Moves what is pending to the front; returns the free space behind it.
    fn make_room(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            for e in &mut self.chunk_ends {
                *e -= self.start;
            }
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// The bytes the next write may take: everything, or the rest of the current chunk.
    fn next_write(&self, per_chunk: bool) -> &[u8] {
        let end = match self.chunk_ends.front() {
            Some(&e) if per_chunk => e,
            _ => self.end,
        };
        &self.buf[self.start..end]
    }

    /// `n` bytes were written.
    fn consume(&mut self, n: usize) {
        self.start += n;
        while self.chunk_ends.front().is_some_and(|&e| e <= self.start) {
            self.chunk_ends.pop_front();
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.chunk_ends.clear();
        }
    }
}

/// Bytes written to the socket but not yet sent by TCP.
fn unsent_bytes(sock: &TcpStream) -> i32 {
    let mut n: libc::c_int = 0;
    // Safety: SIOCOUTQNSD writes one int into n, a valid c_int that outlives the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCOUTQNSD as _, &mut n) };
    if r < 0 {
        0
    } else {
        n
    }
}

/// Makes closing `sock` send RST (SO_LINGER on with a zero timeout): the abort of a connection
/// that did not finish in time.
pub(crate) fn reset_on_close(sock: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // Safety: setsockopt reads a linger struct of exactly the size passed from a valid
    // reference, on a descriptor `sock` keeps open for the call.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}

/// The kernel's MSS of a connected socket (TCP_MAXSEG), the EMSS MPA derives MULPDU from.
pub(crate) fn tcp_mss(sock: &TcpStream) -> Option<u32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // Safety: getsockopt writes at most `len` bytes into v, a valid c_int.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0 && v > 0).then_some(v as u32)
}

/// One connection's driver: its socket, its queue pair and where the connection stands.
pub(crate) struct Driver {
    sock: TcpStream,
    shared: Arc<QpShared>,
    counters: Arc<DeviceCounters>,
    opts: DriverOptions,
    /// Where received bytes land before ddp takes them.
    rx: Vec<u8>,
    established: Option<EstablishedTx>,
    tx: TxBuf,
    /// Whether the last write stopped inside a chunk (one-segment-per-chunk mode).
    mid_chunk: bool,
    written: u64,
    /// The stream failed (Terminate, framing error, startup failure): flush, then close.
    failed: bool,
    /// Close TCP at once, without waiting for the queue (malformed startup frame).
    close_now: bool,
    closing_since: Option<Instant>,
    graceful_started: bool,
    fin_sent: bool,
    peer_fin: bool,
    /// The close did not finish in time: the socket is reset, not closed.
    reset: bool,
}

/// What a threaded driver waits for before its next round.
struct Wait {
    read: bool,
    write: bool,
    timeout_ms: i32,
    /// Give the kernel a moment first (one segment per chunk, the last one not sent yet).
    pause: bool,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("qp", &self.shared.num)
            .field("closing", &self.closing_since.is_some())
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// A driver for `sock` (made non-blocking by [`Driver::start`]); `established` hears how
    /// MPA startup ended.
    pub(crate) fn new(
        sock: TcpStream,
        shared: Arc<QpShared>,
        counters: Arc<DeviceCounters>,
        opts: DriverOptions,
        established: Option<EstablishedTx>,
    ) -> Self {
        Driver {
            sock,
            shared,
            counters,
            opts,
            rx: Vec::new(),
            established,
            tx: TxBuf::new(),
            mid_chunk: false,
            written: 0,
            failed: false,
            close_now: false,
            closing_since: None,
            graceful_started: false,
            fin_sent: false,
            peer_fin: false,
            reset: false,
        }
    }

    /// Makes the socket non-blocking and allocates the receive buffer.
    pub(crate) fn start(&mut self) -> Result<(), QpError> {
        self.rx = vec![0u8; RX_BUF];
        self.sock
            .set_nonblocking(true)
            .map_err(|e| QpError::Io(e.kind()))
    }

    /// The socket's descriptor (to wait on).
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.sock.as_raw_fd()
    }

    fn report(&mut self, r: Result<Established, ConnectError>) {
        if let Some(tx) = self.established.take() {
            let _ = tx.send(r);
        }
    }

    fn fail(&mut self, e: QpError) {
        self.shared.set_error(e);
        self.failed = true;
    }

    fn handle_event(&mut self, ev: QpEvent) {
        let c = self.counters.clone();
        let c = &*c;
        match ev {
            QpEvent::Established {
                peer_private_data,
                negotiated,
            } => {
                DeviceCounters::inc(&c.mpa_established);
                self.report(Ok(Established {
                    peer_private_data,
                    negotiated,
                }));
            }
            QpEvent::ConnectRequest(_) => {}
            ev @ (QpEvent::Rejected { .. } | QpEvent::StartupFailed(_)) => {
                // A malformed or missing startup frame closes TCP at once; a rejection first
                // lets the Reply drain, and an RFC 6581 refusal its Terminate.
                self.close_now |= matches!(
                    &ev,
                    QpEvent::StartupFailed(e) if e.action() != mpa::ErrorAction::Terminate
                );
                self.report(Err(startup_error(c, ev)));
                self.failed = true;
            }
            ev => {
                if let Some(e) = stream_error(c, &ev) {
                    self.fail(e);
                }
            }
        }
    }

    /// Runs the queue pair's timers, takes its output, completions and events.
    fn pump(&mut self, now: Instant) {
        let mut events = Vec::new();
        self.shared.locked(|qp| {
            if qp.poll_timeout().is_some_and(|t| now >= t) {
                qp.handle_timeout(now);
            }
            if self.shared.close_requested.load(Ordering::Acquire) && !self.graceful_started {
                // QueuePair::close shut the queue pair already; this only starts the close.
                self.graceful_started = true;
                qp.shutdown();
            }
            if self.tx.pending() < TX_REFILL_BELOW {
                let st = self.shared.pd().lock();
                if self.opts.segment_per_chunk {
                    // One chunk at a time, each end remembered.
                    loop {
                        let room = self.tx.make_room();
                        let Some(n) = qp.poll_transmit(&st.tags, &st.mem, room) else {
                            break;
                        };
                        self.tx.end += n;
                        self.tx.chunk_ends.push_back(self.tx.end);
                        if self.tx.buf.len() - self.tx.end < qp.max_fpdu_len() {
                            break;
                        }
                    }
                } else {
                    let room = self.tx.make_room();
                    let n = qp.poll_transmit_batch(&st.tags, &st.mem, room);
                    self.tx.end += n;
                }
            }
            // The completions go to the CQs as `locked` returns, still under the lock.
            while let Some(ev) = qp.poll_event() {
                events.push(ev);
            }
        });
        for ev in events {
            self.handle_event(ev);
        }
    }

    /// Writes what is framed; returns true when the socket (or the one-segment rule) holds us
    /// back.
    fn flush_tx(&mut self) -> Result<bool, QpError> {
        let before = self.written;
        let per_chunk = self.opts.segment_per_chunk;
        let mut blocked = false;
        while !self.tx.is_empty() {
            if per_chunk && !self.mid_chunk && unsent_bytes(&self.sock) > 0 {
                blocked = true;
                break;
            }
            let out = self.tx.next_write(per_chunk);
            let len = out.len();
            match self.sock.write(out) {
                Ok(n) => {
                    self.written += n as u64;
                    self.mid_chunk = n < len;
                    self.tx.consume(n);
                    if n < len && !per_chunk {
                        // The socket buffer is full.
                        blocked = true;
                        break;
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
        if self.written != before {
            DeviceCounters::add(&self.counters.tx_bytes, self.written - before);
            // Kernel TCP owns the bytes now: Sends and Writes complete (ddp's on_acked contract).
            self.shared.lock_qp().on_acked(self.written);
        }
        Ok(blocked)
    }

    fn read_all(&mut self) -> Result<(), QpError> {
        loop {
            match self.sock.read(&mut self.rx) {
                Ok(0) => {
                    // The peer's FIN, after every octet before it was handed in: the stream is
                    // half-closed (DDP-69), not failed; before MPA is up the startup fails.
                    self.peer_fin = true;
                    self.shared.lock_qp().handle_peer_fin();
                    return Ok(());
                }
                Ok(n) => {
                    DeviceCounters::add(&self.counters.rx_bytes, n as u64);
                    let mut qp = self.shared.lock_qp();
                    let mut st = self.shared.pd().lock();
                    let st = &mut *st;
                    qp.handle_rx_bytes(&mut st.tags, &mut st.mem, Instant::now(), &self.rx[..n]);
                    if qp.is_error() {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(QpError::Io(e.kind())),
            }
        }
    }

    /// One round of work: timers, output, completions, the close. `None` once the connection
    /// is done; else what to wait for before the next round.
    fn work(&mut self, now: Instant) -> Result<Option<Wait>, QpError> {
        self.pump(now);
        if self.close_now {
            return Ok(None);
        }
        let blocked = self.flush_tx()?;
        // Sends written above may complete at once.
        self.pump(now);
        let closing = self.failed || self.graceful_started;
        if closing {
            let since = *self.closing_since.get_or_insert(now);
            let expired = now.duration_since(since) > self.opts.close_timeout;
            let drained = self.tx.is_empty() && (self.failed || self.shared.lock_qp().is_idle());
            if drained && !self.fin_sent {
                let _ = self.sock.shutdown(Shutdown::Write);
                self.fin_sent = true;
            }
            if self.fin_sent && self.peer_fin {
                return Ok(None);
            }
            if expired {
                // Not finished in time: abort (RST); what is left is flushed.
                if self.graceful_started {
                    DeviceCounters::inc(&self.counters.close_timeouts);
                }
                self.reset = true;
                return Ok(None);
            }
        }
        // A peer FIN while we are not closing half-closes the stream (DDP -06 §6.2.1): our
        // Sends, Writes and Read Responses still go out; our FIN follows the application's
        // close (DDP-70).
        // More FPDUs are queued and the socket takes them: only look for input, do not sleep.
        let more = !blocked && !self.tx.is_empty();
        let pause = blocked && self.opts.segment_per_chunk;
        let timeout_ms = if more || pause {
            0
        } else if self.closing_since.is_some() {
            10
        } else {
            let qp = self.shared.lock_qp();
            match qp.poll_timeout() {
                Some(t) => t.saturating_duration_since(now).as_millis().min(200) as i32,
                None => 200,
            }
        };
        Ok(Some(Wait {
            // After the peer's FIN the socket stays readable (EOF): stop asking for it.
            read: !self.peer_fin,
            write: blocked && !self.opts.segment_per_chunk,
            timeout_ms,
            pause,
        }))
    }

    /// Acts on what the socket and the waker reported.
    fn handle_ready(&mut self, ready: Ready) -> Result<(), QpError> {
        if ready.hangup && self.peer_fin && !self.fin_sent {
            // Both directions gone without our FIN: the peer reset the half-closed connection.
            return Err(QpError::Io(io::ErrorKind::ConnectionReset));
        }
        if ready.woken {
            self.shared.waker.drain();
        }
        if (ready.readable || ready.hangup) && !self.peer_fin {
            self.read_all()?;
        }
        Ok(())
    }

    /// Threaded: rounds until the connection closes, blocking in poll(2) between them.
    fn run_blocking(&mut self) -> Result<(), QpError> {
        self.start()?;
        let fd = self.sock.as_raw_fd();
        loop {
            let Some(w) = self.work(Instant::now())? else {
                return Ok(());
            };
            if w.pause {
                std::thread::sleep(Duration::from_micros(20));
            }
            let ready = wait(fd, w.read, w.write, &self.shared.waker, w.timeout_ms)
                .map_err(|e| QpError::Io(e.kind()))?;
            self.handle_ready(ready)?;
        }
    }

    /// Inline: one round without blocking. With `read`, a non-blocking read first takes what
    /// arrived (that read stands for the wait: nothing sleeps here); then timers, completions
    /// and output. `Ok(false)` once the connection is done: call [`Driver::finish`].
    pub(crate) fn step(&mut self, read: bool) -> Result<bool, QpError> {
        if read {
            let ready = if self.peer_fin {
                // Only a reset is left to notice (a zero-timeout poll).
                wait(self.raw_fd(), false, false, &self.shared.waker, 0)
                    .map_err(|e| QpError::Io(e.kind()))?
            } else {
                Ready {
                    readable: true,
                    ..Ready::default()
                }
            };
            self.handle_ready(ready)?;
        }
        Ok(self.work(Instant::now())?.is_some())
    }

    /// Ends the connection after its last round (`r`: how the rounds ended): flushes what is
    /// left, closes or resets the socket, marks the queue pair finished.
    pub(crate) fn finish(mut self, r: Result<(), QpError>) {
        let shared = self.shared.clone();
        let counters = self.counters.clone();
        if let Err(e) = r {
            shared.set_error(e);
        }
        if shared.error().is_some() {
            DeviceCounters::inc(&counters.connection_errors);
        }
        // Every request still in flight completes flushed; ddp refuses posts from now on.
        let rx_after_close = shared.locked(|qp| {
            qp.handle_close();
            qp.stats().rx_after_close
        });
        DeviceCounters::add(&counters.rx_after_close, rx_after_close);
        self.report(Err(ConnectError::Startup(
            mpa::StartupError::ConnectionClosed,
        )));
        if self.reset {
            reset_on_close(&self.sock);
        } else {
            let _ = self.sock.shutdown(Shutdown::Both);
        }
        drop(self);
        shared.set_finished();
    }
}

/// Runs the connection on the calling thread until it closes (threaded devices). Never panics
/// on peer input: errors end up in the queue pair's error, the counters and flushed
/// completions. `established` hears how MPA startup ended (initiators, and responders right
/// after accepting).
pub(crate) fn run(
    sock: TcpStream,
    shared: Arc<QpShared>,
    counters: Arc<DeviceCounters>,
    opts: DriverOptions,
    established: Option<EstablishedTx>,
) {
    let mut d = Driver::new(sock, shared, counters, opts, established);
    let r = d.run_blocking();
    d.finish(r);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(t: &mut TxBuf, bytes: &[u8], chunk: bool) {
        let room = t.make_room();
        room[..bytes.len()].copy_from_slice(bytes);
        t.end += bytes.len();
        if chunk {
            t.chunk_ends.push_back(t.end);
        }
    }

    #[test]
    fn everything_framed_goes_out_in_one_write() {
        let mut t = TxBuf::new();
        push(&mut t, b"fpdu-one", false);
        push(&mut t, b"fpdu-two", false);
        assert_eq!(t.next_write(false), b"fpdu-onefpdu-two");
        t.consume(5);
        assert_eq!(t.next_write(false), b"onefpdu-two");
        t.consume(11);
        assert!(t.is_empty());
        assert_eq!(
            (t.start, t.end),
            (0, 0),
            "an emptied buffer starts over at 0"
        );
    }

    #[test]
    fn one_segment_per_chunk_writes_stop_at_chunk_ends_even_after_compaction() {
        let mut t = TxBuf::new();
        push(&mut t, b"aaaa", true);
        push(&mut t, b"bbb", true);
        assert_eq!(t.next_write(true), b"aaaa");
        t.consume(2); // a partial write
        assert_eq!(t.next_write(true), b"aa");
        let _ = t.make_room(); // moves the pending bytes (and the chunk ends) to the front
        assert_eq!(t.start, 0);
        assert_eq!(t.next_write(true), b"aa");
        t.consume(2);
        push(&mut t, b"cc", true);
        assert_eq!(t.next_write(true), b"bbb");
        t.consume(3);
        assert_eq!(t.next_write(true), b"cc");
        assert_eq!(t.pending(), 2);
    }
}
