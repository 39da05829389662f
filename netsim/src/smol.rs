//! smoltcp's TCP (an independent implementation) as a [`SimTransport`] for the simulated link:
//! one `Interface` (medium IP, IPv4) with one TCP socket, client or server.

use std::cell::Cell;
use std::collections::VecDeque;
use std::time::Duration;

use crate::{ConnState, Delivery, SimTime, SimTransport};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, Checksum, ChecksumCapabilities, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration as SmolDuration, Instant as SmolInstant};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, Ipv4Address};

use crate::{SimRole, CLIENT_IP, CLIENT_PORT, SERVER_IP, SERVER_PORT};

/// Knobs of a smoltcp endpoint.
#[derive(Clone, Debug)]
pub struct SmolConfig {
    /// IP MTU of the device (smoltcp announces MSS = MTU - 40).
    pub mtu: usize,
    /// Receive buffer (sets the window and its scale).
    pub rx_buffer: usize,
    /// Send buffer.
    pub tx_buffer: usize,
    /// Verify IPv4/TCP checksums on receive (off only for the negative test that shows
    /// corruption would otherwise reach the application).
    pub verify_checksums: bool,
    /// Offer TCP timestamps (RFC 7323). Off by default: smoltcp 0.12 sizes data segments as if
    /// the TCP header had no options (payload = min(peer MSS, MTU - 40)), so with timestamps a
    /// full segment is 12 octets over its own MTU and smoltcp drops it unsent (silently, its
    /// sequence number already advanced) whenever the peer announces MSS > MTU - 52. Found by
    /// this simulation; turn it on only where smoltcp sends no full-size segments.
    pub timestamps: bool,
    /// Delayed-ACK time (smoltcp's default is 10 ms).
    pub ack_delay: Option<Duration>,
}

impl Default for SmolConfig {
    fn default() -> Self {
        SmolConfig {
            mtu: 1500,
            rx_buffer: 256 * 1024,
            tx_buffer: 256 * 1024,
            verify_checksums: true,
            timestamps: false,
            ack_delay: Some(Duration::from_millis(10)),
        }
    }
}

thread_local! {
    /// Virtual time for smoltcp's timestamp generator, which is a plain `fn() -> u32`.
    static NOW_MICROS: Cell<u64> = const { Cell::new(0) };
}

fn tsval() -> u32 {
    // One tick per millisecond, offset so it does not start at zero.
    (NOW_MICROS.with(Cell::get) / 1000) as u32 ^ 0x1000_0000
}

fn smol_now(now: SimTime) -> SmolInstant {
    NOW_MICROS.with(|c| c.set(now.as_micros()));
    SmolInstant::from_micros(now.as_micros() as i64)
}

/// A device whose queues the adapter fills and drains.
struct SimDevice {
    rx: VecDeque<Vec<u8>>,
    tx: VecDeque<Vec<u8>>,
    mtu: usize,
    verify_checksums: bool,
}

struct RxToken(Vec<u8>);
struct TxToken<'a>(&'a mut VecDeque<Vec<u8>>);

impl phy::RxToken for RxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut buf = vec![0; len];
        let r = f(&mut buf);
        self.0.push_back(buf);
        r
    }
}

impl Device for SimDevice {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: SmolInstant) -> Option<(RxToken, TxToken<'_>)> {
        let p = self.rx.pop_front()?;
        Some((RxToken(p), TxToken(&mut self.tx)))
    }

    fn transmit(&mut self, _: SmolInstant) -> Option<TxToken<'_>> {
        Some(TxToken(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = self.mtu;
        if !self.verify_checksums {
            let mut c = ChecksumCapabilities::default();
            c.ipv4 = Checksum::Tx;
            c.tcp = Checksum::Tx;
            caps.checksum = c;
        }
        caps
    }
}

/// smoltcp as a [`SimTransport`].
pub struct SmolTransport {
    iface: Interface,
    sockets: SocketSet<'static>,
    handle: SocketHandle,
    dev: SimDevice,
    rx_offset: u64,
    state: ConnState,
    last: tcp::State,
    dirty: bool,
    scratch: Vec<u8>,
    rsts: SmolRsts,
}

