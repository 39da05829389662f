//! The C API from a C program (`tests/c/checks.c`, compiled against the rdma-core headers and
//! linked with our libraries), over the kernel transport on loopback:
//! - misuse gets the error or completion status libibverbs documents, and nothing else
//!   breaks: unsupported requests (UD, SRQ, atomics, immediate data, inline data on a queue
//!   pair without max_inline_data, multicast), a bad lkey (IBV_WC_LOC_PROT_ERR, the queue
//!   pair in ERR), posts on the errored queue pair (IBV_WC_WR_FLUSH_ERR), the peer's view of
//!   it, a region deregistered while a receive is posted on it; inline data copied at post
//!   time, and too much of it refused;
//! - rdma_cm on MPA: private data raw both ways, IRD/ORD of the Request, a rejection with its
//!   private data, a refused connection (REJECTED, -ECONNREFUSED), DISCONNECTED on both sides.
//!
//! And an unknown device name makes perftest and ibv_devinfo fail cleanly.

mod support;

use std::process::Command;

/// Compiles `tests/c/checks.c` and runs `checks MODE PORT`; asserts it passed.
fn c_checks(mode: &str) {
    let Some(tools) = support::rdma_tools() else {
        return;
    };
    let libs = support::verbs_libs();
    let dir = support::TempDir::new(&format!("checks-{mode}"));
    let exe = dir.0.join("checks");
    let cc = Command::new("cc")
        .arg("-I")
        .arg(tools.join("usr/include"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/checks.c"))
        .arg("-o")
        .arg(&exe)
        .arg("-L")
        .arg(&libs)
        .args(["-l:libibverbs.so.1", "-l:librdmacm.so.1"])
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new("timeout")
        .arg("120")
        .arg(&exe)
        .arg(mode)
        .arg(port.to_string())
        .env("LD_LIBRARY_PATH", &libs)
        .env("XWARP_INTERFACE", "lo")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "checks {mode} exited {:?}",
        out.status
    );
    assert!(text.contains("all checks passed"));
}

#[test]
fn misuse_gets_the_documented_errors_and_statuses() {
    c_checks("misuse");
}

#[test]
fn rdma_cm_events_and_private_data_as_linux_gives_them() {
    c_checks("cm");
}

#[test]
fn an_unknown_device_name_fails_cleanly() {
    let Some(tools) = support::rdma_tools() else {
        return;
    };
    let libs = support::verbs_libs();
    for (program, args) in [
        ("ibv_devinfo", &["-d", "no_such_device"][..]),
        ("ib_write_bw", &["-d", "no_such_device", "-R"][..]),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_xwarp-run"))
            .args(["--interface", "lo", "--lib-dir"])
            .arg(&libs)
            .arg("--")
            .arg(tools.join("usr/bin").join(program))
            .args(args)
            .env("LD_LIBRARY_PATH", tools.join("usr/lib/x86_64-linux-gnu"))
            .output()
            .unwrap();
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        println!(
            "{program} {}: exit {:?}\n{all}",
            args.join(" "),
            out.status.code()
        );
        // A clean failure: an exit status (no signal), a message naming the device.
        assert!(
            matches!(out.status.code(), Some(c) if c != 0),
            "{program}: {all}"
        );
        assert!(all.contains("no_such_device"), "{program}: {all}");
    }
}
