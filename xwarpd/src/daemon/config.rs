//! xwarpd's configuration: a TOML file, then command-line flags on top, validated into
//! newtypes. Every mistake is a [`ConfigError`] that names the setting and says what is
//! accepted; nothing here panics.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
pub use tool_support::ByteSize;
use tool_support::SizeError;

use super::admission_config::{parse_admission, parse_backlog, RawAdmission};
use super::store_config::{parse_store, RawStore};
pub use super::store_config::{
    StoreConfig, TcpStoreConfig, DEFAULT_STORE_PORT, DEFAULT_TCP_STORE_PORT,
};
use afxdp::LocalPortRange;
use dataplane::{AttachPolicy, BindMode, EngineMode, Transport, XdpConfig};

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
    /// A listening port lies inside the engine's active-open port range.
    #[error("{setting} port {port} lies in the local port range {range} (xdp.local_ports / --local-ports), which the XDP program steers to the engine's own connections; choose a port outside it or move the range")]
    PortInLocalRange {
        /// The setting holding the port.
        setting: &'static str,
        /// The port.
        port: u16,
        /// The range, as `FIRST-LAST`.
        range: String,
    },
    /// The engine core is not one this process may run on.
    #[error("invalid {setting} {core}: not a CPU this process may run on (allowed: {allowed})")]
    NoSuchCore {
        /// Which setting (TOML key or flag).
        setting: &'static str,
        /// The value given.
        core: usize,
        /// The CPUs of this process's affinity mask.
        allowed: String,
    },
}

/// A byte size in TOML: an integer or a string with a unit.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RawSize {
    Int(i64),
    Text(String),
}

