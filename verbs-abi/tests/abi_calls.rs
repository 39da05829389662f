//! The C entry points called directly from Rust (no C program, no loader), so that the test
//! command's AddressSanitizer and LeakSanitizer step covers the library's side of the C ABI:
//! devices, context, protection domain, memory regions, completion channel and queues,
//! rdma_cm event channels and ids, a connection over the kernel transport on loopback with
//! the client on its own thread, RDMA Write, Send and RDMA Read with their completions, a
//! completion event, misuse (a bad lkey: IBV_WC_LOC_PROT_ERR, then IBV_WC_WR_FLUSH_ERR on the
//! errored queue pair; NULL handles refused), rdma_cm events held and acknowledged while their
//! id is destroyed, a disconnect on both sides, and every object
//! destroyed again, so the leak check at exit sees whatever a destroy forgets.

use std::ffi::{c_int, c_void, CStr};
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

use verbs_abi::abi::cm::{
    event, RdmaCmEvent, RdmaCmId, RdmaConnParam, RdmaEventChannel, RDMA_PS_TCP,
};
use verbs_abi::abi::verbs::{
    send_flags, wc_opcode, wc_status, wr_opcode, IbvCompChannel, IbvContext, IbvCq, IbvDevice,
    IbvMr, IbvPd, IbvQp, IbvQpCap, IbvQpInitAttr, IbvRecvWr, IbvSendWr, IbvSge, IbvWc, IBV_QPT_RC,
    IBV_TRANSPORT_IWARP,
};

const ACCESS_ALL: c_int = 1 | 2 | 4; // IBV_ACCESS_LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ
const BUF: usize = 8192;
/// How long any one wait (a completion, a connection event) may take.
const WAIT: Duration = Duration::from_secs(20);

