//! The compare JSON: the records and what they ran on.
//!
//! ```json
//! { "environment": { "kernel": "6.12.48", "mtus": [1500, 9000], "pinning": "...", ... },
//!   "records": [ { "test": "write_lat", "transport": "xdp", ..., "ran": { parameter block } } ] }
//! ```
//! Each record's `ran` is the parameter block of the run that measured it (XDP native or
//! generic, copy or zero-copy, engine, MTU and MSS, negotiated markers and CRC, MULPDU);
//! `null` for the `linux` column, whose tools have none. Files written before this format (a
//! bare array of records) still read.

use serde::{Deserialize, Serialize};

use super::record::CompareRecord;

/// What a compare run ran on, as a whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    /// `uname -r` of this host (both namespaces share its kernel).
    pub kernel: String,
    /// xwarp-bench's version.
    pub xwarp_version: String,
    /// The testbed's veth MTUs, in the order the plan ran at them (each record says its own).
    #[serde(default)]
    pub mtus: Vec<u32>,
    /// How the two sides were pinned (every transport alike).
    pub pinning: String,
    /// CPUs this process may use.
    pub cpus: usize,
    /// Rounds; each figure is the median over them.
    pub rounds: u32,
    /// `--short` (fewer iterations, a smoke run).
    pub short: bool,
    /// The tools of the `linux` column.
    pub linux_tools: String,
    /// What the MPA transports (xdp, kernel) negotiated for: markers and CRC.
    #[serde(default)]
    pub mpa: String,
    /// How this binary was built ([`build_kind`]).
    #[serde(default)]
    pub build: String,
    /// How busy the host's CPUs were just before the first run ([`crate::host_load`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_before: Option<crate::host_load::HostLoad>,
    /// The same counters around each MTU's plan (`mtu` set): the steal is the hypervisor's
    /// share of the measuring time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_during: Vec<crate::host_load::HostLoad>,
}

impl Environment {
    /// This host's facts with the run's settings.
    pub fn here(mtus: &[u32], pinned: bool, rounds: u32, short: bool) -> Self {
        Environment {
            kernel: kernel_release(),
            xwarp_version: env!("CARGO_PKG_VERSION").into(),
            mtus: mtus.to_vec(),
            pinning: if pinned {
                "server on CPU 0, client on CPU 1".into()
            } else {
                "not pinned".into()
            },
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            rounds,
            short,
            linux_tools:
                "iperf3 (bandwidth), sockperf ping-pong (latency; blocking as shipped, and \
                          --nonblocked in the linux-poll rows)"
                    .into(),
            mpa: String::new(),
            build: build_kind(),
            host_before: None,
            host_during: Vec::new(),
        }
    }
}

/// How this binary was built: `debug`, `release`, or `release, profile-guided (...)` when
/// `deploy/xwarp build --pgo` built it (that sets `XWARP_PGO` at compile time to what the
/// profile was trained on).
pub fn build_kind() -> String {
    match (cfg!(debug_assertions), option_env!("XWARP_PGO")) {
        (true, _) => "debug".into(),
        (false, Some(trained)) if !trained.is_empty() => {
            format!("release, profile-guided ({trained})")
        }
        (false, _) => "release".into(),
    }
}

/// The whole compare JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// What the run ran on.
    pub environment: Environment,
    /// One record per planned cell (medians over the rounds).
    pub records: Vec<CompareRecord>,
}

impl CompareReport {
    /// Reads a compare JSON: this format, or the bare array of records written before it
    /// (then with an empty environment).
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str::<CompareReport>(text).or_else(|e| {
            serde_json::from_str::<Vec<CompareRecord>>(text)
                .map(|records| CompareReport {
                    environment: Environment::default(),
                    records,
                })
                .map_err(|_| e)
        })
    }
}

/// The running kernel's release, from procfs (`uname -r`); `unknown` if unreadable.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::TestKind;
    use crate::compare::record::Cell;

    #[test]
    fn reads_its_own_format_and_the_bare_array_before_it() {
        let rec = CompareRecord {
            t_typical_us: Some(4.0),
            ..CompareRecord::new(TestKind::WriteLat, Cell::Xdp, 64)
        };
        let r = CompareReport {
            environment: Environment::here(&[1500, 9000], true, 3, false),
            records: vec![rec.clone()],
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(CompareReport::from_json(&text).unwrap(), r);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["environment"]["mtus"], serde_json::json!([1500, 9000]));
        assert!(!v["environment"]["kernel"].as_str().unwrap().is_empty());
        assert_eq!(v["environment"]["build"].as_str().unwrap(), build_kind());
        let old = serde_json::to_string(&vec![rec.clone()]).unwrap();
        let back = CompareReport::from_json(&old).unwrap();
        assert_eq!(back.records, vec![rec]);
        assert_eq!(back.environment, Environment::default());
        assert!(CompareReport::from_json("{\"nothing\": 1}").is_err());
    }
}
