//! Caller-owned memory and lists, on both transports: a caller-owned buffer (`register_owned`) used for an
//! RDMA Write and an RDMA Read end to end and given back; scatter-gather lists for Send (one
//! message into one scatter-gather receive), Write and Read; chained posts that are refused as
//! a whole; unsignaled requests (no completion unless they fail, and a signaled completion
//! after them means they are done). Kernel transport on loopback; xdp against kernel in a
//! veth testbed, with the xdp device on the active side and then on the passive side.

mod veth_device;
use veth_device::open_xdp;

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::mpsc;
use std::time::Duration;

use dataplane::{
    Access, Completion, CompletionQueue, ConnectionConfig, Device, EngineMode, Listener, Opcode,
    PostError, PostKind, PostListError, QueuePair, RemoteAddr, Sge, Status, Transport, WorkRequest,
};
use testbed::{for_test, Side};
use testkit::{or_skip, pattern};

const T: Duration = Duration::from_secs(30);
/// The caller-owned buffer's length.
const LEN: usize = 64 << 10;
/// The passive side's window: the caller-owned part, then room for the unsignaled Writes.
const WIN: usize = LEN + 8192;
const SEND: usize = 6500;

fn wait(cq: &CompletionQueue, what: &str) -> Completion {
    cq.wait(T)
        .unwrap_or_else(|| panic!("no completion for {what}"))
}

fn wait_ok(cq: &CompletionQueue, what: &str) -> Completion {
    let c = wait(cq, what);
    assert_eq!(c.status, Status::Success, "{what}: {c:?}");
    c
}

fn send() -> PostKind {
    PostKind::Send {
        solicited: false,
        invalidate: None,
    }
}

/// The bytes of `sgl` in list order, copied out of the regions.
fn gathered(sgl: &[Sge<'_>]) -> Vec<u8> {
    let mut v = Vec::new();
    for s in sgl {
        v.extend(s.mr.read_vec(s.offset, s.len).unwrap());
    }
    v
}

/// The passive side: a window of caller-owned memory, a scatter-gather receive for the
/// active side's gathered Send and a plain one for the last Send of its unsignaled chain.
fn passive(dev: Device, listener: Listener, stag: mpsc::Sender<u32>, done: mpsc::Receiver<()>) {
    let (qi, cq) = dev.qp_init();
    let win = qi.pd.register_owned(vec![0u8; WIN], Access::ALL).unwrap();
    let r1 = qi.pd.register(8192, Access::LOCAL_WRITE).unwrap();
    let r2 = qi.pd.register(8192, Access::LOCAL_WRITE).unwrap();
    stag.send(win.stag()).unwrap();
    let scatter = [
        Sge::new(&r1, 0..1000),
        Sge::new(&r2, 100..5100),
        Sge::new(&r1, 2000..2500),
    ];
    let inc = listener.accept_timeout(T).expect("an MPA Request");
    let qp = inc
        .accept_with(qi, b"", |qp| {
            qp.post_list(&[WorkRequest::new(1, PostKind::Recv, &scatter)])
                .map_err(|e| e.error)?;
            qp.post_recv(2, &r2, 6000..8192)
        })
        .unwrap();
    // One Send of the gathered list fills the one scatter-gather receive.
    let c = wait_ok(&cq, "scatter-gather receive");
    assert_eq!((c.wr_id, c.opcode, c.byte_len), (1, Opcode::Recv, 6500));
    let want: Vec<u8> = [
        pattern(3000, 3),
        pattern(3000, 4),
        pattern(3500, 3)[3000..].to_vec(),
    ]
    .concat();
    assert!(gathered(&scatter) == want, "scattered data differs");
    assert_eq!(
        r1.read_vec(1000, 1000).unwrap(),
        vec![0; 1000],
        "gap untouched"
    );
    // The signaled Send that ends the unsignaled chain (not the refused chain's Send).
    let c = wait_ok(&cq, "last receive");
    assert_eq!((c.wr_id, c.byte_len), (2, 96));
    assert_eq!(r2.read_vec(6000, 96).unwrap(), pattern(4096, 4)[4000..]);
    // Polling drives an inline engine: the active side's last Read needs an answer.
    let deadline = std::time::Instant::now() + T;
    while done.try_recv().is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the active side finishes"
        );
        let _ = cq.poll_one();
        std::thread::sleep(Duration::from_micros(100));
    }
    drop(qp);
    let mine = win.into_inner().expect("a caller-owned buffer comes back");
    assert!(
        mine[..LEN] == pattern(LEN, 1),
        "the Write reached the owned buffer"
    );
    let unsignaled = [&pattern(4096, 4)[..1000], &pattern(4096, 3)[..4096]].concat();
    assert!(
        mine[LEN..LEN + 5096] == unsignaled,
        "the unsignaled Writes landed"
    );
    assert!(
        r1.into_inner().is_err(),
        "allocated memory is not the caller's"
    );
}

