//! The verbs API over the kernel transport on loopback (no privileges needed): private data
//! both ways, reject, revision mismatch, Send variants, zero-length messages, post-time
//! refusals, graceful close flushing the peer's receives, and counters.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use dataplane::{
    Access, Completion, CompletionQueue, ConnectError, ConnectionConfig, Device, MpaSettings,
    Opcode, PostError, QpInit, QueuePair, RemoteAddr, Status, Transport,
};

const T: Duration = Duration::from_secs(10);

struct End {
    dev: Device,
    init: QpInit,
}

fn end() -> End {
    let dev = Device::open(Transport::Kernel).unwrap();
    let init = QpInit {
        pd: dev.alloc_pd(),
        send_cq: dev.create_cq(),
        recv_cq: dev.create_cq(),
    };
    End { dev, init }
}

fn wait(cq: &CompletionQueue) -> Completion {
    cq.wait(T).expect("completion")
}

/// A connected pair: (client, server) with their queue pairs.
fn pair(cfg: &ConnectionConfig, server_pd: &[u8]) -> (End, QueuePair, End, QueuePair) {
    let (c, s) = (end(), end());
    let l = s
        .dev
        .listen("127.0.0.1:0".parse().unwrap(), cfg.clone())
        .unwrap();
    let addr = l.local_addr();
    let sinit = s.init.clone();
    let spd = server_pd.to_vec();
    let t = std::thread::spawn(move || {
        let inc = l.accept_timeout(T).unwrap();
        assert_eq!(inc.private_data(), b"from the initiator");
        inc.accept(sinit, &spd).unwrap()
    });
    let cq = c
        .dev
        .connect(addr, c.init.clone(), cfg, b"from the initiator")
        .unwrap();
    let sq = t.join().unwrap();
    (c, cq, s, sq)
}

#[test]
fn private_data_travels_both_ways() {
    let (_c, cq, _s, sq) = pair(&ConnectionConfig::default(), b"from the responder");
    assert_eq!(cq.peer_private_data(), b"from the responder");
    assert_eq!(sq.peer_private_data(), b"from the initiator");
}

// MPA-80, MPA-83: a reject sends R=1, the initiator gets the Reply's private data, and the
// responder's TCP stream stays open (handed back).
#[test]
fn reject_reports_private_data_and_leaves_tcp_open() {
    let (c, s) = (end(), end());
    let l = s
        .dev
        .listen("127.0.0.1:0".parse().unwrap(), ConnectionConfig::default())
        .unwrap();
    let addr: SocketAddr = l.local_addr();
    let t = std::thread::spawn(move || {
        let inc = l.accept_timeout(T).unwrap();
        let mut stream = inc
            .reject(b"go away")
            .unwrap()
            .expect("kernel: the stream comes back");
        // TCP is still open: the stream can still be written to.
        stream.write_all(b"x").is_ok()
    });
    match c
        .dev
        .connect(addr, c.init.clone(), &ConnectionConfig::default(), b"hello")
    {
        Err(ConnectError::Rejected { private_data }) => assert_eq!(private_data, b"go away"),
        other => panic!("expected a reject, got {other:?}"),
    }
    assert!(t.join().unwrap());
    assert_eq!(s.dev.counters().startup_rejected, 1);
}

// MPA-102: ends configured for different revisions do not connect.
#[test]
fn revision_mismatch_fails_startup() {
    let (c, s) = (end(), end());
    let draft = ConnectionConfig::default().with_mpa(MpaSettings::strict_draft());
    let l = s.dev.listen("127.0.0.1:0".parse().unwrap(), draft).unwrap();
    let r = c.dev.connect(
        l.local_addr(),
        c.init.clone(),
        &ConnectionConfig::default(),
        &[],
    );
    assert!(matches!(r, Err(ConnectError::Startup(_))), "{r:?}");
}

// Revision 0 (the draft) on both ends works.
#[test]
fn draft_revision_zero_connects_and_sends() {
    let draft = ConnectionConfig::default().with_mpa(MpaSettings::strict_draft());
    let (c, cq, s, sq) = pair(&draft, b"r0");
    let src = c
        .init
        .pd
        .register_from(b"rev zero", Access::default())
        .unwrap();
    let dst = s.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
    sq.post_recv(7, &dst, 0..64).unwrap();
    cq.post_send(8, &src, 0..8).unwrap();
    let r = wait(&s.init.recv_cq);
    assert_eq!(
        (r.wr_id, r.opcode, r.status, r.byte_len),
        (7, Opcode::Recv, Status::Success, 8)
    );
    let mut got = [0u8; 8];
    dst.read(0, &mut got).unwrap();
    assert_eq!(&got, b"rev zero");
}

