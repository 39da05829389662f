//! ARCHITECTURE.md's dependency table is the workspace's dependency graph: every normal
//! dependency between workspace crates that `cargo metadata` reports is a row's entry, every entry
//! is such a dependency, and the dev-only crates are a normal dependency of no other crate.
//!
//! The table is the one after the line "Dependencies point down the picture". Each row is
//! `| crate(s) | dependencies |`; a name in backticks is a package name, other text is commentary.
//! A first cell starting with "dev-only" lists the dev-only crates; their own dependencies are
//! not restricted.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// The line that introduces the table in ARCHITECTURE.md.
const TABLE_INTRO: &str = "Dependencies point down the picture";

/// The dependency table as written.
#[derive(Debug, Default, PartialEq)]
struct Table {
    /// Each crate of an ordinary row and the workspace crates it depends on.
    depends_on: BTreeMap<String, BTreeSet<String>>,
    /// The crates of the dev-only row.
    dev_only: BTreeSet<String>,
}

/// The names in backticks in `cell`.
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Reads the table that follows [`TABLE_INTRO`] in `doc`.
fn parse_table(doc: &str) -> Result<Table, String> {
    let mut lines = doc.lines().skip_while(|l| !l.starts_with(TABLE_INTRO));
    lines
        .next()
        .ok_or(format!("no line starting \"{TABLE_INTRO}\""))?;
    let rows = lines
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2); // header and separator
    let mut table = Table::default();
    for row in rows {
        let cells: Vec<&str> = row.trim_matches('|').split('|').collect();
        let [crates, deps] = cells[..] else {
            return Err(format!("row without two cells: {row}"));
        };
        if crates.trim_start().starts_with("dev-only") {
            table.dev_only.extend(quoted(crates));
            continue;
        }
        for name in quoted(crates) {
            let deps = quoted(deps).into_iter().collect();
            if table.depends_on.insert(name.clone(), deps).is_some() {
                return Err(format!("{name} has two rows"));
            }
        }
    }
    if table.depends_on.is_empty() {
        return Err("the table has no rows".into());
    }
    Ok(table)
}

/// Each workspace package and its normal dependencies on other workspace packages, from
/// `cargo metadata --format-version 1 --no-deps`.
fn workspace_graph(metadata: &serde_json::Value) -> BTreeMap<String, BTreeSet<String>> {
    let packages = metadata["packages"].as_array().expect("packages");
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"].as_array().expect("dependencies");
            let normal = deps
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.contains(d))
                .map(str::to_string)
                .collect();
            (p["name"].as_str().expect("name").to_string(), normal)
        })
        .collect()
}

/// Every way the table and the graph disagree, one line each.
fn disagreements(table: &Table, graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    let in_table = |c: &String| table.depends_on.contains_key(c) || table.dev_only.contains(c);
    let listed = table.depends_on.values().flatten().chain(&table.dev_only);
    for name in table.depends_on.keys().chain(listed) {
        if !graph.contains_key(name) {
            out.push(format!(
                "the table names `{name}`, which is not a workspace package"
            ));
        }
    }
    for (krate, deps) in graph {
        if !in_table(krate) {
            out.push(format!("`{krate}` has no row in the table"));
            continue;
        }
        for dep in deps {
            if table.dev_only.contains(dep) && !table.dev_only.contains(krate) {
                out.push(format!(
                    "`{krate}` -> `{dep}`: a dev-only crate as a normal dependency"
                ));
            }
        }
        let Some(declared) = table.depends_on.get(krate) else {
            continue; // dev-only: anything
        };
        for dep in deps.difference(declared) {
            out.push(format!(
                "`{krate}` -> `{dep}` is in Cargo.toml but not in the table"
            ));
        }
        for dep in declared.difference(deps) {
            if graph.contains_key(dep) {
                out.push(format!(
                    "`{krate}` -> `{dep}` is in the table but not in Cargo.toml"
                ));
            }
        }
    }
    out
}

#[test]
fn the_dependency_table_is_the_workspace_graph() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .args(["--manifest-path", &format!("{root}/Cargo.toml")])
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let graph = workspace_graph(&metadata);
    assert!(graph.len() > 5, "cargo metadata lists only {graph:?}");

    let doc = std::fs::read_to_string(format!("{root}/ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let table = parse_table(&doc).unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"));
    let wrong = disagreements(&table, &graph);
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's dependency table and cargo metadata disagree:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_names_each_missing_undeclared_and_dev_only_edge() {
    let doc = "x\nDependencies point down the picture:\n\n| crate | depends on |\n|---|---|\n\
               | `a` | — |\n| `b`, `c` | `a` (commentary) |\n| dev-only: `t` | anything |\n\nafter\n";
    let table = parse_table(doc).expect("parse");
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(table.depends_on["c"], set(&["a"]));
    assert_eq!(table.dev_only, set(&["t"]));

    let graph = BTreeMap::from([
        ("a".to_string(), set(&["t"])),
        ("b".to_string(), set(&["a", "c"])),
        ("c".to_string(), set(&[])),
        ("t".to_string(), set(&["a", "b"])),
        ("new".to_string(), set(&[])),
    ]);
    assert_eq!(
        disagreements(&table, &graph),
        [
            "`a` -> `t`: a dev-only crate as a normal dependency",
            "`a` -> `t` is in Cargo.toml but not in the table",
            "`b` -> `c` is in Cargo.toml but not in the table",
            "`c` -> `a` is in the table but not in Cargo.toml",
            "`new` has no row in the table",
        ]
    );
}
