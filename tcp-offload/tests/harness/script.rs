//! Scripted peer: hand-made segments in, parsed segments out.

use std::time::Duration;

use tcp_offload::Timestamp;

use tcp_offload::wire::{self, Flags, SegmentRepr, TcpOptions};
use tcp_offload::{Config, Connection, SeqNum, State};

use super::{gen, tuple_a, tuple_b};

/// A segment our connection sent, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Out {
    pub seq: u32,
    pub ack: Option<u32>,
    pub flags: Flags,
    pub window: u16,
    pub options: TcpOptions,
    pub payload: Vec<u8>,
}

impl Out {
    pub fn is_pure_ack(&self) -> bool {
        self.ack.is_some()
            && !self.flags.syn
            && !self.flags.fin
            && !self.flags.rst
            && self.payload.is_empty()
    }
}

/// Parses flags like "SA", "FA", "R", "A".
pub fn flags(s: &str) -> Flags {
    Flags {
        syn: s.contains('S'),
        ack: s.contains('A'),
        fin: s.contains('F'),
        rst: s.contains('R'),
        psh: s.contains('P'),
    }
}

/// A connection under test plus the scripted peer's sequence numbers.
pub struct Script {
    pub c: Connection,
    pub now: Timestamp,
    pub t0: Timestamp,
    /// Peer's next sequence number to send.
    pub p_nxt: u32,
    /// Our ISS as seen on the wire.
    pub iss: u32,
    pub peer_ts: u32,
    pub buf: Vec<u8>,
}

impl Script {
    fn with(t0: Timestamp, c: Connection) -> Script {
        Script {
            c,
            now: t0,
            t0,
            p_nxt: 0,
            iss: 0,
            peer_ts: 1000,
            buf: vec![0; 70_000],
        }
    }

    pub fn active(cfg: Config) -> Script {
        let t0 = Timestamp::ZERO;
        Script::with(
            t0,
            Connection::connect(cfg, tuple_a(), &gen(t0), t0).expect("valid TCP settings"),
        )
    }

    pub fn passive(cfg: Config) -> Script {
        let t0 = Timestamp::ZERO;
        Script::with(
            t0,
            Connection::listen(cfg, tuple_a().local, &gen(t0), t0).expect("valid TCP settings"),
        )
    }

    /// Everything the connection wants to send now.
    pub fn drain(&mut self) -> Vec<Out> {
        let mut v = Vec::new();
        while let Some(n) = self.c.poll_transmit(self.now, &mut self.buf) {
            let s = wire::parse(&self.buf[..n]).expect("our output parses");
            v.push(Out {
                seq: s.seq.0,
                ack: s.flags.ack.then_some(s.ack.0),
                flags: s.flags,
                window: s.window,
                options: s.options,
                payload: s.payload.to_vec(),
            });
            assert!(v.len() < 10_000, "runaway transmit");
        }
        v
    }

    /// Sends a segment from the peer with explicit fields.
    pub fn inject_raw(
        &mut self,
        seq: u32,
        ack: Option<u32>,
        f: &str,
        options: TcpOptions,
        payload: &[u8],
    ) {
        let mut fl = flags(f);
        fl.ack = false;
        let repr = SegmentRepr {
            tuple: tuple_b(),
            seq: SeqNum(seq),
            ack: ack.map(SeqNum),
            flags: fl,
            window: 65535,
            options,
        };
        let pkt = super::raw(repr, payload);
        self.c.handle_packet(self.now, &pkt).expect("valid packet");
    }

    /// Sends from the peer with timestamps (when `ts`) and the peer's current sequence number.
    pub fn inject(&mut self, f: &str, payload: &[u8], ts: bool) {
        let ack = self.c_snd_nxt();
        let o = self.ts_opt(ts);
        self.inject_raw(self.p_nxt, Some(ack), f, o, payload);
        self.p_nxt = self.p_nxt.wrapping_add(
            payload.len() as u32 + u32::from(f.contains('F')) + u32::from(f.contains('S')),
        );
    }

    pub fn ts_opt(&mut self, ts: bool) -> TcpOptions {
        self.peer_ts += 1;
        TcpOptions {
            timestamps: ts.then_some((self.peer_ts, 0)),
            ..Default::default()
        }
    }

    /// What the connection will send next as its sequence number (its SND.NXT as seen on the wire).
    pub fn c_snd_nxt(&self) -> u32 {
        self.c
            .snd_una()
            .0
            .wrapping_add(self.c.bytes_in_flight() as u32)
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        if self.c.poll_timeout().is_some_and(|t| t <= self.now) {
            self.c.handle_timeout(self.now);
        }
    }

    /// Active open to ESTABLISHED against the scripted peer (no options unless `opts`).
    pub fn establish_active(cfg: Config, opts: TcpOptions) -> Script {
        let mut s = Script::active(cfg);
        let out = s.drain();
        assert_eq!(out.len(), 1);
        assert!(out[0].flags.syn && out[0].ack.is_none());
        s.iss = out[0].seq;
        s.p_nxt = 7_000_000;
        s.inject_raw(s.p_nxt, Some(s.iss.wrapping_add(1)), "SA", opts, b"");
        s.p_nxt += 1;
        assert_eq!(s.c.state(), State::Established);
        let out = s.drain();
        assert!(
            out.iter().any(|o| o.is_pure_ack()),
            "ACK of SYN-ACK: {out:?}"
        );
        s
    }
}
