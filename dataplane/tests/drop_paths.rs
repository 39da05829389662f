//! What every teardown must give back, on the xdp transport against a kernel peer: a
//! connection closed by its peer, a queue pair destroyed, a device dropped. Each cycle opens an
//! xdp device in namespace A and a kernel device in B, connects, moves a Send and an RDMA Write,
//! closes, drops everything; afterwards the process has as many threads and open files as
//! after the first cycle, and A's interface has no XDP program. Once as the passive side with a
//! threaded engine, once as the active side inline.
//!
//! The memory half of the check is LeakSanitizer's: the test command runs this binary under
//! AddressSanitizer, where a block left unreachable by a broken drop path (a reference cycle
//! between a queue pair, its device and its engine, say) fails the process at exit.
//! Needs root: skipped with a message elsewhere, fails under CI=true.

mod veth_device;
use veth_device::open_xdp;

use std::net::{SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use afxdp::program::attached;
use dataplane::{
    Access, CompletionQueue, ConnectionConfig, Device, EngineMode, Opcode, RemoteAddr, Status,
    Transport,
};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;
use testkit::syn_flood::wait_until;

const T: Duration = Duration::from_secs(30);
const LEN: usize = 64 << 10;

/// This process's threads and open files.
fn threads_and_files() -> (usize, usize) {
    let count = |dir: &str| std::fs::read_dir(dir).expect(dir).count();
    (count("/proc/self/task"), count("/proc/self/fd"))
}

fn wait_ok(cq: &CompletionQueue, what: &str) {
    let c = cq
        .wait(T)
        .unwrap_or_else(|| panic!("no completion for {what}"));
    assert_eq!(c.status, Status::Success, "{what}: {c:?}");
}

/// One cycle: the xdp device in A (engine in `mode`) and a kernel device in B; the side in
/// `xdp_connects` connects to the other's listener on `port`; a Send and a Write, then the
/// connecting side closes, the other sees the close and destroys its queue pair, and both
/// devices are dropped.
fn cycle(tb: &VethTestbed, mode: EngineMode, xdp_connects: bool, port: u16) {
    let x = open_xdp(tb, Side::A, mode);
    let k = Device::open(Transport::Kernel).unwrap();
    let (active, passive, passive_side) = if xdp_connects {
        (&x, &k, Side::B)
    } else {
        (&k, &x, Side::A)
    };
    let at = SocketAddr::V4(SocketAddrV4::new(tb.ip(passive_side), port));
    let listener = {
        let _ns = tb.enter(passive_side).unwrap();
        passive.listen(at, ConnectionConfig::default()).unwrap()
    };
    let (pqi, pcq) = passive.qp_init();
    let recv = pqi.pd.register(LEN, Access::LOCAL_WRITE).unwrap();
    let window = pqi.pd.register(LEN, Access::REMOTE_WRITE).unwrap();
    let stag = window.stag();
    let (aqi, acq) = active.qp_init();
    let src = aqi
        .pd
        .register_from(&testkit::pattern(LEN, 3), Access::LOCAL_WRITE)
        .unwrap();
    let pqp = std::thread::scope(|s| {
        let accept = s.spawn(|| {
            let inc = listener.accept_timeout(T).expect("an MPA Request");
            inc.accept_with(pqi.clone(), b"", |qp| qp.post_recv(1, &recv, 0..LEN))
                .expect("accept")
        });
        let aqp = {
            let _ns = tb.enter(passive_side.peer()).unwrap();
            active
                .connect(at, aqi.clone(), &ConnectionConfig::default(), b"")
                .expect("connect")
        };
        let pqp = accept.join().expect("the passive side");
        aqp.post_send(1, &src, 0..LEN).unwrap();
        wait_ok(&acq, "the Send");
        aqp.post_write(2, &src, 0..LEN, RemoteAddr { stag, to: 0 })
            .unwrap();
        wait_ok(&acq, "the Write");
        // Connection close: the active side closes; the passive side sees its peer go.
        aqp.close();
        pqp
    });
    let c = pcq.wait(T).expect("the receive completes");
    assert_eq!((c.opcode, c.status), (Opcode::Recv, Status::Success));
    wait_until(T, "the passive side seeing the close", || {
        pqp.is_peer_closed()
    });
    // Queue pair destroyed. An engine that closed first keeps its end in TIME-WAIT (60 s), which
    // the device's drop ends; one that was closed finishes at once.
    drop(pqp);
    if !xdp_connects {
        wait_until(T, "the engine's connection ending", || {
            x.engine_load().unwrap().connections == 0
        });
    }
    // Devices dropped (the regions, queues and listener first: they hold the devices' parts).
    drop((listener, recv, window, src, pqi, pcq, aqi, acq));
    drop((x, k));
    let _ns = tb.enter(Side::A).unwrap();
    let left = attached(tb.ifname(Side::A)).unwrap();
    assert!(left.is_empty(), "program left attached: {left:?}");
}

/// Threads and files of the process once nothing of a cycle is left (a kernel connection's
/// driver thread ends shortly after its close).
fn settled_at(want: (usize, usize)) -> (usize, usize) {
    let end = Instant::now() + T;
    loop {
        let now = threads_and_files();
        if now == want || Instant::now() >= end {
            return now;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn closing_destroying_and_dropping_give_back_threads_files_and_the_program() {
    let Some(tb) = or_skip("drp", for_test("drp")) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    // The first cycle sets up what stays for the process's life (the test harness's threads,
    // cached netlink and random sources); the others must leave exactly that.
    cycle(&tb, EngineMode::Threaded, false, 4700);
    let base = threads_and_files();
    for (i, (mode, xdp_connects)) in [
        (EngineMode::Threaded, false),
        (EngineMode::Inline, true),
        (EngineMode::Threaded, true),
    ]
    .into_iter()
    .enumerate()
    {
        cycle(&tb, mode, xdp_connects, 4701 + i as u16);
        assert_eq!(
            settled_at(base),
            base,
            "threads and open files after cycle {} ({mode:?}, xdp connects: {xdp_connects}) \
             against after the first",
            i + 2
        );
    }
}
