//! Lifetimes of memory regions and queue pairs through the verbs API, on both transports,
//! against a scripted peer (`raw_peer`) whose messages arrive exactly when the test says:
//! - work posted on a region that is deregistered (and its STag slot reused by a new region)
//!   before the peer's data comes completes flushed, and the new region is untouched;
//! - closing a queue pair with work outstanding returns at once, flushes that work, closes the
//!   connection (FIN, then RST at the close timeout), and late data from the peer lands nowhere.
//!
//! The kernel transport runs on loopback; the xdp transport in a veth testbed (root).

mod raw_peer;

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use afxdp::BindMode;
use dataplane::{
    Access, Completion, CompletionQueue, ConnectionConfig, Device, EngineMode, MemoryRegion,
    Opcode, QpInit, QueuePair, RemoteAddr, Status, XdpConfig,
};
use raw_peer::{Ending, RawPeer};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

const T: Duration = Duration::from_secs(30);

/// Where our end runs.
enum Net {
    /// The kernel transport, on loopback.
    Kernel,
    /// An xdp device in side A of a testbed; the peer in side B.
    Xdp(VethTestbed),
}

/// Our end of one connection to a raw e.peer.
struct Ends {
    dev: Device,
    init: QpInit,
    cq: CompletionQueue,
    qp: QueuePair,
    peer: RawPeer,
}

impl Ends {
    fn open(net: &Net, cfg: &ConnectionConfig) -> Ends {
        let (dev, listener) = match net {
            Net::Kernel => (
                Device::open(dataplane::Transport::Kernel).unwrap(),
                TcpListener::bind("127.0.0.1:0").unwrap(),
            ),
            Net::Xdp(tb) => {
                tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
                let dev = {
                    let _ns = tb.enter(Side::A).unwrap();
                    let mut c = XdpConfig::new(tb.ifname(Side::A));
                    c.bind = BindMode::Copy;
                    c.mode = EngineMode::Threaded;
                    Device::open_xdp(c).expect("open the xdp device")
                };
                let ip = tb.ip(Side::B);
                let l = tb.run_in(Side::B, || TcpListener::bind((ip, 0)).unwrap());
                (dev, l)
            }
        };
        let addr: SocketAddr = listener.local_addr().unwrap();
        let cq = dev.create_cq();
        let init = QpInit {
            pd: dev.alloc_pd(),
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
        };
        let (qp, peer) = std::thread::scope(|s| {
            let peer = s.spawn(|| RawPeer::accept(&listener));
            let qp = dev.connect(addr, init.clone(), cfg, b"").expect("connect");
            (qp, peer.join().expect("the peer accepts"))
        });
        Ends {
            dev,
            init,
            cq,
            qp,
            peer,
        }
    }

    fn register(&self, access: Access) -> MemoryRegion {
        self.init.pd.register(64, access).unwrap()
    }

    /// The next completion; it must be `wr_id`'s.
    fn completion(&self, wr_id: u64) -> Completion {
        let c = self
            .cq
            .wait(T)
            .unwrap_or_else(|| panic!("no completion for {wr_id}"));
        assert_eq!(c.wr_id, wr_id, "{c:?}");
        c
    }
}

/// Deregisters `mr` and registers a new region, which must take its STag slot.
fn replace(e: &Ends, mr: MemoryRegion) -> MemoryRegion {
    let slot = mr.stag() >> 8;
    drop(mr);
    let new = e.register(Access::LOCAL_WRITE);
    assert_eq!(new.stag() >> 8, slot, "the new region reuses the slot");
    new
}

fn zeros(mr: &MemoryRegion) -> bool {
    mr.read_vec(0, mr.len()).unwrap().iter().all(|b| *b == 0)
}

