//! The effective configuration as TOML (`xwarpd check-config`): every setting with the value the
//! daemon would use, defaults filled in, in the shape of the configuration file, so the output
//! can be saved and read back as a configuration.

use toml::{Table, Value};
use tool_support::TimeSpan;

use super::config::{DaemonConfig, MetricsAddr};
use crate::store::AllowList;
use dataplane::{AttachPolicy, BindMode, EngineMode};

fn s(v: impl ToString) -> Value {
    Value::String(v.to_string())
}

fn i(v: impl Into<i64>) -> Value {
    Value::Integer(v.into())
}

impl DaemonConfig {
    /// The effective configuration, as a configuration file [`DaemonConfig::load`] reads back.
    pub fn to_toml(&self) -> String {
        let mut t = Table::new();
        let transport = match self.transport {
            dataplane::Transport::Kernel => "kernel",
            dataplane::Transport::Xdp => "xdp",
        };
        t.insert("transport".into(), s(transport));
        t.insert("control_socket".into(), s(self.control_socket.display()));
        let metrics = match self.metrics {
            MetricsAddr::Off => "off".to_string(),
            MetricsAddr::On(a) => a.to_string(),
        };
        t.insert("metrics".into(), s(metrics));
        t.insert("log".into(), s(&self.log));
        let mut mpa = Table::new();
        mpa.insert("markers".into(), Value::Boolean(self.markers));
        mpa.insert("crc".into(), Value::Boolean(self.crc));
        mpa.insert(
            "segment_per_fpdu".into(),
            Value::Boolean(self.segment_per_fpdu),
        );
        t.insert("mpa".into(), Value::Table(mpa));
        let share = &self.backlog_share;
        let mut adm = Table::new();
        adm.insert(
            "backlog".into(),
            i(i64::try_from(self.backlog).unwrap_or(i64::MAX)),
        );
        let per_source = i64::try_from(share.per_source).unwrap_or(i64::MAX);
        adm.insert("backlog_per_source".into(), i(per_source));
        adm.insert("source_prefix_v4".into(), i(share.prefix.v4));
        adm.insert("source_prefix_v6".into(), i(share.prefix.v6));
        t.insert("admission".into(), Value::Table(adm));
        if let Some(x) = &self.xdp {
            let mut xt = Table::new();
            xt.insert("interface".into(), s(&x.interface));
            xt.insert("queue".into(), i(x.queue));
            xt.insert("queues".into(), i(x.queues));
            let steering = match x.lane_steering {
                dataplane::LaneSteering::Auto => "auto",
                dataplane::LaneSteering::Symmetric => "symmetric",
            };
            xt.insert("lane_steering".into(), s(steering));
            let bind = match x.bind {
                BindMode::Auto => "auto",
                BindMode::Copy => "copy",
                BindMode::ZeroCopy => "zerocopy",
            };
            xt.insert("bind".into(), s(bind));
            let attach = match x.attach {
                AttachPolicy::NativeOrGeneric => "auto",
                AttachPolicy::NativeOnly => "native",
                AttachPolicy::GenericOnly => "generic",
            };
            xt.insert("attach".into(), s(attach));
            let ports = format!("{}-{}", x.local_ports.start(), x.local_ports.end());
            xt.insert("local_ports".into(), s(ports));
            xt.insert("engine".into(), s("threaded"));
            if let EngineMode::Pinned(c) = x.mode {
                xt.insert("core".into(), i(i64::try_from(c).unwrap_or(i64::MAX)));
            }
            let count = |n: usize| i(i64::try_from(n).unwrap_or(i64::MAX));
            xt.insert("max_connections".into(), count(x.limits.max_connections));
            // The backlog is admission.backlog (either transport).
            xt.insert("max_half_open".into(), count(x.listener.max_half_open));
            xt.insert("synack_retries".into(), i(x.listener.synack_retries));
            let tx_checksum = match x.tx_checksum {
                dataplane::TxChecksumOffload::Auto => "auto",
                dataplane::TxChecksumOffload::Off => "engine",
                dataplane::TxChecksumOffload::Device => "device",
                dataplane::TxChecksumOffload::Kernel => "kernel",
            };
            xt.insert("tx_checksum".into(), s(tx_checksum));
            xt.insert("huge_pages".into(), Value::Boolean(x.huge_pages));
            let bp = x.busy_poll.unwrap_or_default();
            let usecs = x.busy_poll.map_or(0, |b| b.usecs);
            xt.insert("busy_poll_usecs".into(), i(usecs));
            if x.busy_poll.is_some() {
                xt.insert("busy_poll_budget".into(), i(bp.budget));
            }
            t.insert("xdp".into(), Value::Table(xt));
        }
        if let Some(st) = &self.store {
            let mut sm = Table::new();
            sm.insert("path".into(), s(st.path.display()));
            if let Some(size) = st.size {
                sm.insert("size".into(), s(size));
            }
            if let Some(l) = st.listen {
                sm.insert("listen".into(), s(l));
            }
            if let AllowList::Nets(nets) = &st.allow {
                let v = nets.iter().map(s).collect();
                sm.insert("allow".into(), Value::Array(v));
            }
            sm.insert("credits".into(), i(st.credits));
            sm.insert("max_io".into(), s(st.max_io));
            sm.insert("max_connections".into(), i(st.max_connections));
            sm.insert(
                "max_connections_per_source".into(),
                i(st.max_connections_per_source),
            );
            sm.insert("idle_timeout".into(), s(TimeSpan(st.idle_timeout)));
            t.insert("store".into(), Value::Table(sm));
        }
        let listeners = self
            .listeners
            .iter()
            .map(|a| {
                let mut l = Table::new();
                l.insert("addr".into(), s(a));
                Value::Table(l)
            })
            .collect();
        t.insert("listener".into(), Value::Array(listeners));
        // A table of strings, numbers, booleans and tables always serialises.
        toml::to_string(&t).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::Overrides;

    #[test]
    fn the_effective_toml_reads_back_as_the_same_configuration() {
        let text = r#"
transport = "xdp"
metrics = "off"
[xdp]
interface = "xw0"
queue = 3
queues = 2
lane_steering = "symmetric"
bind = "copy"
attach = "generic"
local_ports = "45000-45099"
core = 0
max_connections = 100
backlog = 50
max_half_open = 60
synack_retries = 2
[store]
path = "/tmp/x.img"
size = "8MiB"
listen = "198.18.0.1:20049"
allow = ["198.18.0.0/15"]
idle_timeout = "5m"
[[listener]]
addr = "198.18.0.1:18516"
"#;
        let c = DaemonConfig::from_toml(text, "t", &Overrides::default()).unwrap();
        let out = c.to_toml();
        for want in [
            "transport = \"xdp\"",
            "bind = \"copy\"",
            "attach = \"generic\"",
            "local_ports = \"45000-45099\"",
            "idle_timeout = \"5m\"",
            "credits = 16",
            "max_connections_per_source = 16",
            "backlog_per_source = 12",
            "backlog = 50",
            "source_prefix_v6 = 64",
            "log = \"info\"",
            "[mpa]",
            "crc = true",
        ] {
            assert!(out.contains(want), "{want:?} missing in\n{out}");
        }
        let back = DaemonConfig::from_toml(&out, "effective", &Overrides::default()).unwrap();
        assert_eq!(back, c, "{out}");
        // The kernel defaults, with no file at all, read back too.
        let k = DaemonConfig::load(None, &Overrides::default()).unwrap();
        let kt = k.to_toml();
        assert!(!kt.contains("[xdp]"), "{kt}");
        assert_eq!(
            DaemonConfig::from_toml(&kt, "k", &Overrides::default()).unwrap(),
            k
        );
    }
}
