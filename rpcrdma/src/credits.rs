//! Credit-based flow control (§3.3, §4.1, §3.8).
//!
//! A credit is one receive buffer posted at the server. Every Send from the client (a call or an
//! RDMA_DONE) consumes one; the server re-posts it once it has taken the message in. A call
//! header carries the client's *requested* credits, a reply header the server's *grant*.
//!
//! Client rule (RPCRDMA-07): Sends in flight never exceed the most recent grant. Calls stay in
//! flight until their reply (or RDMA_ERROR) arrives; an RDMA_DONE counts as in flight until the
//! next reply arrives (RPCRDMA-20), since the server replenishes that credit by then (RPCRDMA-21).
//! Before the first reply the grant is 1 (C-1, RPCRDMA-35). A grant of 0 is clamped to 1 and a
//! grant above what the client can use is clamped to its own maximum (its posted reply buffers,
//! C-3).
//!
//! Server rule: the grant is never 0 while no call is in progress (RPCRDMA-06); it follows the
//! request, capped by the per-connection maximum and by the receive buffers the server can afford
//! right now, so an exhausted server still replies with a smaller grant (RPCRDMA-08). The server
//! counts the RDMA_DONEs it still expects (one per reply that carried read chunks): it keeps an
//! extra receive posted for each (C-2), and its grant is at least that count plus one, so a
//! client that owes DONEs can always send them and one more call (no deadlock with a grant of 1).

use thiserror::Error;

/// The client may not send now: every granted credit is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("no credit available ({in_flight} in flight of {granted} granted)")]
pub struct NoCredit {
    /// Sends in flight (calls and unreplenished DONEs).
    pub in_flight: u32,
    /// The current grant.
    pub granted: u32,
}

/// The client's view of the server's credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCredits {
    granted: u32,
    max: u32,
    requested: u32,
    calls: u32,
    dones: u32,
}

impl ClientCredits {
    /// A fresh connection: grant 1 until the first reply. `max` is how many calls the client can
    /// have outstanding (its posted reply buffers, at least 1); it also is the initial request.
    pub fn new(max: u32) -> Self {
        let max = max.max(1);
        Self {
            granted: 1,
            max,
            requested: max,
            calls: 0,
            dones: 0,
        }
    }

    /// The credit value to put in the next call or DONE header.
    pub fn requested(&self) -> u32 {
        self.requested
    }

    /// Adjusts the request to the expected need (clamped to 1..=max).
    pub fn set_requested(&mut self, n: u32) {
        self.requested = n.clamp(1, self.max);
    }

    /// The most recent grant (after clamping).
    pub fn granted(&self) -> u32 {
        self.granted
    }

    /// Calls sent and not yet answered.
    pub fn calls_in_flight(&self) -> u32 {
        self.calls
    }

    /// Sends the client may still make now.
    pub fn available(&self) -> u32 {
        self.granted.saturating_sub(self.calls + self.dones)
    }

    /// Takes a credit for a call (RPCRDMA-07).
    pub fn try_start_call(&mut self) -> Result<(), NoCredit> {
        self.check_available()?;
        self.calls += 1;
        Ok(())
    }

    /// Takes a credit for an RDMA_DONE (RPCRDMA-20).
    pub fn try_send_done(&mut self) -> Result<(), NoCredit> {
        self.check_available()?;
        self.dones += 1;
        Ok(())
    }

    /// `Ok` when a Send may go now (a credit is free), without taking it.
    pub fn check_available(&self) -> Result<(), NoCredit> {
        if self.available() == 0 {
            return Err(NoCredit {
                in_flight: self.calls + self.dones,
                granted: self.granted,
            });
        }
        Ok(())
    }

    /// A reply or RDMA_ERROR for an outstanding call arrived with `grant`. Replies that match no
    /// outstanding call must not be passed here.
    pub fn on_reply(&mut self, grant: u32) {
        self.calls = self.calls.saturating_sub(1);
        self.dones = 0;
        self.granted = grant.clamp(1, self.max);
    }

    /// The connection was lost: nothing is in flight, and the grant restarts at 1.
    pub fn reset(&mut self) {
        *self = Self {
            requested: self.requested,
            ..Self::new(self.max)
        };
    }
}

/// The server's side: receive buffers and grants of one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerCredits {
    max: u32,
    budget: u32,
    posted: u32,
    in_progress: u32,
    dones_expected: u32,
    last_grant: u32,
    overruns: u64,
}

