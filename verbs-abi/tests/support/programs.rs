//! Running Debian's RDMA programs over xwarp between the two namespaces of a testbed: a
//! server in A, a client in B, each through `xwarp-run`, both bounded in time (killed at the
//! deadline), their output kept for the assertions and printed for the record.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testbed::{Side, VethTestbed};

/// The port of fio's rdma engine in these tests.
pub const FIO_PORT: u16 = 18600;
/// The qperf server's control port in these tests.
pub const QPERF_PORT: u16 = 18610;

/// How long one program may run.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Where the programs and our libraries are.
pub struct Tools {
    pub tools: PathBuf,
    pub libs: PathBuf,
}

/// What a program run left.
#[derive(Debug)]
pub struct Ran {
    pub status: Option<i32>,
    /// The signal that ended it, if one did (SIGKILL at the deadline).
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.status == Some(0)
    }
}

/// A started program whose output goes to files (no pipe to fill).
pub struct Running {
    child: Child,
    out: PathBuf,
    err: PathBuf,
    started: Instant,
}

impl Running {
    /// Waits until it exits or `deadline` passed (then kills it).
    pub fn wait(mut self, deadline: Duration) -> Ran {
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if self.started.elapsed() > deadline {
                let _ = self.child.kill();
                break self.child.wait().expect("wait");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let ran = Ran {
            status: status.code(),
            signal: status.signal(),
            stdout: read(&self.out),
            stderr: read(&self.err),
            took: self.started.elapsed(),
        };
        let _ = std::fs::remove_file(&self.out);
        let _ = std::fs::remove_file(&self.err);
        ran
    }
}

impl Tools {
    /// The unpacked programs and our libraries; `None` (skipped outside CI) without them.
    pub fn get() -> Option<Tools> {
        Some(Tools {
            tools: super::rdma_tools()?,
            libs: super::verbs_libs(),
        })
    }

    /// The unpacked programs' library path.
    fn library_path(&self) -> std::ffi::OsString {
        std::env::join_paths(super::tool_library_dirs(&self.tools)).expect("library folders")
    }

    /// Starts `program args` in `side`'s namespace through xwarp-run on `transport`, the
    /// device on the side's veth end.
    pub fn start(
        &self,
        tb: &VethTestbed,
        side: Side,
        transport: &str,
        program: &str,
        args: &[&str],
    ) -> Running {
        let tag = format!("{}-{}-{program}", std::process::id(), tb.ifname(side));
        let out = std::env::temp_dir().join(format!("xwarp-prog-{tag}.out"));
        let err = std::env::temp_dir().join(format!("xwarp-prog-{tag}.err"));
        let mut c: Command = tb.command(side, env!("CARGO_BIN_EXE_xwarp-run"));
        c.args([
            "--transport",
            transport,
            "--interface",
            tb.ifname(side),
            "--lib-dir",
        ])
        .arg(&self.libs)
        .arg("--")
        .arg(self.tools.join("usr/bin").join(program))
        .args(args)
        .env("LD_LIBRARY_PATH", self.library_path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("output file"))
        .stderr(std::fs::File::create(&err).expect("error file"));
        let child = c.spawn().expect("start the program");
        Running {
            child,
            out,
            err,
            started: Instant::now(),
        }
    }

    /// Waits (at most 30 s) until the server in A on `transport` is ready for `program`'s
    /// client: its port listening (kernel transport), or its device's XDP program attached
    /// (xdp transport; it listens a moment later, and refused connections are tried again).
    pub fn wait_ready(&self, tb: &VethTestbed, transport: &str, program: &str) {
        let port = match program {
            "rping" => 7174,
            "fio" => FIO_PORT,
            "qperf" => QPERF_PORT,
            _ => 18515,
        };
        let ready = || {
            let out = if transport == "kernel" {
                tb.exec(Side::A, &["ss", "-ltnH", &format!("sport = :{port}")])
            } else {
                tb.exec(Side::A, &["ip", "link", "show", "dev", tb.ifname(Side::A)])
            };
            out.is_ok_and(|o| {
                let text = String::from_utf8_lossy(&o.stdout);
                if transport == "kernel" {
                    !text.trim().is_empty()
                } else {
                    text.contains("prog/xdp")
                }
            })
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ready() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(200));
    }

