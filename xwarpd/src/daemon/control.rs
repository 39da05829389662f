//! The control socket: a Unix stream socket `xwarpd stats` connects to. A request is one line
//! (`stats`); the answer is the metrics text, then the connection closes.

use super::worker::Worker;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The listening control socket; removes its path when dropped.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    worker: Option<Worker>,
}

impl ControlServer {
    /// Binds `path` (a stale socket left by a crashed daemon is replaced; a live one is an
    /// error) and answers `stats` with what `stats` returns.
    pub fn start(
        path: &Path,
        stats: impl Fn() -> String + Send + 'static,
    ) -> std::io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running xwarpd", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let l = UnixListener::bind(path)?;
        l.set_nonblocking(true)?;
        let worker = Worker::spawn("xwarpd-control", move |stop| {
            while Worker::running(stop) {
                match l.accept() {
                    Ok((c, _)) => {
                        let _ = c.set_nonblocking(false);
                        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                        let mut line = String::new();
                        let mut r = BufReader::new(&c);
                        let _ = r.read_line(&mut line);
                        let answer = match line.trim() {
                            "stats" => stats(),
                            other => {
                                format!("error: unknown request {other:?} (try \"stats\")\n")
                            }
                        };
                        let _ = (&c).write_all(answer.as_bytes());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            worker: Some(worker),
        })
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.worker.take();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Asks the daemon behind `path` for its stats.
pub fn query_stats(path: &Path) -> std::io::Result<String> {
    let mut c = UnixStream::connect(path).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot reach xwarpd at {}: {e} (is it running? see --control)",
                path.display()
            ),
        )
    })?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    c.write_all(b"stats\n")?;
    let mut s = String::new();
    c.read_to_string(&mut s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip_and_stale_socket_replaced() {
        let p = std::env::temp_dir().join(format!("xwarpd-ctl-{}.sock", std::process::id()));
        // A stale socket file (no listener) is replaced.
        drop(UnixListener::bind(&p).unwrap());
        let s = ControlServer::start(&p, || "xwarpd_x 1\n".into()).unwrap();
        assert_eq!(query_stats(&p).unwrap(), "xwarpd_x 1\n");
        // A second daemon on the same socket is refused.
        assert!(ControlServer::start(&p, String::new).is_err());
        drop(s);
        assert!(!p.exists());
        assert!(query_stats(&p)
            .unwrap_err()
            .to_string()
            .contains("is it running"));
    }
}
