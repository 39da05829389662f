//! The store over ONC RPC on plain TCP on kernel sockets, in process:
//! a plain Linux TCP client written here from RFC 5531 and the program's XDR by hand (not
//! with the crate's encoders) reads and writes the store the RPC-over-RDMA service serves;
//! the xwarp client (`TcpStoreClient`) over kernel TCP; refusals, bounds and counters.

mod store_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use dataplane::Access;
use rpcrdma::storage::StoreStatus;
use store_support::{pattern, server, TempFile};
use xwarpd::oncrpc::{TcpClientOptions, TcpServerOptions, TcpStoreClient, TcpStoreServer};
use xwarpd::store::{AllowList, ClientOptions, StoreClient, StoreError, StoreServer};

const PROG: u32 = 0x2000_5857;

/// The TCP service beside an RPC-over-RDMA one, on the same store.
fn both(f: &TempFile, opts: TcpServerOptions) -> (dataplane::Device, StoreServer, TcpStoreServer) {
    let (dev, rdma) = server(f, 16 << 20);
    let tcp =
        TcpStoreServer::start_kernel("127.0.0.1:0".parse().unwrap(), rdma.shared(), opts).unwrap();
    (dev, rdma, tcp)
}

fn any_client() -> TcpServerOptions {
    TcpServerOptions {
        allow: AllowList::any(),
        ..TcpServerOptions::default()
    }
}

/// A Linux TCP client speaking ONC RPC by hand: XDR words, AUTH_SYS credentials, record
/// marks (calls split into two fragments on purpose).
struct LinuxClient {
    s: TcpStream,
    xid: u32,
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|w| w.to_be_bytes()).collect()
}

impl LinuxClient {
    fn connect(addr: std::net::SocketAddr) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Self { s, xid: 0x5000 }
    }

    /// Sends a call of `proc` with `args` (XDR) as two fragments; returns its XID.
    fn call(&mut self, prog: u32, proc_num: u32, flavor: u32, args: &[u8]) -> u32 {
        self.xid += 1;
        let mut m = words(&[self.xid, 0, 2, prog, 1, proc_num]);
        if flavor == 1 {
            // AUTH_SYS: stamp, machine name "lx" (padded), uid, gid, no groups.
            let body = [words(&[7, 2]), b"lx\0\0".to_vec(), words(&[1000, 100, 0])].concat();
            m.extend(words(&[1, body.len() as u32]));
            m.extend(body);
        } else {
            m.extend(words(&[flavor, 0]));
        }
        m.extend(words(&[0, 0])); // verifier AUTH_NONE
        m.extend_from_slice(args);
        let cut = m.len() / 2;
        let mut wire = (cut as u32).to_be_bytes().to_vec();
        wire.extend_from_slice(&m[..cut]);
        wire.extend((0x8000_0000u32 | (m.len() - cut) as u32).to_be_bytes());
        wire.extend_from_slice(&m[cut..]);
        self.s.write_all(&wire).unwrap();
        self.xid
    }

    /// Reads one reply record (any fragments) and checks its XID; returns it after the XID.
    fn reply(&mut self, xid: u32) -> Vec<u8> {
        let mut rec = Vec::new();
        loop {
            let mut mark = [0u8; 4];
            self.s.read_exact(&mut mark).unwrap();
            let m = u32::from_be_bytes(mark);
            let at = rec.len();
            rec.resize(at + (m & 0x7fff_ffff) as usize, 0);
            self.s.read_exact(&mut rec[at..]).unwrap();
            if m & 0x8000_0000 != 0 {
                break;
            }
        }
        assert_eq!(be(&rec, 0), xid);
        assert_eq!(be(&rec, 4), 1, "a REPLY");
        rec
    }

    /// An accepted SUCCESS reply's results (after the AUTH_NONE verifier).
    fn results(&mut self, xid: u32) -> Vec<u8> {
        let rec = self.reply(xid);
        assert_eq!(
            words(&[0, 0, 0, 0]),
            rec[8..24],
            "accepted, AUTH_NONE verifier, SUCCESS"
        );
        rec[24..].to_vec()
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Vec<u8> {
        let mut a = words(&[(offset >> 32) as u32, offset as u32, 0, data.len() as u32]);
        a.extend_from_slice(data);
        a.resize(a.len().next_multiple_of(4), 0);
        let x = self.call(PROG, 2, 1, &a);
        self.results(x)
    }

    fn read(&mut self, offset: u64, count: u32) -> Vec<u8> {
        let x = self.call(
            PROG,
            1,
            1,
            &words(&[(offset >> 32) as u32, offset as u32, count]),
        );
        self.results(x)
    }
}