/// The active side, against the passive side's window `stag`.
fn active(
    dev: &Device,
    qp: &QueuePair,
    cq: &CompletionQueue,
    pd: &dataplane::ProtectionDomain,
    stag: u32,
) {
    let at = |to| RemoteAddr { stag, to };
    // A caller-owned buffer, RDMA Written and RDMA Read back, then given back.
    let out = pd
        .register_owned(pattern(LEN, 1), Access::LOCAL_WRITE)
        .unwrap();
    let back = pd
        .register_owned(vec![0u8; LEN], Access::LOCAL_WRITE)
        .unwrap();
    qp.post_write(1, &out, 0..LEN, at(0)).unwrap();
    assert_eq!(wait_ok(cq, "owned write").opcode, Opcode::Write);
    qp.post_read(2, &back, 0..LEN, at(0)).unwrap();
    assert_eq!(wait_ok(cq, "owned read").byte_len as usize, LEN);
    assert!(
        back.into_inner().unwrap() == pattern(LEN, 1),
        "read back differs"
    );
    assert!(out.into_inner().unwrap() == pattern(LEN, 1));

    // A gathered Send: three pieces of two regions, one message.
    let g1 = pd
        .register_from(&pattern(4096, 3), Access::LOCAL_WRITE)
        .unwrap();
    let g2 = pd
        .register_from(&pattern(4096, 4), Access::LOCAL_WRITE)
        .unwrap();
    let sgl = [
        Sge::new(&g1, 0..3000),
        Sge::new(&g2, 0..3000),
        Sge::new(&g1, 3000..3500),
    ];
    qp.post_list(&[WorkRequest::new(3, send(), &sgl)]).unwrap();
    let c = wait_ok(cq, "gathered send");
    assert_eq!(
        (c.wr_id, c.opcode, c.byte_len as usize),
        (3, Opcode::Send, SEND)
    );

    // A chain with a bad request is refused whole: its good Send never goes out (the passive
    // side's next receive gets the chain below).
    let good = [Sge::new(&g1, 0..10)];
    let bad = [Sge::new(&g1, 0..5000)];
    assert_eq!(
        qp.post_list(&[
            WorkRequest::new(90, send(), &good),
            WorkRequest::new(91, send(), &bad)
        ]),
        Err(PostListError {
            index: 1,
            error: PostError::LocalBounds
        })
    );
    assert_eq!(
        qp.post_list(&[WorkRequest::new(92, send(), &[])]),
        Err(PostListError {
            index: 0,
            error: PostError::SglLength
        })
    );

    // Unsignaled gathered Write, Write, scattered Read, then one signaled Send: one
    // completion, and when it comes the Read's data is in place.
    let s1 = pd.register(3000, Access::LOCAL_WRITE).unwrap();
    let s2 = pd.register(4096, Access::LOCAL_WRITE).unwrap();
    let w1 = [Sge::new(&g2, 0..1000), Sge::new(&g1, 0..1000)];
    let w2 = [Sge::new(&g1, 1000..4096)];
    let sink = [Sge::new(&s1, 0..3000), Sge::new(&s2, 1000..3096)];
    let last = [Sge::new(&g2, 4000..4096)];
    qp.post_list(&[
        WorkRequest::new(10, PostKind::Write(at(LEN as u64)), &w1).unsignaled(),
        WorkRequest::new(11, PostKind::Write(at(LEN as u64 + 2000)), &w2).unsignaled(),
        WorkRequest::new(12, PostKind::Read(at(LEN as u64)), &sink).unsignaled(),
        WorkRequest::new(13, send(), &last),
    ])
    .unwrap();
    let c = wait_ok(cq, "the signaled end of the chain");
    assert_eq!(
        (c.wr_id, c.opcode),
        (13, Opcode::Send),
        "only the signaled one: {c:?}"
    );
    let written = [gathered(&w1), gathered(&w2)].concat();
    assert!(
        gathered(&sink) == written[..5096],
        "the unsignaled Read is done"
    );
    assert!(
        cq.wait(Duration::from_millis(200)).is_none(),
        "no unsignaled completion"
    );

    // An unsignaled request that fails still completes: a Read of an STag the peer never
    // gave makes it terminate the stream, and the Read completes unsuccessfully.
    let bogus = RemoteAddr {
        stag: stag ^ 0x80,
        to: 0,
    };
    qp.post_list(&[
        WorkRequest::new(20, PostKind::Read(bogus), &[Sge::new(&s1, 0..16)]).unsignaled(),
    ])
    .unwrap();
    let c = wait(cq, "failing unsignaled read");
    assert_eq!((c.wr_id, c.opcode), (20, Opcode::Read));
    assert_ne!(c.status, Status::Success, "{c:?}");
    let _ = dev;
}

