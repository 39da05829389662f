//! Every program of Debian's perftest, rdmacm-utils, ibverbs-utils, qperf and fio starts on our libraries:
//! with them first on the library path (no RPATH, BIND_NOW: every import resolves at load),
//! `PROGRAM --help` (or its usage) never reports a "symbol lookup error" or a missing
//! library. And `xwarp-run --help` explains itself.

mod support;

use std::process::Command;

#[test]
fn every_program_loads_on_our_libraries() {
    let Some(tools) = support::rdma_tools() else {
        return;
    };
    let libs = support::verbs_libs();
    let [lib, ceph] = support::tool_library_dirs(&tools);
    let path = std::env::join_paths([libs, lib, ceph]).expect("library folders");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(tools.join("usr/bin")).unwrap() {
        let p = entry.unwrap().path();
        if !std::fs::read(&p).is_ok_and(|b| b.starts_with(b"\x7fELF")) {
            continue;
        }
        let out = Command::new(&p)
            .arg("--help")
            .env("LD_LIBRARY_PATH", &path)
            .env("LD_BIND_NOW", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run the program");
        let err = String::from_utf8_lossy(&out.stderr);
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !err.contains("symbol lookup error") && !err.contains("error while loading shared"),
            "{name}: {err}"
        );
        assert_ne!(out.status.code(), Some(127), "{name}: {err}");
        checked.push(name);
    }
    assert!(checked.len() >= 30, "{checked:?}");
    for must in [
        "ib_write_bw",
        "ib_read_bw",
        "ib_send_bw",
        "ib_write_lat",
        "ib_send_lat",
        "rping",
        "ibv_devinfo",
    ] {
        assert!(checked.iter().any(|c| c == must), "{must} not checked");
    }
    println!("{} programs load: {}", checked.len(), checked.join(" "));
}

#[test]
fn xwarp_run_explains_itself_and_refuses_bad_use() {
    let run = env!("CARGO_BIN_EXE_xwarp-run");
    let out = Command::new(run).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for word in [
        "--transport kernel",
        "--transport xdp",
        "--interface",
        "Not supported",
    ] {
        assert!(help.contains(word), "{word} missing in:\n{help}");
    }
    let out = Command::new(run)
        .args(["--transport", "rdma", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("kernel or xdp"));
    let out = Command::new(run)
        .args(["--interface", "no-such-if0", "--lib-dir"])
        .arg(support::verbs_libs())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no interface named no-such-if0"));
    let out = Command::new(run).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `ibv_devinfo -v` over xwarp shows one iWARP device for the interface: transport iWARP,
/// port active, link layer Ethernet, its GID the interface's address.
#[test]
fn ibv_devinfo_shows_an_iwarp_device() {
    let Some(tools) = support::rdma_tools() else {
        return;
    };
    let libs = support::verbs_libs();
    let out = Command::new(env!("CARGO_BIN_EXE_xwarp-run"))
        .args(["--interface", "lo", "--lib-dir"])
        .arg(&libs)
        .arg("--")
        .arg(tools.join("usr/bin/ibv_devinfo"))
        .arg("-v")
        .env("LD_LIBRARY_PATH", tools.join("usr/lib/x86_64-linux-gnu"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "hca_id:\txwarp_lo",
        "transport:\t\t\tiWARP (1)",
        "PORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
        "0000:0000:0000:0000:0000:ffff:7f00:0001",
    ] {
        assert!(text.contains(want), "{want:?} missing in:\n{text}");
    }
    println!("{text}");
}
