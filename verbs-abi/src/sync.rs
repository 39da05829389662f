//! The locks and atomics of the state the library's threads share: a completion queue's own
//! completions (`verbs::local_completions`), an event channel's queue (`cm::event_queue`) and
//! an identifier's connection events (`cm::connection_events`).
//!
//! std's in every normal build. In a build with `RUSTFLAGS="--cfg loom"` they are loom's, so
//! that the models in `loom_models` explore every interleaving of those structures' lock and
//! atomic operations (loom's types only work inside `loom::model`; such a build runs the models
//! and nothing else). Only the modelled structures use this module.

pub(crate) use std::sync::atomic::Ordering;

#[cfg(not(loom))]
pub(crate) use std::sync::{atomic::AtomicUsize, Mutex, MutexGuard};

#[cfg(loom)]
pub(crate) use loom::sync::{atomic::AtomicUsize, Mutex, MutexGuard};
