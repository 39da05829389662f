//! Running a loom model (only in a build with `RUSTFLAGS="--cfg loom"`): every interleaving of
//! a bounded scenario, counted. The crates' `loom_models` modules run theirs with it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Preemptions loom tries per interleaving when `LOOM_MAX_PREEMPTIONS` is not set: every
/// model of the workspace runs in seconds at this bound in a release build on two cores.
pub const DEFAULT_PREEMPTIONS: usize = 8;

/// Explores every interleaving of `scenario` (within `LOOM_MAX_PREEMPTIONS`, else
/// [`DEFAULT_PREEMPTIONS`]) and prints how many there were; panics as loom does on a failed
/// assertion, a deadlock or a leak.
pub fn explore(name: &str, scenario: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(DEFAULT_PREEMPTIONS));
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        scenario();
    });
    println!(
        "loom model {name}: {} interleavings explored (at most {} preemptions each)",
        runs.load(Ordering::Relaxed),
        builder.preemption_bound.unwrap_or(usize::MAX)
    );
}
