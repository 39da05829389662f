//! A whole iWARP host under attack: two endpoints joined by a wire the fuzzer controls.
//!
//! A (the sender) and B (the receiver) set up a connection cleanly (markers as the input says,
//! CRC on), then A streams Sends and RDMA Writes of a known pattern to B while the input decides,
//! step by step, what the wire does with each frame from A to B: deliver, drop, duplicate,
//! reorder, corrupt (with or without repairing the IP/TCP checksums), inject arbitrary frames,
//! let time pass. Checked after every step:
//! - nothing panics;
//! - nothing is placed outside a registered region (the domains' memory checks every access);
//! - nothing is delivered that was not sent: every receive B completes successfully holds
//!   exactly the Send A posted for it, and every octet of B's Write target is either untouched
//!   or A's octet for that place (MPA's CRC guards what TCP's checksum misses);
//! - out-of-order memory stays within the configured bound.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::rc::Rc;
use std::time::{Duration, Instant};

use ddp::{
    Access, LocalBuf, Memory, PdId, RegionHandle, RegionSpec, RemoteBuf, SendOpts, Stag, StagTable,
    VecMemory, WcOpcode, WcStatus, WorkRequest,
};
use endpoint::{
    ConnId, Domain, DomainGuard, Endpoint, EndpointConfig, EndpointEvent, FrameSink, QpSettings,
    Secrets, TxOutcome,
};
use tcp_offload::isn::FourTuple;
use tcp_offload::wire::{self, SegmentRepr};

use crate::ddp_targets::CheckedMemory;
use crate::Input;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 4791;
/// Sends A posts (each `SEND_LEN` octets), receives B posts for them.
const SENDS: usize = 6;
const SEND_LEN: usize = 700;
/// B's Write target, written by A in `WRITE_LEN` pieces.
const TARGET_LEN: usize = 16 * 1024;
const WRITE_LEN: usize = 4000;

/// The length of A's source region: what every Send and Write carries, by offset.
const SOURCE_LEN: usize = if TARGET_LEN > SENDS * SEND_LEN {
    TARGET_LEN
} else {
    SENDS * SEND_LEN
};

/// The octet A sends at position `i` of its source region (never 0: untouched is 0).
fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(131) % 251) as u8 + 1
}

/// A's source region's octets, computed once (not per input).
fn source() -> &'static [u8] {
    static SOURCE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    SOURCE.get_or_init(|| (0..SOURCE_LEN).map(pattern).collect())
}

/// A protection domain over checked memory, shared by an endpoint's connection and the test.
#[derive(Clone)]
struct CheckedDomain(Rc<RefCell<(StagTable, CheckedMemory)>>, PdId);

struct Guard<'a>(std::cell::RefMut<'a, (StagTable, CheckedMemory)>);

impl DomainGuard for Guard<'_> {
    fn parts(&mut self) -> (&mut StagTable, &mut dyn Memory) {
        let (t, m) = &mut *self.0;
        (t, m)
    }
}

impl Domain for CheckedDomain {
    type Guard<'a> = Guard<'a>;
    fn id(&self) -> PdId {
        self.1
    }
    fn lock(&self) -> Guard<'_> {
        Guard(self.0.borrow_mut())
    }
}

impl CheckedDomain {
    /// A domain whose memory logs its writes when `log_writes` (drain the log each step).
    fn new(seed: u64, log_writes: bool) -> Self {
        let mem = if log_writes {
            CheckedMemory::logging_writes(VecMemory::new())
        } else {
            CheckedMemory::new(VecMemory::new())
        };
        CheckedDomain(Rc::new(RefCell::new((StagTable::new(seed), mem))), PdId(1))
    }

    /// Registers a region holding `init`, or `len` zeros.
    fn register(&self, len: usize, access: Access, init: Option<&[u8]>) -> (RegionHandle, Stag) {
        let mut g = self.0.borrow_mut();
        let (h, s) =
            g.0.register(RegionSpec {
                base_to: 0,
                len: len as u64,
                access,
                pd: self.1,
                stream: None,
            })
            .expect("room in the table");
        let bytes = init.map_or_else(|| vec![0; len], |b| b[..len].to_vec());
        g.1.inner_mut().insert(h, bytes);
        (h, s)
    }

    fn bytes(&self, h: RegionHandle) -> Vec<u8> {
        self.0.borrow().1.inner().get(h).expect("region").to_vec()
    }
}

/// Frames an endpoint transmits, queued for the wire.
struct Queue(VecDeque<Vec<u8>>, Box<[u8; 2048]>);

impl Default for Queue {
    fn default() -> Self {
        Queue(VecDeque::new(), Box::new([0; 2048]))
    }
}

