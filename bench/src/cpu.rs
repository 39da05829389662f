//! `--cpu_util`: the CPU time this process used during a measurement, as perftest's
//! `CPU_Util[%]`: CPU time (user and system, every thread) over wall time, in per cent of one
//! core (so at most 100 times the number of cores).
//!
//! Read from `/proc/self/task/*/schedstat` (nanoseconds on a CPU per thread), or, where the
//! kernel has no schedstat, from `/proc/self/task/*/stat` (user and system clock ticks of
//! `USER_HZ` = 100 a second on Linux). Threads are summed as they are at both readings: a
//! thread started and ended between them is not counted. The xdp transport's engine thread
//! (`xwarp-engine`, `--engine threaded`) is also reported on its own.

use std::collections::HashMap;
use std::time::Instant;

/// The name the dataplane gives its engine thread.
const ENGINE_THREAD: &str = "xwarp-engine";
/// `USER_HZ`: the unit of the tick counts in `/proc/*/stat`.
const TICKS_PER_SEC: u64 = 100;

/// CPU time of one thread, in nanoseconds, and whether it is the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ThreadTime {
    ns: u64,
    engine: bool,
}

/// A reading at the start of a measurement.
#[derive(Debug, Clone)]
pub struct CpuSampler {
    wall: Instant,
    threads: HashMap<u32, ThreadTime>,
}

/// The CPU utilisation of a measurement, per cent of one core.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuUtil {
    /// The whole process.
    pub process: f64,
    /// The engine thread(s), when the transport runs one.
    pub engine: Option<f64>,
}

impl CpuSampler {
    /// Reads the threads' CPU times now.
    pub fn start() -> Self {
        Self {
            wall: Instant::now(),
            threads: read_threads(),
        }
    }

    /// The utilisation since [`start`](Self::start).
    pub fn finish(&self) -> CpuUtil {
        let now = read_threads();
        let wall_ns = self.wall.elapsed().as_nanos().max(1) as f64;
        let (mut all, mut engine, mut engines) = (0u64, 0u64, 0usize);
        for (tid, t) in &now {
            let Some(before) = self.threads.get(tid) else {
                continue;
            };
            let used = t.ns.saturating_sub(before.ns);
            all += used;
            if t.engine {
                engine += used;
                engines += 1;
            }
        }
        let pct = |ns: u64| ns as f64 * 100.0 / wall_ns;
        CpuUtil {
            process: pct(all),
            engine: (engines > 0).then(|| pct(engine)),
        }
    }
}

/// Every thread of this process with its CPU time.
fn read_threads() -> HashMap<u32, ThreadTime> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return HashMap::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid: u32 = e.file_name().to_str()?.parse().ok()?;
        let path = e.path();
        let ns = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| schedstat_ns(&s))
            .or_else(|| stat_ns(&std::fs::read_to_string(path.join("stat")).ok()?))?;
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let engine = comm.trim_end().starts_with(ENGINE_THREAD);
        Some((tid, ThreadTime { ns, engine }))
    })
    .collect()
}

/// The first field of a `schedstat` file: nanoseconds spent on a CPU.
fn schedstat_ns(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// utime + stime of a `stat` file (fields 14 and 15, counted past the parenthesised command
/// name, which may hold spaces), in nanoseconds.
fn stat_ns(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime + stime) * (1_000_000_000 / TICKS_PER_SEC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_past_a_command_with_spaces_and_parentheses() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime ...
        let line = "4242 (a b) c)) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(stat_ns(line), Some(300 * 10_000_000));
        assert_eq!(stat_ns("no parenthesis"), None);
        assert_eq!(stat_ns("1 (x) R 1"), None);
    }

    #[test]
    fn schedstat_gives_nanoseconds() {
        assert_eq!(schedstat_ns("402344 94859 2\n"), Some(402_344));
        assert_eq!(schedstat_ns(""), None);
    }

    #[test]
    fn the_cpu_time_a_thread_burns_is_counted_and_never_more_than_every_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let own = || {
            let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
            schedstat_ns(&s).unwrap_or(0)
        };
        let s = CpuSampler::start();
        let t0 = Instant::now();
        let begin = own();
        // Burn 20 ms of this thread's CPU time, however long a loaded host takes to give it.
        let burn = 20_000_000;
        let mut x = 0u64;
        while own().saturating_sub(begin) < burn && t0.elapsed().as_secs() < 60 {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        let u = s.finish();
        let wall = t0.elapsed().as_nanos() as f64;
        // At least the 20 ms over (at most) the whole wall time.
        let floor = burn as f64 * 100.0 / wall;
        assert!(u.process >= floor * 0.9, "{u:?}, floor {floor}");
        assert!(u.process <= 100.0 * cores + 1.0, "{u:?}");
        assert_eq!(u.engine, None, "no engine thread in a unit test");
    }
}