/// Runs both sides: `b` listens at `addr`, `a` connects; `enter` puts the calling thread in
/// a side's namespace (the kernel transport's sockets live where they are made).
fn run<G>(a: &Device, b: &Device, addr: SocketAddr, enter: impl Fn(bool) -> G) {
    let listener = {
        let _ns = enter(false);
        b.listen(addr, ConnectionConfig::default()).unwrap()
    };
    let (stx, srx) = mpsc::channel();
    let (dtx, drx) = mpsc::channel();
    let b2 = b.clone();
    let server = std::thread::spawn(move || passive(b2, listener, stx, drx));
    let stag = srx.recv_timeout(T).expect("the window's STag");
    let (qi, cq) = a.qp_init();
    let qp = {
        let _ns = enter(true);
        a.connect(addr, qi.clone(), &ConnectionConfig::default(), b"")
            .expect("connect")
    };
    active(a, &qp, &cq, &qi.pd, stag);
    dtx.send(()).unwrap();
    server.join().expect("passive side");
}

#[test]
fn lists_unsignaled_and_owned_memory_on_the_kernel_transport() {
    let a = Device::open(Transport::Kernel).unwrap();
    let b = Device::open(Transport::Kernel).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    run(&a, &b, SocketAddr::from(([127, 0, 0, 1], port)), |_| ());
}

/// The xdp device (side A) is active against a kernel listener, then passive for a kernel
/// client.
fn xdp_against_kernel(tag: &str, mode: EngineMode) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let x = open_xdp(&tb, Side::A, mode);
    let k = Device::open(Transport::Kernel).unwrap();
    let at_b = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::B), 4200));
    run(&x, &k, at_b, |active| {
        tb.enter(if active { Side::A } else { Side::B }).unwrap()
    });
    let at_a = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::A), 4201));
    run(&k, &x, at_a, |active| {
        tb.enter(if active { Side::B } else { Side::A }).unwrap()
    });
}

#[test]
fn lists_unsignaled_and_owned_memory_on_xdp_threaded() {
    xdp_against_kernel("vlt", EngineMode::Threaded);
}

#[test]
fn lists_unsignaled_and_owned_memory_on_xdp_inline() {
    xdp_against_kernel("vli", EngineMode::Inline);
}

/// Two kernel-transport devices and a listener of the second on loopback.
fn loopback() -> (Device, Device, Listener, SocketAddr) {
    let a = Device::open(Transport::Kernel).unwrap();
    let b = Device::open(Transport::Kernel).unwrap();
    let l = b
        .listen("127.0.0.1:0".parse().unwrap(), ConnectionConfig::default())
        .unwrap();
    let addr = l.local_addr();
    (a, b, l, addr)
}

/// Deregistration with lists: deregistering one region of a posted scatter-gather receive
/// flushes the receive; the Send's data lands nowhere, not even in the list's other region.
#[test]
fn deregistering_a_region_of_a_posted_list_flushes_it() {
    let (a, b, l, addr) = loopback();
    let (bi, bcq) = b.qp_init();
    let keep = bi.pd.register(64, Access::LOCAL_WRITE).unwrap();
    let gone = bi.pd.register(64, Access::LOCAL_WRITE).unwrap();
    let server = std::thread::spawn(move || {
        let inc = l.accept_timeout(T).unwrap();
        let list = [Sge::new(&keep, 0..32), Sge::new(&gone, 0..32)];
        let qp = inc
            .accept_with(bi, b"", |qp| {
                qp.post_list(&[WorkRequest::new(5, PostKind::Recv, &list)])
                    .map_err(|e| e.error)
            })
            .unwrap();
        drop(gone);
        (qp, keep)
    });
    let (ai, acq) = a.qp_init();
    let qp = a
        .connect(addr, ai.clone(), &ConnectionConfig::default(), b"")
        .unwrap();
    let (sqp, keep) = server.join().unwrap();
    let src = ai.pd.register_from(&[0xee; 64], Access::default()).unwrap();
    qp.post_send(1, &src, 0..64).unwrap();
    wait_ok(&acq, "send");
    let c = wait(&bcq, "receive on a list with a deregistered region");
    assert_eq!((c.wr_id, c.status), (5, Status::Flushed));
    assert_eq!(keep.read_vec(0, 64).unwrap(), vec![0; 64], "nothing landed");
    drop((qp, sqp));
}

