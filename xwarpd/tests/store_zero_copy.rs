//! The store serves its file with no staging copy: the file itself, mapped shared and
//! registered, is the local buffer of the server's RDMA Writes and Reads.
//!
//! - A WRITE's bytes are in the file (seen by an independent `read(2)` of it) as soon as the
//!   call returns, before any COMMIT; bytes written into the file behind the server's back are
//!   what a chunked READ returns (both directions go through the page cache).
//! - Memory the process locks does not grow by `max_io` per connection: the server registers
//!   no per-connection staging buffer (the old design locked `max_io` bytes per connection, so
//!   with a 128 MiB `max_io` this test failed with it by ~128 MiB).
//!
//! The tests lock a mutex so the locked-memory measurement sees no other test's regions.

mod store_support;

use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use dataplane::Access;
use store_support::{pattern, server_with, TempFile};
use xwarpd::store::{ClientOptions, ServerOptions, StoreClient};

static SERIAL: Mutex<()> = Mutex::new(());

/// `VmLck` of this process in KiB.
fn locked_kib() -> u64 {
    let mut s = String::new();
    std::fs::File::open("/proc/self/status")
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    let line = s.lines().find(|l| l.starts_with("VmLck:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn write_is_in_the_file_before_commit_and_read_serves_the_page_cache() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let f = TempFile::new("visible");
    let (_dev, srv) = server_with(&f, 8 << 20, ServerOptions::default());
    let mut c = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    let buf = c.pd().register(1 << 20, Access::ALL).unwrap();
    // Chunked (1 MiB) and inline (100 B) WRITEs, unstable: no COMMIT, no sync.
    for (off, n, seed) in [(4097u64, 1usize << 20, 3u64), (3 << 20, 100, 4)] {
        let data = pattern(seed, n);
        buf.write(0, &data).unwrap();
        let w = c.write_with(off, &buf, 0..n, false).unwrap();
        assert!(!w.committed);
        let mut got = vec![0u8; n];
        let file = std::fs::File::open(f.path()).unwrap();
        file.read_exact_at(&mut got, off).unwrap();
        assert!(got == data, "{n} B at {off}: not in the file before COMMIT");
    }
    // An independent write of the file is what a chunked READ returns.
    let outside = pattern(9, 300_000);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(f.path())
        .unwrap();
    file.seek(SeekFrom::Start(5 << 20)).unwrap();
    file.write_all(&outside).unwrap();
    let r = c.read(5 << 20, &buf, 0..outside.len()).unwrap();
    assert_eq!(r.len as usize, outside.len());
    let mut got = vec![0u8; outside.len()];
    buf.read(0, &mut got).unwrap();
    assert!(
        got == outside,
        "a READ did not serve the file's current bytes"
    );
    c.commit(0, 0).unwrap();
}

#[test]
fn connections_lock_no_staging_buffer_of_max_io_bytes() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    const MAX_IO: u32 = 128 << 20;
    let f = TempFile::new("locked");
    let opts = ServerOptions {
        max_io: MAX_IO,
        ..ServerOptions::default()
    };
    let (_dev, srv) = server_with(&f, 2 << 20, opts);
    let before = locked_kib();
    let mut clients: Vec<StoreClient> = (0..2)
        .map(|_| StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap())
        .collect();
    let buf = clients[0].pd().register(1 << 20, Access::ALL).unwrap();
    let data = pattern(5, 1 << 20);
    buf.write(0, &data).unwrap();
    for c in &mut clients {
        assert_eq!(c.getattr().unwrap().max_io, MAX_IO);
    }
    // Both connections served calls (a lazily registered staging buffer would exist by now).
    clients[0].write(1, &buf, 0..1 << 20).unwrap();
    let buf1 = clients[1].pd().register(1 << 20, Access::ALL).unwrap();
    let r = clients[1].read(1, &buf1, 0..1 << 20).unwrap();
    assert_eq!(r.len, 1 << 20);
    let mut got = vec![0u8; 1 << 20];
    buf1.read(0, &mut got).unwrap();
    assert!(got == data);
    let grown = locked_kib().saturating_sub(before);
    // Client buffers (2 MiB) and small send/receive buffers only; far below one max_io.
    assert!(
        grown < 16 << 10,
        "locked memory grew by {grown} KiB for 2 connections (max_io {} KiB)",
        MAX_IO >> 10
    );
}
