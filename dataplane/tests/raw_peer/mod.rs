//! A scripted MPA peer on a kernel TCP socket: the Responder of one connection (Rev 1, CRC, no
//! markers), sending exactly the DDP segments a test asks for, when it asks. For tests that need
//! a peer's message to arrive at a chosen moment (after a region was deregistered, after the
//! queue pair was closed), which a real queue pair on the other end cannot promise.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ddp::{
    DdpPacket, DdpRepr, RdmapControl, RdmapOpcode, ReadRequestPacket, ReadRequestRepr, Stag,
    TaggedRepr, UntaggedRepr, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN,
};
use mpa::startup_frame::{FrameKind, Packet, Repr};
use mpa::{FramingConfig, StreamParser};

const FRAMING: FramingConfig = FramingConfig {
    markers: false,
    crc: true,
};

/// How the other end left the connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// FIN: reading returns end of stream.
    Fin,
    /// RST.
    Reset,
    /// Neither within the wait.
    Open,
}

/// The peer's end of one connection, MPA up.
pub struct RawPeer {
    sock: TcpStream,
    tx_off: u32,
    parser: StreamParser,
    send_msn: u32,
}

impl RawPeer {
    /// Accepts one connection on `listener`, reads the MPA Request and replies (Rev 1, CRC
    /// on, no markers, no private data).
    pub fn accept(listener: &TcpListener) -> RawPeer {
        let (mut sock, _) = listener.accept().expect("accept");
        sock.set_nodelay(true).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut head = [0u8; 20];
        sock.read_exact(&mut head).expect("MPA Request");
        let pd_len = usize::from(u16::from_be_bytes([head[18], head[19]]));
        let mut pd = vec![0u8; pd_len];
        sock.read_exact(&mut pd).expect("private data");
        let mut req = head.to_vec();
        req.extend_from_slice(&pd);
        let r = Repr::parse(&Packet::new_unchecked(&req[..])).expect("a valid Request");
        assert_eq!(r.kind, FrameKind::Request);
        let reply = Repr {
            kind: FrameKind::Reply,
            markers: false,
            crc: true,
            reject: false,
            revision: 1,
            enhanced: None,
            private_data: &[],
        };
        sock.write_all(&reply.to_vec()).unwrap();
        RawPeer {
            sock,
            tx_off: 0,
            parser: StreamParser::new(FRAMING, 0),
            send_msn: 1,
        }
    }

    /// `ulpdu` framed as the next FPDU.
    fn frame(&mut self, ulpdu: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; mpa::fpdu_wire_len(FRAMING, self.tx_off, ulpdu.len())];
        let n = mpa::encode_fpdu(FRAMING, self.tx_off, &[ulpdu], &mut out).unwrap();
        self.tx_off = self.tx_off.wrapping_add(n as u32);
        out.truncate(n);
        out
    }

    /// Frames `ulpdu` as the next FPDU and writes it.
    pub fn send_ulpdu(&mut self, ulpdu: &[u8]) {
        let f = self.frame(ulpdu);
        self.sock.write_all(&f).unwrap();
    }

    /// The next ULPDU from the other end, waiting up to `wait`.
    pub fn next_ulpdu(&mut self, wait: Duration) -> Option<Vec<u8>> {
        let end = Instant::now() + wait;
        let mut buf = [0u8; 4096];
        loop {
            if let Some(f) = self.parser.next_fpdu().expect("well-framed FPDUs") {
                return Some(f.ulpdu_chunks().flatten().copied().collect());
            }
            if Instant::now() >= end {
                return None;
            }
            self.sock
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            match self.sock.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => {
                    let mut rest = &buf[..n];
                    while !rest.is_empty() {
                        let took = self.parser.push(rest);
                        rest = &rest[took..];
                        if took == 0 {
                            panic!("parser full");
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// The ULPDU of a Send of `payload` with the next MSN of QN 0.
    fn send_segment(&mut self, payload: &[u8]) -> Vec<u8> {
        let msn = self.send_msn;
        self.send_msn += 1;
        let mut u = vec![0u8; UNTAGGED_HEADER_LEN + payload.len()];
        DdpRepr::Untagged(UntaggedRepr {
            last: true,
            rsvd_ulp: RdmapControl {
                opcode: RdmapOpcode::Send,
            }
            .emit(),
            rsvd_ulp_ext: 0,
            qn: 0,
            msn,
            mo: 0,
        })
        .emit(&mut DdpPacket::new_unchecked(&mut u[..]));
        u[UNTAGGED_HEADER_LEN..].copy_from_slice(payload);
        u
    }

    /// A Send of `payload`.
    pub fn send(&mut self, payload: &[u8]) {
        let u = self.send_segment(payload);
        self.send_ulpdu(&u);
    }

    /// A tagged message (RDMA Write or Read Response) of `payload` to `stag` at `to`.
    pub fn tagged(&mut self, opcode: RdmapOpcode, stag: u32, to: u64, payload: &[u8]) {
        let mut u = vec![0u8; TAGGED_HEADER_LEN + payload.len()];
        DdpRepr::Tagged(TaggedRepr {
            last: true,
            rsvd_ulp: RdmapControl { opcode }.emit(),
            stag: Stag(stag),
            to,
        })
        .emit(&mut DdpPacket::new_unchecked(&mut u[..]));
        u[TAGGED_HEADER_LEN..].copy_from_slice(payload);
        self.send_ulpdu(&u);
    }

    /// Waits for the other end's next ULPDU, which must be an RDMA Read Request.
    pub fn read_request(&mut self, wait: Duration) -> ReadRequestRepr {
        let u = self.next_ulpdu(wait).expect("a Read Request");
        let p = DdpPacket::new_checked(&u[..]).unwrap();
        let DdpRepr::Untagged(h) = DdpRepr::parse(&p).unwrap() else {
            panic!("not untagged: {u:?}");
        };
        assert_eq!(h.qn, 1, "QN 1: a Read Request");
        let rr = ReadRequestPacket::new_checked(&u[UNTAGGED_HEADER_LEN..]).unwrap();
        ReadRequestRepr::parse(&rr).unwrap()
    }

    /// How the other end leaves: reads (dropping what comes) until end of stream, a reset, or
    /// `wait` passes.
    pub fn ending(&mut self, wait: Duration) -> Ending {
        let end = Instant::now() + wait;
        let mut buf = [0u8; 4096];
        self.sock
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        while Instant::now() < end {
            match self.sock.read(&mut buf) {
                Ok(0) => return Ending::Fin,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ending::Reset,
                Err(e) => panic!("read: {e}"),
            }
        }
        Ending::Open
    }

    /// After a FIN: whether the other end resets the connection within `wait` (probed now and
    /// then with an empty Send, which a closed queue pair drops; a connection that is gone
    /// answers with RST).
    pub fn reset_within(&mut self, wait: Duration) -> bool {
        let end = Instant::now() + wait;
        while Instant::now() < end {
            let u = self.send_segment(&[]);
            let probe = self.frame(&u);
            if let Err(e) = self.sock.write_all(&probe) {
                return matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe);
            }
            let mut b = [0u8; 64];
            match self.sock.read(&mut b) {
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
        false
    }
}