/// A completion queue smaller than the work on it overruns: completions are lost, so the
/// queue reports the overrun and the queue pair fails with `CqOverrun` (verbs' CQ error and
/// QP fatal event), instead of the queue growing.
#[test]
fn an_overrun_completion_queue_fails_its_queue_pair() {
    let (a, b, l, addr) = loopback();
    let server = std::thread::spawn(move || {
        let (bi, _bcq) = b.qp_init();
        let sink = bi.pd.register(64, Access::ALL).unwrap();
        (l.accept_timeout(T).unwrap().accept(bi, b"").unwrap(), sink)
    });
    let (mut ai, _) = a.qp_init();
    let small = a.create_cq_with(4);
    assert_eq!(small.capacity(), 4);
    ai.send_cq = small.clone();
    let qp = a
        .connect(addr, ai.clone(), &ConnectionConfig::default(), b"")
        .unwrap();
    let (_sqp, sink) = server.join().unwrap();
    let src = ai.pd.register(64, Access::default()).unwrap();
    let remote = RemoteAddr {
        stag: sink.stag(),
        to: 0,
    };
    let mut posted = 0;
    for i in 0..10 {
        match qp.post_write(i, &src, 0..64, remote) {
            Ok(()) => posted += 1,
            // The kernel transport completes a Write as soon as TCP takes it: the overrun may
            // have failed the queue pair (and closed it to posts) before the loop ends.
            Err(dataplane::PostError::NotConnected) if i > 4 => break,
            Err(e) => panic!("post {i}: {e:?}"),
        }
    }
    assert!(posted > 4, "{posted} posted: more than the capacity");
    let deadline = std::time::Instant::now() + T;
    while qp.error().is_none() {
        assert!(std::time::Instant::now() < deadline, "no overrun reported");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(qp.error(), Some(dataplane::QpError::CqOverrun));
    assert_eq!(
        small.error(),
        Some(dataplane::CqError::Overrun { capacity: 4 })
    );
    assert_eq!(small.take_events(), 1, "the overrun is an event");
    let mut got = Vec::new();
    assert_eq!(
        small.poll(&mut got, 100),
        4,
        "the queue kept its capacity, no more"
    );
    assert_eq!(
        got.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
}

/// The completion channel with epoll: a solicited-only arm makes the queue's eventfd
/// readable at the solicited Send, not at the plain one before it.
#[test]
fn the_completion_channel_wakes_epoll_on_a_solicited_send() {
    let (a, b, l, addr) = loopback();
    let (bi, bcq) = b.qp_init();
    let sink = bi.pd.register(64, Access::LOCAL_WRITE).unwrap();
    let bi2 = bi.clone();
    let server = std::thread::spawn(move || {
        let inc = l.accept_timeout(T).unwrap();
        let qp = inc
            .accept_with(bi2, b"", |qp| {
                qp.post_recv(1, &sink, 0..32)?;
                qp.post_recv(2, &sink, 32..64)
            })
            .unwrap();
        (qp, sink)
    });
    let (ai, acq) = a.qp_init();
    let qp = a
        .connect(addr, ai.clone(), &ConnectionConfig::default(), b"")
        .unwrap();
    let _sqp = server.join().unwrap();
    use std::os::fd::AsRawFd;
    let fd = bcq.event_fd().unwrap().as_raw_fd();
    // Safety (the test's own descriptors): a fresh epoll instance watching the eventfd.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0);
    let mut ev = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 7,
    };
    // Safety: ep and fd are open; ev is a valid event.
    assert_eq!(
        unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) },
        0
    );
    let wait = |ms| {
        let mut out = [libc::epoll_event { events: 0, u64: 0 }];
        // Safety: out is a valid array of one event.
        unsafe { libc::epoll_wait(ep, out.as_mut_ptr(), 1, ms) }
    };
    bcq.arm(true);
    let src = ai.pd.register_from(&[5u8; 32], Access::default()).unwrap();
    qp.post_send(1, &src, 0..32).unwrap();
    wait_ok(&acq, "plain send");
    assert_eq!(wait(300), 0, "a plain Send fires no solicited-only arm");
    qp.post_send_with(2, &src, 0..32, true, None).unwrap();
    wait_ok(&acq, "solicited send");
    assert_eq!(wait(10_000), 1, "epoll wakes at the solicited Send");
    assert_eq!(bcq.take_events(), 1);
    assert_eq!(wait(0), 0, "taken");
    let mut got = Vec::new();
    assert_eq!(bcq.poll(&mut got, 10), 2);
    assert!(got[1].solicited);
    // Safety: closing the epoll descriptor this test made.
    unsafe { libc::close(ep) };
}
