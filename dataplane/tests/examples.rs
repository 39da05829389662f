//! The examples under `examples/`, compiled into this test and run: each example's server and
//! client logic (what its `main` calls) against each other, on the kernel transport over
//! loopback and with an AF_XDP client against a kernel server in a veth testbed.

// Each example is its own crate with its own copy of `examples/common`; here they share one
// test crate, so that file is loaded once per example.
#![allow(clippy::duplicate_mod)]

#[allow(dead_code)]
#[path = "../examples/pingpong.rs"]
mod pingpong;
#[allow(dead_code)]
#[path = "../examples/storage_client.rs"]
mod storage_client;
mod veth_device;
#[allow(dead_code)]
#[path = "../examples/write_read.rs"]
mod write_read;

use std::net::{SocketAddr, SocketAddrV4};

use dataplane::{ConnectionConfig, Device, EngineMode, Listener, Transport};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;
use veth_device::open_xdp;

/// Where the examples' client and server run.
struct Pair<'a> {
    client: Device,
    server: Device,
    tb: Option<&'a VethTestbed>,
}

impl Pair<'_> {
    fn kernel() -> Self {
        Pair {
            client: Device::open(Transport::Kernel).unwrap(),
            server: Device::open(Transport::Kernel).unwrap(),
            tb: None,
        }
    }

    /// A listener of the server's, on loopback or on side B of the testbed.
    fn listen(&self, port: u16) -> Listener {
        let addr = match self.tb {
            Some(tb) => SocketAddr::V4(SocketAddrV4::new(tb.ip(Side::B), port)),
            None => "127.0.0.1:0".parse().unwrap(),
        };
        let _ns = self.tb.map(|tb| tb.enter(Side::B).unwrap());
        self.server
            .listen(addr, ConnectionConfig::default())
            .unwrap()
    }

    /// Runs `serve` on a server thread and `client` here (in side A's namespace).
    fn run<S: Send + 'static>(
        &self,
        port: u16,
        serve: impl FnOnce(&Device, &Listener) -> S + Send + 'static,
        client: impl FnOnce(&Device, SocketAddr),
    ) -> S {
        let l = self.listen(port);
        let addr = l.local_addr();
        let dev = self.server.clone();
        let server = std::thread::spawn(move || serve(&dev, &l));
        {
            let _ns = self.tb.map(|tb| tb.enter(Side::A).unwrap());
            client(&self.client, addr);
        }
        server.join().expect("the example's server")
    }
}

fn all_examples(p: &Pair<'_>) {
    let echoed = p.run(
        4300,
        |d, l| pingpong::serve(d, l).unwrap(),
        |d, at| {
            let rtt = pingpong::client(d, at, 200, 100).unwrap();
            assert!(rtt > std::time::Duration::ZERO);
        },
    );
    assert_eq!(echoed, 200);

    let len = 300_000;
    let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
    let expect = data.clone();
    let window = p.run(
        4301,
        move |d, l| write_read::serve(d, l, len).unwrap(),
        |d, at| write_read::client(d, at, data).unwrap(),
    );
    assert!(
        window == expect,
        "the server's window holds what was written"
    );

    let path = std::env::temp_dir().join(format!(
        "xwarp-example-disk-{}-{}",
        std::process::id(),
        p.tb.is_some()
    ));
    let file = path.clone();
    p.run(
        4302,
        move |d, l| storage_client::serve(d, l, &file, 32).unwrap(),
        |d, at| storage_client::client(d, at, 20).unwrap(),
    );
    // The committed blocks are in the file.
    let disk = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    assert_eq!(disk.len(), 32 * storage_client::BLOCK);
    let b7 = &disk[7 * storage_client::BLOCK..8 * storage_client::BLOCK];
    assert!(b7.iter().enumerate().all(|(i, &b)| b == (7 * 31 + i) as u8));
    assert!(disk[20 * storage_client::BLOCK..].iter().all(|&b| b == 0));
}

#[test]
fn examples_run_on_the_kernel_transport() {
    all_examples(&Pair::kernel());
}

#[test]
fn examples_run_with_an_xdp_client() {
    let Some(tb) = or_skip("vex", for_test("vex")) else {
        return;
    };
    tb.tx_checksum_off(Side::B).expect("ethtool -K tx off");
    let p = Pair {
        client: open_xdp(&tb, Side::A, EngineMode::Threaded),
        server: Device::open(Transport::Kernel).unwrap(),
        tb: Some(&tb),
    };
    all_examples(&p);
}
