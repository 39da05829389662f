//! MPA Revision 2 against an INDEPENDENT peer
//! (`rfc6581_wire`, written from RFC 5044 / RFC 6581 / RFC 5040 alone), over real TCP between
//! two network namespaces, against our Responder and our Initiator on both transports (kernel
//! and xdp): every revision pairing, IRD/ORD below, equal to and above ours, ORD enforced on
//! the wire, a peer exceeding our IRD Terminated, peer-to-peer mode with each RTR type, a Rev 2
//! Request to a Rev 1-only Responder (and our Initiator's fallback), the Terminates for
//! insufficient IRD and no matching RTR, and tshark's decode of a Rev 2 connection (startup
//! frames and every FPDU with Good CRC32).
//!
//! Root and tools (ip, ethtool, dumpcap/tshark) needed: skipped elsewhere, failures under CI=true.

mod rfc6581_wire;

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use afxdp::BindMode;
use dataplane::{
    Access, CompletionQueue, ConnectError, ConnectionConfig, Device, EngineMode, Listener,
    MemoryRegion, QpInit, QueuePair, RemoteAddr, Status, Transport, XdpConfig,
};
use mpa::{RtrType, RtrTypes, StartupConfig, StartupError};
use rfc6581_wire::{op, recv_seg, send_seg, Frame, Rdma, Seg};
use testbed::{for_test, Side, VethTestbed};
use testkit::{or_skip, pattern, require_tool, unique_temp_path, LiveCapture};

const T: Duration = Duration::from_secs(20);
/// How long the peer watches for an FPDU that must not come.
const QUIET: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ours {
    Kernel,
    Xdp,
}

/// Our device in namespace A, the independent peer in namespace B.
struct Bed {
    tb: VethTestbed,
    dev: Device,
}

impl Bed {
    fn new(tag: &str, ours: Ours) -> Option<Bed> {
        let tb = or_skip(tag, for_test(tag))?;
        let dev = match ours {
            Ours::Kernel => Device::open(Transport::Kernel).unwrap(),
            Ours::Xdp => {
                // The peer's kernel TCP hands veth unfilled checksums otherwise.
                tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
                let _ns = tb.enter(Side::A).unwrap();
                let mut cfg = XdpConfig::new(tb.ifname(Side::A));
                cfg.bind = BindMode::Copy;
                // The engine runs on its own thread: the peer's segments are taken while this
                // test's threads wait on sockets rather than on our completion queues.
                cfg.mode = EngineMode::Threaded;
                Device::open_xdp(cfg).expect("open the xdp device")
            }
        };
        Some(Bed { tb, dev })
    }

    fn addr(&self, side: Side, port: u16) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(self.tb.ip(side), port))
    }

    fn listen(&self, port: u16, cfg: ConnectionConfig) -> Arc<Listener> {
        let _ns = self.tb.enter(Side::A).unwrap();
        Arc::new(self.dev.listen(self.addr(Side::A, port), cfg).unwrap())
    }

    fn init(&self) -> (QpInit, CompletionQueue) {
        let cq = self.dev.create_cq();
        let qi = QpInit {
            pd: self.dev.alloc_pd(),
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
        };
        (qi, cq)
    }

    fn connect(
        &self,
        port: u16,
        qi: &QpInit,
        cfg: &ConnectionConfig,
    ) -> Result<QueuePair, ConnectError> {
        let _ns = self.tb.enter(Side::A).unwrap();
        self.dev
            .connect(self.addr(Side::B, port), qi.clone(), cfg, b"hello")
    }

    /// The peer's TCP connection to our listener.
    fn peer_connect(&self, port: u16) -> TcpStream {
        let to = self.addr(Side::A, port);
        let s = self
            .tb
            .run_in(Side::B, || TcpStream::connect_timeout(&to, T))
            .expect("the peer connects");
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        s
    }

    fn peer_listen(&self, port: u16) -> TcpListener {
        let at = self.addr(Side::B, port);
        self.tb.run_in(Side::B, || TcpListener::bind(at)).unwrap()
    }
}

