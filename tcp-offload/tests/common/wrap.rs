//! A transport with hooks on what it receives: tests tamper with packets going in or data
//! coming out without re-implementing the whole [`Transport`].

use netsim::{ConnState, Delivery, SimTime, SimTransport, TransportStats};

/// Hooks of a [`Wrapped`] transport; the defaults pass everything through.
pub trait Hooks<T: SimTransport> {
    /// A packet arrives for `inner`.
    fn packet(&mut self, inner: &mut T, now: SimTime, packet: &[u8]) {
        inner.handle_packet(now, packet)
    }
    /// The application asks `inner` for data.
    fn recv(&mut self, inner: &mut T, now: SimTime) -> Option<Delivery> {
        inner.recv(now)
    }
}

/// `inner` with `hooks` on its receive paths.
pub struct Wrapped<T, H> {
    /// The transport.
    pub inner: T,
    /// The hooks.
    pub hooks: H,
}

impl<T: SimTransport, H: Hooks<T>> SimTransport for Wrapped<T, H> {
    fn handle_packet(&mut self, now: SimTime, p: &[u8]) {
        self.hooks.packet(&mut self.inner, now, p)
    }
    fn poll_transmit(&mut self, now: SimTime) -> Option<Vec<u8>> {
        self.inner.poll_transmit(now)
    }
    fn poll_timeout(&mut self, now: SimTime) -> Option<SimTime> {
        self.inner.poll_timeout(now)
    }
    fn handle_timeout(&mut self, now: SimTime) {
        self.inner.handle_timeout(now)
    }
    fn state(&self) -> ConnState {
        self.inner.state()
    }
    fn send_space(&self) -> usize {
        self.inner.send_space()
    }
    fn send(&mut self, now: SimTime, d: &[u8]) -> usize {
        self.inner.send(now, d)
    }
    fn send_record(&mut self, now: SimTime, r: &[u8]) -> bool {
        self.inner.send_record(now, r)
    }
    fn recv(&mut self, now: SimTime) -> Option<Delivery> {
        self.hooks.recv(&mut self.inner, now)
    }
    fn close(&mut self, now: SimTime) {
        self.inner.close(now)
    }
    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}
