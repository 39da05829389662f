//! tshark over capture files, and live captures (tshark or dumpcap) of one TCP port.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `tshark -r FILE` with preferences; MPA has no port of its own, so the TCP heuristic
/// dissectors are always tried first (`tcp.try_heuristic_first:TRUE`).
#[derive(Debug, Clone)]
pub struct Tshark {
    args: Vec<OsString>,
}

impl Tshark {
    /// Reads the capture at `path`.
    pub fn read(path: &Path) -> Self {
        let mut t = Tshark {
            args: vec!["-r".into(), path.into()],
        };
        t = t.pref("tcp.try_heuristic_first:TRUE");
        t
    }

    /// Adds a preference (`-o NAME:VALUE`).
    pub fn pref(mut self, pref: &str) -> Self {
        self.args.extend(["-o".into(), pref.into()]);
        self
    }

    /// Turns a heuristic dissector off (`--disable-heuristic NAME`).
    pub fn disable_heuristic(mut self, name: &str) -> Self {
        self.args
            .extend(["--disable-heuristic".into(), name.into()]);
        self
    }

    /// Runs tshark with `args` after the file and preferences; returns its stdout. Panics,
    /// with tshark's stderr, when tshark cannot be run or exits with an error.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tshark")
            .args(&self.args)
            .args(args)
            .output()
            .expect("run tshark");
        assert!(
            out.status.success(),
            "tshark {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One line per packet matching display `filter`: the `fields`, tab-separated (repeated
    /// occurrences of a field comma-separated, as tshark prints them).
    pub fn fields(&self, filter: &str, fields: &[&str]) -> Vec<String> {
        let mut args = vec!["-Y", filter, "-T", "fields"];
        for f in fields {
            args.extend(["-e", f]);
        }
        self.run(&args).lines().map(str::to_owned).collect()
    }

    /// The number of packets matching display `filter`.
    pub fn count(&self, filter: &str) -> usize {
        self.run(&["-Y", filter])
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count()
    }

    /// The verbose (`-V`) text of the packets matching `filter`, where verdicts such as
    /// "Good CRC32" appear.
    pub fn verbose(&self, filter: &str) -> String {
        self.run(&["-V", "-Y", filter])
    }
}

/// A capture running in the background: `program -i IFACE -f "tcp port PORT" -w FILE`, where
/// `program` is tshark or dumpcap, perhaps behind `ip netns exec NS`. Started, it captures;
/// stopped (SIGINT, so the file is complete), the file at [`Self::path`] is left for the test,
/// which removes it when its checks pass (a failing test leaves it to look at).
#[derive(Debug)]
pub struct LiveCapture {
    child: Option<Child>,
    path: PathBuf,
}

impl LiveCapture {
    /// Spawns `program` capturing TCP port `port` on `iface` into `path` and returns once it
    /// reports "Capturing on" (plus 300 ms for the capture to settle). Panics when it does not
    /// start within 20 s.
    pub fn start(mut program: Command, iface: &str, port: u16, path: PathBuf) -> LiveCapture {
        let _ = std::fs::remove_file(&path);
        let mut child = program
            .args(["-i", iface, "-f", &format!("tcp port {port}"), "-w"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the capture");
        // The tool reports "Capturing on '<if>'" once the capture runs; keep draining stderr.
        let (tx, rx) = mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().expect("stderr"));
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            for line in stderr.lines().map_while(Result::ok) {
                if line.contains("Capturing on") {
                    let _ = tx.send(Ok(()));
                } else {
                    seen.push(line);
                }
            }
            let _ = tx.send(Err(seen));
        });
        let cap = LiveCapture {
            child: Some(child),
            path,
        };
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Ok(())) => {}
            Ok(Err(seen)) => panic!("the capture did not start: {seen:?}"),
            Err(_) => panic!("the capture did not start within 20 s"),
        }
        std::thread::sleep(Duration::from_millis(300));
        cap
    }

    /// The capture file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits 300 ms for the last frames, stops the capture with SIGINT and waits (up to 10 s,
    /// then kills) until the tool has exited and the file is complete. Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            std::thread::sleep(Duration::from_millis(300));
            let _ = Command::new("kill")
                .args(["-INT", &c.id().to_string()])
                .status();
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end && c.try_wait().ok().flatten().is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops the capture and returns the file's path.
    pub fn finish(mut self) -> PathBuf {
        self.stop();
        self.path.clone()
    }
}

impl Drop for LiveCapture {
    fn drop(&mut self) {
        self.stop();
    }
}