fn config(ird: u32, ord: u32, mpa: StartupConfig) -> ConnectionConfig {
    ConnectionConfig::default()
        .with_mpa(mpa)
        .with_ird(ird)
        .with_ord(ord)
}

fn wait_ok(cq: &CompletionQueue, what: &str) -> dataplane::Completion {
    let c = cq
        .wait(T)
        .unwrap_or_else(|| panic!("no completion for {what}"));
    assert_eq!(c.status, Status::Success, "{what}: {c:?}");
    c
}

/// True when nothing arrives on `s` within [`QUIET`].
fn quiet(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(QUIET)).unwrap();
    let mut b = [0u8; 1];
    let r = s.peek(&mut b);
    s.set_read_timeout(Some(T)).unwrap();
    matches!(r, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

/// True when `s` ends (FIN or RST) without another octet.
fn ends(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0))
        || matches!(s.read(&mut b), Err(e) if e.kind() == ErrorKind::ConnectionReset)
}

/// What our accepting side holds.
struct Accepted {
    qp: QueuePair,
    cq: CompletionQueue,
    recv: MemoryRegion,
    request: mpa::RequestInfo,
    src: MemoryRegion,
    /// The region of the first Send, when one was posted: it lives as long as the queue pair.
    _first: Option<MemoryRegion>,
}

/// Our Responder: accepts one Request on `listener` (with `depths` when given), with a receive
/// posted before the Reply, and posts a Send of `first` right after.
fn serve(
    bed: &Bed,
    listener: Arc<Listener>,
    depths: Option<(u32, u32)>,
    first: Option<&'static [u8]>,
) -> thread::JoinHandle<Accepted> {
    let (qi, cq) = bed.init();
    thread::spawn(move || {
        let recv = qi.pd.register(4096, Access::LOCAL_WRITE).unwrap();
        let src = qi
            .pd
            .register_from(&pattern(1 << 20, 7), Access::REMOTE_READ)
            .unwrap();
        let mut inc = listener.accept_timeout(T).expect("an MPA Request");
        let request = inc.request().clone();
        if let Some((ird, ord)) = depths {
            inc = inc.with_read_depths(ird, ord);
        }
        let qp = inc
            .accept_with(qi.clone(), b"ours", |qp| qp.post_recv(1, &recv, 0..4096))
            .expect("accept");
        let first = first.map(|msg| {
            let m = qi.pd.register_from(msg, Access::LOCAL_WRITE).unwrap();
            qp.post_send(2, &m, 0..msg.len()).unwrap();
            m
        });
        Accepted {
            qp,
            cq,
            recv,
            request,
            src,
            _first: first,
        }
    })
}

/// The peer's Send (MSN `msn`) reached our posted receive intact.
fn check_received(a: &Accepted, msn: u32, s: &mut TcpStream) {
    let msg = b"from the independent peer";
    send_seg(s, &Seg::send(msn, msg)).unwrap();
    let c = loop {
        let c = a.cq.wait(T).expect("our receive completes");
        if c.wr_id == 1 {
            break c;
        }
    };
    assert_eq!(c.status, Status::Success, "{c:?}");
    let mut got = vec![0u8; c.byte_len as usize];
    a.recv.read(0, &mut got).unwrap();
    assert_eq!(got, msg);
}

/// The peer as Initiator: sends `req`, returns the Reply (None: we closed without one).
fn peer_request(bed: &Bed, port: u16, req: &Frame) -> (TcpStream, Option<Frame>) {
    let mut s = bed.peer_connect(port);
    use std::io::Write;
    s.write_all(&req.bytes()).unwrap();
    let rep = Frame::read_from(&mut s).unwrap();
    (s, rep)
}