impl FrameSink for Queue {
    fn tx_frame(
        &mut self,
        _now: Instant,
        fill: &mut dyn FnMut(&mut [u8]) -> Option<usize>,
    ) -> TxOutcome {
        // Filled in one reused buffer (most offers send nothing), copied out when it is a frame.
        match fill(&mut self.1[..]) {
            Some(n) => {
                self.0.push_back(self.1[..n.min(2048)].to_vec());
                TxOutcome::Queued
            }
            None => TxOutcome::Empty,
        }
    }
}

fn config(mac: [u8; 6], ip: Ipv4Addr, peer: [u8; 6]) -> EndpointConfig {
    let mut c = EndpointConfig::new(mac, ip, Secrets::fixed_for_tests(u64::from(u32::from(ip))));
    c.default_next_hop = Some(peer);
    c
}

struct World {
    a: Endpoint<CheckedDomain>,
    b: Endpoint<CheckedDomain>,
    ab: Queue,
    ba: Queue,
    now: Instant,
    ca: ConnId,
    cb: ConnId,
    pd_b: CheckedDomain,
    rx: RegionHandle,
    target: RegionHandle,
    /// Sends B has completed successfully so far (they complete in order).
    sends_seen: usize,
    /// A's source region: what every Send and Write carries, by offset.
    expected: &'static [u8],
    /// The writes B's memory logged since the last check (a buffer reused every step).
    writes: Vec<(RegionHandle, u64, usize)>,
}

impl World {
    fn round(&mut self) {
        let now = self.now;
        for f in self.ba.0.drain(..) {
            self.a.handle_frame(now, &f);
        }
        self.a.handle_timeout(now);
        self.a.poll_transmit(now, &mut self.ab);
        self.b.handle_timeout(now);
        self.b.poll_transmit(now, &mut self.ba);
    }

    fn deliver_to_b(&mut self, frame: &[u8]) {
        self.b.handle_frame(self.now, frame);
    }

    /// Sets up A and B and runs the handshake and MPA startup over a clean wire; `None` if it
    /// did not complete (cannot happen with a clean wire: a bug, reported as such by the caller).
    fn establish(markers: bool) -> Option<World> {
        let now = Instant::now();
        let pd_a = CheckedDomain::new(11, false);
        let pd_b = CheckedDomain::new(22, true);
        let mut a = Endpoint::new(config(MAC_A, IP_A, MAC_B), now).expect("valid configuration");
        let mut b = Endpoint::new(config(MAC_B, IP_B, MAC_A), now).expect("valid configuration");
        let mut s = QpSettings::default();
        s.startup.want_markers = markers;
        s.startup.want_crc = true;
        b.listen_manual(PORT, s.clone()).ok()?;
        let ca = a
            .connect_in(now, SocketAddrV4::new(IP_B, PORT), s, pd_a.clone())
            .ok()?;
        let (src, _) = pd_a.register(SOURCE_LEN, Access::LOCAL_WRITE, Some(source()));
        let (rx, _) = pd_b.register(SENDS * SEND_LEN, Access::LOCAL_WRITE, None);
        let (target, target_stag) = pd_b.register(TARGET_LEN, Access::REMOTE_WRITE, None);
        let mut w = World {
            a,
            b,
            ab: Queue::default(),
            ba: Queue::default(),
            now,
            ca,
            cb: ConnId(0),
            pd_b,
            rx,
            target,
            sends_seen: 0,
            expected: source(),
            writes: Vec::new(),
        };
        let mut established = (false, false);
        for _ in 0..200 {
            w.round();
            for f in std::mem::take(&mut w.ab.0) {
                w.deliver_to_b(&f);
            }
            while let Some(e) = w.b.poll_event() {
                match e {
                    EndpointEvent::ConnectRequest { conn, .. } => {
                        w.cb = conn;
                        w.b.adopt_pd(conn, w.pd_b.clone()).ok()?;
                        for i in 0..SENDS {
                            let buf = LocalBuf {
                                region: w.rx,
                                offset: (i * SEND_LEN) as u64,
                                len: SEND_LEN as u32,
                            };
                            w.b.post(conn, WorkRequest::recv(i as u64, buf)).ok()?;
                        }
                        w.b.accept_request(conn, b"").ok()?;
                    }
                    EndpointEvent::Established { .. } => established.1 = true,
                    _ => {}
                }
            }
            while let Some(e) = w.a.poll_event() {
                if matches!(e, EndpointEvent::Established { .. }) {
                    established.0 = true;
                }
            }
            if established == (true, true) {
                break;
            }
            w.now += Duration::from_micros(100);
        }
        if established != (true, true) {
            return None;
        }
        // A's traffic: the Sends, then Writes over the whole target.
        for i in 0..SENDS {
            let buf = LocalBuf {
                region: src,
                offset: (i * SEND_LEN) as u64,
                len: SEND_LEN as u32,
            };
            w.a.post(
                w.ca,
                WorkRequest::send(100 + i as u64, buf, SendOpts::default()),
            )
            .ok()?;
        }
        for (k, off) in (0..TARGET_LEN).step_by(WRITE_LEN).enumerate() {
            let len = WRITE_LEN.min(TARGET_LEN - off);
            let buf = LocalBuf {
                region: src,
                offset: off as u64,
                len: len as u32,
            };
            let remote = RemoteBuf {
                stag: target_stag,
                to: off as u64,
            };
            w.a.post(w.ca, WorkRequest::write(200 + k as u64, buf, remote))
                .ok()?;
        }
        Some(w)
    }