    /// `program server_args` in A on `transports.0`, then, once it is ready,
    /// `program client_args` in B on `transports.1`; both waited for. Prints both outputs
    /// with the commands.
    pub fn pair(
        &self,
        tb: &VethTestbed,
        transports: (&str, &str),
        program: &str,
        server_args: &[&str],
        client_args: &[&str],
    ) -> (Ran, Ran) {
        let server = self.start(tb, Side::A, transports.0, program, server_args);
        self.wait_ready(tb, transports.0, program);
        let client = self
            .start(tb, Side::B, transports.1, program, client_args)
            .wait(DEADLINE);
        // The server ends shortly after its client (at once when the client failed).
        let grace = if client.ok() {
            Duration::from_secs(30)
        } else {
            Duration::ZERO
        };
        let server = server.wait(client.took + Duration::from_secs(2) + grace);
        for (who, transport, args, r) in [
            ("server", transports.0, server_args, &server),
            ("client", transports.1, client_args, &client),
        ] {
            println!(
                "== {transport}: xwarp-run -- {program} {} ({who}, exit {:?}, {:.1} s)\n{}{}",
                args.join(" "),
                r.status,
                r.took.as_secs_f64(),
                r.stdout,
                r.stderr
            );
        }
        (server, client)
    }
}

/// The result row of a perftest run: the line after the column header.
pub fn result_row(r: &Ran) -> Option<String> {
    let mut lines = r.stdout.lines();
    lines.find(|l| l.trim_start().starts_with("#bytes"))?;
    lines.next().map(str::to_string)
}

/// `program -R -n N` with its server in A and client in B on `transports` (server's,
/// client's); both exit 0 with their result row.
pub fn perftest(tools: &Tools, tb: &VethTestbed, transports: (&str, &str), program: &str, n: &str) {
    let server_ip = tb.ip(Side::A).to_string();
    let (server, client) = tools.pair(
        tb,
        transports,
        program,
        &["-R", "-n", n],
        &["-R", "-n", n, &server_ip],
    );
    assert!(server.ok(), "{program} server: {server:?}");
    assert!(client.ok(), "{program} client: {client:?}");
    for (who, r) in [("server", &server), ("client", &client)] {
        let row = result_row(r).unwrap_or_else(|| panic!("{program} {who}: no result row"));
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert!(fields.len() >= 4, "{program} {who}: {row}");
        assert_eq!(fields[1], n, "{program} {who}: iterations in {row}");
        let figure: f64 = fields[3].parse().unwrap_or(0.0);
        assert!(figure > 0.0, "{program} {who}: {row}");
    }
    assert!(
        client.stdout.contains("Transport type : IW"),
        "{}",
        client.stdout
    );
}

/// rping with 20 pings, verified on both sides, on `transports` (server's, client's).
pub fn rping(tools: &Tools, tb: &VethTestbed, transports: (&str, &str)) {
    let server_ip = tb.ip(Side::A).to_string();
    let (server, client) = tools.pair(
        tb,
        transports,
        "rping",
        &["-s", "-a", &server_ip, "-C", "20", "-v", "-V"],
        &["-c", "-a", &server_ip, "-C", "20", "-v", "-V"],
    );
    assert!(server.ok(), "rping server: {server:?}");
    assert!(client.ok(), "rping client: {client:?}");
    for (who, r, prefix) in [
        ("server", &server, "server ping data: "),
        ("client", &client, "ping data: "),
    ] {
        let pings: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with(prefix)).collect();
        assert_eq!(pings.len(), 20, "rping {who}: {}", r.stdout);
        for (i, p) in pings.iter().enumerate() {
            assert!(p.contains(&format!("rdma-ping-{i}: ")), "rping {who}: {p}");
        }
        assert!(
            !r.stderr.contains("data mismatch"),
            "rping {who}: {}",
            r.stderr
        );
    }
}

/// `ibv_devinfo -v` in A on `transport`: an iWARP device, port active, Ethernet, the GID.
pub fn devinfo(tools: &Tools, tb: &VethTestbed, transport: &str) {
    let r = tools
        .start(tb, Side::A, transport, "ibv_devinfo", &["-v"])
        .wait(DEADLINE);
    println!(
        "== {transport}: xwarp-run -- ibv_devinfo -v\n{}{}",
        r.stdout, r.stderr
    );
    assert!(r.ok(), "{r:?}");
    let gid = tb.ip(Side::A).octets();
    let gid = format!(
        "ffff:{:02x}{:02x}:{:02x}{:02x}",
        gid[0], gid[1], gid[2], gid[3]
    );
    for want in [
        "transport:\t\t\tiWARP (1)",
        "PORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
        &gid,
    ] {
        assert!(r.stdout.contains(want), "{want:?} missing");
    }
}