/// Every revision pairing against our Responder: Rev 1 and 2 accepted by default with a Reply
/// of the same revision; Rev 0 only by a strict-draft listener; a Rev 2 Request to a Rev 1-only
/// listener (and Rev 0 to a default one, Rev 1 to a strict one) closed without a Reply
/// (RFC 5044 §7.1.1, RFC 6581 §8).
fn responder_revisions(bed: &Bed, port: u16) {
    let policies = [
        StartupConfig::default(),
        StartupConfig::rfc5044(),
        StartupConfig::strict_draft(),
    ];
    for (k, policy) in policies.into_iter().enumerate() {
        let p = port + k as u16;
        let listener = bed.listen(p, config(16, 16, policy));
        for rev in 0..=2u8 {
            let rdma = (rev == 2).then_some(Rdma::depths(16, 16));
            let req = Frame::request(rev, rdma, b"hi");
            let accepted = policy.accept.contains(rev);
            if accepted {
                let h = serve(bed, listener.clone(), None, None);
                let (mut s, rep) = peer_request(bed, p, &req);
                let rep = rep.unwrap_or_else(|| panic!("policy {k} rev {rev}: no Reply"));
                assert!(rep.reply && !rep.reject && rep.crc);
                assert_eq!(
                    rep.rev, rev,
                    "policy {k}: the Reply has the Request's revision"
                );
                assert_eq!(rep.rdma.is_some(), rev == 2, "policy {k} rev {rev}");
                assert_eq!(rep.pd, b"ours", "the ULP's private data alone");
                let a = h.join().unwrap();
                assert_eq!(a.request.private_data, b"hi");
                assert_eq!(a.request.revision, rev);
                assert_eq!(a.qp.negotiated().revision, rev);
                check_received(&a, 1, &mut s);
            } else {
                let (_s, rep) = peer_request(bed, p, &req);
                assert_eq!(rep, None, "policy {k} rev {rev}: closed without a Reply");
            }
        }
    }
}

/// IRD/ORD of the peer below, equal to and above ours (8/8), and lopsided: the Reply's IRD is
/// min(ours, peer's ORD), its ORD min(ours, peer's IRD) (RFC 6581 §5); our queue pair reports
/// the same.
fn responder_depths(bed: &Bed, port: u16) {
    let listener = bed.listen(port, config(8, 8, StartupConfig::default()));
    for (ird, ord) in [(4, 4), (8, 8), (12, 12), (2, 12), (12, 0)] {
        let h = serve(bed, listener.clone(), None, None);
        let req = Frame::request(2, Some(Rdma::depths(ird, ord)), b"");
        let (mut s, rep) = peer_request(bed, port, &req);
        let r = rep
            .unwrap()
            .rdma
            .expect("a Rev 2 Reply with its RDMA octets");
        assert_eq!((r.ird, r.ord), (ord.min(8), ird.min(8)), "peer {ird}/{ord}");
        assert!(!r.p2p && r.rtr_count() == 0);
        let a = h.join().unwrap();
        let n = a.qp.negotiated();
        assert_eq!((n.ird, n.ord), (u32::from(r.ird), u32::from(r.ord)));
        assert_eq!(
            a.request.peer_read_depths,
            Some(mpa::ReadDepths { ird, ord })
        );
        check_received(&a, 1, &mut s);
    }
}

