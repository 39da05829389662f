//! How busy the host was just before `compare` started measuring: each CPU's busy share and
//! the time the hypervisor stole, over a short window of `/proc/stat`. compare pins its two
//! sides to CPU 0 and 1; a process left spinning on one of them (a stray benchmark, a build)
//! skews every figure without failing any run, so compare prints what it saw, warns when a CPU
//! was busy, and keeps it in its JSON. It reads the counters around each MTU's plan too: there
//! the busy shares are mostly compare's own runs, but the steal says whether the hypervisor
//! took time from them. The 1-minute load average of compare's log lines is read here too.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A CPU whose busy share before the run is above this (per cent) gets a warning.
pub const BUSY_WARN_PCT: f64 = 20.0;

/// One CPU's counters of a `/proc/stat` reading, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTicks {
    /// user, nice, system, irq, softirq.
    pub busy: u64,
    /// idle, iowait.
    pub idle: u64,
    /// Time the hypervisor ran something else.
    pub steal: u64,
}

/// The per-CPU lines (`cpuN ...`, not the `cpu` total) of `/proc/stat` text, in order.
pub fn parse_proc_stat(text: &str) -> Vec<CpuTicks> {
    text.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .filter_map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .map(|f| f.parse().ok())
                .collect::<Option<_>>()?;
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            Some(CpuTicks {
                busy: at(0) + at(1) + at(2) + at(5) + at(6),
                idle: at(3) + at(4),
                steal: at(7),
            })
        })
        .collect()
}

/// This host's per-CPU counters now; `None` where `/proc/stat` cannot be read.
pub fn read() -> Option<Vec<CpuTicks>> {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .map(|t| parse_proc_stat(&t))
}

/// What the window showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostLoad {
    /// Each CPU's busy share of the window, per cent.
    pub busy_pct: Vec<f64>,
    /// The stolen share of all CPUs' time in the window, per cent.
    pub steal_pct: f64,
    /// The window's length, seconds.
    pub window_s: f64,
    /// The MTU whose plan ran in the window (none: before the first run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

impl HostLoad {
    /// The load between readings `a` and `b` (same CPUs, `b` later) over `window`. `None`
    /// when the CPU lists differ or no tick passed.
    pub fn between(a: &[CpuTicks], b: &[CpuTicks], window: Duration) -> Option<Self> {
        if a.len() != b.len() || a.is_empty() {
            return None;
        }
        let mut busy_pct = Vec::with_capacity(a.len());
        let (mut steal, mut all) = (0u64, 0u64);
        for (x, y) in a.iter().zip(b) {
            let busy = y.busy.saturating_sub(x.busy);
            let idle = y.idle.saturating_sub(x.idle);
            let st = y.steal.saturating_sub(x.steal);
            let total = busy + idle + st;
            busy_pct.push(if total == 0 {
                0.0
            } else {
                100.0 * busy as f64 / total as f64
            });
            steal += st;
            all += total;
        }
        if all == 0 {
            return None;
        }
        Some(HostLoad {
            busy_pct,
            steal_pct: 100.0 * steal as f64 / all as f64,
            window_s: window.as_secs_f64(),
            mtu: None,
        })
    }

    /// Reads `/proc/stat` twice, `window` apart. `None` where it cannot be read.
    pub fn sample(window: Duration) -> Option<Self> {
        let w = Window::start();
        std::thread::sleep(window);
        w.end(None)
    }

    /// One line: `CPU busy 3 % / 98 %, steal 0.4 % over 1 s before the first run`, or `... over
    /// 182 s of the MTU 9000 plan` (whose busy shares are mostly compare's own runs).
    pub fn summary(&self) -> String {
        let busy: Vec<String> = self.busy_pct.iter().map(|p| format!("{p:.0} %")).collect();
        let when = match self.mtu {
            None => "before the first run".to_string(),
            Some(m) => format!("of the MTU {m} plan"),
        };
        format!(
            "CPU busy {}, steal {:.1} % over {:.0} s {when}",
            busy.join(" / "),
            self.steal_pct,
            self.window_s
        )
    }

