//! Threaded mode: each engine on its own thread (real time), the application talking to it
//! through the SPSC rings only.

mod engine_support;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use dataplane::engine::{mem_link, ConnId, Engine, EngineEvent, ThreadedEngine};
use ddp::{Access, RemoteBuf, WcOpcode, WcStatus};
use engine_support::*;

fn wait_event(e: &mut ThreadedEngine, f: impl Fn(&EngineEvent) -> Option<ConnId>) -> ConnId {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(ev) = e.poll_event() {
            if let Some(c) = f(&ev) {
                return c;
            }
        }
        std::thread::yield_now();
    }
    panic!("no such event within 30 s");
}

#[test]
fn threaded_engines_write_and_send_verified() {
    let base = Instant::now();
    let (pa, pb) = mem_link(base, link(), link(), 3).unwrap();
    let a = Engine::new(engine_cfg(MAC_A, IP_A, MAC_B, Default::default()), pa, base);
    let b = Engine::new(engine_cfg(MAC_B, IP_B, MAC_A, Default::default()), pb, base);
    let cores = core_affinity::get_core_ids().map_or(0, |c| c.len());
    let pin = |i: usize| (cores > i).then_some(i);
    let mut a = ThreadedEngine::spawn(a, pin(0));
    let mut b = ThreadedEngine::spawn(b, pin(1));
    b.call(|e, _| e.listen(4000, settings(true, true)).unwrap());
    let ca = a.call(|e, now| {
        e.connect(now, SocketAddrV4::new(IP_B, 4000), settings(true, true))
            .unwrap()
    });
    let cb = wait_event(&mut b, |ev| match ev {
        EngineEvent::Accepted { conn, .. } => Some(*conn),
        _ => None,
    });
    let len = 1 << 20;
    let (dst, _) = b.call(move |e, _| e.register(len, Access::LOCAL_WRITE));
    b.call(move |e, _| e.post_recv(cb, 1, buf(dst, len)).unwrap());
    wait_event(&mut a, |ev| match ev {
        EngineEvent::Established { conn, .. } => Some(*conn),
        _ => None,
    });
    let data = pattern(len, 42);
    let d2 = data.clone();
    let src = a.call(move |e, _| {
        let (h, _) = e.register(len, Access::LOCAL_WRITE);
        e.region_mut(h).unwrap().copy_from_slice(&d2);
        h
    });
    a.call(move |e, _| {
        e.post_send(ca, 2, buf(src, len), Default::default())
            .unwrap()
    });
    let (wdst, stag) = b.call(move |e, _| e.register(len, Access::REMOTE_WRITE));
    a.call(move |e, _| {
        e.post_write(ca, 3, buf(src, len), RemoteBuf { stag, to: 0 })
            .unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut done_a = Vec::new();
    let mut done_b = Vec::new();
    while (done_a.len() < 2 || done_b.is_empty()) && Instant::now() < deadline {
        if let Some((_, w)) = a.poll_completion() {
            done_a.push(w);
        }
        if let Some((_, w)) = b.poll_completion() {
            done_b.push(w);
        }
        std::thread::yield_now();
    }
    assert!(done_a.iter().all(|w| w.status == WcStatus::Success) && done_a.len() == 2);
    assert_eq!(done_b[0].opcode, WcOpcode::Recv);
    assert_eq!(done_b[0].byte_len as usize, len);
    let got = b.call(move |e, _| e.region(dst).unwrap().to_vec());
    assert!(got == data, "Send data differs");
    let got = b.call(move |e, _| e.region(wdst).unwrap().to_vec());
    assert!(got == data, "Write data differs");
}
