//! Shared machinery of the simulation tests: a bulk-transfer runner that wires two transports,
//! their apps and link audits together, a parallel seed runner and case summaries.
#![allow(dead_code)]

pub mod peer;
pub mod wrap;

pub use netsim::{ours, smol, SimRole};

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use netsim::{
    mix64, AuditStats, BulkApp, BulkConfig, Host, LinkConfig, LinkStats, SegmentAudit,
    SegmentRange, Sim, SimConfig, SimReport, SimSide, SimTime, SimTransport, TransportStats,
    VerifyStats,
};

/// Seed of the stream a side sends in run `seed`.
pub fn stream_seed(seed: u64, side: SimSide) -> u64 {
    mix64(
        seed.wrapping_mul(2)
            .wrapping_add(if side == SimSide::A { 1 } else { 2 }),
    )
}

/// Everything measured in one run.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Run seed.
    pub seed: u64,
    /// Link counters and end time.
    pub report: SimReport,
    /// Link audits of what A and B sent.
    pub audit: [AuditStats; 2],
    /// First unaligned segments of A and B, if any.
    pub unaligned: [Vec<SegmentRange>; 2],
    /// Transport counters of A and B.
    pub transport: [TransportStats; 2],
    /// Receive verification of A and B.
    pub verify: [VerifyStats; 2],
    /// When each side left the handshake.
    pub established: [Option<SimTime>; 2],
    /// When each side's app finished (its connection closed).
    pub done: [Option<SimTime>; 2],
    /// RSTs each side sent before its own connection had closed cleanly. (RSTs after the close
    /// are in `audit[..].rst`; the matrix accepts none from our TCP and only the classified
    /// CLOSED-port answers from smoltcp, see `smol::SmolRsts`.)
    pub rst_before_close: [u64; 2],
}

/// One bulk run: A (client) and B (server) each send their stream and verify the other's,
/// both close, done when both are closed. Audits watch what each side sends. With
/// `XWARP_SIM_TRACE` set in the environment, a run in which any RST was sent prints its last 40
/// packets (side, virtual time, ports, flags, seq, ack, payload length, window) to stderr.
#[allow(clippy::too_many_arguments)]
pub fn run_bulk<A: SimTransport, B: SimTransport>(
    seed: u64,
    a: A,
    b: B,
    cfg_a: BulkConfig,
    cfg_b: BulkConfig,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    audits: [SegmentAudit; 2],
    limits: SimConfig,
) -> Result<(Outcome, A, B), String> {
    let host_a = Host::new(a, BulkApp::new(cfg_a));
    let host_b = Host::new(b, BulkApp::new(cfg_b));
    let mut sim = Sim::new(seed, host_a, host_b, a_to_b, b_to_a)
        .map_err(|e| format!("{e:?}"))?
        .with_config(limits);
    let audits = Rc::new(RefCell::new(audits));
    let tap = Rc::clone(&audits);
    let rsts: Rc<RefCell<Vec<(SimSide, SimTime)>>> = Rc::default();
    let rst_tap = Rc::clone(&rsts);
    let trace: Rc<RefCell<Vec<String>>> = Rc::default();
    let trace_tap = Rc::clone(&trace);
    sim.add_tap(move |side, now, p| {
        if std::env::var_os("XWARP_SIM_TRACE").is_some() {
            trace_tap
                .borrow_mut()
                .push(format!("{side:?} {now} {}", describe_segment(p)));
        }
        let mut audits = tap.borrow_mut();
        let before = audits[side as usize].stats().rst;
        audits[side as usize].observe(p);
        if audits[side as usize].stats().rst > before {
            rst_tap.borrow_mut().push((side, now));
        }
    });
    let result = sim.run();
    let audits = audits.borrow();
    let done = [sim.a.app.done_at, sim.b.app.done_at];
    if std::env::var_os("XWARP_SIM_TRACE").is_some() {
        let t = trace.borrow();
        if t.iter().any(|l| l.contains('R')) {
            eprintln!("=== seed {seed} done {done:?}");
            for l in &t[t.len().saturating_sub(40)..] {
                eprintln!("{l}");
            }
        }
    }
    let mut rst_before_close = [0; 2];
    for &(side, at) in rsts.borrow().iter() {
        if !matches!(done[side as usize], Some(d) if d <= at) {
            rst_before_close[side as usize] += 1;
        }
    }
    let out = Outcome {
        seed,
        report: sim.report(),
        audit: [audits[0].stats(), audits[1].stats()],
        unaligned: [
            audits[0].unaligned_examples().to_vec(),
            audits[1].unaligned_examples().to_vec(),
        ],
        transport: [sim.a.transport.stats(), sim.b.transport.stats()],
        verify: [sim.a.app.verify_stats(), sim.b.app.verify_stats()],
        established: [sim.a.app.established_at, sim.b.app.established_at],
        done,
        rst_before_close,
    };
    drop(audits);
    match result {
        Ok(_) => Ok((out, sim.a.transport, sim.b.transport)),
        Err(e) => Err(format!(
            "seed {seed}: {e}; A [{}] sent {} got {}; B [{}] sent {} got {}; links a->b {:?} b->a {:?}",
            sim.a.transport.describe(),
            sim.a.app.sent(),
            sim.a.app.verify_stats().bytes,
            sim.b.transport.describe(),
            sim.b.app.sent(),
            sim.b.app.verify_stats().bytes,
            out.report.a_to_b,
            out.report.b_to_a
        )),
    }
}

