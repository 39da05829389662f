//! The perftest-style tests over the verbs API: the client drives and measures, the server
//! echoes or serves and ends when the client closes.
//!
//! - `write_lat`: ping-pong of RDMA Writes; each side polls the last byte of its buffer for the
//!   iteration's sequence number, then writes back. Half the round trip per sample.
//! - `read_lat`: one RDMA Read at a time; the full round trip per sample (as perftest).
//! - `send_lat`: ping-pong of Sends into pre-posted receives. Half the round trip per sample.
//! - `write_bw` / `read_bw`: a window of Writes (`--tx-depth`) or Reads (at most the ORD) in
//!   flight. Write completions mean "handed to TCP", so the client ends with a FIN Send and
//!   stops the clock at the server's ACK: the time includes draining the pipe.
//! - `send_bw`: Sends into the server's receive ring with credit-based flow control (iWARP has
//!   no receiver-not-ready retry: a Send without a posted receive is fatal), then FIN / ACK.
//! - `-b` (write_bw, read_bw): the server runs the same stream towards the client (Writes into
//!   its buffer, Reads from it; `-t` of the server) from the connection until the client's FIN,
//!   and answers the FIN with a report of its stream instead of the ACK. The row is the sum of
//!   both streams (perftest's bidirectional figure); each stream is shown below it and kept in
//!   the JSON. The server's stream is timed from its first post to its last completion.

use std::io::Write;
use std::time::{Duration, Instant};

use dataplane::{Incoming, Listener, PostKind, Sge, WorkRequest};

use crate::cli::{Length, RunSpec, TestArgs, TestKind, MAX_SIZE};
use crate::cpu::CpuSampler;
use crate::facts;
use crate::handshake::{BufferInfo, HandshakeStatus as HsStatus, Reply, Request};
use crate::report::{self, Record, RULE};
use crate::session::{
    connection_config, open_device, report_engine_counters, resolve, Ctrl, Ended, Session,
    StreamReport,
};
use crate::stats::{bandwidth, BwStats, LatencyRecorder};

/// Receive buffers of the send_bw server: as many as fit in 64 MiB, 2 to 512.
pub fn send_bw_ring(size: u64) -> usize {
    ((64 << 20) / size.max(1)).clamp(2, 512) as usize
}

/// Reads/Writes the client keeps in flight in read_bw (the default ORD).
const READ_DEPTH: u32 = 16;

/// Data slots and pre-posted receives of each role.
fn layout(test: TestKind, size: u64, server: bool) -> (usize, usize) {
    match (test, server) {
        (TestKind::SendBw, true) => (send_bw_ring(size), send_bw_ring(size)),
        (TestKind::SendLat, _) => (2, 1),
        _ => (2, 0),
    }
}

/// Runs the server: serves clients until one says its run was the last.
pub fn serve(spec: &RunSpec) -> Result<(), String> {
    let args = &spec.args;
    let device = open_device(args, None)?;
    let bind = resolve(&args.bind, args.port)?;
    let listener: Listener = device
        .listen(bind, connection_config(args))
        .map_err(|e| format!("cannot listen on {bind}: {e}"))?;
    println!(
        "xwarp-bench {} server listening on {} (transport {})",
        spec.test.name(),
        listener.local_addr(),
        args.transport.name()
    );
    let _ = std::io::stdout().flush();
    loop {
        let incoming = listener
            .accept()
            .map_err(|e| format!("accept failed: {e}"))?;
        let Some(req) = admit(spec.test, incoming_request(&incoming)) else {
            let status = match Request::decode(incoming.private_data()) {
                Some(r) if r.test != spec.test => HsStatus::WrongTest(spec.test),
                Some(_) => HsStatus::BadSize,
                None => HsStatus::Malformed,
            };
            eprintln!("xwarp-bench: refused a client ({status:?})");
            let _ = incoming.reject(&Reply::refuse(status).encode());
            continue;
        };
        let served = if req.qps > 1 {
            serve_group(spec.test, &device, &listener, (incoming, req), args)
        } else {
            serve_one(spec.test, &device, incoming, &req, args).map(|()| req.last)
        };
        report_engine_counters(&device, "server");
        let last = served?;
        if last {
            return Ok(());
        }
    }
}

