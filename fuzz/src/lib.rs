//! The fuzz targets of xwarp, as plain functions of the input bytes.
//!
//! Each target feeds arbitrary bytes to one parser (or a state machine built on parsers) and
//! checks what must hold for every input: no panic, and the target's own invariants (a parsed
//! header re-emits to the same octets, what a parser reports lies inside its input, ...). A
//! broken invariant panics, which is what a fuzzer reports as a crash.
//!
//! - `fuzz/libfuzzer/` is the cargo-fuzz package (nightly, libFuzzer): one binary per target,
//!   each a one-line call into this crate. `deploy/xwarp fuzz [SECONDS]` runs them all.
//! - `fuzz/corpus/<target>/` holds the seeds (`seed-*`) and the minimized corpora of past
//!   campaigns (`-merge=1`), `fuzz/artifacts/<target>/` every crash
//!   reproducer found so far; `cargo test -p fuzz-targets` replays both through the same
//!   functions on the stable toolchain, so a fixed crash stays fixed.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod ddp_targets;
pub mod endpoint_target;
mod input;
pub mod mpa_targets;
pub mod rpcrdma_targets;
pub mod tcp_targets;

pub use input::Input;

/// A fuzz target: its name (the folder of its corpus) and its function.
pub struct Target {
    /// The name, as `cargo fuzz run NAME` knows it.
    pub name: &'static str,
    /// Runs one input; panics when an invariant breaks.
    pub run: fn(&[u8]),
}

/// Every target, in the order `deploy/xwarp fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "tcp_wire",
        run: tcp_targets::tcp_wire,
    },
    Target {
        name: "tcp_options",
        run: tcp_targets::tcp_options,
    },
    Target {
        name: "mpa_startup",
        run: mpa_targets::mpa_startup,
    },
    Target {
        name: "mpa_stream",
        run: mpa_targets::mpa_stream,
    },
    Target {
        name: "mpa_locate",
        run: mpa_targets::mpa_locate,
    },
    Target {
        name: "ddp_headers",
        run: ddp_targets::ddp_headers,
    },
    Target {
        name: "qp_stream",
        run: ddp_targets::qp_stream,
    },
    Target {
        name: "endpoint_pair",
        run: endpoint_target::endpoint_pair,
    },
    Target {
        name: "rpcrdma_header",
        run: rpcrdma_targets::rpcrdma_header,
    },
    Target {
        name: "store_call",
        run: rpcrdma_targets::store_call,
    },
    Target {
        name: "store_reply",
        run: rpcrdma_targets::store_reply,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}