/// A peer with more Read Requests outstanding than our IRD (2) gets RDMAP's Terminate for it:
/// Remote Operation Error, "Catastrophic error, localized to RDMAP Stream" (RFC 5040,
/// 0x0/0x2/0x07), after at most IRD Read Responses.
fn responder_ird_exceeded(bed: &Bed, port: u16) {
    let listener = bed.listen(port, config(2, 2, StartupConfig::default()));
    let h = serve(bed, listener, None, None);
    let (mut s, rep) = peer_request(bed, port, &Frame::request(2, Some(Rdma::depths(2, 2)), b""));
    assert_eq!(rep.unwrap().rdma.unwrap().ird, 2);
    let a = h.join().unwrap();
    let src = a.src.stag();
    let mut burst = Vec::new();
    for msn in 1..=3u32 {
        let rr = Seg::read_request(msn, (0x55, 0), 256 << 10, (src, 0));
        burst.extend_from_slice(&rfc6581_wire::fpdu(&rr.bytes()));
    }
    use std::io::Write;
    s.write_all(&burst).unwrap();
    let mut responses = 0;
    let term = loop {
        let seg = recv_seg(&mut s)
            .unwrap_or_else(|e| {
                panic!(
                    "{e} after {responses} Read Responses; ours: {:?}",
                    bed.dev.counters()
                )
            })
            .expect("a Terminate before the end");
        match seg.opcode() {
            op::READ_RESPONSE => {
                responses += usize::from(matches!(seg, Seg::Tagged { last: true, .. }))
            }
            op::TERMINATE => break seg.terminate_code().unwrap(),
            o => panic!("unexpected opcode {o}"),
        }
    };
    assert_eq!(
        term,
        (0x0, 0x2, 0x07),
        "RDMAP Remote Operation Error, stream catastrophic"
    );
    assert!(responses <= 2, "{responses} Read Responses for an IRD of 2");
    drop(a);
}

fn rdma_offer(t: Option<RtrType>) -> Rdma {
    Rdma {
        p2p: true,
        rtr_send: t.is_none_or(|t| t == RtrType::Send),
        rtr_write: t.is_none_or(|t| t == RtrType::Write),
        rtr_read: t.is_none_or(|t| t == RtrType::Read),
        ..Rdma::depths(16, 16)
    }
}

fn chosen(r: &Rdma) -> RtrType {
    assert!(r.p2p && r.rtr_count() == 1, "exactly one RTR chosen: {r:?}");
    if r.rtr_send {
        RtrType::Send
    } else if r.rtr_write {
        RtrType::Write
    } else {
        RtrType::Read
    }
}

/// The RTR message of type `t` as the Initiator sends it (RFC 6581 §5).
fn rtr_seg(t: RtrType) -> Seg {
    match t {
        RtrType::Send => Seg::send(1, &[]),
        RtrType::Write => Seg::write(0, 0, &[]),
        RtrType::Read => Seg::read_request(1, (0, 0), 0, (0, 0)),
    }
}

/// Peer-to-peer mode against our Responder, each RTR type offered alone and all three: the
/// Reply chooses exactly one offered type; our side's Send, posted right after the accept, waits
/// for the RTR (nothing on the wire before it); after the RTR it arrives (a Read RTR answered
/// by a zero-length Read Response), and the RTR used none of our receive buffers.
fn responder_p2p(bed: &Bed, port: u16) {
    let listener = bed.listen(port, config(16, 16, StartupConfig::default()));
    for offer in [
        Some(RtrType::Send),
        Some(RtrType::Write),
        Some(RtrType::Read),
        None,
    ] {
        let h = serve(bed, listener.clone(), None, Some(b"responder first"));
        let (mut s, rep) =
            peer_request(bed, port, &Frame::request(2, Some(rdma_offer(offer)), b""));
        let t = chosen(&rep.unwrap().rdma.unwrap());
        if let Some(o) = offer {
            assert_eq!(t, o);
        }
        let a = h.join().unwrap();
        assert_eq!(a.qp.negotiated().rtr, Some(t));
        assert!(quiet(&mut s), "{t:?}: our Responder sent before the RTR");
        send_seg(&mut s, &rtr_seg(t)).unwrap();
        let mut zero_response = false;
        loop {
            let seg = recv_seg(&mut s).unwrap().expect("our Send");
            match seg {
                Seg::Tagged {
                    opcode: op::READ_RESPONSE,
                    stag: 0,
                    ref payload,
                    ..
                } if payload.is_empty() => zero_response = true,
                Seg::Untagged {
                    opcode: op::SEND,
                    msn: 1,
                    ref payload,
                    ..
                } => {
                    assert_eq!(payload, b"responder first");
                    break;
                }
                other => panic!("{t:?}: unexpected {other:?}"),
            }
        }
        assert_eq!(zero_response, t == RtrType::Read, "{t:?}");
        let next_msn = if t == RtrType::Send { 2 } else { 1 };
        check_received(&a, next_msn, &mut s);
    }
}