    /// The invariants that must hold after every step.
    fn check(&mut self) {
        while let Some((conn, wc)) = self.b.poll_completion() {
            if conn != self.cb || wc.status != WcStatus::Success || wc.opcode != WcOpcode::Recv {
                continue;
            }
            let i = wc.wr_id as usize;
            assert_eq!(i, self.sends_seen, "receives complete in order");
            assert_eq!(wc.byte_len as usize, SEND_LEN, "{wc:?}");
            let rx = self.pd_b.bytes(self.rx);
            let (got, want) = (
                &rx[i * SEND_LEN..(i + 1) * SEND_LEN],
                &self.expected[i * SEND_LEN..(i + 1) * SEND_LEN],
            );
            assert!(got == want, "Send {i} is not what A sent");
            self.sends_seen += 1;
        }
        // Every write into the Write target since the last check (all of B's memory writes are
        // logged) holds exactly A's octets for those places: A never sends 0, so a placed 0 is
        // as wrong as any other octet A did not send there.
        let mut g = self.pd_b.0.borrow_mut();
        g.1.take_writes(&mut self.writes);
        let target = g.1.inner().get(self.target).expect("target region");
        for &(region, offset, len) in &self.writes {
            if region != self.target {
                continue;
            }
            let at = offset as usize..offset as usize + len;
            if target[at.clone()] != self.expected[at.clone()] {
                let i = at
                    .clone()
                    .find(|&i| target[i] != self.expected[i])
                    .unwrap_or(at.start);
                panic!("target octet {i} is {}, A never sent that there", target[i]);
            }
        }
        drop(g);
        let max = u64::from(self.b.config().tcp.max_ooo_bytes);
        if let Some(o) = self.b.ooo_bytes(self.cb) {
            assert!(o <= max, "{o} out-of-order octets held, bound {max}");
        }
        while self.a.poll_completion().is_some() {}
        while self.a.poll_event().is_some() {}
        while self.b.poll_event().is_some() {}
    }
}

/// The top bit of each octet of `x` that is not zero, every other bit clear.
fn nonzero_octets(x: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    (((x & LOW7) + LOW7) | x) & !LOW7
}

/// Re-emits `frame` (an Ethernet + IPv4 + TCP frame of ours) with payload octet `at` XORed with
/// `x` and valid IP and TCP checksums: a corruption only MPA's CRC can catch.
fn corrupt_repaired(frame: &[u8], at: usize, x: u8) -> Option<Vec<u8>> {
    let seg = wire::parse(frame.get(14..)?).ok()?;
    if seg.payload.is_empty() {
        return None;
    }
    let mut payload = seg.payload.to_vec();
    let i = at % payload.len();
    payload[i] ^= x.max(1);
    let repr = SegmentRepr {
        tuple: FourTuple {
            local: seg.tuple.remote,
            remote: seg.tuple.local,
        },
        seq: seg.seq,
        ack: seg.flags.ack.then_some(seg.ack),
        flags: seg.flags,
        window: seg.window,
        options: seg.options,
    };
    let mut out = frame[..14].to_vec();
    out.resize(14 + repr.buffer_len(payload.len()), 0);
    let n = repr
        .emit(&mut out[14..], payload.len(), |p| {
            p.copy_from_slice(&payload)
        })
        .ok()?;
    out.truncate(14 + n);
    Some(out)
}

/// The target: see the module documentation.
pub fn endpoint_pair(data: &[u8]) {
    run(data);
}

/// What a run delivered: Sends completed at B, and octets of B's Write target written.
#[derive(Debug, PartialEq, Eq)]
pub struct Delivered {
    /// Receives completed successfully (each checked against A's Send).
    pub sends: usize,
    /// Octets of the Write target that hold A's data.
    pub written: usize,
    /// FPDUs B refused for a bad CRC.
    pub crc_errors: u64,
}