/// `-q N`: accepts the other N - 1 queue pairs of the client whose first one is `first`, then
/// serves all N at once, a thread each. Returns whether that was the client's last run.
fn serve_group(
    test: TestKind,
    device: &dataplane::Device,
    listener: &Listener,
    first: (Incoming, Request),
    args: &TestArgs,
) -> Result<bool, String> {
    let want = usize::from(first.1.qps);
    // Each queue pair is accepted as it comes: the client connects the next one only once the
    // previous one is up.
    let mut group = vec![(accept_one(test, device, first.0, &first.1)?, first.1)];
    while group.len() < want {
        let incoming = listener
            .accept_timeout(Duration::from_secs(args.timeout.max(30)))
            .map_err(|e| format!("waiting for queue pair {} of {want}: {e}", group.len() + 1))?;
        match admit(test, incoming_request(&incoming)) {
            Some(req) if req.qps == group[0].1.qps => {
                group.push((accept_one(test, device, incoming, &req)?, req));
            }
            _ => {
                let _ = incoming.reject(&Reply::refuse(HsStatus::Malformed).encode());
            }
        }
    }
    let last = group.iter().any(|(_, r)| r.last);
    let results: Vec<Result<(), String>> = std::thread::scope(|sc| {
        let handles: Vec<_> = group
            .into_iter()
            .map(|(s, req)| sc.spawn(move || serve_session(test, s, &req, args)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a server thread panicked".into()))
            })
            .collect()
    });
    results.into_iter().collect::<Result<(), String>>()?;
    Ok(last)
}

fn incoming_request(i: &Incoming) -> Option<Request> {
    Request::decode(i.private_data())
}

/// The request if this server runs it.
fn admit(test: TestKind, req: Option<Request>) -> Option<Request> {
    req.filter(|r| r.test == test && (1..=MAX_SIZE).contains(&r.size))
}

fn serve_one(
    test: TestKind,
    device: &dataplane::Device,
    incoming: Incoming,
    req: &Request,
    args: &TestArgs,
) -> Result<(), String> {
    let s = accept_one(test, device, incoming, req)?;
    serve_session(test, s, req, args)
}

/// Accepts `incoming` with the buffers and receives `test` needs on the server.
fn accept_one(
    test: TestKind,
    device: &dataplane::Device,
    incoming: Incoming,
    req: &Request,
) -> Result<Session, String> {
    let (slots, recvs) = layout(test, req.size, true);
    Session::accept(device.clone(), incoming, req, slots, recvs)
}

/// The server's side of `test` on an accepted session, until the client closes.
fn serve_session(
    test: TestKind,
    mut s: Session,
    req: &Request,
    args: &TestArgs,
) -> Result<(), String> {
    let bidi = req.bidirectional && matches!(test, TestKind::WriteBw | TestKind::ReadBw);
    let r = match test {
        _ if bidi => bidirectional_server(&mut s, test, window(test, args)),
        TestKind::WriteLat => write_lat_server(&s),
        TestKind::SendLat => send_lat_server(&s),
        TestKind::WriteBw => fin_ack_server(&mut s),
        TestKind::SendBw => send_bw_server(&mut s),
        _ => Ok(()),
    };
    match r {
        Ok(()) | Err(Ended::Closed(None)) => s.wait_closed(),
        Err(e) => Err(format!("{} server: {e}", test.name())),
    }
}

fn seq_of(i: u64) -> u8 {
    (i % 255) as u8 + 1
}

fn write_lat_server(s: &Session) -> Result<(), Ended> {
    let last = s.size - 1;
    let out = s.slot(1);
    for i in 0.. {
        let seq = seq_of(i);
        s.spin_on_byte("a write", last, seq)?;
        s.mr.write(out.end - 1, &[seq]);
        s.qp.post_write(i, &s.mr, out.clone(), s.remote_slot0())
            .map_err(|e| Ended::Failed(format!("post_write: {e}")))?;
        s.drain_send()?;
    }
    Ok(())
}

fn send_lat_server(s: &Session) -> Result<(), Ended> {
    loop {
        s.next_completion(&s.recv_cq, "a send")?;
        s.qp.post_recv(0, &s.mr, s.slot(0))
            .map_err(|e| Ended::Failed(format!("post_recv: {e}")))?;
        s.qp.post_send(1, &s.mr, s.slot(1))
            .map_err(|e| Ended::Failed(format!("post_send: {e}")))?;
        s.drain_send()?;
    }
}

fn fin_ack_server(s: &mut Session) -> Result<(), Ended> {
    loop {
        let c = s.next_completion(&s.recv_cq, "the FIN")?;
        if s.take_ctrl(&c).map_err(Ended::Failed)? == Some(Ctrl::Fin) {
            return s.send_ctrl(Ctrl::Ack).map_err(Ended::Failed);
        }
    }
}

