//! The verbs model's hand-over on the active side and virtual-address regions: receives posted
//! in `Device::connect_with`'s closure, before the connection exists, take the peer's Sends; a
//! region registered with `register_raw_at` is reached by the peer at TO = its base plus the
//! offset, as verbs applications (which send their peers virtual addresses) expect. Over the
//! kernel transport on loopback (no privileges), and from an xdp device to a kernel one
//! between two namespaces; `Device::finish_closing` returns once the closed connection's FIN
//! reached the peer.

mod veth_device;

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use dataplane::{
    Access, CompletionQueue, ConnectError, ConnectionConfig, Device, EngineMode, Listener, Opcode,
    PostError, QpInit, RemoteAddr, Status, Transport,
};
use testbed::{for_test, Side};
use testkit::or_skip;

const T: Duration = Duration::from_secs(10);

/// Two kernel-transport devices: a client's and a server's.
fn kernel_devices() -> (Device, Device) {
    (
        Device::open(Transport::Kernel).unwrap(),
        Device::open(Transport::Kernel).unwrap(),
    )
}

fn init(dev: &Device) -> (QpInit, CompletionQueue) {
    dev.qp_init()
}

fn ok(cq: &CompletionQueue, what: &str) -> dataplane::Completion {
    let c = cq
        .wait(T)
        .unwrap_or_else(|| panic!("no completion for {what}"));
    assert_eq!(c.status, Status::Success, "{what}: {c:?}");
    c
}

#[test]
fn receives_posted_before_connecting_take_the_peers_sends_and_tos_are_virtual_addresses() {
    let (client, server) = kernel_devices();
    let listener = server
        .listen("127.0.0.1:0".parse().unwrap(), ConnectionConfig::default())
        .unwrap();
    let addr = listener.local_addr();
    hand_over(&client, server, listener, addr, || ());
}

/// The same from an xdp device (threaded engine) in namespace A to a kernel device in B: the
/// early receives wait in the lane's state until TCP is up.
#[test]
fn an_xdp_device_hands_over_early_receives_too() {
    let Some(tb) = or_skip("cwx", for_test("cwx")) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let client = veth_device::open_xdp(&tb, Side::A, EngineMode::Threaded);
    let server = Device::open(Transport::Kernel).unwrap();
    let addr = SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::B), 4110));
    let listener = {
        let _ns = tb.enter(Side::B).unwrap();
        server.listen(addr, ConnectionConfig::default()).unwrap()
    };
    hand_over(&client, server, listener, addr, || {
        tb.enter(Side::A).unwrap()
    });
}

