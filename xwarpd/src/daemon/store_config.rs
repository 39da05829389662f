//! The `[store]` section and the `--store*` flags, validated into [`StoreConfig`].
//!
//! The listen address has no wildcard default: it is given (`store.listen`, `--store-listen`),
//! or on the xdp transport taken from the interface (its IPv4 address, port 20049). Clients are
//! admitted by network: `store.allow` / `--store-allow`, by default only the listen address's
//! own subnet (found from its interface's prefix at start); listening on every address
//! (0.0.0.0, ::) therefore needs an explicit list.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use tool_support::TimeSpan;

use super::config::{addr, pick, ByteSize, ConfigError, Overrides, RawSize};
pub use crate::oncrpc::DEFAULT_TCP_STORE_PORT;
use crate::store::{AllowList, IpNet, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS};

/// The store port (the NFS/RDMA port), used when the address comes from the interface.
pub const DEFAULT_STORE_PORT: u16 = 20049;
/// Largest connection cap accepted.
const MAX_CONNECTIONS_LIMIT: u32 = 4096;
/// The shortest idle timeout accepted.
const IDLE_TIMEOUT_MIN: Duration = Duration::from_secs(1);
/// The longest idle timeout accepted: a week.
const IDLE_TIMEOUT_MAX: Duration = Duration::from_secs(7 * 86_400);

/// The `[store]` section as written (every key optional; unknown keys are errors).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    path: Option<PathBuf>,
    size: Option<RawSize>,
    listen: Option<String>,
    allow: Option<Vec<String>>,
    credits: Option<i64>,
    max_io: Option<RawSize>,
    max_connections: Option<i64>,
    max_connections_per_source: Option<i64>,
    idle_timeout: Option<RawDuration>,
    tcp: Option<bool>,
    tcp_port: Option<i64>,
    tcp_rdma_option: Option<bool>,
}

/// A duration in TOML: seconds (`300`, `1.5`), or a string in [`TimeSpan`]'s grammar (`300s`,
/// `5m`, `1h`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum RawDuration {
    Secs(i64),
    Fraction(f64),
    Text(String),
}

/// The store service's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// The backing file.
    pub path: PathBuf,
    /// Size to create or extend the file to (`None`: use the existing file's size).
    pub size: Option<ByteSize>,
    /// Where it listens; `None`: the xdp interface's IPv4 address, port [`DEFAULT_STORE_PORT`].
    pub listen: Option<SocketAddr>,
    /// The client networks admitted.
    pub allow: AllowList,
    /// Credits per connection (1..=256).
    pub credits: u32,
    /// Largest READ/WRITE per call (4 KiB..=16 MiB).
    pub max_io: u32,
    /// Most connections at once (1..=4096).
    pub max_connections: u32,
    /// Most connections at once from one source (1..=4096; default a quarter of
    /// `max_connections`), sources counted as `[admission]` says.
    pub max_connections_per_source: u32,
    /// What counts as one source (`[admission]`).
    pub sources: dataplane::SourcePrefix,
    /// A connection with no call for this long is closed (1 s to 7 days).
    pub idle_timeout: Duration,
    /// The same store over ONC RPC on plain TCP (`store.tcp`, `--store-tcp on`; off by
    /// default), with the same allow-list, limits and idle timeout.
    pub tcp: Option<TcpStoreConfig>,
}

/// The ONC RPC over TCP service of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpStoreConfig {
    /// Its port on the store's listen address (`store.tcp_port`, `--store-tcp-port`; default
    /// [`DEFAULT_TCP_STORE_PORT`]; 0: any free port, shown in the ready line).
    pub port: u16,
    /// Offer the TCP RDMA option to clients (xdp transport only: our own TCP;
    /// `store.tcp_rdma_option`, `--store-tcp-rdma-option on`; off by default).
    pub rdma_option: bool,
}

