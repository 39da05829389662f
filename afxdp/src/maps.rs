//! The Rust mirror of `bpf/xwarp_maps.h`: map names, sizes and the counter layout shared with
//! the XDP program. The tests below check this file against the header and the compiled object.

/// The XDP program's function (and kernel-visible program) name.
pub const PROG_NAME: &str = "xwarp_steer";
/// Hash map: `u16` TCP destination port (host byte order) -> `u8` [`PortKind`].
pub const PORTS_MAP: &str = "xwarp_ports";
/// Hash map: `u32` IPv4 address (network byte order) -> `u8` 1: the addresses the engine owns.
pub const ADDRS4_MAP: &str = "xwarp_addrs4";
/// Hash map: 16-octet IPv6 address (as on the wire) -> `u8` 1: the addresses the engine owns.
pub const ADDRS6_MAP: &str = "xwarp_addrs6";
/// XSKMAP: `u32` rx queue id -> AF_XDP socket.
pub const XSKS_MAP: &str = "xwarp_xsks";
/// Per-CPU array, one slot: the program's `Counters`.
pub const COUNTERS_MAP: &str = "xwarp_counters";
/// Capacity of [`PORTS_MAP`].
pub const PORTS_MAX: u32 = 16384;
/// Capacity of [`ADDRS4_MAP`] and of [`ADDRS6_MAP`].
pub const ADDRS_MAX: u32 = 16;
/// Capacity of [`XSKS_MAP`]: the highest rx queue id plus one that can be steered.
pub const XSKS_MAX: u32 = 64;

/// Why a port is steered (the XDP program steers both kinds alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PortKind {
    /// A listening iWARP port (`XWARP_PORT_LISTEN`).
    Listen = 1,
    /// A port of the engine's active-open range (`XWARP_PORT_ACTIVE`).
    ActiveOpen = 2,
}

impl PortKind {
    /// The map value for this kind.
    pub fn value(self) -> u8 {
        self as u8
    }

    /// The kind stored as `value`, if it is one.
    pub fn from_value(value: u8) -> Option<Self> {
        match value {
            1 => Some(Self::Listen),
            2 => Some(Self::ActiveOpen),
            _ => None,
        }
    }
}

/// The XDP program's counters (`struct xwarp_counters`), summed over CPUs by the loader.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct SteerCounters {
    /// Handed to an AF_XDP socket.
    pub redirected: u64,
    /// Given to the kernel: not ours.
    pub passed: u64,
    /// Dropped: truncated or impossible headers.
    pub malformed: u64,
    /// A steered port, but no socket on that rx queue: given to the kernel.
    pub steered_no_socket: u64,
    /// Dropped: the first fragment of a TCP segment to a steered port of ours (the engine does
    /// not reassemble; TCP retransmits).
    pub fragments: u64,
}

impl SteerCounters {
    /// Adds `other` field by field (wrapping: these are free-running counters).
    pub fn accumulate(&mut self, other: &SteerCounters) {
        self.redirected = self.redirected.wrapping_add(other.redirected);
        self.passed = self.passed.wrapping_add(other.passed);
        self.malformed = self.malformed.wrapping_add(other.malformed);
        self.steered_no_socket = self.steered_no_socket.wrapping_add(other.steered_no_socket);
        self.fragments = self.fragments.wrapping_add(other.fragments);
    }

    /// What moved between `earlier` and `self`.
    pub fn since(&self, earlier: &SteerCounters) -> SteerCounters {
        SteerCounters {
            redirected: self.redirected.wrapping_sub(earlier.redirected),
            passed: self.passed.wrapping_sub(earlier.passed),
            malformed: self.malformed.wrapping_sub(earlier.malformed),
            steered_no_socket: self
                .steered_no_socket
                .wrapping_sub(earlier.steered_no_socket),
            fragments: self.fragments.wrapping_sub(earlier.fragments),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = include_str!("../../bpf/xwarp_maps.h");

    fn define(name: &str) -> String {
        HEADER
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("#define") && w.next() == Some(name))
                    .then(|| w.next().unwrap_or_default().to_owned())
            })
            .unwrap_or_else(|| panic!("{name} not defined in xwarp_maps.h"))
    }

    #[test]
    fn constants_match_the_shared_header() {
        assert_eq!(define("XWARP_PROG_NAME"), format!("\"{PROG_NAME}\""));
        assert_eq!(define("XWARP_PORTS_MAX"), PORTS_MAX.to_string());
        assert_eq!(define("XWARP_XSKS_MAX"), XSKS_MAX.to_string());
        assert_eq!(define("XWARP_ADDRS_MAX"), ADDRS_MAX.to_string());
        assert_eq!(
            define("XWARP_PORT_LISTEN"),
            PortKind::Listen.value().to_string()
        );
        assert_eq!(
            define("XWARP_PORT_ACTIVE"),
            PortKind::ActiveOpen.value().to_string()
        );
    }

    #[test]
    fn counter_fields_are_in_header_order() {
        let body = HEADER
            .split("struct xwarp_counters {")
            .nth(1)
            .and_then(|s| s.split("};").next())
            .expect("struct xwarp_counters in the header");
        let fields: Vec<&str> = body
            .lines()
            .filter_map(|l| l.trim().strip_prefix("__u64 "))
            .map(|l| l.split(';').next().unwrap_or_default().trim())
            .collect();
        assert_eq!(
            fields,
            [
                "redirected",
                "passed",
                "malformed",
                "steered_no_socket",
                "fragments"
            ]
        );
        assert_eq!(std::mem::size_of::<SteerCounters>(), 8 * fields.len());
    }

    #[test]
    fn port_kind_round_trips_and_rejects_unknown_values() {
        for k in [PortKind::Listen, PortKind::ActiveOpen] {
            assert_eq!(PortKind::from_value(k.value()), Some(k));
        }
        assert_eq!(PortKind::from_value(0), None);
        assert_eq!(PortKind::from_value(3), None);
    }

    #[test]
    fn counters_since_wraps() {
        let a = SteerCounters {
            redirected: u64::MAX,
            ..Default::default()
        };
        let b = SteerCounters {
            redirected: 1,
            passed: 2,
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!(d.redirected, 2);
        assert_eq!(d.passed, 2);
    }
}
