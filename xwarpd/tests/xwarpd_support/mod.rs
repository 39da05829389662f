//! Running the xwarpd binary in tests: a daemon process (killed on drop) with its ready line,
//! signals and exit; temporary files; reading samples out of Prometheus text.
#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_xwarpd");

/// A temporary file path, removed on drop.
pub use testkit::TempPath as Tmp;

/// A running daemon; killed on drop if the test did not stop it. Its stderr (the log) goes to
/// a file, so a chatty daemon never blocks on a full pipe.
pub struct Daemon {
    child: Option<Child>,
    stdout: BufReader<ChildStdout>,
    log: Tmp,
    /// The `xwarpd ready ...` line.
    pub ready: String,
}

static NEXT_LOG: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Daemon {
    /// Starts xwarpd with `args`.
    pub fn start(args: &[&str]) -> Daemon {
        let mut c = Command::new(BIN);
        c.args(args);
        Self::spawn(c)
    }

    /// Spawns `cmd` (xwarpd, perhaps behind `ip netns exec`) and waits for its ready line.
    pub fn spawn(mut cmd: Command) -> Daemon {
        let n = NEXT_LOG.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = Tmp::new(&format!("daemon-{n}.log"));
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(File::create(log.path()).expect("log file"))
            .spawn()
            .expect("spawn xwarpd");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ready = String::new();
        stdout.read_line(&mut ready).unwrap();
        if !ready.starts_with("xwarpd ready") {
            let _ = child.kill();
            let _ = child.wait();
            let e = std::fs::read_to_string(log.path()).unwrap_or_default();
            panic!("xwarpd did not start: {ready:?}\n{e}");
        }
        Daemon {
            child: Some(child),
            stdout,
            log,
            ready,
        }
    }

    /// The value of `key=` in the ready line.
    pub fn field(&self, key: &str) -> String {
        self.ready
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} missing in {:?}", self.ready))
            .to_string()
    }

    /// The daemon's process id (`ip netns exec` execs it, so this is xwarpd itself).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// The daemon's resident set (VmRSS), in octets.
    pub fn rss(&self) -> u64 {
        testkit::syn_flood::rss(Some(self.pid()))
    }

    /// Whether the daemon is still running (has not exited).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    pub fn signal(&mut self, sig: i32) {
        let pid = self.child.as_ref().unwrap().id() as i32;
        // Safety: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// Waits for exit (at most `t`); returns status, rest of stdout, the log.
    pub fn wait(mut self, t: Duration) -> (std::process::ExitStatus, String, String) {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + t;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("xwarpd did not exit within {t:?}\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        let _ = self.stdout.read_to_string(&mut out);
        (status, out, self.log())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A two-namespace testbed for xwarpd on the xdp transport in A: B's kernel fills its own TCP
/// checksums (veth leaves them to "offload", which an AF_XDP receiver would see unfilled and
/// count malformed) and, as `deploy/host-setup` does, A's engine ports are reserved from A's
/// kernel. `None` when the test is skipped (not root, outside CI).
pub fn xdp_testbed(tag: &str) -> Option<testbed::VethTestbed> {
    xdp_testbed_with_queues(tag, 1)
}

/// [`xdp_testbed`] with `queues` receive and transmit queues on each veth end.
pub fn xdp_testbed_with_queues(tag: &str, queues: u32) -> Option<testbed::VethTestbed> {
    use testbed::{available, Side, VethTestbed};
    let tb = testkit::or_skip(
        tag,
        available().map(|()| {
            VethTestbed::create_with_queues(tag, queues).expect("create the veth testbed")
        }),
    )?;
    let ifb = tb.ifname(Side::B).to_string();
    let out = tb
        .exec(Side::B, &["ethtool", "-K", &ifb, "tx", "off"])
        .expect("run ethtool");
    assert!(out.status.success(), "ethtool -K {ifb} tx off: {out:?}");
    let out = tb
        .exec(
            Side::A,
            &[
                "sysctl",
                "-w",
                "net.ipv4.ip_local_reserved_ports=40000-40999",
            ],
        )
        .expect("run sysctl");
    assert!(out.status.success(), "reserve ports in A: {out:?}");
    Some(tb)
}

/// [`xdp_testbed`] whose B also has [`testkit::source_flood::FLOOD_SOURCE`] (/24), the
/// address floods come from beside the clients' own.
pub fn flood_testbed(tag: &str) -> Option<testbed::VethTestbed> {
    use testbed::Side;
    let tb = xdp_testbed(tag)?;
    let addr = format!("{}/24", testkit::source_flood::FLOOD_SOURCE);
    tb.ip_cmd(Side::B, &["addr", "add", &addr, "dev", tb.ifname(Side::B)])
        .expect("add the flooding address to B");
    Some(tb)
}

/// A store client on the kernel transport in B, from B's own address: WRITEs 1 MiB of a
/// pattern, COMMITs and READs it back byte for byte. Each call must work at once (no retry).
pub fn verified_store_calls(tb: &testbed::VethTestbed, dst: std::net::SocketAddr) {
    use xwarpd::store::{ClientOptions, StoreClient};
    tb.run_in(testbed::Side::B, || {
        let mut c = StoreClient::connect(dst, &ClientOptions::default())
            .expect("the store client connects");
        let len = 1 << 20;
        let data = testkit::pattern(len, 11);
        let buf = c.pd().register(len, dataplane::Access::ALL).unwrap();
        buf.write(0, &data).unwrap();
        c.write(4096, &buf, 0..len).expect("1 MiB WRITE");
        c.commit(0, 0).expect("COMMIT");
        buf.write(0, &vec![0u8; len]).unwrap();
        let r = c.read(4096, &buf, 0..len).expect("1 MiB READ");
        assert_eq!(r.len as usize, len);
        assert!(buf.read_vec(0, len).unwrap() == data, "READ data differs");
    });
}

/// A config file, a store image and a control socket path for a test, named after `tag`.
pub fn temps(tag: &str) -> [Tmp; 3] {
    [
        Tmp::new(&format!("{tag}.toml")),
        Tmp::new(&format!("{tag}.img")),
        Tmp::new(&format!("{tag}.sock")),
    ]
}

/// One scrape of the metrics of a daemon in the testbed's A (where its endpoint listens).
pub fn scrape(tb: &testbed::VethTestbed, d: &Daemon) -> String {
    let addr = d.field("metrics");
    tb.run_in(testbed::Side::A, || http_get(&addr))
}

/// A config file's text for xwarpd on the xdp transport in A, serving a 64 MiB store at
/// `store` on A's address and `port`, its metrics on a free local port, with `xdp_extra`
/// appended to the `[xdp]` section.
pub fn xdp_store_config(
    tb: &testbed::VethTestbed,
    ctl: &Tmp,
    store: &Tmp,
    port: u16,
    xdp_extra: &str,
) -> String {
    use testbed::Side;
    format!(
        "transport = \"xdp\"\nmetrics = \"127.0.0.1:0\"\nlog = \"warn\"\ncontrol_socket = \"{}\"\n\
         [xdp]\ninterface = \"{}\"\nqueue = 0\n{xdp_extra}\n\
         [store]\npath = \"{}\"\nsize = \"64MiB\"\nlisten = \"{}:{port}\"\n",
        ctl.as_str(),
        tb.ifname(Side::A),
        store.as_str(),
        tb.ip(Side::A),
    )
}

/// An HTTP GET of `/metrics` at `addr`; the whole answer.
pub fn http_get(addr: &str) -> String {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut s = String::new();
    c.read_to_string(&mut s).unwrap();
    s
}

/// The value of `name`'s sample for engine (queue) `queue` in Prometheus text.
pub fn sample_of_queue(text: &str, name: &str, queue: u32) -> u64 {
    let head = format!("{name}{{queue=\"{queue}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&head)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {head} in:\n{text}"))
}

/// The value of the first sample of `name` in Prometheus text.
pub fn sample(text: &str, name: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {name} in:\n{text}"))
}
