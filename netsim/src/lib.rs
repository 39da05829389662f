//! Seeded, deterministic simulated IP link with virtual time, for tests and benchmarks.
//!
//! Pure: no I/O, no clock, no threads, no unsafe. A [`Sim`] joins two [`SimEndpoint`]s by a
//! [`Link`] each way (delay, jitter, reordering, loss, duplication, bit flips, MTU, bottleneck
//! rate and queue; see [`LinkConfig`]) and runs them in [`SimTime`] until both are done. Every
//! random draw comes from ChaCha8 streams derived from one seed, so a failing run is reproduced
//! by its seed alone (given deterministic endpoints).
//!
//! Any TCP plugs in as a [`SimTransport`]; a [`BulkApp`] drives it with a seeded stream and checks
//! what arrives with a [`StreamVerifier`]; a [`Host`] pairs the two into a [`SimEndpoint`].
//! [`SegmentAudit`] watches one side's segments on the link (retransmissions, flags, header
//! alignment to records, payload contents).
//!
//! Without a link, [`exchange()`] joins two of our connections back to back (no loss, no delay,
//! one instant), for tests and benchmarks that need an open pair.
//!
//! A run, in outline (our TCP plugs in through [`ours::OursTransport`], smoltcp through
//! [`smol::SmolTransport`]):
//!
//! ```text
//! let a = Host::new(client_transport, BulkApp::new(BulkConfig::new(n, seed_a, n, seed_b)));
//! let b = Host::new(server_transport, BulkApp::new(BulkConfig::new(n, seed_b, n, seed_a)));
//! let link = LinkConfig::default().with_loss(0.01).with_jitter(Duration::from_millis(2));
//! let mut sim = Sim::new(seed, a, b, link.clone(), link)?;
//! sim.add_tap(|side, now, packet| audit[side as usize].observe(packet));
//! let report = sim.run()?; // both sides verified every octet and closed
//! ```
//!
//! One adapter of our TCP. There were two: `SimTransport` in tcp-offload's library (client, or
//! server behind a listener; byte stream or owned records) and the tests' `OursTransport`, which
//! had diverged from it. [`ours::OursTransport`] is kept because it covers all the tests need
//! (external records written at every retransmission, passive open by `Connection::listen` or by a
//! `Listener`, record mode entered early, counters of stale timeouts and acknowledged records, a
//! detailed `describe`); from `SimTransport` it took the listener settings, a close asked for
//! while opening being kept until the connection is established, no send space before that, and
//! `segments_sent` counting data segments as documented. `SimTransport`'s immediate timeout after
//! each application call is left out: the driver already polls for output after every turn.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod audit;
mod bulk;
mod driver;
mod exchange;
mod link;
mod role;
mod stream;
mod time;
mod verify;

pub mod ours;
pub mod smol;

pub use audit::{AuditStats, SegmentAudit, SegmentRange};
pub use bulk::{BulkApp, BulkConfig, ClosePolicy, Finish};
pub use driver::{Sim, SimConfig, SimEndpoint, SimError, SimReport, SimSide, Tap};
pub use exchange::exchange;
pub use link::{Link, LinkConfig, LinkConfigError, LinkStats, SendOutcome};
pub use role::{SimRole, CLIENT_IP, CLIENT_PORT, SERVER_IP, SERVER_PORT};
pub use stream::{Application, ConnState, Delivery, Host, SimTransport, TransportStats};
pub use time::SimTime;
pub use verify::{mix64, Pattern, RecordPlan, StreamVerifier, VerifyError, VerifyStats};
