//! What ships carries no simulator, no test fixture and no test-only dependency, and the
//! libraries carry no program's crates: the normal dependency tree (`cargo tree -e normal`) of
//! each package below lists none of the crates its rule forbids.
//! - `bench` (`xwarp-bench`, `xwarp-rdma`): nothing of [`DEV_ONLY`]. It may use the `testbed`
//!   fixture: `compare` builds testbeds at run time.
//! - `xwarpd`: nothing of [`DEV_ONLY`], nor [`FIXTURE`].
//! - the libraries `dataplane`, `afxdp` and `verbs-abi` (the drop-in libibverbs and
//!   librdmacm): nothing of those, nor [`PROGRAM_ONLY`].

use std::process::Command;

/// Crates that belong to tests and benchmarks only.
const DEV_ONLY: &[&str] = &["netsim", "testkit", "etherparse", "rand_chacha", "smoltcp"];
/// The network namespace/veth fixture.
const FIXTURE: &str = "testbed";
/// What a program needs and a library does not: argument parsing, a log subscriber.
const PROGRAM_ONLY: &[&str] = &["clap", "tracing-subscriber"];

/// Each checked package, what it ships, and the crates its normal tree must not hold.
fn rules() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    let daemon = [DEV_ONLY, &[FIXTURE]].concat();
    let library = [&daemon[..], PROGRAM_ONLY].concat();
    vec![
        ("bench", "xwarp-bench and xwarp-rdma", DEV_ONLY.to_vec()),
        ("xwarpd", "xwarpd", daemon),
        ("dataplane", "the dataplane library", library.clone()),
        (
            "verbs-abi",
            "libibverbs.so.1, librdmacm.so.1 and xwarp-run",
            library.clone(),
        ),
        ("afxdp", "the afxdp library", library),
    ]
}

/// The crate names of `cargo tree --prefix none -f {p}` output that are in `forbidden`.
fn forbidden_in(tree: &str, forbidden: &[&str]) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| forbidden.contains(name))
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn shipped_packages_have_no_forbidden_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    for (package, ships, forbidden) in rules() {
        let out = Command::new(&cargo)
            .args([
                "tree",
                "--offline",
                "--locked",
                "-e",
                "normal",
                "--prefix",
                "none",
            ])
            .args(["-f", "{p}", "--manifest-path", manifest, "-p", package])
            .output()
            .expect("run cargo tree");
        let tree = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && tree.lines().count() > 1,
            "cargo tree -p {package} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            forbidden_in(&tree, &forbidden),
            Vec::<String>::new(),
            "{ships} ({package}) depends on crates it must not carry"
        );
    }
}

#[test]
fn the_check_sees_a_forbidden_crate_anywhere_in_the_tree() {
    let tree = "xwarpd v0.1.0 (/x)\nclap v4.6.7\nnetsim v0.1.0 (/n)\nrand_chacha v0.3.1\n\
                testbed v0.1.0 (/t)\nrand v0.8.5";
    assert_eq!(forbidden_in(tree, DEV_ONLY), ["netsim", "rand_chacha"]);
    let rules = rules();
    let rule = |p: &str| &rules.iter().find(|r| r.0 == p).expect("a rule").2;
    assert_eq!(
        forbidden_in(tree, rule("xwarpd")),
        ["netsim", "rand_chacha", "testbed"]
    );
    assert_eq!(
        forbidden_in(tree, rule("dataplane")),
        ["clap", "netsim", "rand_chacha", "testbed"]
    );
    assert_eq!(forbidden_in(tree, rule("bench")), ["netsim", "rand_chacha"]);
}
