//! An independent MPA / DDP / RDMAP peer written from RFC 5044, RFC 6581, RFC 5041 and RFC 5040
//! alone: its own startup-frame and FPDU encoders and decoders (CRC32c computed bit by bit here),
//! sharing no code with the `mpa` or `ddp` crates. No markers: every test asks for none.

use std::io::{self, Read, Write};

/// RFC 5044 §7.1.1: the two keys.
pub const REQ_KEY: &[u8; 16] = b"MPA ID Req Frame";
/// RFC 5044 §7.1.1.
pub const REP_KEY: &[u8; 16] = b"MPA ID Rep Frame";

/// RFC 6581 §7.1: the four octets of RDMA-layer connection data (A/B flags over IRD, C/D flags
/// over ORD).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rdma {
    pub ird: u16,
    pub ord: u16,
    /// A: peer-to-peer connection model.
    pub p2p: bool,
    /// B: RTR by a zero-length FPDU (a Send).
    pub rtr_send: bool,
    /// C: RTR by a zero-length RDMA Write.
    pub rtr_write: bool,
    /// D: RTR by a zero-length RDMA Read.
    pub rtr_read: bool,
}

impl Rdma {
    pub fn depths(ird: u16, ord: u16) -> Rdma {
        Rdma {
            ird,
            ord,
            ..Rdma::default()
        }
    }
    fn encode(&self) -> [u8; 4] {
        let a = (self.ird & 0x3fff)
            | if self.p2p { 0x8000 } else { 0 }
            | if self.rtr_send { 0x4000 } else { 0 };
        let b = (self.ord & 0x3fff)
            | if self.rtr_write { 0x8000 } else { 0 }
            | if self.rtr_read { 0x4000 } else { 0 };
        let mut o = [0u8; 4];
        o[..2].copy_from_slice(&a.to_be_bytes());
        o[2..].copy_from_slice(&b.to_be_bytes());
        o
    }
    fn decode(b: &[u8]) -> Rdma {
        let a = u16::from_be_bytes([b[0], b[1]]);
        let c = u16::from_be_bytes([b[2], b[3]]);
        Rdma {
            ird: a & 0x3fff,
            ord: c & 0x3fff,
            p2p: a & 0x8000 != 0,
            rtr_send: a & 0x4000 != 0,
            rtr_write: c & 0x8000 != 0,
            rtr_read: c & 0x4000 != 0,
        }
    }
    /// How many RTR flags are set.
    pub fn rtr_count(&self) -> usize {
        [self.rtr_send, self.rtr_write, self.rtr_read]
            .iter()
            .filter(|x| **x)
            .count()
    }
}

/// An MPA Request or Reply (RFC 5044 §7.1.1; RFC 6581 §7.1 for the Enhanced bit and data).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    pub reply: bool,
    pub markers: bool,
    pub crc: bool,
    pub reject: bool,
    pub rev: u8,
    /// The Enhanced bit and the four RDMA octets ahead of the private data (Rev 2).
    pub rdma: Option<Rdma>,
    /// The ULP's private data.
    pub pd: Vec<u8>,
}

impl Frame {
    pub fn request(rev: u8, rdma: Option<Rdma>, pd: &[u8]) -> Frame {
        Frame {
            crc: true,
            rev,
            rdma,
            pd: pd.to_vec(),
            ..Frame::default()
        }
    }
    pub fn bytes(&self) -> Vec<u8> {
        let mut o = Vec::new();
        o.extend_from_slice(if self.reply { REP_KEY } else { REQ_KEY });
        let mut flags = 0u8;
        for (on, bit) in [
            (self.markers, 0x80),
            (self.crc, 0x40),
            (self.reject, 0x20),
            (self.rdma.is_some(), 0x10),
        ] {
            if on {
                flags |= bit;
            }
        }
        o.push(flags);
        o.push(self.rev);
        let extra = if self.rdma.is_some() { 4 } else { 0 };
        o.extend_from_slice(&((self.pd.len() + extra) as u16).to_be_bytes());
        if let Some(r) = self.rdma {
            o.extend_from_slice(&r.encode());
        }
        o.extend_from_slice(&self.pd);
        o
    }
    /// Reads one frame; `Ok(None)` when the connection ends first.
    pub fn read_from(s: &mut impl Read) -> io::Result<Option<Frame>> {
        let mut h = [0u8; 20];
        if !read_or_end(s, &mut h)? {
            return Ok(None);
        }
        let reply = match &h[..16] {
            k if k == REP_KEY => true,
            k if k == REQ_KEY => false,
            k => panic!("not an MPA key: {k:02x?}"),
        };
        let mut pd = vec![0u8; usize::from(u16::from_be_bytes([h[18], h[19]]))];
        s.read_exact(&mut pd)?;
        let enhanced = h[16] & 0x10 != 0 && h[17] == 2;
        let rdma = enhanced.then(|| Rdma::decode(&pd[..4]));
        if enhanced {
            pd.drain(..4);
        }
        Ok(Some(Frame {
            reply,
            markers: h[16] & 0x80 != 0,
            crc: h[16] & 0x40 != 0,
            reject: h[16] & 0x20 != 0,
            rev: h[17],
            rdma,
            pd,
        }))
    }
}