/// The RSTs a [`SmolTransport`] put on the link, by why it sent them.
///
/// smoltcp 0.12 moves its socket to CLOSED when TIME-WAIT ends or when the ACK of its FIN arrives
/// in LAST-ACK, and a CLOSED socket no longer matches any segment: its `Interface` then answers a
/// late segment of that connection (reordered by the link, or the peer's retransmitted FIN
/// whose first copy already arrived) with a RST of RFC 9293 §3.10.7.1 form, as for a port with no
/// connection. RFC 9293 §3.10.7.1 requires exactly that for a CLOSED port. Those are
/// `closed_replies`; everything else is `other`. (Between two smoltcps on the `reorder` link such
/// a RST can even end the peer's TIME-WAIT early, RFC 1337's hazard: sim_smoltcp.rs, seed 4.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmolRsts {
    /// RSTs sent after an orderly close (state CLOSED reached from TIME-WAIT or LAST-ACK), each
    /// in answer to a segment that arrived then and in the §3.10.7.1 form for that segment:
    /// `<SEQ=SEG.ACK><CTL=RST>` if it had ACK, else `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`.
    pub closed_replies: u64,
    /// Any other RST: before or without an orderly close, or not in that form.
    pub other: u64,
}

/// (SEQ, ACK if any, RST) of a TCP segment in an IPv4 packet; SEG.LEN counts SYN and FIN.
fn tcp_fields(p: &[u8]) -> Option<(u32, Option<u32>, u32, bool)> {
    use etherparse::{SlicedPacket, TransportSlice};
    let s = SlicedPacket::from_ip(p).ok()?;
    let Some(TransportSlice::Tcp(t)) = s.transport else {
        return None;
    };
    let len = t.payload().len() as u32 + u32::from(t.syn()) + u32::from(t.fin());
    Some((
        t.sequence_number(),
        t.ack().then(|| t.acknowledgment_number()),
        len,
        t.rst(),
    ))
}

/// Whether `rst` is the RFC 9293 §3.10.7.1 answer to `seg` (both IPv4 packets).
fn is_closed_port_reply(seg: &[u8], rst: &[u8]) -> bool {
    let (Some((seq, ack, len, seg_rst)), Some((r_seq, r_ack, _, true))) =
        (tcp_fields(seg), tcp_fields(rst))
    else {
        return false;
    };
    !seg_rst
        && match ack {
            Some(a) => r_seq == a && r_ack.is_none(),
            None => r_seq == 0 && r_ack == Some(seq.wrapping_add(len)),
        }
}

impl SmolTransport {
    /// A client (connects at once) or a server (listens), smoltcp randomness seeded by `seed`.
    pub fn new(role: SimRole, seed: u64, cfg: &SmolConfig) -> Self {
        let mut dev = SimDevice {
            rx: VecDeque::new(),
            tx: VecDeque::new(),
            mtu: cfg.mtu,
            verify_checksums: cfg.verify_checksums,
        };
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = seed;
        let now = smol_now(SimTime::ZERO);
        let mut iface = Interface::new(config, &mut dev, now);
        let (me, peer) = match role {
            SimRole::Client => (CLIENT_IP, SERVER_IP),
            SimRole::Server => (SERVER_IP, CLIENT_IP),
        };
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(Ipv4Address::from(me)), 24))
                .expect("one address");
        });
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; cfg.rx_buffer]),
            tcp::SocketBuffer::new(vec![0; cfg.tx_buffer]),
        );
        socket.set_nagle_enabled(false);
        socket.set_ack_delay(
            cfg.ack_delay
                .map(|d| SmolDuration::from_micros(d.as_micros() as u64)),
        );
        if cfg.timestamps {
            socket.set_tsval_generator(Some(tsval));
        }
        match role {
            SimRole::Client => socket
                .connect(
                    iface.context(),
                    (IpAddress::Ipv4(Ipv4Address::from(peer)), SERVER_PORT),
                    CLIENT_PORT,
                )
                .expect("connect"),
            SimRole::Server => socket.listen(SERVER_PORT).expect("listen"),
        }
        let mut sockets = SocketSet::new(Vec::new());
        let handle = sockets.add(socket);
        let mut t = SmolTransport {
            iface,
            sockets,
            handle,
            dev,
            rx_offset: 0,
            state: ConnState::Opening,
            last: tcp::State::Closed,
            dirty: true,
            scratch: vec![0; 64 * 1024],
            rsts: SmolRsts::default(),
        };
        t.refresh();
        t
    }

    fn socket(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.handle)
    }

    /// The RSTs it sent, classified.
    pub fn rsts(&self) -> SmolRsts {
        self.rsts
    }

    /// Counts the RSTs among the packets queued from index `from` on; `trigger` is the segment
    /// just handled, if they answer one.
    fn count_rsts(&mut self, from: usize, trigger: Option<&[u8]>) {
        let closed = self.state == ConnState::Closed;
        for p in self.dev.tx.iter().skip(from) {
            if !tcp_fields(p).is_some_and(|f| f.3) {
                continue;
            }
            match trigger {
                Some(seg) if closed && is_closed_port_reply(seg, p) => {
                    self.rsts.closed_replies += 1
                }
                _ => self.rsts.other += 1,
            }
        }
    }

    /// smoltcp's own state.
    pub fn tcp_state(&self) -> tcp::State {
        self.sockets.get::<tcp::Socket>(self.handle).state()
    }

    fn refresh(&mut self) {
        use tcp::State as S;
        let now = self.tcp_state();
        self.state = match now {
            S::Listen | S::SynSent | S::SynReceived => ConnState::Opening,
            S::Established => ConnState::Established,
            S::CloseWait => ConnState::PeerClosed,
            S::FinWait1 | S::FinWait2 | S::Closing | S::LastAck => ConnState::Closing,
            S::TimeWait => ConnState::TimeWait,
            // smoltcp closes after TIME-WAIT or on the ACK of our FIN in LAST-ACK; from any other
            // state, Closed means a RST or an abort.
            S::Closed => match (self.state, self.last) {
                (ConnState::Closed | ConnState::Reset, _) => self.state,
                (_, S::TimeWait | S::LastAck) => ConnState::Closed,
                _ => ConnState::Reset,
            },
        };
        self.last = now;
    }

    fn pump(&mut self, now: SimTime) {
        let ts = smol_now(now);
        self.iface.poll(ts, &mut self.dev, &mut self.sockets);
        // smoltcp emits at most one segment per socket per egress pass: repeat until quiet.
        for _ in 0..100_000 {
            let before = self.dev.tx.len();
            self.iface.poll_egress(ts, &mut self.dev, &mut self.sockets);
            if self.dev.tx.len() == before {
                break;
            }
        }
        self.dirty = false;
        self.refresh();
    }
}