/// Runs `f` for every seed on up to `threads` threads; results in seed order.
pub fn par_seeds<T: Send>(seeds: &[u64], threads: usize, f: impl Fn(u64) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::with_capacity(seeds.len()));
    let threads = threads.clamp(1, seeds.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { break };
                let r = f(seed);
                results.lock().unwrap().push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// Threads for seed-parallel runs: the machine's parallelism, at most 2 unless
/// `XWARP_SIM_THREADS` says otherwise.
pub fn threads() -> usize {
    std::env::var("XWARP_SIM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(2)))
}

/// Totals over the runs of one case.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Runs.
    pub runs: u64,
    /// Payload octets verified at the receivers.
    pub bytes: u64,
    /// Link counters, both directions.
    pub link: LinkStats,
    /// Audits, both directions.
    pub audit: AuditStats,
    /// Transport counters, both sides.
    pub retransmits: u64,
    /// Counted §5.3 exceptions, both sides.
    pub exceptions: u64,
    /// Out-of-order deliveries seen by the receivers.
    pub ooo_deliveries: u64,
    /// Largest virtual end time.
    pub max_end: SimTime,
    /// Sum of virtual end times in microseconds.
    pub total_end_us: u64,
}

impl Summary {
    /// Folds in one run.
    pub fn add(&mut self, o: &Outcome) {
        self.runs += 1;
        self.bytes += o.verify[0].bytes + o.verify[1].bytes;
        self.link.add(&o.report.a_to_b);
        self.link.add(&o.report.b_to_a);
        self.audit.add(&o.audit[0]);
        self.audit.add(&o.audit[1]);
        self.retransmits += o.transport[0].retransmits + o.transport[1].retransmits;
        self.exceptions +=
            o.transport[0].unaligned_exceptions + o.transport[1].unaligned_exceptions;
        self.ooo_deliveries += o.verify[0].ooo_deliveries + o.verify[1].ooo_deliveries;
        self.max_end = self.max_end.max(o.report.end);
        self.total_end_us += o.report.end.as_micros();
    }

    /// One line for the test log.
    pub fn line(&self, case: &str) -> String {
        let mean_ms = self.total_end_us / self.runs.max(1) / 1000;
        format!(
            "{case}: seeds={} bytes={} pkts={} lost={} queue_drops={} reordered={} dup={} corrupt={} retx_segments={} \
             (ours count {}) unaligned={} reshaped_retx={} exceptions={} ooo_deliveries={} rst={} sim_time mean={}ms max={}",
            self.runs,
            self.bytes,
            self.link.sent,
            self.link.lost,
            self.link.dropped_queue,
            self.link.reordered,
            self.link.duplicated,
            self.link.corrupted,
            self.audit.retx,
            self.retransmits,
            self.audit.unaligned(),
            self.audit.retx_reshaped,
            self.exceptions,
            self.ooo_deliveries,
            self.audit.rst,
            mean_ms,
            self.max_end,
        )
    }
}

/// The link settings of the matrix, by name.
pub fn link_case(name: &str) -> LinkConfig {
    use std::time::Duration;
    // 5 ms one way, 100 Mbit/s with 1 MiB of queue (never full for one flow of 256 KiB windows).
    let base = LinkConfig::default()
        .with_delay(Duration::from_millis(5))
        .with_rate(12_500_000, 1 << 20);
    match name {
        "clean" => base,
        "loss1" => base.with_loss(0.01),
        "loss5" => base.with_loss(0.05),
        // Heavy reordering: 4 ms of jitter against 120 us per full packet (about 30 packets
        // deep), plus a fifth of the packets held back by 15 ms (three times the delay).
        "reorder" => base
            .with_jitter(Duration::from_millis(4))
            .with_reorder(0.2, Duration::from_millis(15)),
        "hostile" => base
            .with_loss(0.02)
            .with_jitter(Duration::from_millis(3))
            .with_reorder(0.05, Duration::from_millis(10))
            .with_duplicate(0.02)
            .with_corrupt(0.02),
        other => panic!("unknown link case {other}"),
    }
}

/// One line per TCP segment: flags, seq, ack, payload length, window.
pub fn describe_segment(p: &[u8]) -> String {
    use etherparse::{SlicedPacket, TransportSlice};
    let Ok(s) = SlicedPacket::from_ip(p) else {
        return "unparsed".into();
    };
    let Some(TransportSlice::Tcp(t)) = s.transport else {
        return "not tcp".into();
    };
    let mut f = String::new();
    for (on, c) in [
        (t.syn(), 'S'),
        (t.fin(), 'F'),
        (t.rst(), 'R'),
        (t.ack(), '.'),
    ] {
        if on {
            f.push(c);
        }
    }
    format!(
        "{}>{} [{f}] seq={} ack={} len={} win={}",
        t.source_port(),
        t.destination_port(),
        t.sequence_number(),
        t.acknowledgment_number(),
        t.payload().len(),
        t.window_size()
    )
}
