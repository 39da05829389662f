//! The `[admission]` section and `--backlog-per-source`: what counts as one source of
//! connections (an IPv4 address and an IPv6 /64 by default) and each source's share of a
//! listener's backlog (connections whose MPA startup has not finished), on either transport.
//! The store's share of its connections per source (`store.max_connections_per_source`) counts
//! sources the same way.

use serde::Deserialize;

use super::config::{pick, ConfigError, Overrides};
use dataplane::{SourcePrefix, SourceShare};

/// The `[admission]` section as written (every key optional; unknown keys are errors).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmission {
    backlog: Option<i64>,
    backlog_per_source: Option<i64>,
    source_prefix_v4: Option<i64>,
    source_prefix_v6: Option<i64>,
}

/// A listener's backlog, on either transport: `--backlog`, else `admission.backlog`, else
/// `xdp_backlog` (`xdp.backlog` when given and the transport is xdp), else
/// [`dataplane::DEFAULT_BACKLOG`]. The two keys of the file may not both be given.
pub(super) fn parse_backlog(
    raw: &RawAdmission,
    o: &Overrides,
    xdp_backlog: Option<usize>,
) -> Result<usize, ConfigError> {
    if raw.backlog.is_some() && xdp_backlog.is_some() {
        return Err(ConfigError::Inconsistent(
            "admission.backlog and xdp.backlog both set the backlog: keep admission.backlog",
        ));
    }
    let key = raw.backlog.map(|n| n.to_string());
    let given = connections(
        pick(
            ("--backlog", o.backlog.as_deref()),
            ("admission.backlog", key.as_deref()),
        ),
        "connections per listener whose MPA startup has not finished, 1 to 65536 (default 256); more are reset",
    )?;
    Ok(given.or(xdp_backlog).unwrap_or(dataplane::DEFAULT_BACKLOG))
}

/// A count of connections, 1 to 65536, from the setting `given` (`None` when not given).
fn connections(
    given: Option<(&'static str, &str)>,
    expected: &'static str,
) -> Result<Option<usize>, ConfigError> {
    let Some((setting, v)) = given else {
        return Ok(None);
    };
    v.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=1 << 16).contains(n))
        .map(Some)
        .ok_or_else(|| ConfigError::Invalid {
            setting,
            value: v.into(),
            expected,
        })
}

/// Validates the section with `--backlog-per-source` on top, for listeners whose backlog is
/// `backlog`: the share defaults to a quarter of it (at least one).
pub(super) fn parse_admission(
    raw: RawAdmission,
    o: &Overrides,
    backlog: usize,
) -> Result<SourceShare, ConfigError> {
    let key = raw.backlog_per_source.map(|n| n.to_string());
    let per_source = connections(
        pick(
            ("--backlog-per-source", o.backlog_per_source.as_deref()),
            ("admission.backlog_per_source", key.as_deref()),
        ),
        "connections in MPA startup one source may hold in a listener's backlog, 1 to 65536 (default a quarter of the backlog)",
    )?
    .unwrap_or((backlog / 4).max(1));
    let prefix = |setting, v: Option<i64>, max: i64, default: u8, expected| match v {
        None => Ok(default),
        Some(n) if (1..=max).contains(&n) => Ok(n as u8),
        Some(n) => Err(ConfigError::Invalid {
            setting,
            value: n.to_string(),
            expected,
        }),
    };
    let d = SourcePrefix::default();
    Ok(SourceShare {
        per_source,
        prefix: SourcePrefix {
            v4: prefix(
                "admission.source_prefix_v4",
                raw.source_prefix_v4,
                32,
                d.v4,
                "the leading bits of an IPv4 address that name one source, 1 to 32 (default 32: one address)",
            )?,
            v6: prefix(
                "admission.source_prefix_v6",
                raw.source_prefix_v6,
                128,
                d.v6,
                "the leading bits of an IPv6 address that name one source, 1 to 128 (default 64: one /64)",
            )?,
        },
    })
}

#[cfg(test)]
mod tests {
    use crate::daemon::{DaemonConfig, Overrides};