/// The peer as Responder for one connection: reads our Request, answers with `reply(request)`
/// (None: close without a Reply), then runs `then`.
fn peer_responder<R: Send + 'static>(
    listener: TcpListener,
    reply: impl Fn(&Frame) -> Option<Frame> + Send + 'static,
    then: impl FnOnce(TcpStream, Frame) -> R + Send + 'static,
) -> thread::JoinHandle<R> {
    thread::spawn(move || loop {
        let (mut s, _) = listener.accept().unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        let req = Frame::read_from(&mut s).unwrap().expect("our Request");
        let Some(rep) = reply(&req) else {
            drop(s);
            continue;
        };
        use std::io::Write;
        s.write_all(&rep.bytes()).unwrap();
        return then(s, req);
    })
}

/// The peer's Reply to our Request `req` (which asks for CRC and no markers, as every test's
/// config does).
fn reply_to(req: &Frame, rev: u8, rdma: Option<Rdma>) -> Frame {
    assert!(!req.markers && req.crc, "our Request: no markers, CRC");
    Frame {
        reply: true,
        crc: true,
        rev,
        rdma,
        pd: b"theirs".to_vec(),
        ..Frame::default()
    }
}

/// Our Initiator's Request by revision: Rev 2 by default with our IRD/ORD and the Enhanced
/// bit; Rev 1 for an RFC 5044 config; Rev 0 in the draft's strict mode. A Rev 1 Reply to our
/// Rev 2 Request is taken (no depths exchanged).
fn initiator_revisions(bed: &Bed, port: u16) {
    let cases = [
        (StartupConfig::default(), 2u8, 2u8),
        (StartupConfig::default(), 2, 1),
        (StartupConfig::rfc5044(), 1, 1),
        (StartupConfig::strict_draft(), 0, 0),
    ];
    for (k, (mpa, sent, answered)) in cases.into_iter().enumerate() {
        let p = port + k as u16;
        let l = bed.peer_listen(p);
        let h = peer_responder(
            l,
            move |req| {
                let rdma = (answered == 2).then_some(Rdma::depths(8, 8));
                Some(reply_to(req, answered, rdma))
            },
            |_, req| req,
        );
        let (qi, _cq) = bed.init();
        let qp = bed.connect(p, &qi, &config(8, 8, mpa)).expect("connect");
        let req = h.join().unwrap();
        assert_eq!(req.rev, sent, "case {k}");
        assert_eq!(req.pd, b"hello", "case {k}: our private data alone");
        assert_eq!(
            req.rdma,
            (sent == 2).then_some(Rdma::depths(8, 8)),
            "case {k}"
        );
        let n = qp.negotiated();
        assert_eq!((n.revision, n.ird, n.ord), (answered, 8, 8), "case {k}");
        assert_eq!(qp.peer_private_data(), b"theirs");
    }
}

/// RFC 6581 §8: a Responder that only knows Rev 1 closes on our Rev 2 Request; we retry once
/// with Rev 1 on a new connection and that one is answered.
fn initiator_rev1_fallback(bed: &Bed, port: u16) {
    let l = bed.peer_listen(port);
    let h = peer_responder(
        l,
        |req| (req.rev == 1).then(|| reply_to(req, 1, None)),
        |_, req| req,
    );
    let before = bed.dev.counters().rev1_fallbacks;
    let (qi, _cq) = bed.init();
    let qp = bed
        .connect(port, &qi, &ConnectionConfig::default())
        .expect("the Rev 1 retry connects");
    assert_eq!(h.join().unwrap().rev, 1);
    assert_eq!(qp.negotiated().revision, 1);
    assert_eq!(bed.dev.counters().rev1_fallbacks, before + 1);
}