/// `-b`: streams towards the client until its FIN, then reports the stream instead of the ACK.
fn bidirectional_server(s: &mut Session, test: TestKind, depth: u32) -> Result<(), Ended> {
    let mut p = Progress::quiet(test, s.size as u64);
    let (times, total) = stream(s, test, Until::PeerFin, depth, &mut p)?;
    let b = bandwidth(s.size as u64, &times, total);
    let report = StreamReport {
        messages: b.iterations,
        nanos: u64::try_from(total.as_nanos()).unwrap_or(u64::MAX),
        peak_gbps: b.peak_gbps,
    };
    s.send_ctrl(Ctrl::Report(report)).map_err(Ended::Failed)
}

/// Work requests a bandwidth test keeps in flight: `-t`, and at most the ORD for Reads.
fn window(test: TestKind, args: &TestArgs) -> u32 {
    match test {
        TestKind::ReadBw => args.tx_depth().min(READ_DEPTH),
        _ => args.tx_depth(),
    }
}

/// Receive completions taken per poll (perftest's `CTX_POLL_BATCH`).
const POLL_BATCH: usize = 16;

fn send_bw_server(s: &mut Session) -> Result<(), Ended> {
    let ring = s.data_slots();
    let batch = (ring / 4).max(1) as u32;
    let mut reposted = 0u32;
    let mut done = Vec::with_capacity(POLL_BATCH);
    let mut slots = Vec::with_capacity(POLL_BATCH);
    loop {
        s.next_completions(&s.recv_cq, &mut done, POLL_BATCH, "a send")?;
        slots.clear();
        for c in &done {
            if s.take_ctrl(c).map_err(Ended::Failed)? == Some(Ctrl::Fin) {
                return s.send_ctrl(Ctrl::Ack).map_err(Ended::Failed);
            }
            if let Some(i) = s.data_slot_of(c) {
                slots.push((c.wr_id, s.slot(i)));
            }
        }
        // The polled batch's slots go back as one list (one lock, one doorbell), built on the
        // stack.
        let n = slots.len();
        let sgls: [[Sge<'_>; 1]; POLL_BATCH] = std::array::from_fn(|i| {
            [Sge::new(
                &s.mr,
                slots.get(i).map_or(0..0, |(_, r)| r.clone()),
            )]
        });
        let wrs: [WorkRequest<'_>; POLL_BATCH] = std::array::from_fn(|i| {
            WorkRequest::new(
                slots.get(i).map_or(0, |&(id, _)| id),
                PostKind::Recv,
                &sgls[i],
            )
        });
        if n > 0 {
            s.qp.post_list(&wrs[..n])
                .map_err(|e| Ended::Failed(format!("post_recv: {e}")))?;
        }
        reposted += n as u32;
        if reposted >= batch {
            s.send_ctrl(Ctrl::Credits(reposted))
                .map_err(Ended::Failed)?;
            reposted = 0;
            s.drain_send()?;
        }
    }
}

/// Prints a progress line to stderr once a second after the first second.
struct Progress {
    start: Instant,
    last: Instant,
    what: String,
    quiet: bool,
}

impl Progress {
    fn new(test: TestKind, size: u64) -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            what: format!("{} {} B", test.name(), size),
            quiet: false,
        }
    }

    /// No lines (a server's stream, which has no length of its own to count against).
    fn quiet(test: TestKind, size: u64) -> Self {
        Self {
            quiet: true,
            ..Self::new(test, size)
        }
    }

    fn tick(&mut self, done: u64, length: Length) {
        let now = Instant::now();
        if self.quiet || now.duration_since(self.last) < Duration::from_secs(1) {
            return;
        }
        self.last = now;
        let of = match length {
            Length::Iterations(n) => format!("{done}/{n} iterations"),
            Length::Duration(d) => format!(
                "{done} iterations, {:.0} s of {:.0} s",
                now.duration_since(self.start).as_secs_f64(),
                d.as_secs_f64()
            ),
        };
        eprintln!("xwarp-bench: {}: {of}", self.what);
    }
}

/// When the measured loop stops.
struct Stop {
    length: Length,
    start: Instant,
}

impl Stop {
    fn new(length: Length) -> Self {
        Self {
            length,
            start: Instant::now(),
        }
    }

    fn more(&self, done: u64) -> bool {
        match self.length {
            Length::Iterations(n) => done < n,
            Length::Duration(d) => self.start.elapsed() < d,
        }
    }
}

