//! The out-of-band handshake: what client and server tell each other before a test.
//!
//! perftest swaps its buffer's key, address and size over a socket of its own; we carry the same
//! in the MPA private data (the client's in the Request, the server's in the Reply), which both
//! sides see before the first work request. Big-endian, fixed layout:
//!
//! ```text
//! Request (36 B): "XWB1" | test u8 | flags u8 (bit 0: last run, bit 1: bidirectional) | qps u16 | size u64 | stag u32 | addr u64 | len u64
//! Reply   (28 B): "XWB1" | status u8 | 0 u8 u16 | stag u32 | addr u64 | len u64
//! ```
//! A server rejects (MPA Reply with R=1) with a Reply whose status says why.

use crate::cli::TestKind;

const MAGIC: &[u8; 4] = b"XWB1";
const REQUEST_LEN: usize = 36;
const REPLY_LEN: usize = 28;

/// A registered buffer as the peer reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferInfo {
    /// STag of the region (tagged offsets start at 0).
    pub stag: u32,
    /// Its start address (informational: iWARP addresses by STag and TO).
    pub addr: u64,
    /// Its length.
    pub len: u64,
}

/// The client's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Which test.
    pub test: TestKind,
    /// Message size in bytes.
    pub size: u64,
    /// True on the client's last run: the server exits after it.
    pub last: bool,
    /// `-b`: the server streams towards the client too.
    pub bidirectional: bool,
    /// `-q`: queue pairs the client runs at once (each sends this request; 0 from older
    /// clients means 1).
    pub qps: u16,
    /// The client's buffer.
    pub buffer: BufferInfo,
}

/// Why a server refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeStatus {
    /// Accepted.
    Ok,
    /// The server runs another test (its id).
    WrongTest(TestKind),
    /// The size is out of the server's range.
    BadSize,
    /// The request could not be decoded.
    Malformed,
}

/// The server's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Accepted or why not.
    pub status: HandshakeStatus,
    /// The server's buffer (zeroes when refused).
    pub buffer: BufferInfo,
}

fn put_buffer(out: &mut Vec<u8>, b: &BufferInfo) {
    out.extend_from_slice(&b.stag.to_be_bytes());
    out.extend_from_slice(&b.addr.to_be_bytes());
    out.extend_from_slice(&b.len.to_be_bytes());
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn get_buffer(b: &[u8], at: usize) -> BufferInfo {
    BufferInfo {
        stag: u32_at(b, at),
        addr: u64_at(b, at + 4),
        len: u64_at(b, at + 12),
    }
}

impl Request {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REQUEST_LEN);
        out.extend_from_slice(MAGIC);
        out.push(self.test.id());
        out.push(u8::from(self.last) | (u8::from(self.bidirectional) << 1));
        out.extend_from_slice(&self.qps.to_be_bytes());
        out.extend_from_slice(&self.size.to_be_bytes());
        put_buffer(&mut out, &self.buffer);
        out
    }

    /// Parses the wire form; `None` when it is not one.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() != REQUEST_LEN || &b[..4] != MAGIC {
            return None;
        }
        Some(Self {
            test: TestKind::from_id(b[4])?,
            last: b[5] & 1 != 0,
            bidirectional: b[5] & 2 != 0,
            qps: u16::from_be_bytes([b[6], b[7]]).max(1),
            size: u64_at(b, 8),
            buffer: get_buffer(b, 16),
        })
    }
}

impl Reply {
    /// The wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(REPLY_LEN);
        out.extend_from_slice(MAGIC);
        let (status, detail) = match self.status {
            HandshakeStatus::Ok => (0, 0),
            HandshakeStatus::WrongTest(t) => (1, t.id()),
            HandshakeStatus::BadSize => (2, 0),
            HandshakeStatus::Malformed => (3, 0),
        };
        out.extend_from_slice(&[status, detail, 0, 0]);
        put_buffer(&mut out, &self.buffer);
        out
    }

    /// Parses the wire form; `None` when it is not one.
    pub fn decode(b: &[u8]) -> Option<Self> {
        if b.len() != REPLY_LEN || &b[..4] != MAGIC {
            return None;
        }
        let status = match b[4] {
            0 => HandshakeStatus::Ok,
            1 => HandshakeStatus::WrongTest(TestKind::from_id(b[5])?),
            2 => HandshakeStatus::BadSize,
            3 => HandshakeStatus::Malformed,
            _ => return None,
        };
        Some(Self {
            status,
            buffer: get_buffer(b, 8),
        })
    }

    /// A refusal.
    pub fn refuse(status: HandshakeStatus) -> Self {
        Self {
            status,
            buffer: BufferInfo {
                stag: 0,
                addr: 0,
                len: 0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUF: BufferInfo = BufferInfo {
        stag: 0x0102_0304,
        addr: 0x7f00_0000_1000,
        len: 65_536,
    };

    #[test]
    fn request_round_trips_and_has_a_fixed_layout() {
        let r = Request {
            test: TestKind::WriteBw,
            size: 65_536,
            last: true,
            bidirectional: false,
            qps: 1,
            buffer: BUF,
        };
        let b = r.encode();
        assert_eq!(b.len(), REQUEST_LEN);
        assert_eq!(&b[..4], b"XWB1");
        assert_eq!(b[5], 1);
        let bidi = Request {
            bidirectional: true,
            ..r
        };
        assert_eq!(bidi.encode()[5], 3);
        assert_eq!(Request::decode(&bidi.encode()), Some(bidi));
        let two = Request { qps: 2, ..r };
        assert_eq!(&two.encode()[6..8], &[0, 2]);
        assert_eq!(Request::decode(&two.encode()), Some(two));
        // An older client's zero field: one queue pair.
        let mut old = b.clone();
        old[6..8].copy_from_slice(&[0, 0]);
        assert_eq!(Request::decode(&old).map(|r| r.qps), Some(1));
        assert_eq!(&b[16..20], &[1, 2, 3, 4]);
        assert_eq!(Request::decode(&b), Some(r));
    }

    #[test]
    fn reply_round_trips_every_status() {
        for status in [
            HandshakeStatus::Ok,
            HandshakeStatus::WrongTest(TestKind::SendLat),
            HandshakeStatus::BadSize,
            HandshakeStatus::Malformed,
        ] {
            let r = Reply {
                status,
                buffer: BUF,
            };
            assert_eq!(Reply::decode(&r.encode()), Some(r));
        }
    }

    #[test]
    fn garbage_is_not_a_handshake() {
        assert_eq!(Request::decode(b""), None);
        assert_eq!(Request::decode(&[0u8; REQUEST_LEN]), None);
        let mut b = Request {
            test: TestKind::ReadLat,
            size: 2,
            last: false,
            bidirectional: false,
            qps: 1,
            buffer: BUF,
        }
        .encode();
        b[4] = 200; // no such test
        assert_eq!(Request::decode(&b), None);
        let mut r = Reply::refuse(HandshakeStatus::BadSize).encode();
        r[4] = 9;
        assert_eq!(Reply::decode(&r), None);
        assert_eq!(Reply::decode(&r[..10]), None);
    }
}
