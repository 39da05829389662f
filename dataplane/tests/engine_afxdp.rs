//! The real thing: the engine on AF_XDP in one network namespace, the kernel transport (Linux
//! TCP + our MPA/DDP via the verbs API) in the other, over veth. Send and RDMA Write of 1 MiB
//! from the engine, verified byte for byte at the kernel side; RDMA Read of 1 MiB from the
//! kernel's region, verified at the engine.

use ddp::WorkRequest;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use afxdp::{AttachPolicy, BindMode, LocalPortRange, XdpProgram, XskConfig, XskQueue};
use dataplane::engine::{Engine, XskIo};
use dataplane::{Access, ConnectionConfig, Device, QpInit, Transport};
use ddp::{LocalBuf, RegionHandle, RemoteBuf, Stag, WcStatus};
use endpoint::{EndpointConfig, EndpointEvent, QpSettings, Secrets};
use testbed::{for_test, Side};
use testkit::{or_skip, pattern};

fn settings(markers: bool, crc: bool) -> QpSettings {
    let mut s = QpSettings::default();
    s.startup.want_markers = markers;
    s.startup.want_crc = crc;
    s
}

fn buf(region: RegionHandle, len: usize) -> LocalBuf {
    LocalBuf {
        region,
        offset: 0,
        len: len as u32,
    }
}

#[test]
fn afxdp_engine_to_kernel_transport_send_and_write() {
    let Some(tb) = or_skip("eng", for_test("eng")) else {
        return;
    };
    let len = 1 << 20;
    let data = pattern(len, 11);

    // veth hands frames over with the TCP checksum left to "offload" (CHECKSUM_PARTIAL); a
    // bypass receiver sees it unfilled. Have B's kernel compute checksums in software.
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");

    // B: the kernel transport listening.
    let dev = Device::open(Transport::Kernel).unwrap();
    let listener = {
        let _ns = tb.enter(Side::B).unwrap();
        dev.listen(
            SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::B), 4000)),
            ConnectionConfig::default(),
        )
        .unwrap()
    };
    let (stag_tx, stag_rx) = mpsc::channel::<(u32, u32)>();
    let expect = data.clone();
    // The kernel side keeps its queue pair open until the engine is done with it.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let kernel = std::thread::spawn(move || {
        let pd = dev.alloc_pd();
        let cq = dev.create_cq();
        let recv_mr = pd.register(len, Access::LOCAL_WRITE).unwrap();
        let write_mr = pd.register(len, Access::REMOTE_WRITE).unwrap();
        let read_mr = pd.register(len, Access::REMOTE_READ).unwrap();
        read_mr.write(0, &pattern(len, 12)).unwrap();
        stag_tx.send((write_mr.stag(), read_mr.stag())).unwrap();
        let inc = listener.accept_timeout(Duration::from_secs(30)).unwrap();
        let init = QpInit {
            pd: pd.clone(),
            send_cq: cq.clone(),
            recv_cq: cq.clone(),
        };
        let _qp = inc
            .accept_with(init, &[], |qp| qp.post_recv(1, &recv_mr, 0..len))
            .unwrap();
        let wc = cq
            .wait(Duration::from_secs(30))
            .expect("receive completion");
        let mut got = vec![0u8; len];
        recv_mr.read(0, &mut got).unwrap();
        let send_ok = wc.byte_len as usize == len && got == expect;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut write_ok = false;
        while Instant::now() < deadline && !write_ok {
            write_mr.read(0, &mut got).unwrap();
            write_ok = got == expect;
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = done_rx.recv_timeout(Duration::from_secs(60));
        (send_ok, write_ok)
    });

    // A: the engine on AF_XDP.
    let _ns = tb.enter(Side::A).unwrap();
    let ifa = tb.ifname(Side::A).to_string();
    let prog = XdpProgram::attach(&ifa, AttachPolicy::NativeOrGeneric).unwrap();
    prog.steer_range(LocalPortRange::new(40000, 40999).unwrap())
        .unwrap();
    let queue = XskQueue::new(
        &ifa,
        0,
        XskConfig {
            bind_mode: BindMode::Copy,
            ..XskConfig::default()
        },
    )
    .unwrap();
    prog.register_socket(0, queue.fd()).unwrap();
    let secrets = Secrets::fixed_for_tests(1);
    let mut cfg = EndpointConfig::new(tb.mac(Side::A).unwrap(), tb.ip(Side::A), secrets);
    cfg.local_ports = 40000..=40999;
    cfg.default_next_hop = Some(tb.mac(Side::B).unwrap());
    let start = Instant::now();
    let mut e = Engine::new(cfg, XskIo::new(queue), start).expect("valid configuration");
    let (stag, read_stag) = stag_rx.recv().unwrap();
    let (rdst, _) = e.endpoint_mut().register(len, Access::LOCAL_WRITE);
    let conn = e
        .endpoint_mut()
        .connect(
            Instant::now(),
            SocketAddrV4::new(tb.ip(Side::B), 4000),
            settings(false, true),
        )
        .unwrap();
    let (src, _) = e.endpoint_mut().register(len, Access::LOCAL_WRITE);
    e.endpoint_mut()
        .region_mut(src)
        .unwrap()
        .copy_from_slice(&data);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut posted = false;
    let mut done = Vec::new();
    while Instant::now() < deadline && done.len() < 3 {
        e.poll(Instant::now());
        while let Some(ev) = e.endpoint_mut().poll_event() {
            if let EndpointEvent::Established { .. } = ev {
                e.endpoint_mut()
                    .post(
                        conn,
                        WorkRequest::send(1, buf(src, len), Default::default()),
                    )
                    .unwrap();
                e.endpoint_mut()
                    .post(
                        conn,
                        WorkRequest::write(
                            2,
                            buf(src, len),
                            RemoteBuf {
                                stag: Stag(stag),
                                to: 0,
                            },
                        ),
                    )
                    .unwrap();
                e.endpoint_mut()
                    .post(
                        conn,
                        WorkRequest::read(
                            3,
                            buf(rdst, len),
                            RemoteBuf {
                                stag: Stag(read_stag),
                                to: 0,
                            },
                        ),
                    )
                    .unwrap();
                posted = true;
            }
        }
        while let Some((_, wc)) = e.endpoint_mut().poll_completion() {
            done.push(wc);
        }
    }
    let _ = done_tx.send(());
    // Keep the engine running while the kernel side closes its queue pair.
    let close_deadline = Instant::now() + Duration::from_secs(30);
    while !kernel.is_finished() && Instant::now() < close_deadline {
        e.poll(Instant::now());
    }
    assert!(
        posted,
        "MPA startup with the kernel did not finish: {:?}",
        e.endpoint().counters()
    );
    assert!(
        done.len() == 3 && done.iter().all(|w| w.status == WcStatus::Success),
        "{done:?} {:?}",
        e.endpoint().counters()
    );
    assert!(
        e.endpoint().region(rdst).unwrap() == &pattern(len, 12)[..],
        "Read data differs at the engine"
    );
    let (send_ok, write_ok) = kernel.join().unwrap();
    assert!(send_ok, "Send data differs at the kernel side");
    assert!(write_ok, "Write data differs at the kernel side");
    println!("engine counters: {:?}", e.endpoint().counters());
}