/// How long a bandwidth stream runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// The client's: its iterations or duration, then FIN and the server's answer.
    Length(Length),
    /// The server's under `-b`: until the client's FIN.
    PeerFin,
}

/// Runs the client side of `spec` against `host`; prints the table and returns the rows.
pub fn run_client(spec: &RunSpec, host: &str) -> Result<Vec<Record>, String> {
    let args = &spec.args;
    let addr = resolve(host, args.port)?;
    let device = open_device(args, Some(addr.ip()))?;
    let config = connection_config(args);
    let mut rows = Vec::new();
    let unit = args.bw_unit();
    let mut histograms = Vec::new();
    for (k, &size) in spec.sizes.iter().enumerate() {
        let req = Request {
            test: spec.test,
            size,
            last: k + 1 == spec.sizes.len(),
            bidirectional: args.bidirectional,
            qps: u16::try_from(args.qps).unwrap_or(u16::MAX),
            buffer: BufferInfo {
                stag: 0,
                addr: 0,
                len: 0,
            },
        };
        let (slots, _) = layout(spec.test, size, false);
        let ctrl = matches!(spec.test, TestKind::WriteBw | TestKind::SendBw) || args.bidirectional;
        let mut group = (0..args.qps)
            .map(|_| Session::connect(device.clone(), addr, req, &config, slots, ctrl))
            .collect::<Result<Vec<_>, _>>()?;
        let params = facts::params(spec, &device, Some(group[0].qp.negotiated()));
        if k == 0 {
            // perftest's order: the parameter block, then the table.
            println!("{RULE}");
            println!(
                "                    {} over {} ({}), {}",
                spec.test.name(),
                args.transport.name(),
                addr,
                if spec.test.is_latency() {
                    "latency in usec"
                } else if unit == report::BwUnit::Gigabits {
                    "Gb/sec = 10^9 bit/s"
                } else {
                    "MB/sec = 2^20 bytes/s"
                }
            );
            print!("{}", params.block());
            facts::warn(&params);
            println!("{RULE}");
            println!("{}", report::header_line(spec.test, unit, args.cpu_util));
        }
        let (mut row, hist) = if let [s] = group.as_mut_slice() {
            measure(s, spec.test, size, spec.length, args)
        } else {
            measure_group(&mut group, spec.test, size, spec.length, args).map(|r| (r, None))
        }
        .map_err(|e| {
            // What the engine saw explains a failed run best (retransmissions, drops).
            report_engine_counters(&device, "client");
            format!("{} {} B: {e}", spec.test.name(), size)
        })?;
        row.params = Some(params);
        println!("{}", row.row_in(unit));
        for line in report::notes(&row, unit) {
            println!("{line}");
        }
        let _ = std::io::stdout().flush();
        rows.push(row);
        if let Some(h) = hist.filter(|_| args.histogram) {
            histograms.push((size, h));
        }
        drop(group);
    }
    report_engine_counters(&device, "client");
    println!("{RULE}");
    for (size, lines) in histograms {
        println!("Latency histogram of {size} B (usec, count):");
        for l in lines {
            println!("{l}");
        }
        println!("{RULE}");
    }
    if let Some(path) = &args.json {
        report::write_json(path, &rows)?;
    }
    if let Some(path) = &args.csv {
        report::write_csv(path, &rows)?;
    }
    Ok(rows)
}

fn measure(
    s: &mut Session,
    test: TestKind,
    size: u64,
    length: Length,
    args: &TestArgs,
) -> Result<(Record, Option<Vec<String>>), Ended> {
    let cpu = args.cpu_util.then(CpuSampler::start);
    let (mut r, hist) = measure_run(s, test, size, length, args)?;
    if let Some(u) = cpu.map(|c| c.finish()) {
        r.cpu_util = Some(u.process);
        r.cpu_util_engine = u.engine;
    }
    Ok((r, hist))
}