/// A receive and an RDMA Read posted on regions that are deregistered before the peer's Send
/// and Read Response come: both complete flushed, the regions now in their slots are untouched,
/// and the connection goes on (no Terminate).
fn deregistered_work(net: Net) {
    let mut e = Ends::open(&net, &ConnectionConfig::default());
    let src = e.register(Access::LOCAL_WRITE);
    src.write(0, &[7; 64]).unwrap();
    // A receive on a region deregistered before the Send arrives.
    let recv = e.register(Access::LOCAL_WRITE);
    e.qp.post_recv(1, &recv, 0..64).unwrap();
    let recv = replace(&e, recv);
    e.qp.post_send(2, &src, 0..0).unwrap();
    assert!(e.peer.next_ulpdu(T).is_some(), "our first FPDU (MPA-85)");
    assert_eq!(e.completion(2).status, Status::Success);
    e.peer.send(&[0xaa; 32]);
    let c = e.completion(1);
    assert_eq!(
        (c.opcode, c.status, c.byte_len),
        (Opcode::Recv, Status::Flushed, 0)
    );
    assert!(zeros(&recv), "the slot's new region is untouched");
    // The stream goes on: a receive on the new region takes the next Send.
    e.qp.post_recv(3, &recv, 0..64).unwrap();
    e.peer.send(&[0xbb; 32]);
    let c = e.completion(3);
    assert_eq!((c.status, c.byte_len), (Status::Success, 32));
    assert_eq!(recv.read_vec(0, 32).unwrap(), [0xbb; 32]);
    // An RDMA Read whose sink is deregistered before the Response arrives.
    let sink = e.register(Access::LOCAL_WRITE);
    let remote = RemoteAddr {
        stag: 0x0012_3400,
        to: 0,
    };
    e.qp.post_read(4, &sink, 0..32, remote).unwrap();
    let rr = e.peer.read_request(T);
    assert_eq!(rr.sink_stag.0, sink.stag());
    let sink = replace(&e, sink);
    e.peer.tagged(
        ddp::RdmapOpcode::RdmaReadResponse,
        rr.sink_stag.0,
        rr.sink_to,
        &[0xcc; 32],
    );
    let c = e.completion(4);
    assert_eq!(
        (c.opcode, c.status, c.byte_len),
        (Opcode::Read, Status::Flushed, 0)
    );
    assert!(zeros(&sink), "the slot's new region is untouched");
    // No Terminate: the connection works.
    e.qp.post_send(5, &src, 0..8).unwrap();
    assert_eq!(e.completion(5).status, Status::Success);
    assert!(e.peer.next_ulpdu(T).is_some_and(|u| u.ends_with(&[7; 8])));
    assert_eq!(e.qp.error(), None);
}

#[test]
fn deregistered_work_flushes_and_never_reaches_the_slots_next_region_kernel() {
    deregistered_work(Net::Kernel);
}

#[test]
fn deregistered_work_flushes_and_never_reaches_the_slots_next_region_xdp() {
    let Some(tb) = or_skip("ltd", for_test("ltd")) else {
        return;
    };
    deregistered_work(Net::Xdp(tb));
}

/// Our end closes with a receive and an RDMA Read outstanding while the peer stays open: the
/// close returns at once, both complete flushed, the peer sees FIN and, as it never closes its
/// side, RST at the close timeout; the Read Response and RDMA Write it sends after our close
/// land nowhere and are counted.
fn closing_with_work_outstanding(net: Net) {
    let cfg = ConnectionConfig::default().with_close_timeout(Duration::from_secs(1));
    let e = Ends::open(&net, &cfg);
    let (recv, sink, src) = (
        e.register(Access::LOCAL_WRITE),
        e.register(Access::LOCAL_WRITE),
        e.register(Access::LOCAL_WRITE),
    );
    let window = e.register(Access::REMOTE_WRITE);
    let Ends {
        dev,
        qp,
        cq,
        mut peer,
        ..
    } = e;
    qp.post_recv(1, &recv, 0..64).unwrap();
    qp.post_send(2, &src, 0..0).unwrap();
    assert!(peer.next_ulpdu(T).is_some(), "our first FPDU (MPA-85)");
    let remote = RemoteAddr {
        stag: 0x0012_3400,
        to: 0,
    };
    qp.post_read(3, &sink, 0..32, remote).unwrap();
    let rr = peer.read_request(T);
    let started = Instant::now();
    drop(qp);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "close returned after {took:?}"
    );
    let mut done: Vec<_> = (0..3)
        .map(|_| {
            let c = cq.wait(T).expect("a completion");
            (c.wr_id, c.opcode, c.status)
        })
        .collect();
    done.sort_by_key(|c| c.0);
    assert_eq!(
        done,
        [
            (1, Opcode::Recv, Status::Flushed),
            (2, Opcode::Send, Status::Success),
            (3, Opcode::Read, Status::Flushed)
        ]
    );
    peer.tagged(
        ddp::RdmapOpcode::RdmaReadResponse,
        rr.sink_stag.0,
        rr.sink_to,
        &[0xdd; 32],
    );
    peer.tagged(ddp::RdmapOpcode::RdmaWrite, window.stag(), 0, &[0xee; 32]);
    assert_eq!(peer.ending(T), Ending::Fin);
    assert!(peer.reset_within(T), "RST at the close timeout");
    let deadline = Instant::now() + T;
    let counted = loop {
        let c = dev.counters();
        if (c.rx_after_close >= 2 && c.close_timeouts == 1) || Instant::now() > deadline {
            break c;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        counted.rx_after_close >= 2 && counted.close_timeouts == 1,
        "{counted:?}"
    );
    for mr in [&recv, &sink, &window] {
        assert!(zeros(mr), "nothing landed after the close");
    }
}

#[test]
fn close_returns_at_once_flushes_and_drops_late_data_kernel() {
    closing_with_work_outstanding(Net::Kernel);
}

#[test]
fn close_returns_at_once_flushes_and_drops_late_data_xdp() {
    let Some(tb) = or_skip("ltc", for_test("ltc")) else {
        return;
    };
    closing_with_work_outstanding(Net::Xdp(tb));
}