// Private data above the limit is refused before anything is sent.
#[test]
fn private_data_over_limit_is_refused_locally() {
    let c = end();
    let r = c.dev.connect(
        "127.0.0.1:9".parse().unwrap(),
        c.init.clone(),
        &ConnectionConfig::default(),
        &[0; 513],
    );
    assert!(matches!(r, Err(ConnectError::Usage(_))), "{r:?}");
}

#[test]
fn connect_to_a_closed_port_is_an_io_error() {
    let c = end();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let r = c
        .dev
        .connect(addr, c.init.clone(), &ConnectionConfig::default(), &[]);
    assert!(matches!(r, Err(ConnectError::Io(_))), "{r:?}");
}

// A Transport::Xdp device is refused clearly until that transport exists.
#[test]
fn xdp_transport_is_reported_unavailable() {
    assert!(Device::open(Transport::Xdp).is_err());
}

#[test]
fn send_variants_zero_length_and_write_read() {
    let (c, cq, s, sq) = pair(&ConnectionConfig::default(), &[]);
    let src = c
        .init
        .pd
        .register_from(&[0xabu8; 5000], Access::ALL)
        .unwrap();
    let dst = s.init.pd.register(8192, Access::ALL).unwrap();
    for i in 0..3 {
        sq.post_recv(i, &dst, 0..8192).unwrap();
    }
    // Zero-length Send: consumes a receive, completes with 0 bytes.
    cq.post_send(1, &src, 0..0).unwrap();
    let r = wait(&s.init.recv_cq);
    assert_eq!((r.status, r.byte_len), (Status::Success, 0));
    // Send with Solicited Event.
    cq.post_send_with(2, &src, 0..10, true, None).unwrap();
    let r = wait(&s.init.recv_cq);
    assert!(r.solicited && r.byte_len == 10);
    // Send with Invalidate of a server STag: the receive reports it.
    let victim = s.init.pd.register(16, Access::ALL).unwrap();
    cq.post_send_with(3, &src, 0..4, false, Some(victim.stag()))
        .unwrap();
    let r = wait(&s.init.recv_cq);
    assert_eq!(r.invalidated, Some(victim.stag()));
    for _ in 0..3 {
        assert!(wait(&c.init.send_cq).is_ok());
    }
    // RDMA Write then Read back, and a zero-length Write.
    let remote = RemoteAddr {
        stag: dst.stag(),
        to: 100,
    };
    cq.post_write(4, &src, 0..5000, remote).unwrap();
    cq.post_write(5, &src, 0..0, remote).unwrap();
    let back = c.init.pd.register(5000, Access::LOCAL_WRITE).unwrap();
    cq.post_read(6, &back, 0..5000, remote).unwrap();
    let ops: Vec<_> = (0..3).map(|_| wait(&c.init.send_cq)).collect();
    assert!(ops.iter().all(Completion::is_ok), "{ops:?}");
    assert_eq!(ops[2].opcode, Opcode::Read);
    assert!(back.read_vec(0, 5000).unwrap().iter().all(|x| *x == 0xab));
}

#[test]
fn post_refusals_come_back_at_once() {
    let (c, cq, s, _sq) = pair(&ConnectionConfig::default(), &[]);
    let mine = c.init.pd.register(100, Access::ALL).unwrap();
    let theirs = s.init.pd.register(100, Access::ALL).unwrap();
    assert_eq!(cq.post_send(1, &mine, 0..101), Err(PostError::LocalBounds));
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = 50..10;
    assert_eq!(
        cq.post_send(1, &mine, backwards),
        Err(PostError::LocalBounds)
    );
    assert_eq!(
        cq.post_send(1, &theirs, 0..10),
        Err(PostError::ForeignRegion)
    );
    // A receive into a region without local write access is refused, saying which right.
    let ro = c.init.pd.register(100, Access::REMOTE_READ).unwrap();
    assert_eq!(cq.post_recv(1, &ro, 0..100), Err(PostError::Access));
}

