//! One TCP connection written by hand as Ethernet frames, for tshark to dissect.

use crate::checksum::internet_checksum;
use crate::pcap::pcap_file;

/// TCP flag SYN.
pub const SYN: u8 = 0x02;
/// TCP flag PSH.
pub const PSH: u8 = 0x08;
/// TCP flag ACK.
pub const ACK: u8 = 0x10;

/// One end of the synthetic connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// 198.18.0.1, MAC 02:00:00:00:00:01, initial sequence number 0x1000_0000.
    Client,
    /// 198.18.0.2, MAC 02:00:00:00:00:02, initial sequence number 0x2000_0000.
    Server,
}

impl Peer {
    fn index(self) -> usize {
        match self {
            Peer::Client => 0,
            Peer::Server => 1,
        }
    }

    /// The other end.
    pub fn other(self) -> Peer {
        match self {
            Peer::Client => Peer::Server,
            Peer::Server => Peer::Client,
        }
    }

    /// Its IPv4 address (198.18.0.0/15 only).
    pub fn ip(self) -> [u8; 4] {
        [198, 18, 0, 1 + self.index() as u8]
    }

    /// Its MAC address (locally administered).
    pub fn mac(self) -> [u8; 6] {
        [2, 0, 0, 0, 0, 1 + self.index() as u8]
    }
}

/// The frames of one IPv4/TCP connection between [`Peer::Client`] and [`Peer::Server`], in
/// the order they were added. Every frame is Ethernet II + a 20-octet IPv4 header (DF, TTL 64,
/// ID 0) + a 20-octet TCP header (window 65535, no options) with correct checksums. Sequence
/// numbers advance by the payload length (and 1 for SYN); the acknowledgment number, when ACK
/// is set, is everything the other end has sent so far. Nothing is retransmitted or lost.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The frames, oldest first (tests may damage one on purpose).
    pub frames: Vec<Vec<u8>>,
    ports: [u16; 2],
    seq: [u32; 2],
}

impl Capture {
    /// An empty capture of the connection from `client_port` to `server_port`.
    pub fn new(client_port: u16, server_port: u16) -> Self {
        Capture {
            frames: Vec::new(),
            ports: [client_port, server_port],
            seq: [0x1000_0000, 0x2000_0000],
        }
    }

    /// Adds the three-way handshake: SYN, SYN+ACK, ACK (the client opens).
    pub fn handshake(&mut self) {
        self.segment(Peer::Client, SYN, &[]);
        self.segment(Peer::Server, SYN | ACK, &[]);
        self.segment(Peer::Client, ACK, &[]);
    }

    /// Adds one segment sent by `from` with TCP `flags` carrying `payload` (at most 65495
    /// octets).
    pub fn segment(&mut self, from: Peer, flags: u8, payload: &[u8]) {
        let (f, t) = (from.index(), from.other().index());
        let (src, dst) = (from.ip(), from.other().ip());
        let mut tcp = Vec::with_capacity(20 + payload.len());
        tcp.extend_from_slice(&self.ports[f].to_be_bytes());
        tcp.extend_from_slice(&self.ports[t].to_be_bytes());
        tcp.extend_from_slice(&self.seq[f].to_be_bytes());
        let ack = if flags & ACK != 0 { self.seq[t] } else { 0 };
        tcp.extend_from_slice(&ack.to_be_bytes());
        tcp.extend_from_slice(&[5 << 4, flags, 0xff, 0xff, 0, 0, 0, 0]);
        tcp.extend_from_slice(payload);
        let tcp_len = (tcp.len() as u16).to_be_bytes();
        let pseudo = [&src[..], &dst[..], &[0, 6], &tcp_len[..]].concat();
        let c = internet_checksum(&[&pseudo, &tcp]);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&((20 + tcp.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let c = internet_checksum(&[&ip]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let eth = [&from.other().mac()[..], &from.mac()[..], &[0x08, 0x00]].concat();
        self.frames.push([&eth[..], &ip, &tcp].concat());
        self.seq[f] = self.seq[f].wrapping_add(payload.len() as u32 + u32::from(flags & SYN != 0));
    }

    /// The frames as a pcap file ([`pcap_file`]).
    pub fn pcap(&self) -> Vec<u8> {
        pcap_file(&self.frames)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn frames_carry_addresses_ports_and_valid_checksums() {
        let mut c = Capture::new(40000, 20000);
        c.handshake();
        c.segment(Peer::Server, PSH | ACK, b"hello");
        assert_eq!(c.frames.len(), 4);
        let f = &c.frames[3];
        assert_eq!(f.len(), 14 + 20 + 20 + 5);
        assert_eq!(&f[0..6], &Peer::Client.mac());
        assert_eq!(&f[6..12], &Peer::Server.mac());
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let (ip, tcp) = (&f[14..34], &f[34..]);
        assert_eq!(internet_checksum(&[ip]), 0, "IPv4 header checksum");
        assert_eq!(&ip[12..16], &[198, 18, 0, 2]);
        assert_eq!(&ip[16..20], &[198, 18, 0, 1]);
        let pseudo = [&ip[12..20], &[0, 6], &(tcp.len() as u16).to_be_bytes()[..]].concat();
        assert_eq!(internet_checksum(&[&pseudo, tcp]), 0, "TCP checksum");
        assert_eq!(
            &tcp[0..4],
            &[0x4e, 0x20, 0x9c, 0x40],
            "ports 20000 -> 40000"
        );
        assert_eq!(&tcp[20..], b"hello");
    }

    #[test]
    fn sequence_numbers_count_syn_and_payload() {
        let mut c = Capture::new(1, 2);
        c.handshake();
        c.segment(Peer::Client, PSH | ACK, &[0; 7]);
        c.segment(Peer::Server, ACK, &[]);
        let tcp = |i: usize| c.frames[i][34..].to_vec();
        assert_eq!(word(&tcp(0), 4), 0x1000_0000);
        assert_eq!(word(&tcp(0), 8), 0, "SYN acknowledges nothing");
        assert_eq!(word(&tcp(1), 4), 0x2000_0000);
        assert_eq!(word(&tcp(1), 8), 0x1000_0001);
        assert_eq!(word(&tcp(3), 4), 0x1000_0001);
        assert_eq!(word(&tcp(4), 8), 0x1000_0008);
        assert_eq!(tcp(4)[13], ACK);
    }
}
