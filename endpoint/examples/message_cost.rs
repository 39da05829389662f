//! The endpoint's cost of the pieces of one small message, without I/O, for instruction counts.
//! Each iteration: A posts a 64 B Send and transmits it; then three pieces, each a function of
//! its own that callgrind can count alone (`--toggle-collect`):
//!
//! - `send_receive`: B handles the Send's frame, runs its round (the timers, the transmit pass:
//!   nothing to send yet, the ACK of a short segment waits 25 us) and takes the receive's
//!   completion;
//! - `ack_transmit`: 100 us later, B's round writes the delayed ACK, a pure ACK;
//! - `ack_receive`: A handles that ACK, runs its round (the Send completes) and takes the
//!   completion.
//!
//! The endpoints are warmed up first (the quick-ACK phase after the handshake over), and each
//! iteration checks that the pieces did what they are named for. Arguments: `N` (default 200),
//! `markers` (0/1, default 0); CRC on.
//!
//! ```text
//! cargo build --release -p endpoint --example message_cost
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*message_cost::ack_receive*' \
//!     target/release/examples/message_cost 400
//! ```
//! Two runs with different `N` give a piece's cost without first-call effects:
//! (Ir(N2) - Ir(N1)) / (N2 - N1). `deploy/xwarp counts` runs them.

#[path = "../tests/pair/mod.rs"]
mod pair;

use std::time::{Duration, Instant};

use ddp::{Access, RegionHandle, WcOpcode, WorkRequest};
use endpoint::{ConnId, Endpoint};
use pair::{buf, filled, settings, Frames, Pair};

/// Message size.
const MSG: usize = 64;
/// Iterations before the counted ones: the quick-ACK phase after the handshake is over.
const WARM_UP: u64 = 100;

/// The two endpoints with one connection, their buffers and the frames between them.
struct Messages {
    a: Endpoint,
    b: Endpoint,
    ca: ConnId,
    cb: ConnId,
    src: RegionHandle,
    dst: RegionHandle,
    now: Instant,
    ab: Frames,
    ba: Frames,
}

impl Messages {
    fn new(markers: bool) -> Self {
        let mut p = Pair::clean();
        let s = settings(markers, true);
        let (ca, cb) = p.establish(4791, s.clone(), s);
        let (src, _) = filled(&mut p.a, &[0x5a; MSG], Access::LOCAL_WRITE);
        let (dst, _) = p.b.register(MSG, Access::LOCAL_WRITE);
        Messages {
            a: p.a,
            b: p.b,
            ca,
            cb,
            src,
            dst,
            now: p.now,
            ab: Frames::default(),
            ba: Frames::default(),
        }
    }

    /// One message and its ACK; with `check`, each piece checked (not while warming up, when
    /// ACKs still go out at once).
    fn iteration(&mut self, check: bool) {
        self.now += Duration::from_millis(1);
        self.b
            .post(self.cb, WorkRequest::recv(0, buf(self.dst, MSG)))
            .expect("post receive");
        self.a
            .post(
                self.ca,
                WorkRequest::send(1, buf(self.src, MSG), Default::default()),
            )
            .expect("post send");
        self.a.handle_timeout(self.now);
        self.a.poll_transmit(self.now, &mut self.ab);
        assert_eq!(self.ab.used, 1, "the Send in one frame");
        let received = send_receive(&mut self.b, &mut self.ab, &mut self.ba, self.now);
        assert!(received, "B received the Send");
        assert!(!check || self.ba.used == 0, "B's ACK waits");
        self.now += Duration::from_micros(100);
        ack_transmit(&mut self.b, &mut self.ba, self.now);
        assert_eq!(self.ba.used, 1, "B sent one frame");
        let (f, len) = &self.ba.bufs[0];
        assert_eq!(tcp_payload_len(&f[..*len]), Some(0), "a pure ACK");
        let completed = ack_receive(&mut self.a, &mut self.ba, &mut self.ab, self.now);
        assert!(completed, "A's Send completed");
        assert_eq!(self.ab.used, 0, "A had nothing to send");
    }
}

/// B handles the Send's frame, runs its round into `out` and takes the receive's completion.
#[inline(never)]
fn send_receive(b: &mut Endpoint, inbox: &mut Frames, out: &mut Frames, now: Instant) -> bool {
    receive_round(b, inbox, out, now, WcOpcode::Recv)
}

/// B's round at its ACK deadline: the pure ACK into `out`.
#[inline(never)]
fn ack_transmit(b: &mut Endpoint, out: &mut Frames, now: Instant) {
    b.handle_timeout(now);
    b.poll_transmit(now, out);
}

/// A handles the ACK, runs its round into `out` and takes the Send's completion.
#[inline(never)]
fn ack_receive(a: &mut Endpoint, inbox: &mut Frames, out: &mut Frames, now: Instant) -> bool {
    receive_round(a, inbox, out, now, WcOpcode::Send)
}

/// `ep` handles the frames of `inbox` and runs a round into `out`; whether a completion of
/// `opcode` came of it. Inlined into each counted piece.
#[inline(always)]
fn receive_round(
    ep: &mut Endpoint,
    inbox: &mut Frames,
    out: &mut Frames,
    now: Instant,
    opcode: WcOpcode,
) -> bool {
    inbox.deliver(ep, now);
    ep.handle_timeout(now);
    ep.poll_transmit(now, out);
    take(ep, opcode)
}

/// Takes the completions of `ep`; whether one of `opcode` was among them.
fn take(ep: &mut Endpoint, opcode: WcOpcode) -> bool {
    let mut found = false;
    while let Some((_, wc)) = ep.poll_completion() {
        found |= wc.opcode == opcode;
    }
    found
}

/// The TCP payload length of an Ethernet frame with IPv4 and TCP.
fn tcp_payload_len(f: &[u8]) -> Option<usize> {
    let ip = f.get(14..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let doff = usize::from(ip.get(ihl + 12)? >> 4) * 4;
    total.checked_sub(ihl + doff)
}

fn main() {
    let arg = |i: usize, d: u64| {
        std::env::args()
            .nth(i)
            .map_or(d, |a| a.parse().expect("a number"))
    };
    let (n, markers) = (arg(1, 200), arg(2, 0) == 1);
    let mut m = Messages::new(markers);
    for i in 0..WARM_UP + n {
        m.iteration(i >= WARM_UP);
    }
    println!("{n} x 64 B Send and its pure ACK (markers {markers}, CRC true)");
}