/// A refused TCP connection (RST to our SYN: nobody listens) is no Rev 1 Responder closing
/// on our Request: the connect fails as refused, with no Rev 1 retry. (Taking it for one
/// made an rdma_cm client that raced its server's listen connect with Rev 1 and no
/// ready-to-receive message, and a server that sends first then waited for ever, MPA-85.)
fn initiator_refused_is_no_rev1_fallback(bed: &Bed, port: u16) {
    let before = bed.dev.counters().rev1_fallbacks;
    let (qi, _cq) = bed.init();
    match bed.connect(port, &qi, &ConnectionConfig::default()) {
        Err(ConnectError::Io(e)) => {
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}")
        }
        other => panic!("a refused connect, not {other:?}"),
    }
    assert_eq!(bed.dev.counters().rev1_fallbacks, before);
}

/// IRD/ORD in the Reply below, equal to and above ours (8): our ORD ends at min(8, their IRD);
/// with their IRD at 1, three posted Reads go out one at a time (the next only after the
/// previous Read's Response), all completing with the peer's data.
fn initiator_depths_and_ord(bed: &Bed, port: u16) {
    for (k, their_ird) in [4u16, 8, 16, 1].into_iter().enumerate() {
        initiator_depths_case(bed, port + k as u16, their_ird);
    }
}

fn initiator_depths_case(bed: &Bed, p: u16, their_ird: u16) {
    {
        let l = bed.peer_listen(p);
        let h = peer_responder(
            l,
            move |req| Some(reply_to(req, 2, Some(Rdma::depths(their_ird, 8)))),
            move |mut s, _| {
                let mut served = 0;
                if their_ird == 1 {
                    for i in 0..3u32 {
                        let rr = recv_seg(&mut s).unwrap().expect("a Read Request");
                        assert_eq!(rr.opcode(), op::READ_REQUEST);
                        let (sink, sink_to, size, _, _) = rr.read_request_fields();
                        assert!(
                            quiet(&mut s),
                            "Read {i}: another Read while one is outstanding"
                        );
                        let data = pattern(size as usize, 40 + u64::from(i));
                        send_seg(&mut s, &Seg::read_response(sink, sink_to, &data)).unwrap();
                        served += 1;
                    }
                }
                // Hold the connection until our side is done.
                let _ = recv_seg(&mut s);
                served
            },
        );
        let (qi, cq) = bed.init();
        let qp = bed
            .connect(p, &qi, &config(8, 8, StartupConfig::default()))
            .unwrap();
        let n = qp.negotiated();
        assert_eq!(
            (n.ird, n.ord),
            (8, u32::from(their_ird.min(8))),
            "their IRD {their_ird}"
        );
        if their_ird == 1 {
            let dst = qi.pd.register(3 * 4096, Access::LOCAL_WRITE).unwrap();
            for i in 0..3u64 {
                let at = (i * 4096) as usize;
                let remote = RemoteAddr { stag: 0x77, to: 0 };
                qp.post_read(10 + i, &dst, at..at + 4096, remote).unwrap();
            }
            for i in 0..3u8 {
                wait_ok(&cq, "a Read");
                let mut got = vec![0u8; 4096];
                dst.read(usize::from(i) * 4096, &mut got).unwrap();
                assert_eq!(got, pattern(4096, 40 + u64::from(i)));
            }
        }
        drop(qp);
        assert_eq!(h.join().unwrap(), if their_ird == 1 { 3 } else { 0 });
    }
}