fn be(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// A Linux TCP client writes and reads the store over ONC RPC (the option never offered, so
/// nothing annotated, and nothing it would not understand); what the RPC-over-RDMA client
/// wrote reads back over TCP and the other way round.
#[test]
fn linux_tcp_client_reads_and_writes_the_store_shared_with_rpc_rdma() {
    let f = TempFile::new("onc-linux");
    let (_dev, _rdma_srv, tcp) = both(&f, any_client());
    let mut lx = LinuxClient::connect(tcp.local_addr());
    let x = lx.call(PROG, 4, 0, &[]);
    let attr = lx.results(x);
    assert_eq!(be(&attr, 0), 0, "GETATTR OK");
    assert_eq!(
        (u64::from(be(&attr, 4)) << 32) | u64::from(be(&attr, 8)),
        16 << 20
    );
    for (i, n) in [1usize, 3, 4096, 70_001, 1 << 20].into_iter().enumerate() {
        let data = pattern(i as u64 + 40, n);
        let off = 4099 * i as u64 + 1;
        let w = lx.write(off, &data);
        assert_eq!((be(&w, 0), be(&w, 4) as usize), (0, n), "WRITE OK, count");
        let r = lx.read(off, n as u32);
        assert_eq!(be(&r, 0), 0, "READ OK");
        assert_eq!(be(&r, 8) as usize, n);
        assert!(r[12..12 + n] == data[..], "size {n}: data differs");
        assert_eq!(r.len(), 12 + n.next_multiple_of(4));
    }
    // RPC/RDMA writes, TCP reads; TCP writes, RPC/RDMA reads.
    let mut rc = StoreClient::connect(_rdma_srv.local_addr(), &ClientOptions::default()).unwrap();
    let mr = rc.pd().register(8192, Access::ALL).unwrap();
    let a = pattern(90, 8192);
    mr.write(0, &a).unwrap();
    rc.write(8 << 20, &mr, 0..8192).unwrap();
    let r = lx.read(8 << 20, 8192);
    assert!(r[12..12 + 8192] == a[..]);
    let b = pattern(91, 5000);
    lx.write(9 << 20, &b);
    rc.read(9 << 20, &mr, 0..5000).unwrap();
    let mut got = vec![0u8; 5000];
    mr.read(0, &mut got).unwrap();
    assert!(got == b);
    let x = lx.call(PROG, 3, 0, &words(&[0, 0, 0]));
    assert_eq!(be(&lx.results(x), 0), 0, "COMMIT OK");
    // A READ past the end: OUT_OF_RANGE, no data.
    let r = lx.read(17 << 20, 10);
    assert_eq!(r, words(&[StoreStatus::OutOfRange as u32]));
    let st = tcp.stats().snapshot();
    assert_eq!(st.accepted, 1);
    assert_eq!(st.totals.reads, 7);
    assert_eq!(st.totals.writes, 6);
    assert_eq!(st.totals.errors, 1);
}

/// RFC 5531 refusals: another program, another version, an unknown procedure, garbage
/// arguments, an unsupported credential flavor; each answered, the connection kept.
#[test]
fn rpc_level_refusals_are_answered_and_counted() {
    let f = TempFile::new("onc-refuse");
    let (_dev, _r, tcp) = both(&f, any_client());
    let mut lx = LinuxClient::connect(tcp.local_addr());
    let x = lx.call(PROG + 1, 4, 0, &[]);
    assert_eq!(lx.reply(x)[8..24], words(&[0, 0, 0, 1]), "PROG_UNAVAIL");
    let x = lx.call(PROG, 9, 0, &[]);
    assert_eq!(lx.reply(x)[8..24], words(&[0, 0, 0, 3]), "PROC_UNAVAIL");
    let x = lx.call(PROG, 1, 0, &[0, 0]);
    assert_eq!(lx.reply(x)[8..24], words(&[0, 0, 0, 4]), "GARBAGE_ARGS");
    let x = lx.call(PROG, 4, 9, &[]);
    assert_eq!(
        lx.reply(x)[8..],
        words(&[1, 1, 1]),
        "MSG_DENIED, AUTH_ERROR, AUTH_BADCRED"
    );
    let x = lx.call(PROG, 4, 0, &[]);
    assert_eq!(be(&lx.results(x), 0), 0, "still served");
    assert_eq!(tcp.stats().snapshot().totals.refused, 4);
}

/// A record longer than the bound closes the connection before it is read; the allow-list and
/// the connection cap close connections at once; all counted.
#[test]
fn bounds_and_admission() {
    let f = TempFile::new("onc-bounds");
    let opts = TcpServerOptions {
        max_io: 64 << 10,
        max_connections: 1,
        // The cap alone: the one held never gives way, however slowly the test runs.
        silent_after: Duration::MAX,
        ..any_client()
    };
    let (_dev, _r, tcp) = both(&f, opts);
    let mut s = TcpStream::connect(tcp.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Announces 100 MiB: refused from the mark alone.
    s.write_all(&(0x8000_0000u32 | (100 << 20)).to_be_bytes())
        .unwrap();
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap_or(0), 0, "closed");
    wait_for(|| tcp.stats().snapshot().open.is_empty());
    assert_eq!(tcp.stats().snapshot().totals.refused, 1);
    // The cap: one held, the second closed at once.
    let mut one = LinuxClient::connect(tcp.local_addr());
    let x = one.call(PROG, 0, 0, &[]);
    one.results(x);
    let mut two = TcpStream::connect(tcp.local_addr()).unwrap();
    two.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(two.read(&mut b).unwrap_or(0), 0, "over the cap: closed");
    assert_eq!(tcp.stats().snapshot().refused_full, 1);
    // Not in the allow-list.
    let (_d2, r2) = server(&TempFile::new("onc-allow"), 1 << 20);
    let only = TcpServerOptions {
        allow: AllowList::Nets(vec!["198.18.0.0/15".parse().unwrap()]),
        ..TcpServerOptions::default()
    };
    let t2 =
        TcpStoreServer::start_kernel("127.0.0.1:0".parse().unwrap(), r2.shared(), only).unwrap();
    let mut three = TcpStream::connect(t2.local_addr()).unwrap();
    three
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(three.read(&mut b).unwrap_or(0), 0, "not allowed: closed");
    assert_eq!(t2.stats().snapshot().refused_not_allowed, 1);
}

/// No call within the idle timeout: closed and counted.
#[test]
fn idle_connections_are_closed() {
    let f = TempFile::new("onc-idle");
    let opts = TcpServerOptions {
        idle_timeout: Duration::from_millis(300),
        ..any_client()
    };
    let (_dev, _r, tcp) = both(&f, opts);
    let mut s = TcpStream::connect(tcp.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut b = [0u8; 1];
    assert_eq!(s.read(&mut b).unwrap_or(0), 0);
    assert_eq!(tcp.stats().snapshot().idle_closed, 1);
}

/// At the cap, a connection silent for `silent_after` gives way to a new client: it is closed
/// (counted) and the new one served; one that keeps calling does not.
#[test]
fn a_silent_connection_gives_way_at_the_cap() {
    let f = TempFile::new("onc-evict");
    let opts = TcpServerOptions {
        max_connections: 2,
        silent_after: Duration::from_millis(300),
        ..any_client()
    };
    let (_dev, _r, tcp) = both(&f, opts);
    let mut silent = LinuxClient::connect(tcp.local_addr());
    let x = silent.call(PROG, 0, 0, &[]);
    silent.results(x);
    let mut working = LinuxClient::connect(tcp.local_addr());
    // `working` calls every 50 ms while `silent` says nothing for longer than 300 ms.
    for _ in 0..10 {
        let x = working.call(PROG, 0, 0, &[]);
        working.results(x);
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut new = LinuxClient::connect(tcp.local_addr());
    let x = new.call(PROG, 0, 0, &[]);
    new.results(x);
    let x = working.call(PROG, 0, 0, &[]);
    working.results(x);
    let mut b = [0u8; 1];
    assert_eq!(
        silent.s.read(&mut b).unwrap_or(0),
        0,
        "the silent one closed"
    );
    let st = tcp.stats().snapshot();
    assert_eq!((st.evicted, st.refused_full, st.accepted), (1, 0, 3));
    wait_for(|| tcp.stats().snapshot().open.len() == 2);
}

fn wait_for(mut f: impl FnMut() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("condition not reached");
}

/// The xwarp client over kernel TCP: 1 B to 4 MiB written and read back at unaligned offsets,
/// GETATTR, COMMIT, errors as statuses; nothing placed (no option on kernel TCP).
#[test]
fn xwarp_client_over_kernel_tcp_roundtrips() {
    let f = TempFile::new("onc-xwarp");
    let (_dev, _r, tcp) = both(&f, any_client());
    let mut c =
        TcpStoreClient::connect_kernel(tcp.local_addr(), &TcpClientOptions::default()).unwrap();
    assert!(!c.placement());
    let attr = c.getattr().unwrap();
    assert_eq!(attr.size, 16 << 20);
    let mut buf = Vec::new();
    let mut off = 3u64;
    let mut total = 0u64;
    for (i, n) in [1usize, 2, 5, 4095, 65_536, 1 << 20, 4 << 20]
        .into_iter()
        .enumerate()
    {
        let data = pattern(i as u64 + 60, n);
        let w = c.write(off, &data, i % 2 == 0).unwrap();
        assert_eq!((w.count as usize, w.committed), (n, i % 2 == 0));
        let r = c.read(off, &mut buf, n as u32).unwrap();
        assert_eq!(r.len as usize, n);
        assert!(buf[..n] == data[..], "size {n}");
        off += n as u64 + 1001;
        total += n as u64;
    }
    // Short read at the end, eof set.
    let r = c.read((16 << 20) - 10, &mut buf, 100).unwrap();
    assert_eq!((r.len, r.eof), (10, true));
    assert!(matches!(
        c.read(17 << 20, &mut buf, 1),
        Err(StoreError::Status(StoreStatus::OutOfRange))
    ));
    assert!(matches!(
        c.write(16 << 20, &[1], false),
        Err(StoreError::Status(StoreStatus::OutOfRange))
    ));
    c.commit(0, 0).unwrap();
    // Still usable after errors.
    assert_eq!(c.getattr().unwrap().verifier, attr.verifier);
    let k = c.counters();
    assert_eq!(k.bytes_read, total + 10);
    assert_eq!((k.copies_avoided, k.placed_reads), (0, 0));
    let st = tcp.stats().snapshot();
    assert_eq!(st.totals.bytes_written, total);
    assert_eq!(st.totals.bytes_read, total + 10);
}
