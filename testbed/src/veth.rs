//! A throw-away pair of network namespaces joined by a veth pair, for tests and the bench.
//!
//! Names carry the pid and a counter, addresses are 198.18.0.1/24 and 2001:db8::1/64 (side A),
//! 198.18.0.2/24 and 2001:db8::2/64 (side B; IPv6 added `nodad`, so usable at once) inside the
//! namespaces only, and dropping the testbed deletes both namespaces (and
//! with them the veth pair), also when a test fails.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use afxdp::netlink::{Mac, RtNetlink};
use afxdp::netns::{NetNs, NetNsGuard};
use afxdp::program::ifindex;
use afxdp::XdpError;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// One end of the testbed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// 198.18.0.1
    A,
    /// 198.18.0.2
    B,
}

impl Side {
    fn index(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }

    /// The other end.
    pub fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Two namespaces joined by a veth pair, each end up and addressed; or, bridged, each joined
/// by its own veth pair to a Linux bridge in a third namespace.
#[derive(Debug)]
pub struct VethTestbed {
    ns: [String; 2],
    ifname: [String; 2],
    middle: Option<Middle>,
}

/// The middle namespace of a bridged testbed: the bridge and its two ports. Captures there see
/// every frame, which they cannot between two AF_XDP ends of one veth pair (copy-mode AF_XDP
/// transmit passes no packet tap, and the receiver's XDP program redirects first).
#[derive(Debug)]
struct Middle {
    ns: String,
    /// The bridge port towards side A, towards side B.
    ports: [String; 2],
}

impl VethTestbed {
    /// Creates the namespaces and the veth pair. `tag` (a few letters) names the namespaces.
    pub fn create(tag: &str) -> io::Result<Self> {
        Self::create_with_queues(tag, 1)
    }

    /// As [`VethTestbed::create`], with `queues` receive and transmit queues on each veth end
    /// (a multi-queue device's lanes; veth delivers a packet on the receive queue numbered
    /// like the transmit queue it was sent on).
    pub fn create_with_queues(tag: &str, queues: u32) -> io::Result<Self> {
        let tb = Self::named(tag, false);
        // From here on, Drop cleans up whatever was created.
        for ns in &tb.ns {
            run(Command::new("ip").args(["netns", "add", ns]))?;
        }
        veth(
            (&tb.ifname[0], &tb.ns[0]),
            (&tb.ifname[1], &tb.ns[1]),
            queues,
        )?;
        tb.address_both()?;
        Ok(tb)
    }

    /// As [`VethTestbed::create`], but each side's veth end leads to a Linux bridge in a third
    /// namespace ([`VethTestbed::middle_netns`]), where a capture on a bridge port
    /// ([`VethTestbed::middle_port`]) sees the traffic of two AF_XDP ends.
    pub fn create_bridged(tag: &str) -> io::Result<Self> {
        let tb = Self::named(tag, true);
        let m = tb.middle.as_ref().expect("bridged");
        for ns in tb.ns.iter().chain([&m.ns]) {
            run(Command::new("ip").args(["netns", "add", ns]))?;
        }
        let mip = |args: &[&str]| run(Command::new("ip").args(["-n", &m.ns]).args(args));
        mip(&["link", "add", "br0", "type", "bridge"])?;
        for i in 0..2 {
            veth((&tb.ifname[i], &tb.ns[i]), (&m.ports[i], &m.ns), 1)?;
            mip(&["link", "set", &m.ports[i], "master", "br0"])?;
            mip(&["link", "set", &m.ports[i], "up"])?;
        }
        mip(&["link", "set", "br0", "up"])?;
        tb.address_both()?;
        Ok(tb)
    }

    /// The names of a new testbed (nothing created yet): unique per process and testbed.
    fn named(tag: &str, bridged: bool) -> Self {
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let ns = |side: &str| format!("xw-{tag}-{pid}-{n}-{side}");
        // Interface names: at most 15 bytes: "xw" + pid (<= 7 digits) + counter + one letter.
        let ifname = |side: &str| format!("xw{pid}{n}{side}");
        Self {
            ns: [ns("a"), ns("b")],
            ifname: [ifname("a"), ifname("b")],
            middle: bridged.then(|| Middle {
                ns: ns("m"),
                ports: [ifname("p"), ifname("q")],
            }),
        }
    }

