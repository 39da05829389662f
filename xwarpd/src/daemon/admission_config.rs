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
    backlog_per_source: Option<i64>,
    source_prefix_v4: Option<i64>,
    source_prefix_v6: Option<i64>,
}

/// Validates the section with `--backlog-per-source` on top, for listeners whose backlog is
/// `backlog`: the share defaults to a quarter of it (at least one).
pub(super) fn parse_admission(
    raw: RawAdmission,
    o: &Overrides,
    backlog: usize,
) -> Result<SourceShare, ConfigError> {
    let key = raw.backlog_per_source.map(|n| n.to_string());
    let per_source = match pick(
        ("--backlog-per-source", o.backlog_per_source.as_deref()),
        ("admission.backlog_per_source", key.as_deref()),
    ) {
        None => (backlog / 4).max(1),
        Some((setting, v)) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=1 << 16).contains(n))
            .ok_or_else(|| ConfigError::Invalid {
                setting,
                value: v.into(),
                expected: "connections in MPA startup one source may hold in a listener's backlog, 1 to 65536 (default a quarter of the backlog)",
            })?,
    };
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
    }
}
