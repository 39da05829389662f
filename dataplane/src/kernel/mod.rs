//! The `kernel` transport: the MPA/DDP/RDMAP stack over kernel TCP sockets (TCP_NODELAY), one
//! driver thread per connection. The fallback for hosts without XDP, the baseline of the bench,
//! and an independent TCP peer for the AF_XDP engine's tests.

mod driver;
mod waker;

pub(crate) use driver::{run, tcp_mss, DriverOptions, EstablishedTx};
pub(crate) use waker::{wait_readable, Waker};