/// A Reply that cannot work: its ORD above our IRD (RFC 6581 code 6), or peer-to-peer mode with
/// no RTR type we offered (code 7): connect fails with the error, and the peer receives the
/// Terminate (layer LLP, type MPA, the code) before the close.
fn initiator_refusals(bed: &Bed, port: u16) {
    let cases: [(Rdma, RtrTypes, StartupError, u8); 2] = [
        (
            Rdma::depths(8, 9),
            RtrTypes::NONE,
            StartupError::InsufficientIrd {
                ird: 8,
                peer_ord: 9,
            },
            6,
        ),
        (
            Rdma {
                p2p: true,
                rtr_send: true,
                ..Rdma::depths(8, 8)
            },
            RtrTypes::only(RtrType::Write),
            StartupError::NoMatchingRtr,
            7,
        ),
    ];
    for (k, (rdma, offer, err, code)) in cases.into_iter().enumerate() {
        let p = port + k as u16;
        let l = bed.peer_listen(p);
        let h = peer_responder(
            l,
            move |req| Some(reply_to(req, 2, Some(rdma))),
            |mut s, _| {
                let t = recv_seg(&mut s).unwrap().expect("a Terminate");
                (t.terminate_code(), ends(&mut s))
            },
        );
        let (qi, _cq) = bed.init();
        let mpa = StartupConfig {
            p2p_offer: offer,
            ..StartupConfig::default()
        };
        match bed.connect(p, &qi, &config(8, 8, mpa)) {
            Err(ConnectError::Startup(e)) => assert_eq!(e, err),
            other => panic!("case {k}: {other:?}"),
        }
        let (term, closed) = h.join().unwrap();
        assert_eq!(term, Some((0x2, 0x0, code)), "case {k}: LLP/MPA Terminate");
        assert!(closed, "case {k}: TCP closes after the Terminate");
    }
}

/// Our Initiator in peer-to-peer mode with each RTR type: the Request offers it; after the
/// Reply chose it, our first FPDU is that RTR (a Read RTR answered by the peer's zero-length
/// Read Response), then our application's first Send (MSN 2 after a Send RTR, else 1).
fn initiator_p2p(bed: &Bed, port: u16) {
    for (k, t) in [RtrType::Send, RtrType::Write, RtrType::Read]
        .into_iter()
        .enumerate()
    {
        let p = port + k as u16;
        let l = bed.peer_listen(p);
        let h = peer_responder(
            l,
            move |req| {
                let o = req.rdma.expect("a Rev 2 Request");
                assert!(o.p2p && o.rtr_count() == 1, "{o:?}");
                assert_eq!(chosen(&o), t);
                // Depths within the Request's (our IRD 8), one RTR type chosen.
                let rdma = Rdma {
                    ird: 8,
                    ord: 8,
                    ..rdma_offer(Some(t))
                };
                Some(reply_to(req, 2, Some(rdma)))
            },
            move |mut s, _| {
                let rtr = recv_seg(&mut s).unwrap().expect("the RTR");
                assert_eq!(rtr, rtr_seg(t), "the RTR first");
                if t == RtrType::Read {
                    send_seg(&mut s, &Seg::read_response(0, 0, &[])).unwrap();
                }
                let first = recv_seg(&mut s).unwrap().expect("our Send");
                let _ = recv_seg(&mut s);
                first
            },
        );
        let (qi, cq) = bed.init();
        let mpa = StartupConfig {
            p2p_offer: RtrTypes::only(t),
            ..StartupConfig::default()
        };
        let qp = bed.connect(p, &qi, &config(8, 8, mpa)).unwrap();
        assert_eq!(qp.negotiated().rtr, Some(t));
        let m = qi.pd.register_from(b"go", Access::LOCAL_WRITE).unwrap();
        qp.post_send(1, &m, 0..2).unwrap();
        wait_ok(&cq, "our first Send");
        drop(qp);
        let msn = if t == RtrType::Send { 2 } else { 1 };
        assert_eq!(h.join().unwrap(), Seg::send(msn, b"go"), "{t:?}");
    }
}