// DDP-73, DDP-69: when one side closes, the other's outstanding receives complete as flushed
// and its queue pair reports the half-closed peer; a receive posted then flushes at once; its
// own close then ends the connection.
#[test]
fn close_flushes_the_peers_receives() {
    let (_c, cq, s, sq) = pair(&ConnectionConfig::default(), &[]);
    let dst = s.init.pd.register(64, Access::LOCAL_WRITE).unwrap();
    sq.post_recv(42, &dst, 0..64).unwrap();
    cq.close();
    let r = wait(&s.init.recv_cq);
    assert_eq!((r.wr_id, r.status), (42, Status::Flushed));
    assert!(!sq.is_connected());
    assert!(sq.is_peer_closed());
    sq.post_recv(1, &dst, 0..64).unwrap();
    let r = wait(&s.init.recv_cq);
    assert_eq!((r.wr_id, r.status), (1, Status::Flushed));
    assert_eq!(sq.error(), None);
    sq.close();
}

#[test]
fn counters_count_connections_and_bytes() {
    let (c, _cq, s, _sq) = pair(&ConnectionConfig::default(), &[]);
    assert_eq!(s.dev.counters().tcp_accepted, 1);
    assert_eq!(s.dev.counters().mpa_established, 1);
    assert_eq!(c.dev.counters().mpa_established, 1);
    assert!(c.dev.counters().tx_bytes >= 20, "the Request went out");
}

// A stalled startup does not hold up other connections to the same listener.
#[test]
fn stalled_startup_does_not_block_the_listener() {
    let s = end();
    let l = s
        .dev
        .listen("127.0.0.1:0".parse().unwrap(), ConnectionConfig::default())
        .unwrap();
    let addr = l.local_addr();
    let mut stalled = std::net::TcpStream::connect(addr).unwrap();
    stalled.write_all(b"MPA ID Req").unwrap();
    let c = end();
    let sinit = s.init.clone();
    let t = std::thread::spawn(move || l.accept_timeout(T).unwrap().accept(sinit, &[]).unwrap());
    let _cq = c
        .dev
        .connect(addr, c.init.clone(), &ConnectionConfig::default(), &[])
        .unwrap();
    let _sq = t.join().unwrap();
    let mut b = [0u8; 1];
    stalled
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    assert!(
        stalled.read(&mut b).is_err(),
        "the stalled peer got nothing yet"
    );
}

// A file-backed region (what the block store serves): a peer's RDMA Write lands in the file.
#[test]
fn rdma_write_into_a_file_backed_region_reaches_the_file() {
    let path = std::env::temp_dir().join(format!("xwarp-api-store-{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.set_len(1 << 16).unwrap();
    let (c, cq, s, sq) = pair(&ConnectionConfig::default(), &[]);
    let store = s.init.pd.register_file(&f, 1 << 16, Access::ALL).unwrap();
    let src = c
        .init
        .pd
        .register_from(b"persisted by RDMA", Access::default())
        .unwrap();
    cq.post_write(
        1,
        &src,
        0..17,
        RemoteAddr {
            stag: store.stag(),
            to: 1000,
        },
    )
    .unwrap();
    assert!(wait(&c.init.send_cq).is_ok());
    // The Write completes at the sender when written to TCP; a Send after it is delivered only
    // after the Write was placed (RDMAP ordering), so wait for one.
    let dst = s.init.pd.register(8, Access::LOCAL_WRITE).unwrap();
    sq.post_recv(2, &dst, 0..8).unwrap();
    cq.post_send(3, &src, 0..1).unwrap();
    assert!(wait(&s.init.recv_cq).is_ok());
    store.sync().unwrap();
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(&on_disk[1000..1017], b"persisted by RDMA");
    let _ = std::fs::remove_file(&path);
}

// MPA-92: an initiator whose peer never answers gives up after the startup timeout.
#[test]
fn silent_responder_times_out() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let _hold = std::thread::spawn(move || {
        l.accept().map(|(s, _)| {
            std::thread::sleep(Duration::from_secs(5));
            drop(s)
        })
    });
    let c = end();
    let cfg = ConnectionConfig::default().with_mpa(MpaSettings {
        timeout: Duration::from_millis(300),
        ..MpaSettings::default()
    });
    let r = c.dev.connect(addr, c.init.clone(), &cfg, &[]);
    assert!(
        matches!(r, Err(ConnectError::Startup(mpa::StartupError::Timeout))),
        "{r:?}"
    );
    assert_eq!(c.dev.counters().startup_timeouts, 1);
}