/// A Send arrived with no receive posted: on a real RDMA transport the connection breaks
/// (RPCRDMA-28). Means the client sent beyond its grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("receive overrun: the client exceeded its credits")]
pub struct Overrun;

impl ServerCredits {
    /// A connection that will grant at most `max` credits, with one receive posted (the
    /// initial credit) and a buffer budget of `max`.
    pub fn new(max: u32) -> Self {
        let max = max.max(1);
        Self {
            max,
            budget: max,
            posted: 1,
            in_progress: 0,
            dones_expected: 0,
            last_grant: 1,
            overruns: 0,
        }
    }

    /// Sets how many receive buffers the server can currently afford for this connection.
    pub fn set_budget(&mut self, buffers: u32) {
        self.budget = buffers;
    }

    /// Receives posted now.
    pub fn posted(&self) -> u32 {
        self.posted
    }

    /// Calls received and not yet answered.
    pub fn in_progress(&self) -> u32 {
        self.in_progress
    }

    /// The grant sent last.
    pub fn last_grant(&self) -> u32 {
        self.last_grant
    }

    /// Sends that found no receive posted.
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    fn consume(&mut self) -> Result<(), Overrun> {
        if self.posted == 0 {
            self.overruns += 1;
            return Err(Overrun);
        }
        self.posted -= 1;
        Ok(())
    }

    /// A call arrived: it consumed a receive and is now in progress.
    pub fn on_call(&mut self) -> Result<(), Overrun> {
        self.consume()?;
        self.in_progress += 1;
        Ok(())
    }

    /// A Send that is neither a call nor a DONE arrived (dropped as malformed or not for a
    /// server): it consumed a receive all the same.
    pub fn on_dropped(&mut self) -> Result<(), Overrun> {
        self.consume()
    }

    /// An RDMA_DONE arrived: it consumed a receive (RPCRDMA-20).
    pub fn on_done(&mut self) -> Result<(), Overrun> {
        self.consume()?;
        self.dones_expected = self.dones_expected.saturating_sub(1);
        Ok(())
    }

    /// A DONE will not come (timeout, RPCRDMA-22): stop reserving a receive for it.
    pub fn forget_done(&mut self) {
        self.dones_expected = self.dones_expected.saturating_sub(1);
    }

    /// RDMA_DONEs expected (replies with read chunks not yet acknowledged).
    pub fn dones_expected(&self) -> u32 {
        self.dones_expected
    }

    /// How many receives to post now to back the last grant (C-2): the client may still send
    /// `grant - calls in progress` messages, each needing a posted receive, plus one reserved
    /// receive per expected DONE. A grant once sent is
    /// honoured even if the budget shrank since (the budget limits later grants). The caller
    /// posts them and reports with [`ServerCredits::posted_receives`]; RPCRDMA-21: the buffer a
    /// DONE used is replaced here at once.
    pub fn receives_to_post(&self) -> u32 {
        (self.last_grant.saturating_sub(self.in_progress) + self.dones_expected)
            .saturating_sub(self.posted)
    }

    /// `n` receives were posted.
    pub fn posted_receives(&mut self, n: u32) {
        self.posted += n;
    }

    /// The grant for the reply being sent to a call that `requested` credits; the call leaves
    /// the in-progress set. `reply_has_read_chunks`: the client will send RDMA_DONE for it.
    /// Post [`ServerCredits::receives_to_post`] receives before the reply goes out.
    pub fn grant_for_reply(&mut self, requested: u32, reply_has_read_chunks: bool) -> u32 {
        self.in_progress = self.in_progress.saturating_sub(1);
        self.dones_expected += u32::from(reply_has_read_chunks);
        let cap = self.max.min(self.budget);
        // RPCRDMA-06: never 0 (a reply always answers a call, so 1 is the least useful grant);
        // room for every owed DONE plus one call.
        let g = requested.min(cap).max(self.dones_expected + 1);
        self.last_grant = g;
        g
    }