/// `-q N`: the bandwidth stream of every session at once, a thread each, started together;
/// the record is their sum over the longest stream's time.
fn measure_group(
    group: &mut [Session],
    test: TestKind,
    size: u64,
    length: Length,
    args: &TestArgs,
) -> Result<Record, Ended> {
    let cpu = args.cpu_util.then(CpuSampler::start);
    let depth = window(test, args);
    let start = std::sync::Barrier::new(group.len());
    let results: Vec<Result<(Vec<Duration>, Duration), Ended>> = std::thread::scope(|sc| {
        let handles: Vec<_> = group
            .iter_mut()
            .map(|s| {
                let start = &start;
                sc.spawn(move || {
                    start.wait();
                    let mut p = Progress::quiet(test, size);
                    stream(s, test, Until::Length(length), depth, &mut p)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Ended::Failed("a stream thread panicked".into())))
            })
            .collect()
    });
    // The streams started together: their completion times (each from its own start) merge
    // into one run, over the longest stream's time.
    let (mut times, mut longest) = (Vec::new(), Duration::ZERO);
    for r in results {
        let (t, total) = r?;
        times.extend(t);
        longest = longest.max(total);
    }
    times.sort_unstable();
    let sum = bandwidth(size, &times, longest);
    let mut r = Record::bandwidth(test, args.transport.name(), size, &sum);
    if let Some(u) = cpu.map(|c| c.finish()) {
        r.cpu_util = Some(u.process);
        r.cpu_util_engine = u.engine;
    }
    Ok(r)
}

fn measure_run(
    s: &mut Session,
    test: TestKind,
    size: u64,
    length: Length,
    args: &TestArgs,
) -> Result<(Record, Option<Vec<String>>), Ended> {
    let transport = args.transport.name();
    let mut progress = Progress::new(test, size);
    if test.is_latency() {
        let rec = match test {
            TestKind::WriteLat => write_lat(s, length, &mut progress)?,
            TestKind::ReadLat => read_lat(s, length, &mut progress)?,
            _ => send_lat(s, length, &mut progress)?,
        };
        let st = rec
            .summary()
            .ok_or_else(|| Ended::Failed("no samples".into()))?;
        let mut r = Record::latency(test, transport, size, &st);
        r.percentiles_us = Some(rec.percentiles());
        return Ok((r, Some(rec.histogram_lines())));
    }
    let until = Until::Length(length);
    let (completions, total) = stream(s, test, until, window(test, args), &mut progress)?;
    let mine = bandwidth(size, &completions, total);
    let Some(theirs) = s.peer_report.take() else {
        return Ok((Record::bandwidth(test, transport, size, &mine), None));
    };
    let theirs = BwStats::of_run(
        size,
        theirs.messages,
        Duration::from_nanos(theirs.nanos),
        theirs.peak_gbps,
    );
    Ok((
        Record::bidirectional(test, transport, size, &mine, &theirs),
        None,
    ))
}

fn write_lat(s: &Session, length: Length, p: &mut Progress) -> Result<LatencyRecorder, Ended> {
    let mut rec = LatencyRecorder::new();
    let last = s.size - 1;
    let out = s.slot(1);
    let stop = Stop::new(length);
    let mut i = 0u64;
    while stop.more(i) {
        let seq = seq_of(i);
        s.mr.write(out.end - 1, &[seq]);
        let t0 = Instant::now();
        s.qp.post_write(i, &s.mr, out.clone(), s.remote_slot0())
            .map_err(|e| Ended::Failed(format!("post_write: {e}")))?;
        s.spin_on_byte("the echo", last, seq)?;
        rec.record(t0.elapsed() / 2);
        s.drain_send()?;
        i += 1;
        p.tick(i, length);
    }
    Ok(rec)
}

fn read_lat(s: &Session, length: Length, p: &mut Progress) -> Result<LatencyRecorder, Ended> {
    let mut rec = LatencyRecorder::new();
    let stop = Stop::new(length);
    let mut i = 0u64;
    while stop.more(i) {
        let t0 = Instant::now();
        s.qp.post_read(i, &s.mr, s.slot(1), s.remote_slot0())
            .map_err(|e| Ended::Failed(format!("post_read: {e}")))?;
        s.next_completion(&s.send_cq, "the read")?;
        rec.record(t0.elapsed());
        i += 1;
        p.tick(i, length);
    }
    Ok(rec)
}

fn send_lat(s: &Session, length: Length, p: &mut Progress) -> Result<LatencyRecorder, Ended> {
    let mut rec = LatencyRecorder::new();
    let stop = Stop::new(length);
    let post_recv = |s: &Session| {
        s.qp.post_recv(0, &s.mr, s.slot(0))
            .map_err(|e| Ended::Failed(format!("post_recv: {e}")))
    };
    post_recv(s)?;
    let mut i = 0u64;
    while stop.more(i) {
        let t0 = Instant::now();
        s.qp.post_send(i, &s.mr, s.slot(1))
            .map_err(|e| Ended::Failed(format!("post_send: {e}")))?;
        s.next_completion(&s.recv_cq, "the echo")?;
        rec.record(t0.elapsed() / 2);
        post_recv(s)?;
        s.drain_send()?;
        i += 1;
        p.tick(i, length);
    }
    Ok(rec)
}