/// Runs `data` as [`endpoint_pair`] does and says what was delivered.
pub fn run(data: &[u8]) -> Delivered {
    let mut input = Input::new(data);
    let markers = input.bool();
    let mut w = World::establish(markers).expect("a clean wire establishes the connection");
    let mut held: VecDeque<Vec<u8>> = VecDeque::new();
    let mut steps = 0;
    while !input.is_empty() && steps < 1024 {
        steps += 1;
        w.round();
        held.extend(w.ab.0.drain(..));
        match input.u8() % 10 {
            0..=2 => {
                if let Some(f) = held.pop_front() {
                    w.deliver_to_b(&f);
                }
            }
            3 => {
                held.pop_front();
            }
            4 => {
                if let Some(f) = held.front().cloned() {
                    w.deliver_to_b(&f);
                }
            }
            5 => {
                if let Some(f) = held.pop_front() {
                    held.push_back(f);
                }
            }
            6 => {
                let (at, x) = (usize::from(input.u16()), input.u8());
                if let Some(mut f) = held.pop_front() {
                    if !f.is_empty() {
                        let i = at % f.len();
                        f[i] ^= x.max(1);
                    }
                    w.deliver_to_b(&f);
                }
            }
            7 => {
                let (at, x) = (usize::from(input.u16()), input.u8());
                if let Some(f) = held.pop_front() {
                    if let Some(g) = corrupt_repaired(&f, at, x) {
                        w.deliver_to_b(&g);
                    }
                }
            }
            8 => {
                let n = usize::from(input.u8()) * 8;
                let garbage = input.bytes(n).to_vec();
                w.deliver_to_b(&garbage);
            }
            _ => w.now += Duration::from_millis(u64::from(input.u8())),
        }
        w.check();
    }
    // Whatever the wire did, what is left can still be delivered cleanly without breaking any
    // invariant (a stream already in error simply stays silent).
    for _ in 0..16 {
        w.round();
        held.extend(w.ab.0.drain(..));
        while let Some(f) = held.pop_front() {
            w.deliver_to_b(&f);
        }
        w.now += Duration::from_millis(50);
        w.check();
    }
    let target = w.pd_b.bytes(w.target);
    let written = target
        .chunks(8)
        .map(|c| {
            let mut word = [0u8; 8];
            word[..c.len()].copy_from_slice(c);
            nonzero_octets(u64::from_ne_bytes(word)).count_ones() as usize
        })
        .sum();
    Delivered {
        sends: w.sends_seen,
        written,
        crc_errors: w.b.counters().crc_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks are not vacuous: over a clean wire everything A sent arrives and is checked.
    #[test]
    fn nonzero_octets_marks_exactly_the_octets_that_are_not_zero() {
        for x in [
            0u64,
            1,
            0x80,
            0xff00,
            0x0100_0000_0000_0080,
            u64::MAX,
            0x7f7f_7f7f_7f7f_7f7f,
        ] {
            let want = x.to_le_bytes().iter().enumerate().fold(0u64, |m, (i, &b)| {
                if b != 0 {
                    m | 0x80 << (8 * i)
                } else {
                    m
                }
            });
            assert_eq!(nonzero_octets(x), want, "{x:#x}");
        }
    }

    /// The target check fails on an octet A never sent there, 0 included.
    #[test]
    fn an_octet_a_never_sent_in_the_target_fails_the_check() {
        for (at, zero) in [(0, false), (5, false), (TARGET_LEN - 1, false), (77, true)] {
            let mut w = World::establish(false).expect("a clean set-up");
            w.check();
            {
                // Written as a frame that placed it would (a placed 0 is wrong too).
                let mut g = w.pd_b.0.borrow_mut();
                let bad = if zero {
                    0
                } else {
                    w.expected[at].wrapping_add(1).max(1)
                };
                g.1.write(w.target, at as u64, &[bad]);
            }
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.check()));
            let msg = r
                .expect_err("the check must fail")
                .downcast::<String>()
                .unwrap();
            assert!(msg.contains(&format!("target octet {at} ")), "{msg}");
        }
    }

    #[test]
    fn a_clean_wire_delivers_every_send_and_write() {
        for markers in [0u8, 1] {
            let mut input = vec![markers];
            input.extend(std::iter::repeat_n(0u8, 600));
            assert_eq!(
                run(&input),
                Delivered {
                    sends: SENDS,
                    written: TARGET_LEN,
                    crc_errors: 0,
                }
            );
        }
    }

    /// Frames corrupted with their checksums repaired reach MPA, whose CRC refuses them (and
    /// every delivered octet was still checked against what A sent).
    #[test]
    fn a_repaired_corruption_is_not_delivered() {
        // Deliver two frames, then corrupt-and-repair every frame: whatever arrives intact is
        // checked, nothing corrupted gets through (the checks would panic).
        let mut input = vec![0u8, 0, 0];
        for _ in 0..200 {
            input.extend_from_slice(&[7, 0, 40, 0x55]);
        }
        let d = run(&input);
        assert!(d.crc_errors > 0, "{d:?}");
    }
}
