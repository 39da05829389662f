//! What the process runs on, from its environment (`xwarp-run` sets it): the transport
//! (`XWARP_TRANSPORT`: `kernel`, the default, or `xdp`) and the interfaces, one device each
//! (`XWARP_INTERFACE`: names separated by commas; by default the first interface that is up,
//! not loopback, and has an IPv4 address, else `lo`).

use std::ffi::CStr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The environment variable naming the transport.
pub const TRANSPORT_VAR: &str = "XWARP_TRANSPORT";
/// The environment variable naming the interfaces.
pub const INTERFACE_VAR: &str = "XWARP_INTERFACE";
/// The environment variable that, set to `0`, leaves the xdp transport's engine to its own
/// thread. By default the program's posts and polls drive it too (`dataplane::XdpConfig::
/// assist`): the engine thread stands down while the program waits in a poll loop and has
/// the core to itself in a bulk transfer, which gives the latency of an inline engine and
/// the bandwidth of a threaded one.
pub const ASSIST_VAR: &str = "XWARP_VERBS_ASSIST";

/// Whether the program's calls assist the engine ([`ASSIST_VAR`] not `0`).
pub fn assist() -> bool {
    std::env::var(ASSIST_VAR).as_deref() != Ok("0")
}

/// Which transport the devices run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Kernel TCP sockets.
    Kernel,
    /// AF_XDP with xwarp's TCP (one engine per interface).
    Xdp,
}

impl Transport {
    /// Parses `kernel` or `xdp`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "kernel" => Some(Transport::Kernel),
            "xdp" => Some(Transport::Xdp),
            _ => None,
        }
    }
}

/// An interface a device stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name.
    pub name: String,
    /// Its addresses (IPv4 first).
    pub addrs: Vec<IpAddr>,
    /// Its MAC address (zero for loopback).
    pub mac: [u8; 6],
    /// Its MTU (1500 when unknown).
    pub mtu: u32,
    /// Up and running.
    pub up: bool,
}

impl Interface {
    /// The address the device serves: its first IPv4 address, else its first IPv6 one.
    pub fn address(&self) -> Option<IpAddr> {
        self.addrs.first().copied()
    }

    /// Its GID: the address as IPv6 (IPv4 mapped), as iWARP devices report it.
    pub fn gid(&self) -> [u8; 16] {
        self.address()
            .map_or(Ipv6Addr::UNSPECIFIED.octets(), crate::cm::addr::gid_of)
    }

