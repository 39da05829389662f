//! The shipped binaries carry no simulator, no test fixture and no test-only dependency: the
//! normal dependency tree (`cargo tree -e normal`) of the packages of `xwarp-bench`, `xwarp-rdma`
//! (dataplane) and `xwarpd` lists none of [`DEV_ONLY`].

use std::process::Command;

/// Crates that belong to tests and benchmarks only.
const DEV_ONLY: &[&str] = &["netsim", "testkit", "etherparse", "rand_chacha", "smoltcp"];

/// The packages of the shipped binaries.
const SHIPPED: &[(&str, &str)] = &[
    ("bench", "xwarp-bench"),
    ("dataplane", "xwarp-rdma"),
    ("xwarpd", "xwarpd"),
];

/// The crate names of `cargo tree --prefix none -f {p}` output that are in [`DEV_ONLY`].
fn dev_only_in(tree: &str) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| DEV_ONLY.contains(name))
        .map(str::to_string)
        .collect();
    found.sort();
    found.dedup();
    found
}

#[test]
fn shipped_binaries_have_no_dev_only_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    for (package, binary) in SHIPPED {
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
            dev_only_in(&tree),
            Vec::<String>::new(),
            "{binary} ({package}) depends on test-only crates"
        );
    }
}

#[test]
fn the_check_sees_a_dev_only_crate_anywhere_in_the_tree() {
    let tree =
        "xwarpd v0.1.0 (/x)\nclap v4.6.7\nnetsim v0.1.0 (/n)\nrand_chacha v0.3.1\nrand v0.8.5";
    assert_eq!(dev_only_in(tree), ["netsim", "rand_chacha"]);
}
