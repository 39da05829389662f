//! xwarpd's configuration: a TOML file, then command-line flags on top, validated into
//! newtypes. Every mistake is a [`ConfigError`] that names the setting and says what is
//! accepted; nothing here panics.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Deserialize;

use crate::Transport;

/// A configuration mistake, with the setting it concerns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// The file is not valid TOML or has unknown or mistyped keys.
    #[error("config file {path}: {reason}")]
    Syntax {
        /// The file.
        path: String,
        /// The parser's message (line, column, key).
        reason: String,
    },
    /// A setting has a value that is not accepted.
    #[error("invalid {setting} {value:?}: {expected}")]
    Invalid {
        /// Which setting (TOML key or flag).
        setting: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// The settings are incomplete or contradict each other.
    #[error("{0}")]
    Inconsistent(&'static str),
    /// The transport is valid but not available in this build.
    #[error("transport \"xdp\" is not available yet: the AF_XDP engine is not part of this build; use transport = \"kernel\"")]
    XdpUnavailable,
}

/// A byte count written as a number with an optional unit (`4096`, `64KiB`, `4MiB`, `1G`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = &'static str;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let split = s
            .find(|c: char| !c.is_ascii_digit() && c != '_')
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: u64 = num
            .replace('_', "")
            .parse()
            .map_err(|_| "a number of bytes with an optional unit: 4096, 64KiB, 4MiB, 1GiB")?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            "t" | "tb" | "tib" => 1 << 40,
            _ => return Err("a unit of B, KiB, MiB, GiB or TiB (powers of 1024)"),
        };
        n.checked_mul(mult)
            .map(ByteSize)
            .ok_or("a size below 16 EiB")
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A byte size in TOML: an integer or a string with a unit.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RawSize {
    Int(i64),
    Text(String),
}

impl RawSize {
    fn parse(&self, setting: &'static str) -> Result<ByteSize, ConfigError> {
        match self {
            RawSize::Int(n) => u64::try_from(*n)
                .map(ByteSize)
                .map_err(|_| ConfigError::Invalid {
                    setting,
                    value: n.to_string(),
                    expected: "a non-negative number of bytes",
                }),
            RawSize::Text(t) => t.parse().map_err(|expected| ConfigError::Invalid {
                setting,
                value: t.clone(),
                expected,
            }),
        }
    }
}

/// The file's shape (every key optional; unknown keys are errors).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    transport: Option<String>,
    control_socket: Option<PathBuf>,
    metrics: Option<String>,
    log: Option<String>,
    mpa: Option<RawMpa>,
    store: Option<RawStore>,
    #[serde(default)]
    listener: Vec<RawListener>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMpa {
    markers: Option<bool>,
    crc: Option<bool>,
    segment_per_fpdu: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStore {
    path: Option<PathBuf>,
    size: Option<RawSize>,
    listen: Option<String>,
    credits: Option<i64>,
    max_io: Option<RawSize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawListener {
    addr: String,
}

/// Command-line settings that override the file (`None`: not given).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--transport`.
    pub transport: Option<String>,
    /// `--control`.
    pub control_socket: Option<PathBuf>,
    /// `--metrics`.
    pub metrics: Option<String>,
    /// `--log`.
    pub log: Option<String>,
    /// `--store`.
    pub store: Option<PathBuf>,
    /// `--size`.
    pub size: Option<String>,
    /// `--store-listen`.
    pub store_listen: Option<String>,
    /// `--listen` (added to the file's listeners).
    pub listen: Vec<String>,
    /// `--markers`.
    pub markers: Option<bool>,
    /// `--crc`.
    pub crc: Option<bool>,
    /// `--segment-per-fpdu`.
    pub segment_per_fpdu: Option<bool>,
}

/// Where the metrics endpoint listens, or nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsAddr {
    /// Not served (`metrics = "off"`).
    Off,
    /// Served on this address.
    On(SocketAddr),
}

/// The store service's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// The backing file.
    pub path: PathBuf,
    /// Size to create or extend the file to (`None`: use the existing file's size).
    pub size: Option<ByteSize>,
    /// Where it listens.
    pub listen: SocketAddr,
    /// Credits per connection (1..=256).
    pub credits: u32,
    /// Largest READ/WRITE per call (4 KiB..=16 MiB).
    pub max_io: u32,
}

/// A validated daemon configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonConfig {
    /// The transport (only `Kernel` passes validation in this build).
    pub transport: Transport,
    /// The Unix control socket `xwarpd stats` talks to.
    pub control_socket: PathBuf,
    /// The Prometheus endpoint.
    pub metrics: MetricsAddr,
    /// The `tracing` filter (`info`, `debug`, `dataplane=trace`, ...).
    pub log: String,
    /// Markers wanted on what we receive.
    pub markers: bool,
    /// CRC wanted.
    pub crc: bool,
    /// Kernel transport: one FPDU per TCP segment (slow; for wire captures).
    pub segment_per_fpdu: bool,
    /// The store service, if any.
    pub store: Option<StoreConfig>,
    /// Echo listeners (each Send is sent back).
    pub listeners: Vec<SocketAddr>,
}

