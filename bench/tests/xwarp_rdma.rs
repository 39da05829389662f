//! `xwarp-rdma` as a program on loopback (no privileges needed): a clean run exits 0, and a
//! corrupted transfer is caught: exit status 1 on both sides.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn run(port: u16, server_extra: &[&str], client_extra: &[&str]) -> (i32, i32, String) {
    let bin = env!("CARGO_BIN_EXE_xwarp-rdma");
    let mut server = Command::new(bin)
        .args([
            "server",
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--connections",
            "1",
        ])
        .args(server_extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().starts_with("listening on"));
    std::thread::spawn(move || for _ in lines.by_ref() {});
    let client = Command::new(bin)
        .args([
            "client",
            "--connect",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args(["--sizes", "1,4K,64K", "--wait-server", "5"])
        .args(client_extra)
        .output()
        .unwrap();
    let s = server.wait().unwrap();
    (
        client.status.code().unwrap_or(-1),
        s.code().unwrap_or(-1),
        String::from_utf8_lossy(&client.stdout).into_owned(),
    )
}

#[test]
fn clean_run_exits_zero() {
    let (c, s, out) = run(18631, &[], &["--markers"]);
    assert_eq!((c, s), (0, 0), "{out}");
    assert_eq!(out.matches("verified").count(), 9 + 1, "{out}");
}

#[test]
fn corrupted_send_and_write_are_caught_by_the_server_and_reported() {
    let (c, s, out) = run(18632, &[], &["--corrupt", "--ops", "send,write"]);
    assert_eq!((c, s), (1, 1), "{out}");
    assert_eq!(out.matches("MISMATCH").count(), 6, "{out}");
}

#[test]
fn corrupted_read_source_is_caught_by_the_client() {
    let (c, s, out) = run(18633, &["--corrupt"], &["--ops", "read"]);
    assert_eq!(c, 1, "{out}");
    assert_eq!(s, 0, "the server saw nothing wrong");
    assert_eq!(out.matches("MISMATCH").count(), 3, "{out}");
}