    /// A GUID from the MAC address (EUI-64), as Ethernet RDMA devices make theirs.
    pub fn guid(&self) -> u64 {
        let m = self.mac;
        u64::from_be_bytes([m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
    }
}

/// The process's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The transport.
    pub transport: Transport,
    /// The interfaces, one device each.
    pub interfaces: Vec<Interface>,
    /// What was wrong with the environment, if anything (the devices then are those of the
    /// defaults, and opening one says why).
    pub problem: Option<String>,
}

impl Settings {
    /// Reads the environment and the host's interfaces.
    pub fn from_env() -> Settings {
        let all = interfaces();
        let mut problem = None;
        let transport = match std::env::var(TRANSPORT_VAR) {
            Ok(t) => Transport::parse(&t).unwrap_or_else(|| {
                problem = Some(format!(
                    "{TRANSPORT_VAR}={t} is not a transport (kernel or xdp)"
                ));
                Transport::Kernel
            }),
            Err(_) => Transport::Kernel,
        };
        let interfaces = match std::env::var(INTERFACE_VAR) {
            Ok(list) if !list.trim().is_empty() => list
                .split(',')
                .map(str::trim)
                .filter_map(|name| {
                    let found = all.iter().find(|i| i.name == name).cloned();
                    if found.is_none() {
                        problem = Some(format!("{INTERFACE_VAR}: no interface named {name}"));
                    }
                    found
                })
                .collect(),
            _ => default_interface(&all).into_iter().collect(),
        };
        Settings {
            transport,
            interfaces,
            problem,
        }
    }
}

/// The first interface that is up, not loopback and has an IPv4 address; else loopback.
pub fn default_interface(all: &[Interface]) -> Option<Interface> {
    let v4 = |i: &&Interface| i.addrs.iter().any(IpAddr::is_ipv4);
    all.iter()
        .filter(v4)
        .find(|i| i.up && i.name != "lo")
        .or_else(|| all.iter().find(|i| i.name == "lo"))
        .cloned()
}

/// The interfaces of this network namespace with their addresses, MAC and MTU.
pub fn interfaces() -> Vec<Interface> {
    let mut out: Vec<Interface> = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // Safety: getifaddrs fills `list` with a list freed by freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut p = list;
    while !p.is_null() {
        // Safety: p is a node of the list getifaddrs returned, alive until freeifaddrs.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_name.is_null() {
            continue;
        }
        // Safety: ifa_name is a NUL-terminated string of the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        let i = match out.iter().position(|i| i.name == name) {
            Some(i) => i,
            None => {
                out.push(Interface {
                    mtu: mtu_of(&name),
                    name,
                    addrs: Vec::new(),
                    mac: [0; 6],
                    up: false,
                });
                out.len() - 1
            }
        };
        let iface = &mut out[i];
        let flags = ifa.ifa_flags;
        iface.up |= flags & (libc::IFF_UP as u32) != 0 && flags & (libc::IFF_RUNNING as u32) != 0;
        if ifa.ifa_addr.is_null() {
            continue;
        }
        // Safety: ifa_addr points to a sockaddr of the family it names.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        match family {
            libc::AF_INET => {
                // Safety: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                let a = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let at = iface.addrs.iter().filter(|a| a.is_ipv4()).count();
                iface.addrs.insert(at, IpAddr::V4(a));
            }
            libc::AF_INET6 => {
                // Safety: an AF_INET6 address is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                let a = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
                if !is_link_local(&a) {
                    iface.addrs.push(IpAddr::V6(a));
                }
            }
            libc::AF_PACKET => {
                // Safety: an AF_PACKET address is a sockaddr_ll.
                let sll = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_ll) };
                if sll.sll_halen == 6 {
                    iface.mac.copy_from_slice(&sll.sll_addr[..6]);
                }
            }
            _ => {}
        }
    }
    // Safety: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

fn is_link_local(a: &Ipv6Addr) -> bool {
    a.segments()[0] & 0xffc0 == 0xfe80
}

/// The MTU of `name` from sysfs (1500 when it cannot be read).
fn mtu_of(name: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1500)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, addrs: &[&str], up: bool) -> Interface {
        Interface {
            name: name.into(),
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
            mac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
            mtu: 1500,
            up,
        }
    }

    /// The default device's interface is the first one up with IPv4 that is not loopback;
    /// loopback only when there is no other.
    #[test]
    fn default_interface_prefers_an_ipv4_interface_that_is_up() {
        let lo = iface("lo", &["127.0.0.1"], true);
        let down = iface("eth0", &["198.18.0.1"], false);
        let v6 = iface("eth1", &["2001:db8::1"], true);
        let good = iface("eth2", &["198.18.0.2"], true);
        let all = [lo.clone(), down, v6, good.clone()];
        assert_eq!(default_interface(&all), Some(good));
        assert_eq!(default_interface(&all[..3]), Some(lo));
    }

    /// GIDs are the address as IPv6 (IPv4 mapped); GUIDs the MAC's EUI-64.
    #[test]
    fn gid_and_guid_come_from_the_interface() {
        let i = iface("eth0", &["198.18.0.2"], true);
        let g = i.gid();
        assert_eq!(&g[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);
        assert_eq!(&g[12..], &[198, 18, 0, 2]);
        assert_eq!(i.guid(), 0x5054_00ff_fe12_3456);
    }

    /// This host's loopback interface is found with its address.
    #[test]
    fn loopback_is_listed() {
        let all = interfaces();
        let lo = all.iter().find(|i| i.name == "lo").expect("lo");
        assert!(lo.addrs.contains(&"127.0.0.1".parse().unwrap()));
    }
}