/// `server` accepts on `listener` with a receive posted, RDMA-Writes and Reads the client's
/// region by virtual address, and Sends once the client's first Send arrived; the client
/// posted its receive in `connect_with`'s closure (in the namespace `enter` gives).
fn hand_over<G>(
    client: &Device,
    server: Device,
    listener: Listener,
    addr: SocketAddr,
    enter: impl FnOnce() -> G,
) {
    let (cinit, ccq) = init(client);
    // The application's own memory, named by its address as a verbs application names it.
    let mut memory = vec![0u8; 4096];
    let base = memory.as_mut_ptr() as u64;
    // Safety: `memory` outlives the region (dropped at the end of the test, after `mr`) and
    // is only touched through the region while registered.
    let mr = unsafe {
        cinit
            .pd
            .register_raw_at(memory.as_mut_ptr(), memory.len(), Access::ALL, base)
    }
    .unwrap();
    assert_eq!(mr.base_to(), base);
    let hello = cinit
        .pd
        .register_from(b"hello", Access::LOCAL_WRITE)
        .unwrap();

    let (to_server, from_client) = std::sync::mpsc::channel::<(u32, u64)>();
    let serve = std::thread::spawn(move || {
        let (sinit, scq) = server.qp_init();
        let inbox = sinit.pd.register(64, Access::LOCAL_WRITE).unwrap();
        let data = sinit
            .pd
            .register_from(b"written at VA+100", Access::LOCAL_WRITE)
            .unwrap();
        let sink = sinit.pd.register(8, Access::LOCAL_WRITE).unwrap();
        let qp = listener
            .accept_timeout(T)
            .unwrap()
            .accept_with(sinit, b"", |qp| qp.post_recv(1, &inbox, 0..64))
            .unwrap();
        assert_eq!(ok(&scq, "the client's Send").byte_len, 5);
        let (stag, va) = from_client.recv_timeout(T).unwrap();
        let at = |off: u64| RemoteAddr { stag, to: va + off };
        qp.post_write(2, &data, 0..17, at(100)).unwrap();
        assert_eq!(ok(&scq, "write").opcode, Opcode::Write);
        qp.post_read(3, &sink, 0..8, at(200)).unwrap();
        assert_eq!(ok(&scq, "read").opcode, Opcode::Read);
        assert_eq!(sink.read_vec(0, 8).unwrap(), b"VA + 200");
        qp.post_send(4, &data, 0..3).unwrap();
        assert_eq!(ok(&scq, "send").opcode, Opcode::Send);
        // Wait for the client to have seen it, then for its FIN.
        let _ = from_client.recv_timeout(T);
        let deadline = std::time::Instant::now() + T;
        while !qp.is_peer_closed() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(qp.is_peer_closed(), "the client's close reached the server");
    });

    mr.write(200, b"VA + 200").unwrap();
    let mut ran = 0;
    let qp = {
        let _ns = enter();
        client
            .connect_with(
                addr,
                cinit.clone(),
                &ConnectionConfig::default(),
                b"",
                |qp| {
                    ran += 1;
                    qp.post_recv(10, &mr, 0..64)
                },
            )
            .unwrap()
    };
    assert_eq!(ran, 1);
    qp.post_send(11, &hello, 0..5).unwrap();
    assert_eq!(ok(&ccq, "hello").opcode, Opcode::Send);
    to_server.send((mr.stag(), base)).unwrap();
    let c = ok(&ccq, "the server's Send into the early receive");
    assert_eq!((c.wr_id, c.opcode, c.byte_len), (10, Opcode::Recv, 3));
    assert_eq!(mr.read_vec(0, 3).unwrap(), b"wri");
    assert_eq!(mr.read_vec(100, 17).unwrap(), b"written at VA+100");
    to_server.send((0, 0)).unwrap();
    // Closed, and finished before returning: an xdp device's engine would end with the
    // process (the kernel transport returns at once).
    drop(qp);
    let closing = std::time::Instant::now();
    client.finish_closing(T);
    assert!(
        closing.elapsed() < Duration::from_secs(4),
        "{:?}",
        closing.elapsed()
    );
    serve.join().unwrap();
    drop(mr);
    drop(memory);
}

#[test]
fn a_refusal_in_the_closure_ends_the_attempt() {
    let (client, server) = kernel_devices();
    let listener = server
        .listen("127.0.0.1:0".parse().unwrap(), ConnectionConfig::default())
        .unwrap();
    let (cinit, _cq) = client.qp_init();
    let small = cinit.pd.register(8, Access::LOCAL_WRITE).unwrap();
    let r = client.connect_with(
        listener.local_addr(),
        cinit,
        &ConnectionConfig::default(),
        b"",
        |qp| qp.post_recv(1, &small, 0..16),
    );
    assert!(
        matches!(r, Err(ConnectError::Post(PostError::LocalBounds))),
        "{r:?}"
    );
}

#[test]
fn a_base_whose_offsets_wrap_is_refused() {
    let dev = Device::open(Transport::Kernel).unwrap();
    let pd = dev.alloc_pd();
    let mut memory = vec![0u8; 64];
    // Safety: `memory` outlives the attempt, which registers nothing.
    let r = unsafe { pd.register_raw_at(memory.as_mut_ptr(), 64, Access::ALL, u64::MAX - 10) };
    assert!(matches!(
        r,
        Err(dataplane::RegisterError::TaggedOffsetWraps)
    ));
}