/// Fills `buf`; false when the connection ends (FIN or RST) first.
fn read_or_end(s: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    match s.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
            ) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// CRC32c (Castagnoli, reflected), bit by bit.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// An FPDU without markers: ULPDU_Length, the ULPDU, padding to 4 octets, CRC (least
/// significant octet first, as RFC 5044's figures and iSCSI).
pub fn fpdu(ulpdu: &[u8]) -> Vec<u8> {
    let mut o = (ulpdu.len() as u16).to_be_bytes().to_vec();
    o.extend_from_slice(ulpdu);
    while !o.len().is_multiple_of(4) {
        o.push(0);
    }
    let c = crc32c(&o);
    o.extend_from_slice(&c.to_le_bytes());
    o
}

/// Reads one FPDU and checks its CRC; `Ok(None)` when the connection ends first.
pub fn read_fpdu(s: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut l = [0u8; 2];
    if !read_or_end(s, &mut l)? {
        return Ok(None);
    }
    let n = usize::from(u16::from_be_bytes(l));
    let padded = (2 + n).div_ceil(4) * 4 - 2;
    let mut body = vec![0u8; padded + 4];
    s.read_exact(&mut body)?;
    let mut covered = l.to_vec();
    covered.extend_from_slice(&body[..padded]);
    let got = u32::from_le_bytes(body[padded..].try_into().unwrap());
    assert_eq!(got, crc32c(&covered), "FPDU CRC");
    body.truncate(n);
    Ok(Some(body))
}

/// RDMAP opcodes (RFC 5040 §4.2).
pub mod op {
    pub const WRITE: u8 = 0x0;
    pub const READ_REQUEST: u8 = 0x1;
    pub const READ_RESPONSE: u8 = 0x2;
    pub const SEND: u8 = 0x3;
    pub const TERMINATE: u8 = 0x7;
}

/// A DDP segment (RFC 5041 §5) carrying RDMAP (RFC 5040 §4): control octets, then the tagged
/// or untagged header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Tagged {
        opcode: u8,
        last: bool,
        stag: u32,
        to: u64,
        payload: Vec<u8>,
    },
    Untagged {
        opcode: u8,
        last: bool,
        qn: u32,
        msn: u32,
        mo: u32,
        payload: Vec<u8>,
    },
}

const RDMAP_RV: u8 = 0x40;
const DDP_DV: u8 = 0x01;