    fn parse(text: &str, o: &Overrides) -> Result<DaemonConfig, super::ConfigError> {
        DaemonConfig::from_toml(text, "test.toml", o)
    }

    #[test]
    fn the_share_defaults_to_a_quarter_of_the_backlog_and_flags_override_the_file() {
        let k = parse("", &Overrides::default()).unwrap();
        assert_eq!(k.backlog_share.per_source, dataplane::DEFAULT_BACKLOG / 4);
        assert_eq!(
            (k.backlog_share.prefix.v4, k.backlog_share.prefix.v6),
            (32, 64)
        );
        let x = parse(
            "transport = \"xdp\"\n[xdp]\ninterface = \"xw0\"\nbacklog = 100",
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(x.backlog_share.per_source, 25);
        assert_eq!(
            x.xdp.unwrap().limits.backlog_share,
            x.backlog_share,
            "the engine gets it"
        );
        let text =
            "[admission]\nbacklog_per_source = 9\nsource_prefix_v4 = 24\nsource_prefix_v6 = 56";
        let f = parse(text, &Overrides::default()).unwrap();
        assert_eq!(f.backlog_share.per_source, 9);
        assert_eq!(
            (f.backlog_share.prefix.v4, f.backlog_share.prefix.v6),
            (24, 56)
        );
        let o = Overrides {
            backlog_per_source: Some("3".into()),
            ..Overrides::default()
        };
        assert_eq!(parse(text, &o).unwrap().backlog_share.per_source, 3);
    }

    #[test]
    fn out_of_range_values_name_the_setting() {
        for (text, want) in [
            (
                "[admission]\nbacklog_per_source = 0",
                "admission.backlog_per_source",
            ),
            (
                "[admission]\nsource_prefix_v4 = 33",
                "admission.source_prefix_v4",
            ),
            (
                "[admission]\nsource_prefix_v6 = 0",
                "admission.source_prefix_v6",
            ),
            ("[admission]\nbacklog = 0", "admission.backlog"),
            ("[admission]\nbacklog = 65537", "admission.backlog"),
            (
                "transport = \"xdp\"\n[admission]\nbacklog = 8\n[xdp]\ninterface = \"xw0\"\nbacklog = 9",
                "keep admission.backlog",
            ),
            ("[admission]\nper_source = 1", "unknown field"),
        ] {
            let e = parse(text, &Overrides::default()).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        let o = Overrides {
            backlog_per_source: Some("many".into()),
            ..Overrides::default()
        };
        let e = parse("", &o).unwrap_err().to_string();
        assert!(e.contains("--backlog-per-source"), "{e}");
        let o = Overrides {
            backlog: Some("-1".into()),
            ..Overrides::default()
        };
        let e = parse("", &o).unwrap_err().to_string();
        assert!(e.contains("--backlog") && e.contains("1 to 65536"), "{e}");
    }

    /// The backlog is one setting for both transports: the flag over the file, the share a
    /// quarter of it, and the xdp engine's listeners get it too.
    #[test]
    fn the_backlog_applies_to_either_transport() {
        assert_eq!(
            parse("", &Overrides::default()).unwrap().backlog,
            dataplane::DEFAULT_BACKLOG
        );
        let k = parse("[admission]\nbacklog = 40", &Overrides::default()).unwrap();
        assert_eq!((k.backlog, k.backlog_share.per_source), (40, 10));
        let o = Overrides {
            backlog: Some("12".into()),
            ..Overrides::default()
        };
        assert_eq!(parse("[admission]\nbacklog = 40", &o).unwrap().backlog, 12);
        let xdp = "transport = \"xdp\"\n[xdp]\ninterface = \"xw0\"\n";
        let x = parse(
            &format!("{xdp}[admission]\nbacklog = 40\n"),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(x.xdp.unwrap().listener.max_accept_queue, 40);
        let x = parse(&format!("{xdp}backlog = 30"), &o).unwrap();
        assert_eq!(
            (x.backlog, x.xdp.unwrap().listener.max_accept_queue),
            (12, 12)
        );
        let x = parse(&format!("{xdp}backlog = 30"), &Overrides::default()).unwrap();
        assert_eq!(x.backlog, 30, "xdp.backlog still sets it");
    }
}
