//! The locks and atomics of the structures the engine and application threads share: a
//! lane's hand-off inbox (`engine::handoff`), the completion queue (`cq`), the kernel queue
//! pair's shared state (`queue_pair`, `work`).
//!
//! std's in every normal build. In a build with `RUSTFLAGS="--cfg loom"` they are loom's, so
//! that the models in `loom_models` explore every interleaving of those structures' lock and
//! atomic operations (loom's types only work inside `loom::model`; such a build runs the models
//! and nothing else). Only the modelled structures use this module; everything else takes
//! std's directly.

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicUsize},
    Condvar, Mutex, MutexGuard,
};

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicUsize},
    Condvar, Mutex, MutexGuard,
};