    /// The grant to put in an RDMA_ERROR answering a refused call (C-4).
    pub fn grant_for_error(&mut self, requested: u32) -> u32 {
        self.grant_for_reply(requested, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn rpcrdma_35_fresh_client_has_one_credit() {
        let mut c = ClientCredits::new(32);
        assert_eq!(c.granted(), 1);
        assert_eq!(c.requested(), 32);
        assert_eq!(c.try_start_call(), Ok(()));
        assert_eq!(
            c.try_start_call(),
            Err(NoCredit {
                in_flight: 1,
                granted: 1
            })
        );
        c.on_reply(16);
        assert_eq!(c.available(), 16);
    }

    #[test]
    fn rpcrdma_06_client_clamps_grant_of_zero_to_one_and_large_grant_to_max() {
        let mut c = ClientCredits::new(8);
        c.try_start_call().unwrap();
        c.on_reply(0);
        assert_eq!(c.granted(), 1, "a zero grant would deadlock");
        c.try_start_call().unwrap();
        c.on_reply(1000);
        assert_eq!(c.granted(), 8);
    }

    #[test]
    fn rpcrdma_07_client_never_exceeds_the_grant() {
        let mut c = ClientCredits::new(64);
        c.try_start_call().unwrap();
        c.on_reply(4);
        let started = (0..40).filter(|_| c.try_start_call().is_ok()).count();
        assert_eq!(started, 4);
        // A reply lowering the grant: in flight 3, grant 2 -> nothing may go.
        c.on_reply(2);
        assert_eq!(c.calls_in_flight(), 3);
        assert_eq!(c.available(), 0);
        assert!(c.try_start_call().is_err());
        c.on_reply(2);
        c.on_reply(2);
        assert_eq!(c.available(), 1);
    }

    #[test]
    fn rpcrdma_20_done_consumes_a_credit_until_the_next_reply() {
        let mut c = ClientCredits::new(8);
        c.try_start_call().unwrap();
        c.on_reply(2);
        // That reply carried read chunks; the client read them and sends DONE.
        c.try_send_done().unwrap();
        assert_eq!(c.available(), 1);
        c.try_start_call().unwrap();
        assert_eq!(c.available(), 0, "DONE and one call use both credits");
        assert!(c.try_start_call().is_err());
        c.on_reply(2);
        assert_eq!(
            c.available(),
            2,
            "the next reply replenishes the DONE credit"
        );
    }

    #[test]
    fn rpcrdma_20_with_a_grant_of_1_the_call_after_done_waits() {
        let mut c = ClientCredits::new(8);
        c.try_start_call().unwrap();
        c.try_start_call().unwrap_err();
        c.on_reply(1);
        c.try_send_done().unwrap();
        assert!(c.try_start_call().is_err());
    }

    #[test]
    fn rpcrdma_06_idle_server_never_grants_zero() {
        let mut s = ServerCredits::new(16);
        s.on_call().unwrap();
        s.set_budget(0);
        assert_eq!(s.grant_for_reply(0, false), 1);
        assert_eq!(s.in_progress(), 0);
        assert_eq!(
            s.receives_to_post(),
            1,
            "a receive must back the grant of 1"
        );
    }

    #[test]
    fn rpcrdma_08_server_under_buffer_exhaustion_still_replies_with_a_smaller_grant() {
        let mut s = ServerCredits::new(32);
        s.on_call().unwrap();
        assert_eq!(s.grant_for_reply(32, false), 32);
        assert_eq!(s.receives_to_post(), 32);
        s.posted_receives(32);
        s.set_budget(4);
        s.on_call().unwrap();
        assert_eq!(s.grant_for_reply(32, false), 4);
        assert_eq!(s.receives_to_post(), 0);
    }

    #[test]
    fn rpcrdma_21_reply_with_read_chunks_grants_room_for_done_and_a_call() {
        let mut s = ServerCredits::new(8);
        s.on_call().unwrap();
        let g = s.grant_for_reply(1, true);
        assert_eq!(g, 2);
        s.posted_receives(s.receives_to_post());
        let mut c = ClientCredits::new(8);
        c.try_start_call().unwrap();
        c.on_reply(g);
        c.try_send_done().unwrap();
        s.on_done().unwrap();
        c.try_start_call().unwrap();
        s.on_call().unwrap();
        assert_eq!(s.overruns(), 0);
        // The next grant is not lowered because of the DONE.
        s.posted_receives(s.receives_to_post());
        assert_eq!(s.grant_for_reply(1, false), 1);
        assert_eq!(s.grant_for_reply(8, false), 8);
    }

    #[test]
    fn c2_done_still_in_flight_when_the_next_reply_is_sent_finds_a_reserved_receive() {
        let mut s = ServerCredits::new(8);
        let mut c = ClientCredits::new(8);
        let post = |s: &mut ServerCredits| {
            let n = s.receives_to_post();
            s.posted_receives(n);
        };
        // Call A; its reply carries read chunks, so the client owes a DONE.
        c.try_start_call().unwrap();
        s.on_call().unwrap();
        let g = s.grant_for_reply(8, true);
        post(&mut s);
        c.on_reply(g);
        // Calls B and C arrive; the client then sends its DONE, still in flight...
        for _ in 0..2 {
            c.try_start_call().unwrap();
            s.on_call().unwrap();
        }
        c.try_send_done().unwrap();
        // ... when the server answers B. The client counts the DONE as replenished by then.
        let g = s.grant_for_reply(8, false);
        post(&mut s);
        c.on_reply(g);
        // The DONE lands, then every call the client may now send: none overruns.
        s.on_done().unwrap();
        let mut sent = 0;
        while c.try_start_call().is_ok() {
            s.on_call().unwrap();
            sent += 1;
        }
        assert_eq!(sent, 7);
        assert_eq!(s.overruns(), 0);
    }

    #[test]
    fn server_counts_an_overrun_when_a_client_ignores_the_grant() {
        let mut s = ServerCredits::new(4);
        s.on_call().unwrap();
        assert_eq!(s.on_call(), Err(Overrun));
        assert_eq!(s.overruns(), 1);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Call(u32),
        Reply(usize, bool),
        Budget(u32),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u32..40).prop_map(Step::Call),
            (0usize..64, any::<bool>()).prop_map(|(i, chunks)| Step::Reply(i, chunks)),
            (0u32..40).prop_map(Step::Budget),
        ]
    }