    /// Addresses both sides' veth ends (IPv4 /24, IPv6 /64 `nodad`) and brings them up.
    fn address_both(&self) -> io::Result<()> {
        let tb = self;
        for side in [Side::A, Side::B] {
            let ifname = tb.ifname(side).to_owned();
            let addr = format!("{}/24", tb.ip(side));
            tb.ip_cmd(side, &["link", "set", "lo", "up"])?;
            tb.ip_cmd(side, &["addr", "add", &addr, "dev", &ifname])?;
            let addr6 = format!("{}/64", tb.ip6(side));
            tb.ip_cmd(
                side,
                &["-6", "addr", "add", &addr6, "dev", &ifname, "nodad"],
            )?;
            tb.ip_cmd(side, &["link", "set", &ifname, "up"])?;
        }
        Ok(())
    }

    /// The middle namespace of a bridged testbed.
    pub fn middle_netns(&self) -> Option<&str> {
        self.middle.as_ref().map(|m| m.ns.as_str())
    }

    /// The bridge port that leads to `side` (in the middle namespace) of a bridged testbed.
    pub fn middle_port(&self, side: Side) -> Option<&str> {
        self.middle.as_ref().map(|m| m.ports[side.index()].as_str())
    }

    /// The namespace name of `side`.
    pub fn netns_name(&self, side: Side) -> &str {
        &self.ns[side.index()]
    }

    /// The veth end inside `side`'s namespace.
    pub fn ifname(&self, side: Side) -> &str {
        &self.ifname[side.index()]
    }

    /// The IPv4 address of `side`.
    pub fn ip(&self, side: Side) -> Ipv4Addr {
        match side {
            Side::A => Ipv4Addr::new(198, 18, 0, 1),
            Side::B => Ipv4Addr::new(198, 18, 0, 2),
        }
    }

    /// The IPv6 address of `side` (2001:db8::1 or ::2).
    pub fn ip6(&self, side: Side) -> Ipv6Addr {
        match side {
            Side::A => Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1),
            Side::B => Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2),
        }
    }

    /// The MAC of `side`'s veth end (asked over rtnetlink inside its namespace).
    pub fn mac(&self, side: Side) -> Result<Mac, XdpError> {
        let _ns = self
            .enter(side)
            .map_err(|e| XdpError::from_io("enter netns", &e))?;
        RtNetlink::new()?.link_mac(ifindex(self.ifname(side))?)
    }

    /// Moves the calling thread into `side`'s namespace until the guard drops.
    pub fn enter(&self, side: Side) -> io::Result<NetNsGuard> {
        NetNs::named(self.netns_name(side))?.enter()
    }

    /// Turns off transmit checksum offload on `side`'s veth end (`ethtool -K IF tx off` in its
    /// namespace). veth hands kernel TCP's frames over with the checksum left to "offload"
    /// (CHECKSUM_PARTIAL), which a bypass receiver on the other end sees unfilled: the kernel
    /// end of a test against the AF_XDP engine needs this. It also turns TSO off.
    pub fn tx_checksum_off(&self, side: Side) -> io::Result<()> {
        run(Command::new("ip")
            .args(["netns", "exec", self.netns_name(side), "ethtool", "-K"])
            .args([self.ifname(side), "tx", "off"]))
        .map(drop)
    }

    /// Sets the MTU of both veth ends.
    pub fn set_mtu(&self, mtu: u32) -> io::Result<()> {
        for side in [Side::A, Side::B] {
            let ifname = self.ifname(side).to_owned();
            self.ip_cmd(side, &["link", "set", &ifname, "mtu", &mtu.to_string()])?;
        }
        Ok(())
    }

    /// Runs `f` on a new thread that has entered `side`'s namespace (sockets it opens and
    /// threads it starts live there), waits for it and returns its result; a panic in `f` is
    /// passed on. The calling thread stays where it is.
    pub fn run_in<T: Send>(&self, side: Side, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                let _ns = self.enter(side).expect("enter the testbed namespace");
                f()
            });
            match t.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// Runs a program inside `side`'s namespace (`ip netns exec`) and waits for it.
    pub fn exec(&self, side: Side, argv: &[&str]) -> io::Result<Output> {
        Command::new("ip")
            .args(["netns", "exec", self.netns_name(side)])
            .args(argv)
            .output()
    }

    /// A command that will run inside `side`'s namespace (for spawning).
    pub fn command(&self, side: Side, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.netns_name(side), program]);
        c
    }

    /// `ip ARGS` inside `side`'s namespace; fails on a non-zero exit.
    pub fn ip_cmd(&self, side: Side, args: &[&str]) -> io::Result<Output> {
        run(Command::new("ip")
            .args(["-n", self.netns_name(side)])
            .args(args))
    }
}