/// tshark on a Rev 2 connection with Reads (the IRD 1 case above, captured in B): it decodes
/// the Request and the Reply and every FPDU with Good CRC32, nothing malformed. What it says
/// of the Rev 2 frames is printed (tshark 4.0 knows Rev 1; see the report in the test log).
fn tshark_rev2(bed: &Bed, tag: &str, port: u16) {
    if !require_tool(tag, "dumpcap") || !require_tool(tag, "tshark") {
        return;
    }
    let file = unique_temp_path(&format!("{tag}-rev2.pcapng"));
    let mut cap = LiveCapture::start(
        bed.tb.command(Side::B, "dumpcap"),
        bed.tb.ifname(Side::B),
        port,
        file,
    );
    initiator_depths_case(bed, port, 1);
    cap.stop();
    let path = cap.finish();
    let t = testkit::iwarp_oracle::iwarp_tshark(&path);
    let f = format!("tcp.port == {port}");
    assert_eq!(t.count(&format!("{f} && iwarp_mpa.req")), 1, "{path:?}");
    assert_eq!(t.count(&format!("{f} && iwarp_mpa.rep")), 1, "{path:?}");
    // tshark 4.0.17 knows Rev 1: it shows Rev 2 frames with the Enhanced bit as "Reserved:
    // 0x10" and the IRD/ORD octets as the first private data, with no expert info (no
    // warning) on them. Our Request offered IRD 8 / ORD 8 and the ULP's "hello"; the peer's
    // Reply IRD 1 / ORD 8 and "theirs".
    let startup = t.fields(
        &format!("{f} && (iwarp_mpa.req || iwarp_mpa.rep)"),
        &[
            "iwarp_mpa.rev",
            "iwarp_mpa.res",
            "iwarp_mpa.privatedata",
            "_ws.expert.severity",
        ],
    );
    println!("tshark on the Rev 2 startup frames (rev, res, private data, expert): {startup:?}");
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    assert_eq!(
        startup,
        [
            format!("2\t0x10\t00080008{}\t", hex(b"hello")),
            format!("2\t0x10\t00010008{}\t", hex(b"theirs")),
        ],
        "{path:?}"
    );
    let v = t.verbose(&format!("{f} && iwarp_mpa.fpdu"));
    let fpdus = v.matches("Good CRC32").count();
    assert_eq!(v.matches("Bad CRC32").count(), 0, "{path:?}");
    assert!(fpdus >= 6, "{fpdus} FPDUs with Good CRC32 in {path:?}");
    assert_eq!(t.count(&format!("{f} && _ws.malformed")), 0, "{path:?}");
    assert_eq!(
        t.count(&format!("{f} && iwarp_rdma.opcode == 0x01")),
        3,
        "Read Requests"
    );
    if std::env::var_os("XW_KEEP").is_none() {
        let _ = std::fs::remove_file(&path);
    }
}

fn all(tag: &str, ours: Ours, base: u16) {
    let Some(bed) = Bed::new(tag, ours) else {
        return;
    };
    responder_revisions(&bed, base);
    responder_depths(&bed, base + 10);
    responder_ird_exceeded(&bed, base + 11);
    responder_p2p(&bed, base + 12);
    initiator_revisions(&bed, base + 20);
    initiator_rev1_fallback(&bed, base + 30);
    initiator_refused_is_no_rev1_fallback(&bed, base + 31);
    initiator_depths_and_ord(&bed, base + 40);
    initiator_refusals(&bed, base + 50);
    initiator_p2p(&bed, base + 60);
    tshark_rev2(&bed, tag, base + 70);
}

#[test]
fn rfc6581_independent_peer_kernel_transport() {
    all("r6k", Ours::Kernel, 4600);
}

#[test]
fn rfc6581_independent_peer_xdp_transport() {
    all("r6x", Ours::Xdp, 4700);
}
