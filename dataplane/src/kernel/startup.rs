//! MPA startup over a blocking kernel TCP socket: send our Request/Reply, read and validate the
//! peer's (draft-ietf-rddp-mpa-01 §6.1 / RFC 5044 §7.1), with the startup timeout applied to
//! every read (MPA-90, MPA-92).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use crate::MpaSettings;

/// "MPA ID Req Frame".
pub(crate) const REQ_KEY: &[u8; 16] = b"MPA ID Req Frame";
/// "MPA ID Rep Frame".
pub(crate) const REP_KEY: &[u8; 16] = b"MPA ID Rep Frame";

/// A Request or Reply frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StartupFrame {
    pub(crate) reply: bool,
    pub(crate) markers: bool,
    pub(crate) crc: bool,
    pub(crate) reject: bool,
    pub(crate) revision: u8,
    pub(crate) private_data: Vec<u8>,
}

impl StartupFrame {
    pub(crate) fn emit(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(20 + self.private_data.len());
        v.extend_from_slice(if self.reply { REP_KEY } else { REQ_KEY });
        let flags = (u8::from(self.markers) << 7) | (u8::from(self.crc) << 6) | (u8::from(self.reject) << 5);
        v.push(flags);
        v.push(self.revision);
        v.extend_from_slice(&(self.private_data.len() as u16).to_be_bytes());
        v.extend_from_slice(&self.private_data);
        v
    }
}

/// Why startup failed.
#[derive(Debug)]
pub(crate) enum StartupError {
    /// Malformed frame: the TCP connection must be closed (MPA-79, MPA-82, MPA-86, MPA-91, MPA-102).
    Malformed(&'static str),
    /// No complete frame before the deadline.
    Timeout,
    /// Socket error or EOF.
    Io(io::Error),
}

fn read_exact_by(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Result<(), StartupError> {
    let mut got = 0;
    while got < buf.len() {
        let now = Instant::now();
        if now >= deadline {
            return Err(StartupError::Timeout);
        }
        s.set_read_timeout(Some(deadline - now)).map_err(StartupError::Io)?;
        match s.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(StartupError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed during MPA startup",
                )))
            }
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(StartupError::Timeout)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(StartupError::Io(e)),
        }
    }
    Ok(())
}

/// Reads and validates the peer's frame: a Request when `expect_reply` is false, else a Reply.
pub(crate) fn read_frame(
    s: &mut TcpStream,
    expect_reply: bool,
    settings: &MpaSettings,
    deadline: Instant,
) -> Result<StartupFrame, StartupError> {
    let mut hdr = [0u8; 20];
    read_exact_by(s, &mut hdr, deadline)?;
    let want = if expect_reply { REP_KEY } else { REQ_KEY };
    if &hdr[..16] != want {
        // MPA-89: a Request where a Reply is expected (or vice versa) is a bad key too.
        return Err(StartupError::Malformed("bad key"));
    }
    let revision = hdr[17];
    if revision != settings.revision {
        return Err(StartupError::Malformed("bad revision"));
    }
    let pd_len = usize::from(u16::from_be_bytes([hdr[18], hdr[19]]));
    if pd_len > settings.private_data_limit {
        return Err(StartupError::Malformed("PD_Length over the limit"));
    }
    let mut private_data = vec![0u8; pd_len];
    read_exact_by(s, &mut private_data, deadline)?;
    Ok(StartupFrame {
        reply: expect_reply,
        markers: hdr[16] & 0x80 != 0,
        crc: hdr[16] & 0x40 != 0,
        // MPA-100: R is not checked in a Request.
        reject: expect_reply && hdr[16] & 0x20 != 0,
        revision,
        private_data,
    })
}

/// Writes a frame in one call (each startup frame begins its own TCP segment).
pub(crate) fn write_frame(s: &mut TcpStream, f: &StartupFrame) -> io::Result<()> {
    s.write_all(&f.emit())
}

/// What startup agreed on for the full-operation phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Negotiated {
    /// We insert markers in what we send (the peer's M bit, MPA-98).
    pub(crate) tx_markers: bool,
    /// The peer inserts markers in what it sends (our M bit).
    pub(crate) rx_markers: bool,
    /// CRCs generated and checked (either C bit, MPA-99).
    pub(crate) crc: bool,
    /// We are the initiator (the responder must not send an FPDU before receiving one, MPA-85).
    pub(crate) initiator: bool,
}

impl Negotiated {
    pub(crate) fn from_frames(ours: &StartupFrame, peer: &StartupFrame, initiator: bool) -> Self {
        Self {
            tx_markers: peer.markers,
            rx_markers: ours.markers,
            crc: ours.crc || peer.crc,
            initiator,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_vector_request_m1_c1_rev0() {
        // spec-mpa.md §1.4 derived example.
        let f = StartupFrame {
            reply: false,
            markers: true,
            crc: true,
            reject: false,
            revision: 0,
            private_data: vec![],
        };
        let mut want = REQ_KEY.to_vec();
        want.extend_from_slice(&[0xc0, 0, 0, 0]);
        assert_eq!(f.emit(), want);
    }

    #[test]
    fn derived_vector_reply_reject() {
        let f = StartupFrame {
            reply: true,
            markers: false,
            crc: true,
            reject: true,
            revision: 0,
            private_data: vec![],
        };
        assert_eq!(&f.emit()[16..], &[0x60, 0, 0, 0]);
    }

    #[test]
    fn crc_on_if_either_side_asks_mpa99() {
        let mk = |crc| StartupFrame {
            reply: false,
            markers: false,
            crc,
            reject: false,
            revision: 1,
            private_data: vec![],
        };
        for (a, b) in [(false, false), (false, true), (true, false), (true, true)] {
            assert_eq!(Negotiated::from_frames(&mk(a), &mk(b), true).crc, a || b);
        }
    }
}