/// Default control socket.
pub const DEFAULT_CONTROL: &str = "/run/xwarpd/control.sock";
/// Default Prometheus endpoint.
pub const DEFAULT_METRICS: &str = "127.0.0.1:9464";
/// Default store port (the NFS/RDMA port).
pub const DEFAULT_STORE_LISTEN: &str = "0.0.0.0:20049";

fn addr(setting: &'static str, v: &str) -> Result<SocketAddr, ConfigError> {
    v.parse().map_err(|_| ConfigError::Invalid {
        setting,
        value: v.into(),
        expected: "an IP address and port, like 198.18.0.1:20049 or [::1]:20049",
    })
}

/// Parses a transport name.
pub fn parse_transport(setting: &'static str, v: &str) -> Result<Transport, ConfigError> {
    match v {
        "kernel" => Ok(Transport::Kernel),
        "xdp" => Ok(Transport::Xdp),
        _ => Err(ConfigError::Invalid {
            setting,
            value: v.into(),
            expected: "\"kernel\" or \"xdp\"",
        }),
    }
}

impl DaemonConfig {
    /// Reads `path` (if given), applies `o` on top and validates.
    pub fn load(path: Option<&Path>, o: &Overrides) -> Result<Self, ConfigError> {
        let raw = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| ConfigError::Read {
                    path: p.display().to_string(),
                    reason: e.to_string(),
                })?;
                Self::parse_raw(&text, &p.display().to_string())?
            }
            None => RawConfig::default(),
        };
        Self::validate(raw, o)
    }

    /// Parses TOML text (`name` is used in messages) with `o` on top.
    pub fn from_toml(text: &str, name: &str, o: &Overrides) -> Result<Self, ConfigError> {
        Self::validate(Self::parse_raw(text, name)?, o)
    }

    fn parse_raw(text: &str, name: &str) -> Result<RawConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Syntax {
            path: name.into(),
            reason: e.to_string().trim().replace('\n', " "),
        })
    }

    fn validate(raw: RawConfig, o: &Overrides) -> Result<Self, ConfigError> {
        let (tsetting, tname) = match (&o.transport, &raw.transport) {
            (Some(t), _) => ("--transport", t.as_str()),
            (None, Some(t)) => ("transport", t.as_str()),
            (None, None) => ("transport", "kernel"),
        };
        let transport = parse_transport(tsetting, tname)?;
        if transport == Transport::Xdp {
            return Err(ConfigError::XdpUnavailable);
        }
        let metrics = match o.metrics.as_deref().or(raw.metrics.as_deref()) {
            Some("off") => MetricsAddr::Off,
            Some(v) => MetricsAddr::On(addr("metrics", v)?),
            None => MetricsAddr::On(addr("metrics", DEFAULT_METRICS)?),
        };
        let log = o.log.clone().or(raw.log).unwrap_or_else(|| "info".into());
        if tracing_subscriber::EnvFilter::try_new(&log).is_err() {
            return Err(ConfigError::Invalid {
                setting: "log",
                value: log,
                expected: "a tracing filter such as info, debug or dataplane=trace",
            });
        }
        let mpa = raw.mpa.unwrap_or_default();
        let mut listeners = Vec::new();
        for l in &raw.listener {
            listeners.push(addr("listener.addr", &l.addr)?);
        }
        for l in &o.listen {
            listeners.push(addr("--listen", l)?);
        }
        let rs = raw.store.unwrap_or_default();
        let path = o.store.clone().or(rs.path);
        let store = match path {
            None => {
                if o.size.is_some() || rs.size.is_some() {
                    return Err(ConfigError::Inconsistent(
                        "a store size was given without a store path (--store PATH)",
                    ));
                }
                None
            }
            Some(path) => {
                let size =
                    match (&o.size, &rs.size) {
                        (Some(s), _) => Some(s.parse::<ByteSize>().map_err(|expected| {
                            ConfigError::Invalid {
                                setting: "--size",
                                value: s.clone(),
                                expected,
                            }
                        })?),
                        (None, Some(s)) => Some(s.parse("store.size")?),
                        (None, None) => None,
                    };
                if size == Some(ByteSize(0)) {
                    return Err(ConfigError::Invalid {
                        setting: "store.size",
                        value: "0".into(),
                        expected: "a size of at least 1 byte",
                    });
                }
                let listen = addr(
                    "store.listen",
                    o.store_listen
                        .as_deref()
                        .or(rs.listen.as_deref())
                        .unwrap_or(DEFAULT_STORE_LISTEN),
                )?;
                let credits = rs.credits.unwrap_or(16);
                let credits = u32::try_from(credits)
                    .ok()
                    .filter(|c| (1..=256).contains(c))
                    .ok_or(ConfigError::Invalid {
                        setting: "store.credits",
                        value: credits.to_string(),
                        expected: "a whole number from 1 to 256",
                    })?;
                let max_io = match &rs.max_io {
                    Some(m) => m.parse("store.max_io")?,
                    None => ByteSize(u64::from(crate::store::DEFAULT_MAX_IO)),
                };
                if !(4096..=u64::from(rpcrdma::storage::MAX_IO)).contains(&max_io.0) {
                    return Err(ConfigError::Invalid {
                        setting: "store.max_io",
                        value: max_io.to_string(),
                        expected: "from 4KiB to 16MiB",
                    });
                }
                Some(StoreConfig {
                    path,
                    size,
                    listen,
                    credits,
                    max_io: max_io.0 as u32,
                })
            }
        };
        Ok(Self {
            transport,
            control_socket: o
                .control_socket
                .clone()
                .or(raw.control_socket)
                .unwrap_or_else(|| DEFAULT_CONTROL.into()),
            metrics,
            log,
            markers: o.markers.or(mpa.markers).unwrap_or(false),
            crc: o.crc.or(mpa.crc).unwrap_or(true),
            segment_per_fpdu: o.segment_per_fpdu.or(mpa.segment_per_fpdu).unwrap_or(false),
            store,
            listeners,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DaemonConfig, ConfigError> {
        DaemonConfig::from_toml(text, "test.toml", &Overrides::default())
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.transport, Transport::Kernel);
        assert_eq!(c.metrics, MetricsAddr::On(DEFAULT_METRICS.parse().unwrap()));
        assert!(c.crc && !c.markers);
        assert!(c.store.is_none() && c.listeners.is_empty());
    }

    #[test]
    fn full_file_parses() {
        let c = parse(
            r#"
            transport = "kernel"
            control_socket = "/tmp/x.sock"
            metrics = "off"
            log = "debug"
            [mpa]
            markers = true
            crc = false
            [store]
            path = "/tmp/s.img"
            size = "64MiB"
            listen = "198.18.0.1:20049"
            credits = 8
            max_io = 1048576
            [[listener]]
            addr = "198.18.0.1:18515"
            "#,
        )
        .unwrap();
        assert_eq!(c.metrics, MetricsAddr::Off);
        assert!(c.markers && !c.crc);
        let s = c.store.unwrap();
        assert_eq!(s.size, Some(ByteSize(64 << 20)));
        assert_eq!((s.credits, s.max_io), (8, 1 << 20));
        assert_eq!(c.listeners.len(), 1);
    }

    #[test]
    fn flags_override_the_file() {
        let o = Overrides {
            store: Some("/tmp/flag.img".into()),
            size: Some("1G".into()),
            metrics: Some("127.0.0.1:1".into()),
            ..Overrides::default()
        };
        let c = DaemonConfig::from_toml("metrics = \"127.0.0.1:2\"", "t", &o).unwrap();
        assert_eq!(c.metrics, MetricsAddr::On("127.0.0.1:1".parse().unwrap()));
        assert_eq!(c.store.unwrap().size, Some(ByteSize(1 << 30)));
    }

    #[test]
    fn errors_name_the_setting_and_what_is_accepted() {
        let cases: &[(&str, &[&str])] = &[
            (
                "transport = \"rdma\"",
                &["transport", "\"kernel\" or \"xdp\""],
            ),
            ("transport = \"xdp\"", &["not available yet", "kernel"]),
            (
                "metrics = \"localhost\"",
                &["metrics", "IP address and port"],
            ),
            ("bogus = 1", &["unknown field", "bogus"]),
            ("transport = 3", &["test.toml", "transport"]),
            (
                "[store]\npath = \"/x\"\nsize = \"12 parsecs\"",
                &["store.size", "unit"],
            ),
            (
                "[store]\npath = \"/x\"\ncredits = 0",
                &["store.credits", "1 to 256"],
            ),
            (
                "[store]\npath = \"/x\"\nmax_io = \"1GiB\"",
                &["store.max_io", "16MiB"],
            ),
            ("[store]\nsize = 5", &["without a store path"]),
            ("[[listener]]\naddr = \"nowhere\"", &["listener.addr"]),
            ("log = \"[[[\"", &["log", "tracing filter"]),
            ("this is not toml", &["test.toml"]),
        ];
        for (text, needles) in cases {
            let e = parse(text).expect_err(text).to_string();
            for n in *needles {
                assert!(e.contains(n), "{text:?}: {e:?} lacks {n:?}");
            }
        }
    }

    #[test]
    fn byte_sizes() {
        assert_eq!("4096".parse::<ByteSize>(), Ok(ByteSize(4096)));
        assert_eq!("64KiB".parse::<ByteSize>(), Ok(ByteSize(65536)));
        assert_eq!("4 MiB".parse::<ByteSize>(), Ok(ByteSize(4 << 20)));
        assert_eq!("1_000".parse::<ByteSize>(), Ok(ByteSize(1000)));
        assert!("".parse::<ByteSize>().is_err());
        assert!("-1".parse::<ByteSize>().is_err());
        assert!("99999999999T".parse::<ByteSize>().is_err());
    }
}
