//! The control socket: a Unix stream socket `xwarpd stats` and `xwarpd status` connect to. A
//! request is one line (`stats`: the metrics text; `status`: a summary for people); the answer
//! follows, then the connection closes.
//!
//! The socket's path is claimed carefully: only a stale socket of ours (a socket file owned by
//! this user on which nobody listens: connect fails with ECONNREFUSED, as after a kill -9) is
//! replaced. A regular file, a directory, a symlink, a live socket of another process, or a
//! socket of another user are left alone and refused with a message saying what is there.

use super::worker::Worker;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
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
    /// Binds `path` (a stale socket of ours left by a crashed daemon is replaced; anything else
    /// there is an error, see [`claim`]) and answers `stats` with what `stats` returns.
    pub fn start(
        path: &Path,
        stats: impl Fn() -> String + Send + 'static,
    ) -> std::io::Result<Self> {
        Self::start_with(path, move |req| (req == "stats").then(&stats))
    }

    /// As [`ControlServer::start`], answering each request line with what `answer` returns for
    /// it (`None`: an unknown request, answered with an error line).
    pub fn start_with(
        path: &Path,
        answer: impl Fn(&str) -> Option<String> + Send + 'static,
    ) -> std::io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        claim(path)?;
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
                        let req = line.trim();
                        let answer = answer(req).unwrap_or_else(|| {
                            format!(
                                "error: unknown request {req:?} (try \"stats\" or \"status\")\n"
                            )
                        });
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

/// Makes `path` free for our socket: nothing there, or a stale socket of ours (removed).
/// Anything else is an error that says what is there; nothing else is ever deleted.
pub fn claim(path: &Path) -> std::io::Result<()> {
    let p = path.display();
    let refuse = |kind, what: String| Err(std::io::Error::new(kind, format!("{p} {what}")));
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return refuse(e.kind(), format!("cannot be examined: {e}")),
    };
    let t = meta.file_type();
    if !t.is_socket() {
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_symlink() {
            "a symbolic link"
        } else if t.is_file() {
            "a regular file"
        } else {
            "not a socket"
        };
        return refuse(
            ErrorKind::AlreadyExists,
            format!("exists and is {what}, not a stale xwarpd socket: left alone; remove it or choose another --control / control_socket"),
        );
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return refuse(
            ErrorKind::PermissionDenied,
            format!("is a socket of another user (uid {}), not ours: left alone; choose another --control / control_socket", meta.uid()),
        );
    }
    match UnixStream::connect(path) {
        Ok(_) => refuse(
            ErrorKind::AddrInUse,
            "is a live socket: another xwarpd (or another program) is listening on it; stop it or choose another --control / control_socket".into(),
        ),
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
            tracing::info!(path = %p, "replacing a stale control socket");
            std::fs::remove_file(path)
        }
        Err(e) => refuse(
            e.kind(),
            format!("is a socket whose state is unknown ({e}): left alone"),
        ),
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
    query(path, "stats")
}

/// Sends `request` (`stats`, `status`) to the daemon behind `path`; its answer.
pub fn query(path: &Path, request: &str) -> std::io::Result<String> {
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
    c.write_all(format!("{request}\n").as_bytes())?;
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
        // A second daemon on the same socket is refused, and the socket stays.
        let e = ControlServer::start(&p, String::new).unwrap_err();
        assert!(e.to_string().contains("live socket"), "{e}");
        assert_eq!(query_stats(&p).unwrap(), "xwarpd_x 1\n");
        drop(s);
        assert!(!p.exists());
        assert!(query_stats(&p)
            .unwrap_err()
            .to_string()
            .contains("is it running"));
    }

    /// Before, any file at the path was deleted (a regular file or an empty directory), and a
    /// live socket of another program was taken over only by luck of the connect check.
    #[test]
    fn a_file_a_directory_or_a_live_socket_at_the_path_is_refused_and_left_alone() {
        let base = std::env::temp_dir().join(format!("xwarpd-ctl-claim-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let file = base.join("file");
        std::fs::write(&file, b"precious").unwrap();
        let e = ControlServer::start(&file, String::new).unwrap_err();
        assert!(
            e.to_string().contains("a regular file") && e.to_string().contains("left alone"),
            "{e}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"precious");

        let dir = base.join("dir");
        std::fs::create_dir_all(&dir).unwrap();
        let e = ControlServer::start(&dir, String::new).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        assert!(dir.is_dir());

        let link = base.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let e = ControlServer::start(&link, String::new).unwrap_err();
        assert!(e.to_string().contains("a symbolic link"), "{e}");
        assert_eq!(std::fs::read(&file).unwrap(), b"precious");

        // Another program's live socket.
        let live = base.join("live.sock");
        let other = UnixListener::bind(&live).unwrap();
        let e = ControlServer::start(&live, String::new).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::AddrInUse);
        assert!(e.to_string().contains("live socket"), "{e}");
        assert!(
            UnixStream::connect(&live).is_ok(),
            "the other socket still works"
        );
        drop(other);

        // Once its owner is gone it is stale, and replaced.
        let s = ControlServer::start(&live, || "ok\n".into()).unwrap();
        assert_eq!(query_stats(&live).unwrap(), "ok\n");
        drop(s);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
