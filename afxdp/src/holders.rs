//! Who holds a BPF program: how the loader tells a live `xwarp_steer` from a stale one.
//!
//! The program is attached over netlink, so the interface keeps it after its process dies (a
//! kill -9 runs no `Drop`). A live engine holds the program's fd for as long as it runs (the
//! loaded object in [`XdpProgram`](super::XdpProgram)), and the kernel lists every open BPF
//! fd in `/proc/PID/fdinfo/FD` with a `prog_id:` line. So a program that no process holds is
//! stale (its owner is gone) and may be replaced; one that a process holds is live and never
//! is.
//!
//! Limits: only processes of our pid namespace whose descriptors we may read are seen (root,
//! or the same user; another user's process needs `CAP_SYS_PTRACE`); a tool that has the
//! program open at that moment (bpftool) makes it look live, and the start is refused with a
//! message: try again.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The link targets of BPF program and link fds (a link holds its program too).
const BPF_FD_TARGETS: [&[u8]; 2] = [b"anon_inode:bpf-prog", b"anon_inode:bpf_link"];

/// The processes (pids) that hold an fd of program `prog_id`, our own included.
pub(crate) fn program_holders(prog_id: u32) -> Vec<u32> {
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter_map(|p| {
            let pid = p.file_name().to_str()?.parse::<u32>().ok()?;
            process_holds(&p.path(), prog_id).then_some(pid)
        })
        .collect()
}

/// Whether the process at `dir` (`/proc/PID`) has an fd of program `prog_id` open.
fn process_holds(dir: &Path, prog_id: u32) -> bool {
    let Ok(fds) = fs::read_dir(dir.join("fd")) else {
        return false; // gone meanwhile, or not ours to read
    };
    fds.flatten().any(|fd| {
        let is_bpf = fs::read_link(fd.path())
            .is_ok_and(|t| BPF_FD_TARGETS.contains(&OsStr::as_bytes(t.as_os_str())));
        is_bpf
            && fs::read_to_string(dir.join("fdinfo").join(fd.file_name()))
                .is_ok_and(|info| fdinfo_prog_id(&info) == Some(prog_id))
    })
}

/// The `prog_id:` of an fdinfo text.
fn fdinfo_prog_id(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|l| l.strip_prefix("prog_id:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_prog_id_is_read() {
        let info = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nprog_type:\t6\n\
                    prog_jited:\t1\nprog_tag:\t0123456789abcdef\nmemlock:\t4096\nprog_id:\t42\n";
        assert_eq!(fdinfo_prog_id(info), Some(42));
        assert_eq!(fdinfo_prog_id("pos:\t0\nmap_id:\t7\n"), None);
        assert_eq!(fdinfo_prog_id("prog_id:\tx\n"), None);
    }
}
