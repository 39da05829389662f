//! Running Debian's RDMA programs over xwarp between the two namespaces of a testbed: a
//! server in A, a client in B, each through `xwarp-run`, both bounded in time (killed at the
//! deadline), their output kept for the assertions and printed for the record.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testbed::{Side, VethTestbed};

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
                break s.code();
            }
            if self.started.elapsed() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let ran = Ran {
            status,
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
        .env(
            "LD_LIBRARY_PATH",
            self.tools.join("usr/lib/x86_64-linux-gnu"),
        )
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

    /// `program server_args` in A, then (after `pause`) `program client_args` in B; both
    /// waited for. Prints both outputs with the commands.
    pub fn pair(
        &self,
        tb: &VethTestbed,
        transport: &str,
        program: &str,
        server_args: &[&str],
        client_args: &[&str],
    ) -> (Ran, Ran) {
        let server = self.start(tb, Side::A, transport, program, server_args);
        std::thread::sleep(Duration::from_millis(1500));
        let client = self
            .start(tb, Side::B, transport, program, client_args)
            .wait(DEADLINE);
        // The server ends shortly after its client (at once when the client failed).
        let grace = if client.ok() {
            Duration::from_secs(30)
        } else {
            Duration::ZERO
        };
        let server = server.wait(client.took + Duration::from_secs(2) + grace);
        for (who, args, r) in [
            ("server", server_args, &server),
            ("client", client_args, &client),
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
