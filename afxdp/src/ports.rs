//! The engine's active-open local port range, and its reservation from the kernel.
//!
//! The XDP program steers every port of the range to the engine, so the kernel must not pick
//! them for its own connections: `net.ipv4.ip_local_reserved_ports` (per network namespace; it
//! also covers IPv6) keeps them out of the kernel's ephemeral choices.

use std::fmt;
use std::fs;
use std::str::FromStr;

use super::XdpError;

const RESERVED_PORTS: &str = "/proc/sys/net/ipv4/ip_local_reserved_ports";

/// An inclusive range of TCP ports, `first..=last`, with `1 <= first <= last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalPortRange {
    first: u16,
    last: u16,
}

impl LocalPortRange {
    /// The range `first..=last`; rejects empty ranges and port 0.
    pub fn new(first: u16, last: u16) -> Result<Self, XdpError> {
        if first == 0 {
            return Err(XdpError::Invalid("port 0 in a local port range"));
        }
        if first > last {
            return Err(XdpError::Invalid("local port range with first > last"));
        }
        Ok(Self { first, last })
    }

    /// The first port.
    pub fn first(&self) -> u16 {
        self.first
    }

    /// The last port (inclusive).
    pub fn last(&self) -> u16 {
        self.last
    }

    /// The number of ports.
    pub fn len(&self) -> usize {
        usize::from(self.last - self.first) + 1
    }

    /// Always false: a range holds at least one port.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether `port` is in the range.
    pub fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }

    /// The ports, in order.
    pub fn iter(&self) -> impl Iterator<Item = u16> {
        self.first..=self.last
    }
}

impl fmt::Display for LocalPortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.first == self.last {
            write!(f, "{}", self.first)
        } else {
            write!(f, "{}-{}", self.first, self.last)
        }
    }
}

impl FromStr for LocalPortRange {
    type Err = XdpError;

    /// Parses `PORT` or `FIRST-LAST` (the sysctl's syntax).
    fn from_str(s: &str) -> Result<Self, XdpError> {
        let bad = XdpError::Invalid("port range is not PORT or FIRST-LAST");
        let port = |p: &str| p.trim().parse::<u16>().map_err(|_| bad);
        match s.split_once('-') {
            Some((a, b)) => Self::new(port(a)?, port(b)?),
            None => {
                let p = port(s)?;
                Self::new(p, p)
            }
        }
    }
}

/// Parses the sysctl's list (`"8080,9000-9100"`, possibly empty).
pub fn parse_reserved(list: &str) -> Result<Vec<LocalPortRange>, XdpError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect()
}

/// The reserved ranges of the calling thread's network namespace.
pub fn reserved_ports() -> Result<Vec<LocalPortRange>, XdpError> {
    let text =
        fs::read_to_string(RESERVED_PORTS).map_err(|e| XdpError::from_io(RESERVED_PORTS, &e))?;
    parse_reserved(&text)
}

/// Adds `range` to `ip_local_reserved_ports` of the calling thread's network namespace, keeping
/// what was reserved before. Host set-up calls this; tests call it only inside their own
/// namespace (the setting is per namespace).
pub fn reserve_local_ports(range: LocalPortRange) -> Result<(), XdpError> {
    let mut all = reserved_ports()?;
    if all
        .iter()
        .any(|r| r.first <= range.first && range.last <= r.last)
    {
        return Ok(());
    }
    all.push(range);
    let list: Vec<String> = all.iter().map(ToString::to_string).collect();
    fs::write(RESERVED_PORTS, list.join(",")).map_err(|e| XdpError::from_io(RESERVED_PORTS, &e))
}

/// Whether the kernel would avoid `port` for its ephemeral choices (in the calling thread's
/// namespace).
pub fn is_reserved(port: u16) -> Result<bool, XdpError> {
    Ok(reserved_ports()?.iter().any(|r| r.contains(port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_rejects_port_zero_and_inverted_bounds() {
        assert!(LocalPortRange::new(0, 10).is_err());
        assert!(LocalPortRange::new(10, 9).is_err());
        let r = LocalPortRange::new(40000, 40003).unwrap();
        assert_eq!(r.len(), 4);
        assert!(r.contains(40000) && r.contains(40003) && !r.contains(40004));
        assert_eq!(r.iter().collect::<Vec<_>>(), [40000, 40001, 40002, 40003]);
    }

    #[test]
    fn sysctl_list_round_trips() {
        let v = parse_reserved("8080, 9000-9100\n").unwrap();
        assert_eq!(
            v,
            [
                LocalPortRange::new(8080, 8080).unwrap(),
                LocalPortRange::new(9000, 9100).unwrap()
            ]
        );
        let text: Vec<String> = v.iter().map(ToString::to_string).collect();
        assert_eq!(text.join(","), "8080,9000-9100");
        assert!(parse_reserved("").unwrap().is_empty());
        assert!(parse_reserved("\n").unwrap().is_empty());
    }

    #[test]
    fn malformed_lists_are_errors_not_panics() {
        for bad in ["x", "1-", "-2", "70000", "5-4", "0"] {
            assert!(parse_reserved(bad).is_err(), "{bad}");
        }
    }
}