impl StoreConfig {
    /// Each source's share of the connections.
    pub fn source_share(&self) -> dataplane::SourceShare {
        dataplane::SourceShare {
            per_source: self.max_connections_per_source as usize,
            prefix: self.sources,
        }
    }
}

/// `on` / `off` (also true/false, yes/no) of a flag.
fn on_off(setting: &'static str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(ConfigError::Invalid {
            setting,
            value: v.into(),
            expected: "on or off",
        }),
    }
}

/// The `store.tcp*` settings and flags.
fn parse_tcp(rs: &RawStore, o: &Overrides) -> Result<Option<TcpStoreConfig>, ConfigError> {
    let on = match &o.store_tcp {
        Some(v) => on_off("--store-tcp", v)?,
        None => rs.tcp.unwrap_or(false),
    };
    let rdma_option = match &o.store_tcp_rdma_option {
        Some(v) => on_off("--store-tcp-rdma-option", v)?,
        None => rs.tcp_rdma_option.unwrap_or(false),
    };
    let port_key = rs.tcp_port.map(|p| p.to_string());
    let port = match pick(
        ("--store-tcp-port", o.store_tcp_port.as_deref()),
        ("store.tcp_port", port_key.as_deref()),
    ) {
        None => DEFAULT_TCP_STORE_PORT,
        Some((setting, v)) => v.trim().parse::<u16>().map_err(|_| ConfigError::Invalid {
            setting,
            value: v.into(),
            expected: "a port from 0 (any free port) to 65535",
        })?,
    };
    Ok(on.then_some(TcpStoreConfig { port, rdma_option }))
}

/// An allow-list entry: a network (`198.18.0.0/15`, `2001:db8::/32`) or one address.
fn parse_net(setting: &'static str, v: &str) -> Result<IpNet, ConfigError> {
    let v = v.trim();
    v.parse::<IpNet>()
        .map(|n| n.trunc())
        .or_else(|_| v.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| ConfigError::Invalid {
            setting,
            value: v.into(),
            expected: "a network like 198.18.0.0/15 or 2001:db8::/32, or one address (0.0.0.0/0 admits every IPv4 client)",
        })
}

/// A number of connections as given (1 to [`MAX_CONNECTIONS_LIMIT`]), or `default`.
fn connection_count(given: Option<(&'static str, &str)>, default: u32) -> Result<u32, ConfigError> {
    let Some((setting, v)) = given else {
        return Ok(default);
    };
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|c| (1..=MAX_CONNECTIONS_LIMIT).contains(c))
        .ok_or_else(|| ConfigError::Invalid {
            setting,
            value: v.into(),
            expected: "a whole number from 1 to 4096",
        })
}