    /// A warning when a CPU was busier than [`BUSY_WARN_PCT`].
    pub fn warning(&self) -> Option<String> {
        let busy: Vec<String> = self
            .busy_pct
            .iter()
            .enumerate()
            .filter(|(_, p)| **p > BUSY_WARN_PCT)
            .map(|(i, p)| format!("CPU {i} {p:.0} %"))
            .collect();
        (!busy.is_empty()).then(|| {
            format!(
                "the host was not idle before the run ({}): another process competes with the \
                 pinned sides and every figure will be skewed",
                busy.join(", ")
            )
        })
    }
}

/// A window of the host's counters: opened by [`Window::start`], closed by [`Window::end`].
#[derive(Debug)]
pub struct Window {
    ticks: Option<Vec<CpuTicks>>,
    started: Instant,
}

impl Window {
    /// Reads the counters now.
    pub fn start() -> Self {
        Window {
            ticks: read(),
            started: Instant::now(),
        }
    }

    /// The load since [`Window::start`], during the plan of `mtu` (none: before the first
    /// run); `None` where `/proc/stat` could not be read.
    pub fn end(&self, mtu: Option<u32>) -> Option<HostLoad> {
        let load = HostLoad::between(self.ticks.as_ref()?, &read()?, self.started.elapsed())?;
        Some(HostLoad { mtu, ..load })
    }
}

/// The 1-minute load average (`/proc/loadavg`), for compare's log; `?` where it cannot be read.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "cpu  300 0 300 1000 0 0 0 0 0 0\n\
                     cpu0 100 0 100 500 0 0 0 0 0 0\n\
                     cpu1 200 0 200 500 0 0 0 0 0 0\n\
                     intr 12345\n";
    // CPU 0: 95 busy ticks of 100 (a spinner); CPU 1: 5 busy, 90 idle, 5 stolen.
    const B: &str = "cpu  400 0 400 1090 0 0 0 5 0 0\n\
                     cpu0 150 0 140 505 0 0 5 0 0 0\n\
                     cpu1 203 0 202 590 0 0 0 5 0 0\n\
                     intr 12999\n";

    #[test]
    fn per_cpu_busy_and_steal() {
        let (a, b) = (parse_proc_stat(A), parse_proc_stat(B));
        assert_eq!(a.len(), 2, "the total line is not a CPU");
        assert_eq!(
            b[0],
            CpuTicks {
                busy: 295,
                idle: 505,
                steal: 0
            }
        );
        let l = HostLoad::between(&a, &b, Duration::from_secs(1)).unwrap();
        assert_eq!(l.busy_pct, vec![95.0, 5.0]);
        assert_eq!(l.steal_pct, 2.5);
        assert_eq!(
            l.summary(),
            "CPU busy 95 % / 5 %, steal 2.5 % over 1 s before the first run"
        );
        let during = HostLoad {
            mtu: Some(9000),
            ..l.clone()
        };
        assert_eq!(
            during.summary(),
            "CPU busy 95 % / 5 %, steal 2.5 % over 1 s of the MTU 9000 plan"
        );
        let w = l.warning().expect("CPU 0 was busy");
        assert!(w.contains("CPU 0 95 %") && !w.contains("CPU 1"), "{w}");
    }

    #[test]
    fn a_window_of_this_host_has_its_cpus() {
        // Linux only (the test suite's host): /proc/stat is there.
        let w = Window::start();
        std::thread::sleep(Duration::from_millis(30));
        let l = w.end(Some(1500)).expect("/proc/stat read twice");
        assert_eq!(l.busy_pct.len(), read().unwrap().len());
        assert_eq!(l.mtu, Some(1500));
        assert!(l.window_s >= 0.03, "{}", l.window_s);
        assert!(load_average().parse::<f64>().is_ok(), "{}", load_average());
    }

    #[test]
    fn an_idle_host_gets_no_warning_and_bad_readings_none() {
        let a = parse_proc_stat(A);
        let idle: Vec<CpuTicks> = a
            .iter()
            .map(|c| CpuTicks {
                idle: c.idle + 100,
                busy: c.busy + 2,
                ..*c
            })
            .collect();
        let l = HostLoad::between(&a, &idle, Duration::from_secs(1)).unwrap();
        assert!(l.warning().is_none(), "{:?}", l.busy_pct);
        assert_eq!(HostLoad::between(&a, &a, Duration::from_secs(1)), None);
        assert_eq!(HostLoad::between(&a, &a[..1], Duration::from_secs(1)), None);
        assert!(
            parse_proc_stat("cpu0 1 x 3\n").is_empty(),
            "a bad line is skipped"
        );
    }
}
