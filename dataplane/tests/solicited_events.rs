//! Solicited events on both transports. A receiver arms its completion queue
//! for solicited completions only (verbs' `ibv_req_notify_cq(cq, 1)`); the sender's plain Sends
//! queue completions without an event, its Send with the solicited-event flag fires one, and
//! one arm fires once. The xdp device in namespace A and the kernel device in B each take the
//! receiving side once.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use afxdp::BindMode;
use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, Listener, MemoryRegion, Opcode, QpInit,
    QueuePair, Status, Transport, XdpConfig,
};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

const T: Duration = Duration::from_secs(20);
/// How long a receiver waits for an event that must not fire.
const NO_EVENT: Duration = Duration::from_millis(400);

/// The listener of `rx` on `side`, one per port for the whole test.
fn listener(tb: &VethTestbed, rx: &Device, side: Side, port: u16) -> Arc<Listener> {
    static LISTENERS: Mutex<Vec<(u16, Arc<Listener>)>> = Mutex::new(Vec::new());
    let mut l = LISTENERS.lock().unwrap();
    if let Some((_, x)) = l.iter().find(|(p, _)| *p == port) {
        return x.clone();
    }
    let at = SocketAddr::V4(SocketAddrV4::new(tb.ip(side), port));
    let _ns = tb.enter(side).unwrap();
    let x = Arc::new(rx.listen(at, ConnectionConfig::default()).unwrap());
    l.push((port, x.clone()));
    x
}

/// One end of a pair: its queue pair, init and completion queue, and the region its receives
/// were posted in (which lives as long as they may complete).
type End = (QueuePair, QpInit, CompletionQueue, MemoryRegion);

/// `rx` listens on `side`, `tx` connects; returns both ends, each with four receives posted.
fn pair(tb: &VethTestbed, rx: &Device, rx_side: Side, tx: &Device, port: u16) -> (End, End) {
    let at = SocketAddr::V4(SocketAddrV4::new(tb.ip(rx_side), port));
    let listener = listener(tb, rx, rx_side, port);
    let (rqi, rcq) = rx.qp_init();
    let (tqi, tcq) = tx.qp_init();
    let rqi2 = rqi.clone();
    let (buf_tx, buf_rx) = std::sync::mpsc::channel();
    let acc = std::thread::spawn(move || {
        let buf = rqi2.pd.register(4 * 64, Access::LOCAL_WRITE).unwrap();
        let inc = listener.accept_timeout(T).expect("a Request");
        let qp = inc
            .accept_with(rqi2, b"", |qp| {
                (0..4u64).try_for_each(|i| {
                    let at = (i * 64) as usize;
                    qp.post_recv(i, &buf, at..at + 64)
                })
            })
            .unwrap();
        buf_tx.send(buf).unwrap();
        qp
    });
    let tqp = {
        let _ns = tb.enter(rx_side.peer()).unwrap();
        // Peer-to-peer mode (RFC 6581): the Initiator's RTR lets the Responder send first.
        let mut cfg = ConnectionConfig::default();
        cfg.mpa.p2p_offer = mpa::RtrTypes::only(mpa::RtrType::Write);
        tx.connect(at, tqi.clone(), &cfg, b"").expect("connect")
    };
    let tbuf = tqi.pd.register(4 * 64, Access::LOCAL_WRITE).unwrap();
    for i in 0..4u64 {
        let at = (i * 64) as usize;
        tqp.post_recv(i, &tbuf, at..at + 64).unwrap();
    }
    let rqp = acc.join().unwrap();
    let rbuf = buf_rx.recv().unwrap();
    ((rqp, rqi, rcq, rbuf), (tqp, tqi, tcq, tbuf))
}

fn send(qp: &QueuePair, qi: &QpInit, cq: &CompletionQueue, solicited: bool) {
    let m = qi.pd.register_from(b"event?", Access::LOCAL_WRITE).unwrap();
    qp.post_send_with(9, &m, 0..6, solicited, None).unwrap();
    let c = cq.wait(T).expect("the Send completes");
    assert_eq!((c.opcode, c.status), (Opcode::Send, Status::Success));
}

/// The xdp device (A) listens, the kernel device (B) connects; `xdp_receives` picks the side
/// that arms and receives.
fn receiver_arms_solicited_only(
    tb: &VethTestbed,
    x: &Device,
    k: &Device,
    xdp_receives: bool,
    port: u16,
) {
    let (xs, ks) = pair(tb, x, Side::A, k, port);
    let ((rqp, _rqi, rcq, _rbuf), (tqp, tqi, tcq, _tbuf)) =
        if xdp_receives { (xs, ks) } else { (ks, xs) };
    rcq.arm(true);
    send(&tqp, &tqi, &tcq, false);
    send(&tqp, &tqi, &tcq, false);
    assert!(
        !rcq.wait_event(NO_EVENT),
        "plain Sends fire no solicited-only event"
    );
    send(&tqp, &tqi, &tcq, true);
    assert!(
        rcq.wait_event(T),
        "the solicited Send fires the armed event"
    );
    let mut got = Vec::new();
    // The event came with the solicited receive: it and the two before are queued.
    while got.len() < 3 {
        let c = rcq.wait(T).expect("the receives are queued");
        got.push(c);
    }
    assert!(
        got.iter().all(|c| c.opcode == Opcode::Recv && c.is_ok()),
        "{got:?}"
    );
    assert_eq!(
        got.iter().map(|c| c.solicited).collect::<Vec<_>>(),
        [false, false, true]
    );
    send(&tqp, &tqi, &tcq, true);
    assert!(!rcq.wait_event(NO_EVENT), "one arm, one event");
    assert!(rcq.wait(T).is_some_and(|c| c.solicited));
    drop((rqp, tqp));
}

#[test]
fn solicited_only_events_on_both_transports() {
    let tag = "sol";
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let x = {
        let _ns = tb.enter(Side::A).unwrap();
        let mut cfg = XdpConfig::new(tb.ifname(Side::A));
        cfg.bind = BindMode::Copy;
        Device::open_xdp(cfg).expect("open the xdp device")
    };
    let k = Device::open(Transport::Kernel).unwrap();
    receiver_arms_solicited_only(&tb, &x, &k, true, 4801);
    receiver_arms_solicited_only(&tb, &x, &k, false, 4801);
}