/// Validates the store settings: `Ok(None)` when no store path is given. `xdp`: the transport
/// has an interface the listen address may come from; `sources`: what counts as one source.
pub(super) fn parse_store(
    rs: RawStore,
    o: &Overrides,
    xdp: bool,
    sources: dataplane::SourcePrefix,
) -> Result<Option<StoreConfig>, ConfigError> {
    let tcp = parse_tcp(&rs, o)?;
    let Some(path) = o.store.clone().or(rs.path) else {
        if o.size.is_some() || rs.size.is_some() {
            return Err(ConfigError::Inconsistent(
                "a store size was given without a store path (--store PATH)",
            ));
        }
        return Ok(None);
    };
    let size = match (&o.size, &rs.size) {
        (Some(s), _) => Some(s.parse::<ByteSize>().map_err(|e| ConfigError::Invalid {
            setting: "--size",
            value: s.clone(),
            expected: e.expected(),
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
    let listen = match (&o.store_listen, &rs.listen) {
        (Some(l), _) => Some(addr("--store-listen", l)?),
        (None, Some(l)) => Some(addr("store.listen", l)?),
        (None, None) if xdp => None,
        (None, None) => {
            return Err(ConfigError::Inconsistent(
                "the store needs a listen address: set store.listen or give --store-listen ADDR:PORT (an address of this host, e.g. 198.18.0.1:20049); there is no 0.0.0.0 default",
            ))
        }
    };
    let allow = if !o.store_allow.is_empty() {
        let nets = o.store_allow.iter().map(|v| parse_net("--store-allow", v));
        AllowList::Nets(nets.collect::<Result<_, _>>()?)
    } else if let Some(list) = &rs.allow {
        let nets = list.iter().map(|v| parse_net("store.allow", v));
        AllowList::Nets(nets.collect::<Result<_, _>>()?)
    } else {
        AllowList::ListenSubnet
    };
    if allow == AllowList::Nets(Vec::new()) {
        return Err(ConfigError::Inconsistent(
            "store.allow is empty, so no client could connect: list the client networks",
        ));
    }
    if allow == AllowList::ListenSubnet && listen.is_some_and(|l| l.ip().is_unspecified()) {
        return Err(ConfigError::Inconsistent(
            "the store listens on every address (0.0.0.0 or ::), where the default allow-list (the listen address's subnet) is undefined: list the client networks in store.allow or with --store-allow CIDR",
        ));
    }
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
    let cap_key = rs.max_connections.map(|c| c.to_string());
    let max_connections = pick(
        (
            "--store-max-connections",
            o.store_max_connections.as_deref(),
        ),
        ("store.max_connections", cap_key.as_deref()),
    );
    let max_connections = connection_count(max_connections, DEFAULT_MAX_CONNECTIONS)?;
    let share_key = rs.max_connections_per_source.map(|c| c.to_string());
    let max_connections_per_source = connection_count(
        pick(
            (
                "--store-max-connections-per-source",
                o.store_max_connections_per_source.as_deref(),
            ),
            ("store.max_connections_per_source", share_key.as_deref()),
        ),
        crate::store::default_source_share(max_connections).per_source as u32,
    )?;
    let idle_key = match &rs.idle_timeout {
        Some(RawDuration::Secs(n)) => Some(n.to_string()),
        Some(RawDuration::Fraction(x)) => Some(x.to_string()),
        Some(RawDuration::Text(t)) => Some(t.clone()),
        None => None,
    };
    let idle = pick(
        ("--store-idle-timeout", o.store_idle_timeout.as_deref()),
        ("store.idle_timeout", idle_key.as_deref()),
    );
    let idle_timeout = match idle {
        None => DEFAULT_IDLE_TIMEOUT,
        Some((setting, v)) => v
            .parse::<TimeSpan>()
            .ok()
            .map(Duration::from)
            .filter(|d| (IDLE_TIMEOUT_MIN..=IDLE_TIMEOUT_MAX).contains(d))
            .ok_or_else(|| ConfigError::Invalid {
                setting,
                value: v.into(),
                expected: "a duration from 1s to 7 days: seconds, or a number with a unit ms, s, m or h (300, 1.5s, 5m, 1h)",
            })?,
    };
    Ok(Some(StoreConfig {
        tcp,
        path,
        size,
        listen,
        allow,
        credits,
        max_io: max_io.0 as u32,
        max_connections,
        max_connections_per_source,
        sources,
        idle_timeout,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::DaemonConfig;

    fn store(text: &str, o: &Overrides) -> Result<StoreConfig, ConfigError> {
        let c = DaemonConfig::from_toml(text, "test.toml", o)?;
        Ok(c.store.expect("a store"))
    }

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn allow_list_idle_timeout_and_cap_parse_from_file_and_flags() {
        let s = store(
            "[store]\npath = \"/x\"\nlisten = \"198.18.0.1:20049\"\nallow = [\"198.18.0.0/15\", \"2001:db8::7\", \"10.1.2.3/8\"]\nmax_connections = 8\nidle_timeout = \"5m\"",
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            s.allow,
            AllowList::Nets(vec![
                net("198.18.0.0/15"),
                net("2001:db8::7/128"),
                net("10.0.0.0/8")
            ])
        );
        assert_eq!(s.max_connections, 8);
        assert_eq!(s.max_connections_per_source, 2, "a quarter of the cap");
        assert_eq!(s.idle_timeout, Duration::from_secs(300));
        // Defaults: the listen subnet, the default cap and timeout.
        let d = store(
            "[store]\npath = \"/x\"\nlisten = \"198.18.0.1:20049\"",
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(d.allow, AllowList::ListenSubnet);
        assert_eq!(d.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(d.max_connections_per_source, DEFAULT_MAX_CONNECTIONS / 4);
        assert_eq!(d.idle_timeout, DEFAULT_IDLE_TIMEOUT);
        // The share per source: from the file, the flag on top; sources as [admission] says.
        let text = "[admission]\nsource_prefix_v6 = 48\n[store]\npath = \"/x\"\nlisten = \"198.18.0.1:20049\"\nmax_connections_per_source = 5";
        let s = store(text, &Overrides::default()).unwrap();
        assert_eq!(s.source_share().per_source, 5);
        assert_eq!(s.source_share().prefix.v6, 48);
        let o = Overrides {
            store_max_connections_per_source: Some("64".into()),
            ..Overrides::default()
        };
        assert_eq!(store(text, &o).unwrap().max_connections_per_source, 64);
        // Flags replace the file's list and settings.
        let o = Overrides {
            store_allow: vec!["127.0.0.0/8".into()],
            store_max_connections: Some("2".into()),
            store_idle_timeout: Some("30".into()),
            ..Overrides::default()
        };
        let f = store(
            "[store]\npath = \"/x\"\nlisten = \"0.0.0.0:1\"\nallow = [\"198.18.0.0/15\"]\nidle_timeout = 9",
            &o,
        )
        .unwrap();
        assert_eq!(f.allow, AllowList::Nets(vec![net("127.0.0.0/8")]));
        assert_eq!(
            (f.max_connections, f.idle_timeout),
            (2, Duration::from_secs(30))
        );
    }

    /// The ONC RPC over TCP service: off by default; on by key or flag, port 20050 unless
    /// given, the option off unless asked; flags win over the file; bad values named.
    #[test]
    fn tcp_service_is_off_by_default_and_configured_by_key_or_flag() {
        let p = "[store]\npath = \"/x\"\nlisten = \"198.18.0.1:20049\"\n";
        assert_eq!(store(p, &Overrides::default()).unwrap().tcp, None);
        let on = store(&format!("{p}tcp = true"), &Overrides::default()).unwrap();
        assert_eq!(
            on.tcp,
            Some(TcpStoreConfig {
                port: DEFAULT_TCP_STORE_PORT,
                rdma_option: false
            })
        );
        let file = format!("{p}tcp = true\ntcp_port = 3049\ntcp_rdma_option = true");
        assert_eq!(
            store(&file, &Overrides::default()).unwrap().tcp,
            Some(TcpStoreConfig {
                port: 3049,
                rdma_option: true
            })
        );
        let o = Overrides {
            store_tcp: Some("off".into()),
            ..Overrides::default()
        };
        assert_eq!(store(&file, &o).unwrap().tcp, None, "the flag wins");
        let o = Overrides {
            store_tcp: Some("on".into()),
            store_tcp_port: Some("4049".into()),
            ..Overrides::default()
        };
        assert_eq!(store(p, &o).unwrap().tcp.map(|t| t.port), Some(4049));
        for (o, want) in [
            (
                Overrides {
                    store_tcp: Some("maybe".into()),
                    ..Overrides::default()
                },
                "--store-tcp",
            ),
            (
                Overrides {
                    store_tcp: Some("on".into()),
                    store_tcp_port: Some("70000".into()),
                    ..Overrides::default()
                },
                "--store-tcp-port",
            ),
        ] {
            let e = store(p, &o).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn listen_address_is_required_unless_the_xdp_interface_gives_it() {
        let e = store("[store]\npath = \"/x\"", &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("store.listen") && e.contains("--store-listen") && e.contains("no 0.0.0.0"),
            "{e}"
        );
        let x = store(
            "transport = \"xdp\"\n[xdp]\ninterface = \"eth1\"\n[store]\npath = \"/x\"",
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(x.listen, None);
    }

    #[test]
    fn store_errors_name_the_setting_and_what_is_accepted() {
        let p = "[store]\npath = \"/x\"\nlisten = \"198.18.0.1:20049\"\n";
        let cases: Vec<(String, &[&str])> = vec![
            (
                "[store]\npath = \"/x\"\nlisten = \"0.0.0.0:20049\"".into(),
                &["every address", "store.allow", "--store-allow"],
            ),
            (
                "[store]\npath = \"/x\"\nlisten = \"[::]:20049\"".into(),
                &["every address"],
            ),
            (format!("{p}allow = []"), &["store.allow", "empty"]),
            (
                format!("{p}allow = [\"198.18.0.0/40\"]"),
                &["store.allow", "198.18.0.0/40", "0.0.0.0/0"],
            ),
            (format!("{p}allow = [\"lan\"]"), &["store.allow", "\"lan\""]),
            (
                format!("{p}max_connections = 0"),
                &["store.max_connections", "1 to 4096"],
            ),
            (
                format!("{p}max_connections_per_source = 0"),
                &["store.max_connections_per_source", "1 to 4096"],
            ),
            (
                format!("{p}max_connections = 5000"),
                &["store.max_connections", "1 to 4096"],
            ),
            (
                format!("{p}idle_timeout = 0"),
                &["store.idle_timeout", "1s to 7 days"],
            ),
            (
                format!("{p}idle_timeout = \"soon\""),
                &["store.idle_timeout", "\"soon\""],
            ),
        ];
        for (text, needles) in &cases {
            let e = store(text, &Overrides::default())
                .expect_err(text)
                .to_string();
            for n in *needles {
                assert!(e.contains(n), "{text:?}: {e:?} lacks {n:?}");
            }
        }
        let o = Overrides {
            store_allow: vec!["nowhere".into()],
            ..Overrides::default()
        };
        let e = store(p, &o).unwrap_err().to_string();
        assert!(e.contains("--store-allow") && e.contains("nowhere"), "{e}");
    }

    /// The idle timeout reads every form of the tools' one duration grammar, from the file and
    /// from the flag, and refuses what it refuses or what lies outside 1 s to 7 days.
    #[test]
    fn idle_timeout_takes_the_tools_duration_grammar() {
        let base = "[store]\npath = \"/x\"\nlisten = \"198.18.0.1:20049\"\n";
        let file = |v: &str| store(&format!("{base}idle_timeout = {v}"), &Overrides::default());
        let flag = |v: &str| {
            let o = Overrides {
                store_idle_timeout: Some(v.into()),
                ..Overrides::default()
            };
            store(base, &o)
        };
        for (text, want) in [
            ("300", 300_000),
            ("300s", 300_000),
            ("1.5s", 1_500),
            ("1500ms", 1_500),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("1.5", 1_500),
        ] {
            let want = Duration::from_millis(want);
            assert_eq!(
                flag(text).unwrap().idle_timeout,
                want,
                "--store-idle-timeout {text}"
            );
            assert_eq!(
                file(&format!("\"{text}\"")).unwrap().idle_timeout,
                want,
                "{text:?}"
            );
        }
        assert_eq!(file("300").unwrap().idle_timeout, Duration::from_secs(300));
        assert_eq!(
            file("2.5").unwrap().idle_timeout,
            Duration::from_millis(2500)
        );
        for bad in ["-1", "5d", "", "250ms", "8h0", "169h", "1e3", "soon"] {
            let e = flag(bad).expect_err(bad).to_string();
            assert!(
                e.contains("--store-idle-timeout") && e.contains("1s to 7 days"),
                "{bad}: {e}"
            );
        }
    }
}