impl SimTransport for SmolTransport {
    fn handle_packet(&mut self, now: SimTime, packet: &[u8]) {
        // The state before this segment: a RST it provokes counts as a closed port's answer only
        // if the connection had already closed in order.
        let from = self.dev.tx.len();
        self.dev.rx.push_back(packet.to_vec());
        let closed_before = self.state == ConnState::Closed;
        self.pump(now);
        self.count_rsts(from, closed_before.then_some(packet));
    }

    fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>> {
        if self.dev.tx.is_empty() && self.dirty {
            self.pump(now);
            self.count_rsts(0, None);
        }
        self.dev.tx.pop_front()
    }

    fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime> {
        if !self.dev.tx.is_empty() || self.dirty {
            return Some(now);
        }
        let at = self.iface.poll_at(smol_now(now), &self.sockets)?;
        Some(SimTime::from_micros(at.total_micros().max(0) as u64))
    }

    fn handle_timeout(&mut self, now: SimTime) {
        let from = self.dev.tx.len();
        self.pump(now);
        self.count_rsts(from, None);
    }

    fn state(&self) -> ConnState {
        self.state
    }

    fn send_space(&self) -> usize {
        let s = self.sockets.get::<tcp::Socket>(self.handle);
        if s.may_send() {
            s.send_capacity() - s.send_queue()
        } else {
            0
        }
    }

    fn send(&mut self, _now: SimTime, data: &[u8]) -> usize {
        self.dirty = true;
        self.socket().send_slice(data).unwrap_or(0)
    }

    fn recv(&mut self, _now: SimTime) -> Option<Delivery> {
        let mut buf = std::mem::take(&mut self.scratch);
        let n = self.socket().recv_slice(&mut buf).unwrap_or(0);
        let d = (n > 0).then(|| {
            self.dirty = true;
            let offset = self.rx_offset;
            self.rx_offset += n as u64;
            Delivery {
                offset,
                data: buf[..n].to_vec(),
                in_order: self.rx_offset,
            }
        });
        self.scratch = buf;
        d
    }

    fn close(&mut self, _now: SimTime) {
        self.dirty = true;
        self.socket().close();
    }

    fn describe(&self) -> String {
        let s = self.sockets.get::<tcp::Socket>(self.handle);
        format!("smoltcp {} send_queue={}", s.state(), s.send_queue())
    }
}
