//! The `kernel` transport: the MPA/DDP/RDMAP stack over kernel TCP sockets (TCP_NODELAY), one
//! driver thread per connection, or inline (the application's calls drive each connection). The fallback for hosts without XDP, the baseline of the bench,
//! and an independent TCP peer for the AF_XDP engine's tests.

mod acceptor;
mod backlog;
mod connection_driver;
mod inline;
mod waker;

pub(crate) use acceptor::{KernelIncoming, KernelListener};
pub(crate) use connection_driver::{run, tcp_mss, DriverOptions};
pub(crate) use inline::{InlineConn, InlineDrivers, InlineHandle};
pub(crate) use waker::{wait_readable, Waker};
