//! The threads the library starts for itself block every signal, so a signal sent to the
//! process (SIGINT, SIGTERM, a program's SIGALRM) reaches an application thread and interrupts
//! the call it waits in. Threaded kernel-transport devices on loopback (no privileges): the
//! acceptor and both connections' drivers.

use std::time::Duration;

use dataplane::{ConnectionConfig, Device, EngineMode};

/// (name, blocked-signal mask) of each thread of this process whose name starts with "xwarp-".
fn library_threads() -> Vec<(String, u64)> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let name = std::fs::read_to_string(dir.join("comm"))
                .ok()?
                .trim()
                .to_string();
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let mask = status.lines().find(|l| l.starts_with("SigBlk:"))?;
            let mask = u64::from_str_radix(mask.split_whitespace().nth(1)?, 16).ok()?;
            name.starts_with("xwarp-").then_some((name, mask))
        })
        .collect()
}

#[test]
fn acceptor_and_connection_threads_block_process_signals() {
    let t = Duration::from_secs(20);
    let server = Device::open_kernel(EngineMode::Threaded).unwrap();
    let client = Device::open_kernel(EngineMode::Threaded).unwrap();
    let cfg = ConnectionConfig::default();
    let l = server
        .listen("127.0.0.1:0".parse().unwrap(), cfg.clone())
        .unwrap();
    let addr = l.local_addr();
    let (sinit, _scq) = server.qp_init();
    let accepted = std::thread::spawn(move || {
        let qp = l.accept_timeout(t).unwrap().accept(sinit, b"").unwrap();
        (l, qp)
    });
    let (cinit, _ccq) = client.qp_init();
    let _cqp = client.connect(addr, cinit, &cfg, b"").unwrap();
    let (_l, _sqp) = accepted.join().unwrap();

    // Each side's connection driver: the accepting side's may still be starting (seconds at
    // most, under a sanitizer).
    let drivers = |threads: &[(String, u64)]| {
        threads
            .iter()
            .filter(|(n, _)| n.starts_with("xwarp-qp"))
            .count()
    };
    let deadline = std::time::Instant::now() + t;
    let mut threads = library_threads();
    while drivers(&threads) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        threads = library_threads();
    }
    let names: Vec<&str> = threads.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"xwarp-listen"), "{names:?}");
    assert!(drivers(&threads) >= 2, "{names:?}");
    for (name, mask) in &threads {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGALRM, libc::SIGUSR1] {
            assert_ne!(
                mask & (1 << (sig - 1)),
                0,
                "{name} takes signal {sig}: {mask:#x}"
            );
        }
    }
}
