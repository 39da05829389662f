//! The `kernel` transport: the MPA/DDP/RDMAP stack over kernel TCP sockets (TCP_NODELAY), one
//! driver thread per connection. The fallback for hosts without XDP, the baseline of the bench,
//! and an independent TCP peer for the AF_XDP engine's tests.

mod driver;
mod engine;
pub(crate) mod startup;
mod waker;

pub(crate) use driver::{run, DriverOptions};
pub(crate) use engine::Engine;
pub(crate) use waker::Waker;