    proptest! {
        /// RPCRDMA-07, RPCRDMA-28: a client following its credits never overruns the server's
        /// receives, whatever the request sizes, reply order and server budget; in flight never
        /// exceeds the grant; the server never grants 0 (RPCRDMA-06).
        #[test]
        fn rpcrdma_07_28_credit_protocol_never_overruns(max_c in 1u32..40, max_s in 1u32..40,
                                                         steps in proptest::collection::vec(step(), 1..200)) {
            let mut c = ClientCredits::new(max_c);
            let mut s = ServerCredits::new(max_s);
            let mut outstanding: VecDeque<u32> = VecDeque::new(); // requested credit of each call
            let mut dones_owed = 0u32;
            let flush = |c: &mut ClientCredits, s: &mut ServerCredits, owed: &mut u32| {
                while *owed > 0 && c.try_send_done().is_ok() {
                    *owed -= 1;
                    s.on_done().unwrap_or(());
                    let n = s.receives_to_post();
                    s.posted_receives(n);
                }
            };
            for st in steps {
                flush(&mut c, &mut s, &mut dones_owed);
                match st {
                    Step::Call(req) => {
                        c.set_requested(req);
                        if c.try_start_call().is_ok() {
                            prop_assert!(c.calls_in_flight() <= c.granted());
                            prop_assert!(s.on_call().is_ok());
                            outstanding.push_back(c.requested());
                        }
                    }
                    Step::Reply(i, read_chunks) if !outstanding.is_empty() => {
                        let req = outstanding.remove(i % outstanding.len()).unwrap();
                        let g = s.grant_for_reply(req, read_chunks);
                        prop_assert!(g >= 1);
                        let n = s.receives_to_post();
                        s.posted_receives(n);
                        c.on_reply(g);
                        // The client reads the chunks, then owes a DONE (RPCRDMA-04), sent
                        // when a credit is free, like a call.
                        dones_owed += u32::from(read_chunks);
                    }
                    Step::Reply(..) => {}
                    Step::Budget(b) => s.set_budget(b),
                }
                prop_assert_eq!(c.calls_in_flight() as usize, outstanding.len());
                prop_assert_eq!(s.in_progress() as usize, outstanding.len());
            }
            // Draining: answer everything; every owed DONE gets out (no deadlock).
            while let Some(req) = outstanding.pop_front() {
                flush(&mut c, &mut s, &mut dones_owed);
                let g = s.grant_for_reply(req, false);
                s.posted_receives(s.receives_to_post());
                c.on_reply(g);
            }
            flush(&mut c, &mut s, &mut dones_owed);
            prop_assert_eq!(dones_owed, 0);
            prop_assert_eq!(s.overruns(), 0);
        }
    }
}
