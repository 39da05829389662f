//! The store client's pipelined calls (start_read / start_write / wait_any) over loopback:
//! several calls in flight at once, within the server's credits (RPCRDMA-07), data equal, a
//! failing call reported alone.

mod store_support;

use std::collections::HashMap;
use std::sync::Arc;

use dataplane::Access;
use rpcrdma::storage::StoreStatus;
use store_support::{pattern, server, server_with, TempFile};
use xwarpd::store::{
    CallId, ClientOptions, Finished, ServerOptions, StoreClient, StoreError, MAX_IN_FLIGHT,
};

#[test]
fn pipelined_writes_then_reads_come_back_equal_inline_and_chunked() {
    let f = TempFile::new("pipe");
    let (_dev, srv) = server(&f, 32 << 20);
    let mut c = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    // Sizes alternate between the inline path and the chunk path.
    let sizes = [100usize, 1 << 20, 3000, 65_537, 1, 300_000, 8000, 1 << 20];
    let slot = 1 << 20;
    let n = sizes.len() * 3;
    let src = Arc::new(c.pd().register(slot * n, Access::ALL).unwrap());
    let dst = Arc::new(c.pd().register(slot * n, Access::ALL).unwrap());
    let mut expect = Vec::new();
    let mut ids = HashMap::new();
    let mut max_in_flight = 0;
    for i in 0..n {
        let len = sizes[i % sizes.len()];
        let data = pattern(i as u64 + 1, len);
        src.write(i * slot, &data).unwrap();
        let offset = (i * slot) as u64 + 11;
        let id = c
            .start_write(offset, &src, i * slot..i * slot + len, false)
            .unwrap();
        ids.insert(id, i);
        max_in_flight = max_in_flight.max(c.in_flight());
        expect.push((offset, data));
    }
    while c.in_flight() > 0 {
        let (id, r) = c.wait_any().unwrap();
        let i = ids.remove(&id).expect("an answer for a call we started");
        match r.unwrap() {
            Finished::Write(w) => assert_eq!(w.count as usize, expect[i].1.len()),
            other => panic!("call {i}: {other:?}"),
        }
    }
    assert!(ids.is_empty(), "every call answered once");
    assert!(
        max_in_flight > 1,
        "calls overlapped (at most {max_in_flight} in flight)"
    );
    for (i, (offset, data)) in expect.iter().enumerate() {
        let id = c
            .start_read(*offset, &dst, i * slot..i * slot + data.len())
            .unwrap();
        ids.insert(id, i);
    }
    while c.in_flight() > 0 {
        let (id, r) = c.wait_any().unwrap();
        let i = ids.remove(&id).unwrap();
        let Finished::Read(r) = r.unwrap() else {
            panic!("call {i}: not a READ answer");
        };
        assert_eq!(r.len as usize, expect[i].1.len());
        let mut got = vec![0u8; expect[i].1.len()];
        dst.read(i * slot, &mut got).unwrap();
        assert!(got == expect[i].1, "call {i}: data differs");
    }
    let st = srv.stats().snapshot().totals;
    assert_eq!(st.writes, n as u64);
    assert_eq!(st.reads, n as u64);
}

#[test]
fn rpcrdma_07_calls_stay_within_a_small_grant() {
    // Two credits: a third call in flight would arrive with no receive posted, which breaks
    // the connection (RPCRDMA-28); so 40 calls all answered means the client waited its turn.
    let f = TempFile::new("grant");
    let opts = ServerOptions {
        credits: 2,
        ..ServerOptions::default()
    };
    let (_dev, srv) = server_with(&f, 4 << 20, opts);
    let mut c = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    let buf = Arc::new(c.pd().register(64 << 10, Access::ALL).unwrap());
    let mut answered = 0;
    for i in 0..40u64 {
        c.start_read(i * 4096, &buf, 0..(64 << 10)).unwrap();
        assert!(c.credits() <= 2 && c.credits() as usize <= MAX_IN_FLIGHT);
        while c.in_flight() >= 4 {
            c.wait_any().unwrap().1.unwrap();
            answered += 1;
        }
    }
    while c.in_flight() > 0 {
        c.wait_any().unwrap().1.unwrap();
        answered += 1;
    }
    assert_eq!(answered, 40);
    assert_eq!(srv.stats().snapshot().totals.reads, 40);
}

#[test]
fn a_failing_pipelined_call_fails_alone() {
    let f = TempFile::new("fail");
    let (_dev, srv) = server(&f, 1 << 20);
    let mut c = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    assert!(
        matches!(c.wait_any(), Err(StoreError::Invalid(_))),
        "nothing in flight"
    );
    let buf = Arc::new(c.pd().register(8192, Access::ALL).unwrap());
    let good1 = c.start_read(0, &buf, 0..4096).unwrap();
    let bad = c.start_read(2 << 20, &buf, 4096..8192).unwrap();
    let good2 = c.start_write(4096, &buf, 0..4096, true).unwrap();
    let mut results: HashMap<CallId, Result<Finished, StoreError>> = HashMap::new();
    while c.in_flight() > 0 {
        let (id, r) = c.wait_any().unwrap();
        results.insert(id, r);
    }
    assert!(matches!(results[&good1], Ok(Finished::Read(_))));
    assert!(
        matches!(
            results[&bad],
            Err(StoreError::Status(StoreStatus::OutOfRange))
        ),
        "{:?}",
        results[&bad]
    );
    assert!(matches!(results[&good2], Ok(Finished::Write(w)) if w.committed));
    // The connection is still good for one-at-a-time calls.
    assert_eq!(c.read(0, &buf, 0..10).unwrap().len, 10);
}

#[test]
fn poll_any_returns_answers_without_waiting_and_none_when_idle() {
    let f = TempFile::new("poll");
    let (_dev, srv) = server(&f, 1 << 20);
    let mut c = StoreClient::connect(srv.local_addr(), &ClientOptions::default()).unwrap();
    assert!(c.poll_any().unwrap().is_none(), "nothing in flight");
    let buf = Arc::new(c.pd().register(4 * 4096, Access::ALL).unwrap());
    let mut ids: Vec<CallId> = (0..4)
        .map(|i| {
            c.start_read(i as u64 * 4096, &buf, i * 4096..(i + 1) * 4096)
                .unwrap()
        })
        .collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ids.is_empty() {
        assert!(std::time::Instant::now() < deadline, "answers within 30 s");
        if let Some((id, r)) = c.poll_any().unwrap() {
            assert!(matches!(r, Ok(Finished::Read(rr)) if rr.len == 4096));
            let at = ids
                .iter()
                .position(|x| *x == id)
                .expect("a call we started");
            ids.remove(at);
        }
    }
    assert!(c.poll_any().unwrap().is_none(), "every answer taken once");
    assert_eq!(c.in_flight(), 0);
}
