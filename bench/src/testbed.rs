//! The two-namespace testbed, the same conventions as `deploy/testbed`: namespaces NAME-a and
//! NAME-b joined by the veth pair NAMEa/NAMEb, addresses 198.18.0.1/24 and 198.18.0.2/24 (the
//! 198.18.0.0/15 benchmark range). Names are unique per process (pid and a counter). Nothing in
//! the root namespace is touched except creating and moving the veth pair; dropping the
//! testbed deletes both namespaces (and with them the pair), also after a failure.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Address of the server side (namespace a).
pub const ADDR_A: &str = "198.18.0.1";
/// Address of the client side (namespace b).
pub const ADDR_B: &str = "198.18.0.2";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// True when this process runs as root (reads /proc/self/status).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// A live testbed; dropped, it is removed.
#[derive(Debug)]
pub struct Testbed {
    /// Its name (1-8 characters of [a-z0-9]).
    pub name: String,
    /// Server namespace.
    pub ns_a: String,
    /// Client namespace.
    pub ns_b: String,
    /// Veth end in `ns_a`.
    pub if_a: String,
    /// Veth end in `ns_b`.
    pub if_b: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run ip (iproute2): {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

impl Testbed {
    /// Builds a testbed with a unique name and the veth MTU `mtu`.
    pub fn up(mtu: u32) -> Result<Self, String> {
        if !is_root() {
            return Err("the testbed needs root (network namespaces)".into());
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % 10;
        let name = format!("xb{}{}", std::process::id() % 100_000, n);
        let tb = Self {
            ns_a: format!("{name}-a"),
            ns_b: format!("{name}-b"),
            if_a: format!("{name}a"),
            if_b: format!("{name}b"),
            name,
        };
        tb.remove();
        tb.build(mtu)?;
        Ok(tb)
    }

    fn build(&self, mtu: u32) -> Result<(), String> {
        let mtu = mtu.to_string();
        let (a, b) = (self.ns_a.as_str(), self.ns_b.as_str());
        let (ia, ib) = (self.if_a.as_str(), self.if_b.as_str());
        ip(&["netns", "add", a])?;
        ip(&["netns", "add", b])?;
        ip(&["link", "add", ia, "type", "veth", "peer", "name", ib])?;
        ip(&["link", "set", ia, "netns", a])?;
        ip(&["link", "set", ib, "netns", b])?;
        ip(&["-n", a, "addr", "add", &format!("{ADDR_A}/24"), "dev", ia])?;
        ip(&["-n", b, "addr", "add", &format!("{ADDR_B}/24"), "dev", ib])?;
        for (ns, dev) in [(a, ia), (b, ib)] {
            ip(&["-n", ns, "link", "set", dev, "mtu", &mtu])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        Ok(())
    }

    fn remove(&self) {
        let _ = ip(&["netns", "del", &self.ns_a]);
        let _ = ip(&["netns", "del", &self.ns_b]);
        // a half-built pair may still sit in the root namespace
        let _ = Command::new("ip")
            .args(["link", "del", &self.if_a])
            .stderr(Stdio::null())
            .status();
    }

    /// Turns off transmit checksum offload on one side's veth end. veth hands kernel TCP's
    /// frames over with the checksum left to "offload" (CHECKSUM_PARTIAL), which an AF_XDP
    /// engine on the other end sees as a bad checksum: a kernel-transport peer of the xdp
    /// transport needs this on its side (it also turns off TSO, so kernel-vs-kernel figures
    /// are only comparable without it).
    pub fn tx_checksum_off(&self, in_a: bool) -> Result<(), String> {
        let (ns, dev) = if in_a {
            (&self.ns_a, &self.if_a)
        } else {
            (&self.ns_b, &self.if_b)
        };
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run ethtool: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ethtool -K {dev} tx off failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// `ip netns exec NS` followed by `program`, as a command to finish and spawn.
    pub fn exec(&self, in_a: bool, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", if in_a { &self.ns_a } else { &self.ns_b }])
            .arg(program);
        c
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.remove();
    }
}