impl Drop for VethTestbed {
    fn drop(&mut self) {
        for ns in self.ns.iter().chain(self.middle.as_ref().map(|m| &m.ns)) {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// A veth pair: `a` (name, namespace) and its peer `b`.
fn veth(a: (&str, &str), b: (&str, &str), queues: u32) -> io::Result<Output> {
    let q = queues.to_string();
    let queues = ["numtxqueues", &q, "numrxqueues", &q];
    run(Command::new("ip")
        .args(["link", "add", a.0])
        .args(queues)
        .args(["netns", a.1, "type", "veth", "peer", "name", b.0])
        .args(queues)
        .args(["netns", b.1]))
}

/// Whether this process can build testbeds (root, `ip` present).
pub fn available() -> Result<(), String> {
    // Safety: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (network namespaces, veth, XDP)".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("needs iproute2's `ip`".into()),
    }
}

fn run(cmd: &mut Command) -> io::Result<Output> {
    let out = cmd.output()?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(io::Error::other(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// A testbed for a test, or why this process cannot build one (`Err`: not root, no `ip`).
/// Whether the test then skips or fails is the test's rule (`testkit::or_skip`: fail under
/// CI). Panics when the testbed could be built but creating it failed: that is a real failure.
pub fn for_test(tag: &str) -> Result<VethTestbed, String> {
    available()?;
    Ok(VethTestbed::create(tag).expect("create the netns/veth testbed"))
}

/// [`for_test`] for a bridged testbed ([`VethTestbed::create_bridged`]).
pub fn for_test_bridged(tag: &str) -> Result<VethTestbed, String> {
    available()?;
    Ok(VethTestbed::create_bridged(tag).expect("create the bridged netns/veth testbed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run_in` runs its closure inside the namespace (the veth end is visible there) and
    /// leaves the calling thread where it was (the veth end is not visible here); a panic in
    /// the closure reaches the caller.
    #[test]
    fn run_in_enters_the_namespace_on_another_thread_only() {
        let Some(tb) = testkit::or_skip("runin", for_test("runin")) else {
            return;
        };
        let name = tb.ifname(Side::B).to_owned();
        assert!(tb.run_in(Side::B, || ifindex(&name).is_ok()));
        assert!(
            ifindex(&name).is_err(),
            "the caller stayed in its namespace"
        );
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tb.run_in(Side::A, || panic!("inside"))
        }));
        assert!(caught.is_err());
    }

    /// `set_mtu` reaches both ends; `tx_checksum_off` leaves the end without tx checksumming.
    #[test]
    fn mtu_and_tx_checksum_settings_reach_the_veth_ends() {
        let Some(tb) = testkit::or_skip("mtu", for_test("mtu")) else {
            return;
        };
        tb.set_mtu(1400).unwrap();
        for side in [Side::A, Side::B] {
            let out = tb.ip_cmd(side, &["link", "show", tb.ifname(side)]).unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("mtu 1400"), "{text}");
        }
        tb.tx_checksum_off(Side::B).unwrap();
        let out = tb
            .exec(Side::B, &["ethtool", "-k", tb.ifname(Side::B)])
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("tx-checksumming: off"), "{text}");
    }
}
