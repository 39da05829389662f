//! The two-namespace testbed of `compare`, the demo and bench's end-to-end tests: a thin view of
//! `testbed::VethTestbed` (namespaces and a veth pair created directly inside
//! them, names with the pid and a counter, addresses 198.18.0.1/24 on side a (the server) and
//! 198.18.0.2/24 on side b, everything removed on drop, also after a failure). Nothing in the
//! root namespace is touched.

use std::process::Command;

use testbed::{Side, VethTestbed};

/// Address of the server side (namespace a).
pub const ADDR_A: &str = "198.18.0.1";
/// Address of the client side (namespace b).
pub const ADDR_B: &str = "198.18.0.2";

/// Whether this process can build a testbed (root, iproute2), or why not.
pub fn available() -> Result<(), String> {
    testbed::available()
}

/// A live testbed; dropped, it is removed.
#[derive(Debug)]
pub struct Testbed {
    /// A short name for messages (the namespaces are NAME-a and NAME-b).
    pub name: String,
    /// Server namespace.
    pub ns_a: String,
    /// Client namespace.
    pub ns_b: String,
    /// Veth end in `ns_a`.
    pub if_a: String,
    /// Veth end in `ns_b`.
    pub if_b: String,
    tb: VethTestbed,
}

fn side(in_a: bool) -> Side {
    if in_a {
        Side::A
    } else {
        Side::B
    }
}

impl Testbed {
    /// Builds a testbed with the veth MTU `mtu`.
    pub fn up(mtu: u32) -> Result<Self, String> {
        Self::up_with_queues(mtu, 1)
    }

    /// Builds a testbed with the veth MTU `mtu` and `queues` receive and transmit queues on
    /// each veth end (`-q N` on the xdp transport needs N).
    pub fn up_with_queues(mtu: u32, queues: u32) -> Result<Self, String> {
        testbed::available().map_err(|why| format!("the testbed {why}"))?;
        let tb = VethTestbed::create_with_queues("xb", queues)
            .map_err(|e| format!("cannot build the testbed: {e}"))?;
        tb.set_mtu(mtu)
            .map_err(|e| format!("cannot set the testbed's MTU to {mtu}: {e}"))?;
        debug_assert_eq!(tb.ip(Side::A).to_string(), ADDR_A);
        debug_assert_eq!(tb.ip(Side::B).to_string(), ADDR_B);
        let (ns_a, ns_b) = (tb.netns_name(Side::A), tb.netns_name(Side::B));
        Ok(Self {
            name: ns_a.strip_suffix("-a").unwrap_or(ns_a).to_owned(),
            ns_a: ns_a.to_owned(),
            ns_b: ns_b.to_owned(),
            if_a: tb.ifname(Side::A).to_owned(),
            if_b: tb.ifname(Side::B).to_owned(),
            tb,
        })
    }

    /// Sets the MTU of both veth ends (no XDP program may be attached that cannot take it:
    /// ours can, it is multi-buffer aware).
    pub fn set_mtu(&self, mtu: u32) -> Result<(), String> {
        self.tb
            .set_mtu(mtu)
            .map_err(|e| format!("cannot set the testbed's MTU to {mtu}: {e}"))
    }

    /// Turns off transmit checksum offload on one side's veth end. veth hands kernel TCP's
    /// frames over with the checksum left to "offload" (CHECKSUM_PARTIAL), which an AF_XDP
    /// engine on the other end sees as a bad checksum: a kernel-transport peer of the xdp
    /// transport needs this on its side (it also turns off TSO, so kernel-vs-kernel figures
    /// are only comparable without it).
    pub fn tx_checksum_off(&self, in_a: bool) -> Result<(), String> {
        self.tb
            .tx_checksum_off(side(in_a))
            .map_err(|e| format!("ethtool -K tx off failed: {e}"))
    }

    /// `ip netns exec NS` followed by `program`, as a command to finish and spawn.
    pub fn exec(&self, in_a: bool, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.tb.netns_name(side(in_a))])
            .arg(program);
        c
    }
}