impl Seg {
    pub fn send(msn: u32, payload: &[u8]) -> Seg {
        Seg::Untagged {
            opcode: op::SEND,
            last: true,
            qn: 0,
            msn,
            mo: 0,
            payload: payload.to_vec(),
        }
    }
    pub fn write(stag: u32, to: u64, payload: &[u8]) -> Seg {
        Seg::Tagged {
            opcode: op::WRITE,
            last: true,
            stag,
            to,
            payload: payload.to_vec(),
        }
    }
    pub fn read_response(stag: u32, to: u64, payload: &[u8]) -> Seg {
        Seg::Tagged {
            opcode: op::READ_RESPONSE,
            last: true,
            stag,
            to,
            payload: payload.to_vec(),
        }
    }
    /// RFC 5040 §4.4: Data Sink STag/TO, size, Data Source STag/TO, on QN 1.
    pub fn read_request(msn: u32, sink: (u32, u64), size: u32, src: (u32, u64)) -> Seg {
        let mut p = sink.0.to_be_bytes().to_vec();
        p.extend_from_slice(&sink.1.to_be_bytes());
        p.extend_from_slice(&size.to_be_bytes());
        p.extend_from_slice(&src.0.to_be_bytes());
        p.extend_from_slice(&src.1.to_be_bytes());
        Seg::Untagged {
            opcode: op::READ_REQUEST,
            last: true,
            qn: 1,
            msn,
            mo: 0,
            payload: p,
        }
    }
    pub fn bytes(&self) -> Vec<u8> {
        let mut o = Vec::new();
        match self {
            Seg::Tagged {
                opcode,
                last,
                stag,
                to,
                payload,
            } => {
                o.push(0x80 | if *last { 0x40 } else { 0 } | DDP_DV);
                o.push(RDMAP_RV | opcode);
                o.extend_from_slice(&stag.to_be_bytes());
                o.extend_from_slice(&to.to_be_bytes());
                o.extend_from_slice(payload);
            }
            Seg::Untagged {
                opcode,
                last,
                qn,
                msn,
                mo,
                payload,
            } => {
                o.push(if *last { 0x40 } else { 0 } | DDP_DV);
                o.push(RDMAP_RV | opcode);
                o.extend_from_slice(&[0; 4]);
                o.extend_from_slice(&qn.to_be_bytes());
                o.extend_from_slice(&msn.to_be_bytes());
                o.extend_from_slice(&mo.to_be_bytes());
                o.extend_from_slice(payload);
            }
        }
        o
    }
    pub fn parse(u: &[u8]) -> Seg {
        assert_eq!(u[0] & 0x03, DDP_DV, "DDP version");
        assert_eq!(u[1] & 0xC0, RDMAP_RV, "RDMAP version");
        let opcode = u[1] & 0x0f;
        let last = u[0] & 0x40 != 0;
        let be32 = |i: usize| u32::from_be_bytes(u[i..i + 4].try_into().unwrap());
        if u[0] & 0x80 != 0 {
            Seg::Tagged {
                opcode,
                last,
                stag: be32(2),
                to: u64::from_be_bytes(u[6..14].try_into().unwrap()),
                payload: u[14..].to_vec(),
            }
        } else {
            Seg::Untagged {
                opcode,
                last,
                qn: be32(6),
                msn: be32(10),
                mo: be32(14),
                payload: u[18..].to_vec(),
            }
        }
    }
    pub fn opcode(&self) -> u8 {
        match self {
            Seg::Tagged { opcode, .. } | Seg::Untagged { opcode, .. } => *opcode,
        }
    }
    pub fn payload(&self) -> &[u8] {
        match self {
            Seg::Tagged { payload, .. } | Seg::Untagged { payload, .. } => payload,
        }
    }
    /// A Terminate's (layer, error type, error code) (RFC 5040 §4.8).
    pub fn terminate_code(&self) -> Option<(u8, u8, u8)> {
        match self {
            Seg::Untagged {
                opcode: op::TERMINATE,
                qn: 2,
                payload,
                ..
            } => Some((payload[0] >> 4, payload[0] & 0x0f, payload[1])),
            _ => None,
        }
    }
    /// A Read Request's (sink STag, sink TO, size, source STag, source TO).
    pub fn read_request_fields(&self) -> (u32, u64, u32, u32, u64) {
        let p = self.payload();
        let be32 = |i: usize| u32::from_be_bytes(p[i..i + 4].try_into().unwrap());
        let be64 = |i: usize| u64::from_be_bytes(p[i..i + 8].try_into().unwrap());
        (be32(0), be64(4), be32(12), be32(16), be64(20))
    }
}

/// Writes one segment as one FPDU.
pub fn send_seg(s: &mut impl Write, seg: &Seg) -> io::Result<()> {
    s.write_all(&fpdu(&seg.bytes()))
}

/// Reads the next segment.
pub fn recv_seg(s: &mut impl Read) -> io::Result<Option<Seg>> {
    Ok(read_fpdu(s)?.map(|u| Seg::parse(&u)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CRC32c check value and RFC 3720's all-zero vector, so the peer's CRC is right on its
    /// own.
    #[test]
    fn crc32c_vectors() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }
}