/// The bandwidth loop: keeps `depth` work requests in flight; returns each completion's time
/// since the start and the total time (through the FIN/ACK where there is one).
fn stream(
    s: &mut Session,
    test: TestKind,
    until: Until,
    depth: u32,
    p: &mut Progress,
) -> Result<(Vec<Duration>, Duration), Ended> {
    let length = match until {
        Until::Length(l) => l,
        // The server's progress lines count its own stream; it has no length of its own.
        Until::PeerFin => Length::Duration(Duration::MAX),
    };
    let cap = match length {
        Length::Iterations(n) => n.min(1 << 24) as usize,
        Length::Duration(_) => 1 << 16,
    };
    let mut times = Vec::with_capacity(cap);
    let mut credits = match test {
        TestKind::SendBw => send_bw_ring(s.size as u64) as u64,
        _ => u64::MAX,
    };
    let remote = s.remote_slot0();
    let src = s.slot(1);
    let stop = Stop::new(length);
    let start = stop.start;
    let (mut posted, mut done) = (0u64, 0u64);
    let send_bw = test == TestKind::SendBw;
    let server = until == Until::PeerFin;
    // The server's stream (-b) watches its receive queue for the client's FIN.
    let watch_recv = send_bw || server;
    let mut fin = false;
    loop {
        let mut more = if server { !fin } else { stop.more(posted) };
        while more && posted - done < u64::from(depth) && credits > 0 {
            let r = match test {
                TestKind::WriteBw => s.qp.post_write(posted, &s.mr, src.clone(), remote),
                TestKind::ReadBw => s.qp.post_read(posted, &s.mr, src.clone(), remote),
                _ => s.qp.post_send(posted, &s.mr, src.clone()),
            };
            r.map_err(|e| Ended::Failed(format!("post: {e}")))?;
            posted += 1;
            credits -= u64::from(send_bw);
            more = server || stop.more(posted);
        }
        if !more && done == posted {
            break;
        }
        // Wait for completions, or for credits from the server.
        s.spin("a completion", || {
            let mut progressed = false;
            // The completions found by one poll share one clock reading (perftest reads the
            // cycle counter per completion; a clock_gettime each was 3.5 % of a send_bw
            // sender's core).
            let mut found_at = None;
            while let Some(c) = s.send_cq.poll_one() {
                if !c.is_ok() {
                    return Some(Err(Ended::Failed(format!(
                        "{:?} finished {:?}",
                        c.opcode, c.status
                    ))));
                }
                if c.wr_id != u64::MAX {
                    times.push(*found_at.get_or_insert_with(|| start.elapsed()));
                    done += 1;
                }
                progressed = true;
            }
            while let Some(c) = watch_recv.then(|| s.recv_cq.poll_one()).flatten() {
                match s.take_ctrl(&c) {
                    Ok(Some(Ctrl::Credits(n))) => credits += u64::from(n),
                    Ok(Some(Ctrl::Fin)) => fin = true,
                    Ok(_) => {}
                    Err(e) => return Some(Err(Ended::Failed(e))),
                }
                progressed = true;
            }
            progressed.then_some(Ok(()))
        })??;
        p.tick(done, length);
    }
    if server {
        let total = start.elapsed();
        s.drain_send()?;
        return Ok((times, total));
    }
    if send_bw && credits == 0 {
        loop {
            let c = s.next_completion(&s.recv_cq, "credits")?;
            if let Some(Ctrl::Credits(_)) = s.take_ctrl(&c).map_err(Ended::Failed)? {
                break;
            }
        }
    }
    if matches!(test, TestKind::WriteBw | TestKind::SendBw) || s.bidirectional {
        s.send_ctrl(Ctrl::Fin).map_err(Ended::Failed)?;
        loop {
            let c = s.next_completion(&s.recv_cq, "the ACK")?;
            match s.take_ctrl(&c).map_err(Ended::Failed)? {
                Some(Ctrl::Ack) => break,
                Some(Ctrl::Report(r)) => {
                    s.peer_report = Some(r);
                    break;
                }
                _ => {}
            }
        }
    }
    let total = start.elapsed();
    s.drain_send()?;
    Ok((times, total))
}
