//! Seeded, deterministic simulated IP link with virtual time (tests and benchmarks).