extern "C" {
    fn ibv_get_device_list(num: *mut c_int) -> *mut *mut IbvDevice;
    fn ibv_free_device_list(list: *mut *mut IbvDevice);
    fn ibv_get_device_name(device: *mut IbvDevice) -> *const std::ffi::c_char;
    fn ibv_open_device(device: *mut IbvDevice) -> *mut IbvContext;
    fn ibv_close_device(ctx: *mut IbvContext) -> c_int;
    fn ibv_alloc_pd(ctx: *mut IbvContext) -> *mut IbvPd;
    fn ibv_dealloc_pd(pd: *mut IbvPd) -> c_int;
    fn ibv_reg_mr(pd: *mut IbvPd, addr: *mut c_void, len: usize, access: c_int) -> *mut IbvMr;
    fn ibv_dereg_mr(mr: *mut IbvMr) -> c_int;
    fn ibv_create_comp_channel(ctx: *mut IbvContext) -> *mut IbvCompChannel;
    fn ibv_destroy_comp_channel(ch: *mut IbvCompChannel) -> c_int;
    fn ibv_create_cq(
        ctx: *mut IbvContext,
        cqe: c_int,
        cq_context: *mut c_void,
        channel: *mut IbvCompChannel,
        vector: c_int,
    ) -> *mut IbvCq;
    fn ibv_destroy_cq(cq: *mut IbvCq) -> c_int;
    fn ibv_get_cq_event(
        ch: *mut IbvCompChannel,
        cq: *mut *mut IbvCq,
        ctx: *mut *mut c_void,
    ) -> c_int;
    fn ibv_ack_cq_events(cq: *mut IbvCq, n: u32);
    fn ibv_create_qp(pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> *mut IbvQp;
    fn xwarp_rdma_create_event_channel() -> *mut RdmaEventChannel;
    fn xwarp_rdma_destroy_event_channel(ch: *mut RdmaEventChannel);
    fn xwarp_rdma_get_cm_event(ch: *mut RdmaEventChannel, ev: *mut *mut RdmaCmEvent) -> c_int;
    fn xwarp_rdma_ack_cm_event(ev: *mut RdmaCmEvent) -> c_int;
    fn xwarp_rdma_create_id(
        ch: *mut RdmaEventChannel,
        id: *mut *mut RdmaCmId,
        ctx: *mut c_void,
        ps: c_int,
    ) -> c_int;
    fn xwarp_rdma_destroy_id(id: *mut RdmaCmId) -> c_int;
    fn xwarp_rdma_bind_addr(id: *mut RdmaCmId, sa: *mut libc::sockaddr) -> c_int;
    fn xwarp_rdma_listen(id: *mut RdmaCmId, backlog: c_int) -> c_int;
    fn xwarp_rdma_resolve_addr(
        id: *mut RdmaCmId,
        src: *mut libc::sockaddr,
        dst: *mut libc::sockaddr,
        ms: c_int,
    ) -> c_int;
    fn xwarp_rdma_resolve_route(id: *mut RdmaCmId, ms: c_int) -> c_int;
    fn xwarp_rdma_create_qp(id: *mut RdmaCmId, pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> c_int;
    fn xwarp_rdma_destroy_qp(id: *mut RdmaCmId);
    fn xwarp_rdma_connect(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int;
    fn xwarp_rdma_accept(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int;
    fn xwarp_rdma_disconnect(id: *mut RdmaCmId) -> c_int;
}

/// A raw pointer that may cross to the client thread (the library's objects are thread-safe
/// as libibverbs' are).
struct Shared<T>(T);
// Safety: only pointers to the library's objects, which it serialises itself.
unsafe impl<T> Send for Shared<T> {}

/// One side's verbs objects: protection domain, a region over `buf`, a completion queue on a
/// channel.
struct End {
    pd: *mut IbvPd,
    buf: Vec<u8>,
    mr: *mut IbvMr,
    channel: *mut IbvCompChannel,
    cq: *mut IbvCq,
}

impl End {
    /// Allocates the objects on `ctx`.
    fn new(ctx: *mut IbvContext) -> End {
        // Safety: `ctx` is an open context; every object is checked before use.
        unsafe {
            let pd = ibv_alloc_pd(ctx);
            assert!(!pd.is_null(), "ibv_alloc_pd");
            let mut buf = vec![0u8; BUF];
            let mr = ibv_reg_mr(pd, buf.as_mut_ptr().cast(), BUF, ACCESS_ALL);
            assert!(!mr.is_null(), "ibv_reg_mr");
            assert_eq!((*mr).addr, buf.as_mut_ptr().cast(), "region address");
            let channel = ibv_create_comp_channel(ctx);
            assert!(!channel.is_null(), "ibv_create_comp_channel");
            let cq = ibv_create_cq(ctx, 64, null_mut(), channel, 0);
            assert!(!cq.is_null(), "ibv_create_cq");
            End {
                pd,
                buf,
                mr,
                channel,
                cq,
            }
        }
    }

    /// A queue pair on `id` over this side's domain and queue.
    fn qp(&self, id: *mut RdmaCmId) -> *mut IbvQp {
        let mut attr = qp_attr(self.cq);
        // Safety: `id` is a live id, `attr` valid for the call.
        let rc = unsafe { xwarp_rdma_create_qp(id, self.pd, &mut attr) };
        assert_eq!(rc, 0, "rdma_create_qp");
        // Safety: a live id.
        unsafe { (*id).qp }
    }

    /// The next completion, polled (bounded by [`WAIT`]).
    fn wait_wc(&self) -> IbvWc {
        let deadline = Instant::now() + WAIT;
        let mut wc = IbvWc::default();
        loop {
            // Safety: `cq` is live, `wc` has room for one entry.
            let n = unsafe { poll_cq(self.cq, &mut wc) };
            assert!(n >= 0, "ibv_poll_cq: {n}");
            if n == 1 {
                return wc;
            }
            assert!(Instant::now() < deadline, "no completion in {WAIT:?}");
            std::thread::yield_now();
        }
    }

    /// Deregisters and destroys everything (the queue pair went first).
    fn destroy(self) {
        // Safety: the objects this side made, each destroyed once, users before what they use.
        unsafe {
            assert_eq!(ibv_destroy_cq(self.cq), 0, "ibv_destroy_cq");
            assert_eq!(ibv_destroy_comp_channel(self.channel), 0, "destroy channel");
            assert_eq!(ibv_dereg_mr(self.mr), 0, "ibv_dereg_mr");
            assert_eq!(ibv_dealloc_pd(self.pd), 0, "ibv_dealloc_pd");
        }
        drop(self.buf);
    }
}

fn qp_attr(cq: *mut IbvCq) -> IbvQpInitAttr {
    IbvQpInitAttr {
        qp_context: null_mut(),
        send_cq: cq,
        recv_cq: cq,
        srq: null_mut(),
        cap: IbvQpCap {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: IBV_QPT_RC,
        sq_sig_all: 0,
    }
}

/// `ibv_poll_cq` (an inline function of the header: the context's operation).
unsafe fn poll_cq(cq: *mut IbvCq, wc: *mut IbvWc) -> c_int {
    // Safety: the caller passes a live queue; its context's operations are the library's.
    unsafe { ((*(*cq).context).ops.poll_cq.expect("poll_cq"))(cq, 1, wc) }
}

/// `ibv_post_send` of one work request with one element.
unsafe fn post_send(
    qp: *mut IbvQp,
    wr_id: u64,
    opcode: u32,
    sge: IbvSge,
    remote: Option<(u64, u32)>,
) -> c_int {
    let mut sge = sge;
    let (addr, rkey) = remote.unwrap_or((0, 0));
    let mut wr = IbvSendWr {
        wr_id,
        next: null_mut(),
        sg_list: &mut sge,
        num_sge: 1,
        opcode,
        send_flags: send_flags::SIGNALED,
        imm_data: 0,
        rdma_remote_addr: addr,
        rdma_rkey: rkey,
        wr_rest: [0; 5],
        xrc_remote_srqn: 0,
        bind_mw: [0; 6],
    };
    let mut bad = null_mut();
    // Safety: a live queue pair; `wr` and `sge` outlive the call.
    let rc = unsafe { ((*(*qp).context).ops.post_send.expect("post_send"))(qp, &mut wr, &mut bad) };
    if rc != 0 {
        assert_eq!(
            bad, &mut wr as *mut IbvSendWr,
            "bad_wr names the refused request"
        );
    }
    rc
}

/// `ibv_post_recv` of one receive over `sge`.
unsafe fn post_recv(qp: *mut IbvQp, wr_id: u64, sge: IbvSge) -> c_int {
    let mut sge = sge;
    let mut wr = IbvRecvWr {
        wr_id,
        next: null_mut(),
        sg_list: &mut sge,
        num_sge: 1,
    };
    let mut bad = null_mut();
    // Safety: a live queue pair; `wr` and `sge` outlive the call.
    unsafe { ((*(*qp).context).ops.post_recv.expect("post_recv"))(qp, &mut wr, &mut bad) }
}

fn sge(end: &End, offset: usize, len: u32) -> IbvSge {
    IbvSge {
        addr: end.buf.as_ptr() as u64 + offset as u64,
        length: len,
        // Safety: a live region.
        lkey: unsafe { (*end.mr).lkey },
    }
}

/// The next rdma_cm event on `ch`, which must be `want`; returns its id after acking it.
fn expect_event(ch: *mut RdmaEventChannel, want: c_int) -> *mut RdmaCmId {
    let mut ev = null_mut();
    // Safety: a live channel; the event is read, then acked once.
    unsafe {
        assert_eq!(xwarp_rdma_get_cm_event(ch, &mut ev), 0, "rdma_get_cm_event");
        assert_eq!((*ev).event, want, "event (status {})", (*ev).status);
        let id = (*ev).id;
        assert_eq!(xwarp_rdma_ack_cm_event(ev), 0, "rdma_ack_cm_event");
        id
    }
}

fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// Starts resolving 127.0.0.1:`port` for `id` (ADDR_RESOLVED follows on its channel).
fn resolve_loopback(id: *mut RdmaCmId, port: u16) {
    let mut dst = loopback(port);
    // Safety: a live id; `dst` outlives the call.
    let rc = unsafe {
        xwarp_rdma_resolve_addr(
            id,
            null_mut(),
            (&mut dst as *mut libc::sockaddr_in).cast(),
            1000,
        )
    };
    assert_eq!(rc, 0, "rdma_resolve_addr");
}

/// Devices and the context: listed, named, opened, reported as iWARP, closed, freed.
fn device_and_context() {
    // Safety: the list is freed once; the context closed once.
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        assert!(!list.is_null() && n >= 1, "ibv_get_device_list: {n}");
        let dev = *list;
        let name = CStr::from_ptr(ibv_get_device_name(dev))
            .to_string_lossy()
            .into_owned();
        assert_eq!(name, "xwarp_lo");
        assert_eq!((*dev).transport_type, IBV_TRANSPORT_IWARP);
        let ctx = ibv_open_device(dev);
        assert!(!ctx.is_null(), "ibv_open_device");
        let end = End::new(ctx);
        // A queue pair without rdma_cm, destroyed at once.
        let mut attr = qp_attr(end.cq);
        let qp = ibv_create_qp(end.pd, &mut attr);
        assert!(!qp.is_null(), "ibv_create_qp");
        assert_eq!(verbs_abi_destroy_qp(qp), 0, "ibv_destroy_qp");
        // NULL handles are refused, not followed.
        assert_ne!(ibv_dealloc_pd(null_mut()), 0, "ibv_dealloc_pd(NULL)");
        assert_ne!(ibv_dereg_mr(null_mut()), 0, "ibv_dereg_mr(NULL)");
        end.destroy();
        assert_eq!(ibv_close_device(ctx), 0, "ibv_close_device");
        ibv_free_device_list(list);
    }
}

/// `ibv_destroy_qp`.
unsafe fn verbs_abi_destroy_qp(qp: *mut IbvQp) -> c_int {
    extern "C" {
        fn ibv_destroy_qp(qp: *mut IbvQp) -> c_int;
    }
    // Safety: the caller passes a live queue pair.
    unsafe { ibv_destroy_qp(qp) }
}

/// A connection on loopback: the server here, the client on its own thread; data both ways
/// by Write, Send and Read; a completion event; a bad lkey; disconnect; everything destroyed.
fn connection(port: u16) {
    let server_ch = unsafe { xwarp_rdma_create_event_channel() };
    assert!(!server_ch.is_null(), "rdma_create_event_channel");
    let mut listen_id = null_mut();
    let mut addr = loopback(port);
    // Safety: live channel and id; `addr` outlives the calls.
    unsafe {
        assert_eq!(
            xwarp_rdma_create_id(server_ch, &mut listen_id, null_mut(), RDMA_PS_TCP),
            0
        );
        assert_eq!(
            xwarp_rdma_bind_addr(listen_id, (&mut addr as *mut libc::sockaddr_in).cast()),
            0
        );
        assert_eq!(xwarp_rdma_listen(listen_id, 1), 0, "rdma_listen");
    }

    let (tx, rx) = std::sync::mpsc::channel::<Shared<(u64, u32)>>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let client = std::thread::spawn(move || client(port, rx, done_tx));

    let id = expect_event(server_ch, event::CONNECT_REQUEST);
    // Safety: the request's id is live until destroyed below.
    let mut end = End::new(unsafe { (*id).verbs });
    let qp = end.qp(id);
    // Safety: live queue pair, region and id.
    unsafe {
        assert_eq!(
            post_recv(qp, 7, sge(&end, 4096, 4096)),
            0,
            "post_recv before accept"
        );
        let mut param: RdmaConnParam = std::mem::zeroed();
        param.responder_resources = 1;
        param.initiator_depth = 1;
        assert_eq!(xwarp_rdma_accept(id, &mut param), 0, "rdma_accept");
    }
    expect_event(server_ch, event::ESTABLISHED);
    // The client writes 1 KiB at offset 64, sends 32 B into the receive at 4096 and reads the
    // first 64 B back.
    end.buf[..64].fill(0x5a);
    let base = end.buf.as_ptr() as u64;
    // Armed before the client may send: the Send's completion makes the event.
    // Safety: live queue and channel.
    unsafe {
        let arm = (*(*end.cq).context)
            .ops
            .req_notify_cq
            .expect("req_notify_cq");
        assert_eq!(arm(end.cq, 0), 0, "ibv_req_notify_cq");
        tx.send(Shared((base, (*end.mr).rkey))).unwrap();
        let mut pfd = libc::pollfd {
            fd: (*end.channel).fd,
            events: libc::POLLIN,
            revents: 0,
        };
        assert_eq!(
            libc::poll(&mut pfd, 1, WAIT.as_millis() as c_int),
            1,
            "channel readable"
        );
        let (mut cq, mut cq_ctx) = (null_mut(), null_mut());
        assert_eq!(
            ibv_get_cq_event(end.channel, &mut cq, &mut cq_ctx),
            0,
            "ibv_get_cq_event"
        );
        assert_eq!(cq, end.cq);
        ibv_ack_cq_events(cq, 1);
    }
    let wc = end.wait_wc();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (7, wc_status::SUCCESS, wc_opcode::RECV)
    );
    assert_eq!(wc.byte_len, 32);
    assert_eq!(&end.buf[4096..4128], &[0xa5; 32], "the Send's data");
    assert_eq!(
        &end.buf[64..64 + 1024],
        &[0x33; 1024][..],
        "the Write's data"
    );

    done_rx.recv_timeout(WAIT).expect("the client finished");
    expect_event(server_ch, event::DISCONNECTED);
    client.join().expect("client thread");
    // Safety: each object once, users first.
    unsafe {
        xwarp_rdma_destroy_qp(id);
        assert_eq!(xwarp_rdma_destroy_id(id), 0);
        assert_eq!(xwarp_rdma_destroy_id(listen_id), 0);
        xwarp_rdma_destroy_event_channel(server_ch);
    }
    end.destroy();
}

/// The client: resolves, connects, writes 1 KiB at offset 64 of the server's region, sends 32
/// bytes, reads the server's first 64 bytes back, then a bad lkey errors its queue pair,
/// and it disconnects.
fn client(
    port: u16,
    remote: std::sync::mpsc::Receiver<Shared<(u64, u32)>>,
    done: std::sync::mpsc::Sender<()>,
) {
    // Safety: every object is made, used and destroyed on this thread, in order.
    unsafe {
        let ch = xwarp_rdma_create_event_channel();
        let mut id = null_mut();
        assert_eq!(
            xwarp_rdma_create_id(ch, &mut id, null_mut(), RDMA_PS_TCP),
            0
        );
        resolve_loopback(id, port);
        expect_event(ch, event::ADDR_RESOLVED);
        assert_eq!(xwarp_rdma_resolve_route(id, 1000), 0);
        expect_event(ch, event::ROUTE_RESOLVED);
        let mut end = End::new((*id).verbs);
        let qp = end.qp(id);
        let mut param: RdmaConnParam = std::mem::zeroed();
        param.responder_resources = 1;
        param.initiator_depth = 1;
        param.private_data = null();
        assert_eq!(xwarp_rdma_connect(id, &mut param), 0, "rdma_connect");
        expect_event(ch, event::ESTABLISHED);
        let Shared((base, rkey)) = remote.recv_timeout(WAIT).expect("the server's region");

        end.buf[..1024].fill(0x33);
        end.buf[1024..1056].fill(0xa5);
        let w = post_send(
            qp,
            1,
            wr_opcode::RDMA_WRITE,
            sge(&end, 0, 1024),
            Some((base + 64, rkey)),
        );
        assert_eq!(w, 0, "post RDMA Write");
        assert_eq!(
            post_send(qp, 2, wr_opcode::SEND, sge(&end, 1024, 32), None),
            0,
            "post Send"
        );
        let r = post_send(
            qp,
            3,
            wr_opcode::RDMA_READ,
            sge(&end, 2048, 64),
            Some((base, rkey)),
        );
        assert_eq!(r, 0, "post RDMA Read");
        for (wr_id, opcode) in [
            (1, wc_opcode::RDMA_WRITE),
            (2, wc_opcode::SEND),
            (3, wc_opcode::RDMA_READ),
        ] {
            let wc = end.wait_wc();
            assert_eq!(
                (wc.wr_id, wc.status, wc.opcode),
                (wr_id, wc_status::SUCCESS, opcode)
            );
        }
        assert_eq!(&end.buf[2048..2112], &[0x5a; 64], "the Read's data");

        // Misuse: a bad lkey errors the queue pair; what follows is flushed.
        let mut bad = sge(&end, 0, 64);
        bad.lkey ^= 0xdead_beef;
        assert_eq!(
            post_send(qp, 4, wr_opcode::SEND, bad, None),
            0,
            "posted; fails in completion"
        );
        let wc = end.wait_wc();
        assert_eq!((wc.wr_id, wc.status), (4, wc_status::LOC_PROT_ERR));
        let flushed = post_send(qp, 5, wr_opcode::SEND, sge(&end, 0, 8), None);
        if flushed == 0 {
            let wc = end.wait_wc();
            assert_eq!((wc.wr_id, wc.status), (5, wc_status::WR_FLUSH_ERR));
        }

        assert_eq!(xwarp_rdma_disconnect(id), 0, "rdma_disconnect");
        expect_event(ch, event::DISCONNECTED);
        xwarp_rdma_destroy_qp(id);
        assert_eq!(xwarp_rdma_destroy_id(id), 0);
        xwarp_rdma_destroy_event_channel(ch);
        end.destroy();
        done.send(()).unwrap();
    }
}

/// Events and their acknowledgements, as librdmacm keeps them: `rdma_destroy_id` returns only
/// after the application acknowledged the events about the id it took (a thread handling
/// DISCONNECTED while the main thread tears down relies on it), and an event still queued
/// when its id is destroyed is never handed out.
fn event_acknowledgements() {
    // Safety: each object is live where used and destroyed once; the event is acked once.
    unsafe {
        let ch = xwarp_rdma_create_event_channel();
        let mut id = null_mut();
        assert_eq!(
            xwarp_rdma_create_id(ch, &mut id, null_mut(), RDMA_PS_TCP),
            0
        );
        resolve_loopback(id, 9);
        let mut ev = null_mut();
        assert_eq!(xwarp_rdma_get_cm_event(ch, &mut ev), 0);
        assert_eq!(((*ev).event, (*ev).id), (event::ADDR_RESOLVED, id));
        let held = Shared(ev);
        let acker = std::thread::spawn(move || {
            let held = held;
            std::thread::sleep(Duration::from_millis(200));
            let acked_at = Instant::now();
            assert_eq!(xwarp_rdma_ack_cm_event(held.0), 0);
            acked_at
        });
        assert_eq!(xwarp_rdma_destroy_id(id), 0);
        let destroyed_at = Instant::now();
        let acked_at = acker.join().expect("acker");
        assert!(
            destroyed_at >= acked_at,
            "rdma_destroy_id returned before the event about its id was acknowledged"
        );

        // An event queued, never taken, and its id destroyed: nothing is handed out.
        let mut id = null_mut();
        assert_eq!(
            xwarp_rdma_create_id(ch, &mut id, null_mut(), RDMA_PS_TCP),
            0
        );
        resolve_loopback(id, 9);
        assert_eq!(xwarp_rdma_destroy_id(id), 0);
        let fd = (*ch).fd;
        let flags = libc::fcntl(fd, libc::F_GETFL);
        assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK), 0);
        let mut ev = null_mut();
        assert_eq!(
            xwarp_rdma_get_cm_event(ch, &mut ev),
            -1,
            "an event of a destroyed id"
        );
        assert_eq!(*libc::__errno_location(), libc::EAGAIN);
        xwarp_rdma_destroy_event_channel(ch);
    }
}

#[test]
fn c_entry_points_over_the_kernel_transport() {
    // Safety: set before any thread of the library exists (it reads the environment once).
    std::env::set_var("XWARP_INTERFACE", "lo");
    std::env::remove_var("XWARP_TRANSPORT");
    device_and_context();
    event_acknowledgements();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    connection(port);
}