impl RawSize {
    pub(super) fn parse(&self, setting: &'static str) -> Result<ByteSize, ConfigError> {
        match self {
            RawSize::Int(n) => u64::try_from(*n)
                .map(ByteSize)
                .map_err(|_| ConfigError::Invalid {
                    setting,
                    value: n.to_string(),
                    expected: "a non-negative number of bytes",
                }),
            RawSize::Text(t) => t.parse().map_err(|e: SizeError| ConfigError::Invalid {
                setting,
                value: t.clone(),
                expected: e.expected(),
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
    admission: Option<RawAdmission>,
    store: Option<RawStore>,
    xdp: Option<RawXdp>,
    #[serde(default)]
    listener: Vec<RawListener>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawXdp {
    interface: Option<String>,
    queue: Option<i64>,
    queues: Option<i64>,
    lane_steering: Option<String>,
    bind: Option<String>,
    attach: Option<String>,
    local_ports: Option<String>,
    engine: Option<String>,
    core: Option<i64>,
    max_connections: Option<i64>,
    backlog: Option<i64>,
    max_half_open: Option<i64>,
    synack_retries: Option<i64>,
    huge_pages: Option<bool>,
    busy_poll_usecs: Option<i64>,
    busy_poll_budget: Option<i64>,
    tx_checksum: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMpa {
    markers: Option<bool>,
    crc: Option<bool>,
    segment_per_fpdu: Option<bool>,
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
    /// `--store-allow` (replaces the file's `store.allow`).
    pub store_allow: Vec<String>,
    /// `--store-max-connections`.
    pub store_max_connections: Option<String>,
    /// `--store-max-connections-per-source`.
    pub store_max_connections_per_source: Option<String>,
    /// `--backlog`.
    pub backlog: Option<String>,
    /// `--backlog-per-source`.
    pub backlog_per_source: Option<String>,
    /// `--store-idle-timeout`.
    pub store_idle_timeout: Option<String>,
    /// `--store-tcp` (on/off).
    pub store_tcp: Option<String>,
    /// `--store-tcp-port`.
    pub store_tcp_port: Option<String>,
    /// `--store-tcp-rdma-option` (on/off).
    pub store_tcp_rdma_option: Option<String>,
    /// `--listen` (added to the file's listeners).
    pub listen: Vec<String>,
    /// `--markers`.
    pub markers: Option<bool>,
    /// `--crc`.
    pub crc: Option<bool>,
    /// `--segment-per-fpdu`.
    pub segment_per_fpdu: Option<bool>,
    /// `--interface` (xdp).
    pub interface: Option<String>,
    /// `--queue` (xdp).
    pub queue: Option<String>,
    /// `--bind` (xdp).
    pub bind: Option<String>,
    /// `--attach` (xdp).
    pub attach: Option<String>,
    /// `--local-ports` (xdp).
    pub local_ports: Option<String>,
    /// `--engine` (xdp).
    pub engine: Option<String>,
    /// `--core` (xdp).
    pub core: Option<String>,
}

impl Overrides {
    /// The xdp flags that were given, by flag name.
    fn xdp_flags(&self) -> Vec<&'static str> {
        [
            ("--interface", self.interface.is_some()),
            ("--queue", self.queue.is_some()),
            ("--bind", self.bind.is_some()),
            ("--attach", self.attach.is_some()),
            ("--local-ports", self.local_ports.is_some()),
            ("--engine", self.engine.is_some()),
            ("--core", self.core.is_some()),
        ]
        .into_iter()
        .filter_map(|(f, given)| given.then_some(f))
        .collect()
    }
}

/// Where the metrics endpoint listens, or nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsAddr {
    /// Not served (`metrics = "off"`).
    Off,
    /// Served on this address.
    On(SocketAddr),
}

/// A validated daemon configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct DaemonConfig {
    /// The transport.
    pub transport: Transport,
    /// The AF_XDP device's settings: `Some` exactly when `transport` is `Xdp`.
    pub xdp: Option<XdpConfig>,
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
    /// A listener's backlog: connections whose MPA startup has not finished, at most
    /// (`--backlog`, `admission.backlog`; on the xdp transport also `xdp.backlog`, and in
    /// `xdp.listener.max_accept_queue`).
    pub backlog: usize,
    /// What counts as one source of connections, and each source's share of a listener's
    /// backlog (`[admission]`); on the xdp transport also in `xdp.limits.backlog_share`.
    pub backlog_share: dataplane::SourceShare,
    /// The store service, if any.
    pub store: Option<StoreConfig>,
    /// Echo listeners (each Send is sent back).
    pub listeners: Vec<SocketAddr>,
}

/// Default control socket.
pub const DEFAULT_CONTROL: &str = "/run/xwarpd/control.sock";
/// Default Prometheus endpoint.
pub const DEFAULT_METRICS: &str = "127.0.0.1:9464";

pub(super) fn addr(setting: &'static str, v: &str) -> Result<SocketAddr, ConfigError> {
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

/// A setting given as a flag or as a file key (the flag wins), with the name to blame.
pub(super) fn pick<'a>(
    flag: (&'static str, Option<&'a str>),
    key: (&'static str, Option<&'a str>),
) -> Option<(&'static str, &'a str)> {
    match (flag, key) {
        ((f, Some(v)), _) => Some((f, v)),
        (_, (k, Some(v))) => Some((k, v)),
        _ => None,
    }
}

/// One of a setting's keywords (`default` when not given).
fn keyword<T: Copy>(
    given: Option<(&'static str, &str)>,
    default: T,
    words: &[(&str, T)],
    expected: &'static str,
) -> Result<T, ConfigError> {
    let Some((setting, v)) = given else {
        return Ok(default);
    };
    words
        .iter()
        .find(|(w, _)| *w == v)
        .map(|&(_, t)| t)
        .ok_or_else(|| ConfigError::Invalid {
            setting,
            value: v.into(),
            expected,
        })
}

/// Whether `n` is a name Linux accepts for an interface (`dev_valid_name`).
fn valid_ifname(n: &str) -> bool {
    !n.is_empty()
        && n.len() < 16
        && n != "."
        && n != ".."
        && !n.chars().any(|c| c == '/' || c == ':' || c.is_whitespace())
}

/// Parses the `[xdp]` section with the xdp flags on top. `Ok(None)` when no interface is
/// named (fine for the kernel transport, which ignores the section once it is valid).
fn parse_xdp(raw: RawXdp, o: &Overrides) -> Result<Option<XdpConfig>, ConfigError> {
    let invalid = |setting, value: &str, expected| ConfigError::Invalid {
        setting,
        value: value.into(),
        expected,
    };
    let (queue_key, core_key) = (
        raw.queue.map(|q| q.to_string()),
        raw.core.map(|c| c.to_string()),
    );
    let queue = match pick(
        ("--queue", o.queue.as_deref()),
        ("xdp.queue", queue_key.as_deref()),
    ) {
        Some((setting, v)) => v.trim().parse::<u32>().map_err(|_| {
            invalid(
                setting,
                v,
                "a receive queue number, 0 or more (see `ethtool -l IFNAME`)",
            )
        })?,
        None => 0,
    };
    let bind = keyword(
        pick(
            ("--bind", o.bind.as_deref()),
            ("xdp.bind", raw.bind.as_deref()),
        ),
        BindMode::Auto,
        &[
            ("auto", BindMode::Auto),
            ("copy", BindMode::Copy),
            ("zerocopy", BindMode::ZeroCopy),
        ],
        "\"auto\" (zero-copy when the driver offers it, else copy), \"copy\" or \"zerocopy\"",
    )?;
    let attach = keyword(
        pick(
            ("--attach", o.attach.as_deref()),
            ("xdp.attach", raw.attach.as_deref()),
        ),
        AttachPolicy::NativeOrGeneric,
        &[
            ("auto", AttachPolicy::NativeOrGeneric),
            ("native", AttachPolicy::NativeOnly),
            ("generic", AttachPolicy::GenericOnly),
        ],
        "\"auto\" (native XDP, else generic with a warning), \"native\" or \"generic\"",
    )?;
    let local_ports = match pick(
        ("--local-ports", o.local_ports.as_deref()),
        ("xdp.local_ports", raw.local_ports.as_deref()),
    ) {
        Some((setting, v)) => {
            let r: LocalPortRange = v.trim().parse().map_err(|_| {
                invalid(
                    setting,
                    v,
                    "PORT or FIRST-LAST with 1 <= FIRST <= LAST <= 65535, like 40000-40999",
                )
            })?;
            r.first()..=r.last()
        }
        None => XdpConfig::new("").local_ports,
    };
    keyword(
        pick(
            ("--engine", o.engine.as_deref()),
            ("xdp.engine", raw.engine.as_deref()),
        ),
        (),
        &[("threaded", ())],
        "\"threaded\" (the engine polls on its own thread; an inline engine needs an application thread driving it, which a daemon does not have; pin it with xdp.core / --core)",
    )?;
    let mode = match pick(
        ("--core", o.core.as_deref()),
        ("xdp.core", core_key.as_deref()),
    ) {
        None => EngineMode::Threaded,
        Some((setting, v)) => {
            let core = v
                .trim()
                .parse::<usize>()
                .map_err(|_| invalid(setting, v, "a CPU number, 0 or more"))?;
            let allowed: Vec<usize> = core_affinity::get_core_ids()
                .unwrap_or_default()
                .into_iter()
                .map(|c| c.id)
                .collect();
            if !allowed.is_empty() && !allowed.contains(&core) {
                return Err(ConfigError::NoSuchCore {
                    setting,
                    core,
                    allowed: allowed
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            EngineMode::Pinned(core)
        }
    };
    let interface = match pick(
        ("--interface", o.interface.as_deref()),
        ("xdp.interface", raw.interface.as_deref()),
    ) {
        None => return Ok(None),
        Some((setting, v)) if !valid_ifname(v) => {
            return Err(invalid(
                setting,
                v,
                "an interface name: 1 to 15 bytes, no '/', ':' or whitespace",
            ))
        }
        Some((_, v)) => v,
    };
    let mut cfg = XdpConfig::new(interface);
    (cfg.queue, cfg.bind, cfg.attach) = (queue, bind, attach);
    #[cfg(debug_assertions)]
    if let Some(f) = super::test_hooks::faults()? {
        cfg.fault = f;
    }
    (cfg.local_ports, cfg.mode) = (local_ports, mode);
    // The engine's bounds under load (TOML only; the defaults suit most hosts).
    let in_range = |setting, v: Option<i64>, lo: i64, hi: i64, expected| match v {
        None => Ok(None),
        Some(n) if (lo..=hi).contains(&n) => Ok(Some(n as usize)),
        Some(n) => Err(invalid(setting, &n.to_string(), expected)),
    };
    if let Some(n) = in_range(
        "xdp.max_connections",
        raw.max_connections,
        1,
        1 << 20,
        "connections the engine holds at most, 1 to 1048576 (default 4096)",
    )? {
        cfg.limits.max_connections = n;
    }
    if let Some(n) = in_range(
        "xdp.backlog",
        raw.backlog,
        1,
        1 << 16,
        "connections per listener whose MPA startup has not finished, 1 to 65536 (default 256); more are reset",
    )? {
        cfg.listener.max_accept_queue = n;
    }
    if let Some(n) = in_range(
        "xdp.max_half_open",
        raw.max_half_open,
        0,
        1 << 16,
        "half-open handshakes per listener, 0 to 65536 (default 1024); past it SYN cookies answer",
    )? {
        cfg.listener.max_half_open = n;
    }
    if let Some(n) = in_range(
        "xdp.synack_retries",
        raw.synack_retries,
        0,
        10,
        "SYN-ACK retransmissions before a half-open handshake is dropped, 0 to 10 (default 5, as Linux)",
    )? {
        cfg.listener.synack_retries = n as u32;
    }
    if let Some(n) = in_range(
        "xdp.queues",
        raw.queues,
        1,
        64,
        "receive queues served from xdp.queue on, one engine each, 1 to 64 (default 1)",
    )? {
        cfg.queues = n as u32;
    }
    cfg.lane_steering = keyword(
        raw.lane_steering.as_deref().map(|v| ("xdp.lane_steering", v)),
        dataplane::LaneSteering::Auto,
        &[
            ("auto", dataplane::LaneSteering::Auto),
            ("symmetric", dataplane::LaneSteering::Symmetric),
        ],
        "\"auto\" (follow the NIC's RSS when its driver reports it, else the symmetric hash) or \"symmetric\"",
    )?;
    cfg.tx_checksum = keyword(
        raw.tx_checksum.as_deref().map(|v| ("xdp.tx_checksum", v)),
        dataplane::TxChecksumOffload::Auto,
        &[
            ("auto", dataplane::TxChecksumOffload::Auto),
            ("engine", dataplane::TxChecksumOffload::Off),
            ("device", dataplane::TxChecksumOffload::Device),
            ("kernel", dataplane::TxChecksumOffload::Kernel),
        ],
        "\"auto\" (the device where its driver offers AF_XDP TX checksums, else the engine; the default), \"engine\", \"device\" or \"kernel\" (computed by the kernel in copy mode)",
    )?;
    // NIC hosts (no effect on veth): the UMEM on huge pages, busy polling of the driver.
    cfg.huge_pages = raw.huge_pages.unwrap_or(false);
    let usecs = in_range(
        "xdp.busy_poll_usecs",
        raw.busy_poll_usecs,
        0,
        10_000,
        "microseconds one busy-poll system call may spin in the driver (SO_BUSY_POLL), 0 (off, the default) to 10000",
    )?;
    let budget = in_range(
        "xdp.busy_poll_budget",
        raw.busy_poll_budget,
        1,
        1024,
        "packets the driver may handle per busy poll (SO_BUSY_POLL_BUDGET), 1 to 1024 (default 64)",
    )?;
    cfg.busy_poll = match (usecs, budget) {
        (None | Some(0), Some(_)) => {
            return Err(ConfigError::Inconsistent(
                "xdp.busy_poll_budget needs xdp.busy_poll_usecs above 0 (busy polling on)",
            ))
        }
        (None | Some(0), None) => None,
        (Some(u), b) => Some(dataplane::BusyPoll {
            usecs: u as u32,
            budget: b.map_or(dataplane::BusyPoll::default().budget, |b| b as u32),
        }),
    };
    Ok(Some(cfg))
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
        // The section is checked whatever the transport, so a file can be switched with
        // --transport; the flags only make sense with xdp.
        let xdp_backlog = raw.xdp.as_ref().is_some_and(|x| x.backlog.is_some());
        let xdp = parse_xdp(raw.xdp.unwrap_or_default(), o)?;
        let mut xdp = match transport {
            Transport::Kernel if !o.xdp_flags().is_empty() => {
                return Err(ConfigError::Inconsistent(
                    "--interface, --queue, --bind, --attach, --local-ports, --engine and --core apply to the xdp transport only: add --transport xdp",
                ))
            }
            Transport::Kernel => None,
            Transport::Xdp => Some(xdp.ok_or(ConfigError::Inconsistent(
                "transport \"xdp\" needs an interface: set xdp.interface in the file or give --interface IFNAME",
            ))?),
        };
        let admission = raw.admission.unwrap_or_default();
        let xdp_backlog = xdp_backlog.then(|| xdp.as_ref().map(|x| x.listener.max_accept_queue));
        let backlog = parse_backlog(&admission, o, xdp_backlog.flatten())?;
        let backlog_share = parse_admission(admission, o, backlog)?;
        if let Some(x) = &mut xdp {
            x.listener.max_accept_queue = backlog;
            x.limits.backlog_share = backlog_share;
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
        let store = parse_store(
            raw.store.unwrap_or_default(),
            o,
            xdp.is_some(),
            backlog_share.prefix,
        )?;
        let segment_per_fpdu = o.segment_per_fpdu.or(mpa.segment_per_fpdu).unwrap_or(false);
        if let Some(x) = &xdp {
            if segment_per_fpdu {
                return Err(ConfigError::Inconsistent(
                    "segment_per_fpdu applies to the kernel transport only (the xdp engine segments by itself)",
                ));
            }
            let range = LocalPortRange::new(*x.local_ports.start(), *x.local_ports.end())
                .map_err(|_| ConfigError::Inconsistent("empty local port range"))?;
            let store_port = store.as_ref().map(|s| {
                let port = s.listen.map_or(DEFAULT_STORE_PORT, |l| l.port());
                ("store.listen", port)
            });
            let tcp_port = store
                .as_ref()
                .and_then(|s| s.tcp)
                .map(|t| ("store.tcp_port", t.port));
            let ports = listeners.iter().map(|l| ("listener", l.port()));
            for (setting, port) in store_port.into_iter().chain(tcp_port).chain(ports) {
                if port != 0 && range.contains(port) {
                    return Err(ConfigError::PortInLocalRange {
                        setting,
                        port,
                        range: range.to_string(),
                    });
                }
            }
        }
        Ok(Self {
            transport,
            xdp,
            control_socket: o
                .control_socket
                .clone()
                .or(raw.control_socket)
                .unwrap_or_else(|| DEFAULT_CONTROL.into()),
            metrics,
            log,
            markers: o.markers.or(mpa.markers).unwrap_or(false),
            crc: o.crc.or(mpa.crc).unwrap_or(true),
            segment_per_fpdu,
            backlog,
            backlog_share,
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
            store_listen: Some("127.0.0.1:20049".into()),
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
            (
                "transport = \"xdp\"",
                &["needs an interface", "xdp.interface", "--interface"],
            ),
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
                "[store]\npath = \"/x\"\nlisten = \"127.0.0.1:1\"\ncredits = 0",
                &["store.credits", "1 to 256"],
            ),
            (
                "[store]\npath = \"/x\"\nlisten = \"127.0.0.1:1\"\nmax_io = \"1GiB\"",
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

    fn xdp(text: &str, o: &Overrides) -> Result<XdpConfig, ConfigError> {
        let c = DaemonConfig::from_toml(text, "test.toml", o)?;
        assert_eq!(c.transport, Transport::Xdp);
        Ok(c.xdp.expect("xdp transport carries its settings"))
    }

    #[test]
    fn xdp_section_defaults_are_the_devices() {
        let x = xdp(
            "transport = \"xdp\"\n[xdp]\ninterface = \"eth1\"",
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(x, XdpConfig::new("eth1"));
        // A daemon's engine runs on its own thread, never inline.
        assert_eq!(x.mode, EngineMode::Threaded);
    }

    #[test]
    fn xdp_section_parses_every_key() {
        let core = core_affinity::get_core_ids().unwrap()[0].id;
        let x = xdp(
            &format!(
                r#"
                transport = "xdp"
                [xdp]
                interface = "enp1s0f1"
                queue = 3
                queues = 4
                lane_steering = "symmetric"
                bind = "zerocopy"
                attach = "native"
                local_ports = "50000-50099"
                engine = "threaded"
                core = {core}
                max_connections = 100
                backlog = 50
                max_half_open = 60
                synack_retries = 2
                huge_pages = true
                busy_poll_usecs = 50
                busy_poll_budget = 16
                tx_checksum = "device"
                "#
            ),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(x.interface, "enp1s0f1");
        assert!(x.huge_pages);
        assert_eq!(x.tx_checksum, dataplane::TxChecksumOffload::Device);
        assert_eq!(
            x.busy_poll,
            Some(dataplane::BusyPoll {
                usecs: 50,
                budget: 16
            })
        );
        assert_eq!(x.limits.max_connections, 100);
        assert_eq!(x.listener.max_accept_queue, 50);
        assert_eq!(x.listener.max_half_open, 60);
        assert_eq!(x.listener.synack_retries, 2);
        assert_eq!(x.queue, 3);
        assert_eq!(x.queues, 4);
        assert_eq!(x.lane_steering, dataplane::LaneSteering::Symmetric);
        assert_eq!(x.bind, BindMode::ZeroCopy);
        assert_eq!(x.attach, AttachPolicy::NativeOnly);
        assert_eq!(x.local_ports, 50000..=50099);
        assert_eq!(x.mode, EngineMode::Pinned(core));
        for (word, mode) in [
            ("auto", BindMode::Auto),
            ("copy", BindMode::Copy),
            ("zerocopy", BindMode::ZeroCopy),
        ] {
            let o = Overrides {
                bind: Some(word.into()),
                ..Overrides::default()
            };
            assert_eq!(
                xdp("transport=\"xdp\"\n[xdp]\ninterface=\"x\"", &o)
                    .unwrap()
                    .bind,
                mode
            );
        }
        for (word, policy) in [
            ("auto", AttachPolicy::NativeOrGeneric),
            ("native", AttachPolicy::NativeOnly),
            ("generic", AttachPolicy::GenericOnly),
        ] {
            let o = Overrides {
                attach: Some(word.into()),
                ..Overrides::default()
            };
            let x = xdp("transport=\"xdp\"\n[xdp]\ninterface=\"x\"", &o).unwrap();
            assert_eq!(x.attach, policy);
        }
    }

    #[test]
    fn xdp_flags_override_the_file() {
        let o = Overrides {
            transport: Some("xdp".into()),
            interface: Some("veth7".into()),
            queue: Some("1".into()),
            local_ports: Some("41000".into()),
            ..Overrides::default()
        };
        let x = xdp(
            "transport = \"kernel\"\n[xdp]\ninterface = \"eth0\"\nqueue = 5\nbind = \"copy\"",
            &o,
        )
        .unwrap();
        assert_eq!((x.interface.as_str(), x.queue), ("veth7", 1));
        assert_eq!(
            x.bind,
            BindMode::Copy,
            "the file's key stays when no flag is given"
        );
        assert_eq!(x.local_ports, 41000..=41000);
    }

    #[test]
    fn kernel_transport_checks_but_ignores_the_xdp_section() {
        let c = parse("[xdp]\ninterface = \"eth1\"\nqueue = 2").unwrap();
        assert_eq!((c.transport, c.xdp), (Transport::Kernel, None));
        // A broken section is reported even so (check-config catches it before a switch).
        let e = parse("[xdp]\nbind = \"fast\"").unwrap_err().to_string();
        assert!(e.contains("xdp.bind"), "{e}");
    }

    #[test]
    fn xdp_errors_name_the_setting_and_what_is_accepted() {
        let x = "transport = \"xdp\"\n[xdp]\ninterface = \"eth1\"\n";
        let cases: Vec<(String, &[&str])> = vec![
            (format!("{x}queues = 65"), &["xdp.queues", "65", "1 to 64"]),
            (
                format!("{x}lane_steering = \"rss\""),
                &["xdp.lane_steering", "rss", "symmetric"],
            ),
            (
                format!("{x}queue = -1"),
                &["xdp.queue", "\"-1\"", "receive queue"],
            ),
            (
                format!("{x}synack_retries = 11"),
                &["xdp.synack_retries", "\"11\"", "0 to 10"],
            ),
            (format!("{x}backlog = 0"), &["xdp.backlog", "1 to 65536"]),
            (
                format!("{x}busy_poll_usecs = 20000"),
                &["xdp.busy_poll_usecs", "0 (off, the default) to 10000"],
            ),
            (
                format!("{x}busy_poll_budget = 8"),
                &["xdp.busy_poll_budget needs xdp.busy_poll_usecs"],
            ),
            (
                format!("{x}tx_checksum = \"nic\""),
                &["xdp.tx_checksum", "nic", "\"auto\"", "\"kernel\""],
            ),
            (
                format!("{x}max_connections = 0"),
                &["xdp.max_connections", "1 to 1048576"],
            ),
            (
                format!("{x}bind = \"fast\""),
                &["xdp.bind", "\"auto\"", "\"copy\"", "\"zerocopy\""],
            ),
            (
                format!("{x}attach = \"offload\""),
                &["xdp.attach", "\"native\"", "\"generic\""],
            ),
            (
                format!("{x}local_ports = \"40999-40000\""),
                &["xdp.local_ports", "FIRST-LAST"],
            ),
            (
                format!("{x}local_ports = \"0-10\""),
                &["xdp.local_ports", "1 <= FIRST"],
            ),
            (
                format!("{x}local_ports = \"70000\""),
                &["xdp.local_ports", "65535"],
            ),
            (
                format!("{x}engine = \"inline\""),
                &["xdp.engine", "\"inline\"", "\"threaded\"", "daemon"],
            ),
            (
                format!("{x}core = 100000"),
                &["xdp.core", "100000", "not a CPU", "allowed"],
            ),
            (format!("{x}core = -3"), &["xdp.core", "CPU number"]),
            (
                "transport = \"xdp\"\n[xdp]\ninterface = \"a/b\"".into(),
                &["xdp.interface", "\"a/b\"", "15 bytes"],
            ),
            (
                "transport = \"xdp\"\n[xdp]\ninterface = \"sixteen-bytes-00\"".into(),
                &["xdp.interface", "15 bytes"],
            ),
            (
                "transport = \"xdp\"\n[xdp]\nqueue = 1".into(),
                &["needs an interface", "--interface"],
            ),
            (format!("{x}ring = 5"), &["unknown field", "ring"]),
            (
                format!("{x}[mpa]\nsegment_per_fpdu = true"),
                &["segment_per_fpdu", "kernel transport only"],
            ),
            (
                format!("{x}local_ports = \"20000-20100\"\n[store]\npath = \"/x\""),
                &["store.listen", "20049", "20000-20100", "local port range"],
            ),
            (
                format!("{x}[[listener]]\naddr = \"198.18.0.1:40001\""),
                &["listener", "40001", "40000-40999"],
            ),
        ];
        for (text, needles) in &cases {
            let e = parse(text).expect_err(text).to_string();
            for n in *needles {
                assert!(e.contains(n), "{text:?}: {e:?} lacks {n:?}");
            }
        }
    }

    #[test]
    fn xdp_flags_need_the_xdp_transport() {
        for o in [
            Overrides {
                interface: Some("eth1".into()),
                ..Overrides::default()
            },
            Overrides {
                core: Some("0".into()),
                ..Overrides::default()
            },
        ] {
            let e = DaemonConfig::from_toml("", "t", &o)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("xdp transport only") && e.contains("--transport xdp"),
                "{e}"
            );
        }
        // Flag errors name the flag, not the key.
        let o = Overrides {
            transport: Some("xdp".into()),
            interface: Some("eth1".into()),
            queue: Some("first".into()),
            ..Overrides::default()
        };
        let e = DaemonConfig::from_toml("", "t", &o)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--queue") && e.contains("\"first\""), "{e}");
    }

    #[test]
    fn store_size_takes_the_shared_size_forms() {
        // The forms are tool_support::ByteSize's (tested there); the config reads text and
        // integers through it.
        for (text, want) in [
            ("\"4KiB\"", 4096),
            ("\"4 MiB\"", 4 << 20),
            ("\"1G\"", 1 << 30),
            ("65536", 65536),
        ] {
            let c = DaemonConfig::from_toml(
                &format!("[store]\npath = \"/x\"\nlisten = \"198.18.0.1:20049\"\nsize = {text}"),
                "t",
                &Overrides::default(),
            )
            .unwrap();
            assert_eq!(c.store.unwrap().size, Some(ByteSize(want)), "{text}");
        }
    }
}
