//! The layout of `bench/src/compare/`, checked rather than described: no file of the folder
//! depends on `mod.rs` (the plan and the run) but `mod.rs` itself, and the files' uses form no
//! circle.
//!
//! A file's uses are read from its code before its `#[cfg(test)]` module, comments left out:
//! every path through `super::` or `crate::compare::` (in `use` lines and inline, braces
//! followed), and in `mod.rs` every `name::` of a file of the folder. A path whose first name
//! is a file of the folder is a use of that file; any other name is an item of `mod.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The files of the folder (by module name, `mod` for mod.rs) and their code before tests.
fn folder() -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/compare");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            files.insert(name, code_before_tests(&text));
        }
    }
    files
}

/// The lines before `#[cfg(test)]`, without `//` comments.
fn code_before_tests(text: &str) -> String {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first names of the paths that follow each `prefix` in `code`: `a` of `prefix a::b`,
/// `a` and `c` of `prefix {a::b, c}`.
fn names_after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group, up to its closing brace.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(first_name(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.push(first_name(&item));
        } else {
            out.push(first_name(rest));
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

fn first_name(path: &str) -> String {
    path.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Each file's uses of the folder's files (`mod` for an item of mod.rs).
fn uses(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for (name, code) in files {
        let mut to = BTreeSet::new();
        let mut named: Vec<String> = names_after(code, "crate::compare::");
        if name == "mod" {
            for other in files.keys().filter(|k| *k != "mod") {
                if code.contains(&format!("{other}::")) {
                    named.push(other.clone());
                }
            }
        } else {
            named.extend(names_after(code, "super::"));
        }
        for n in named {
            let file = if files.contains_key(&n) && n != "mod" {
                n
            } else {
                "mod".to_string()
            };
            if &file != name {
                to.insert(file);
            }
        }
        graph.insert(name.clone(), to);
    }
    graph
}

/// A circle of `graph`, if it has one (depth-first search).
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_file_of_compare_uses_mod_rs_and_the_folder_has_no_import_circle() {
    let files = folder();
    for f in [
        "mod", "record", "table", "pair", "linux", "tcp", "queues", "polling", "report",
    ] {
        assert!(
            files.contains_key(f),
            "compare/{f}.rs missing: {:?}",
            files.keys()
        );
    }
    let graph = uses(&files);
    for (name, to) in &graph {
        if name != "mod" {
            assert!(!to.contains("mod"), "compare/{name}.rs uses mod.rs: {to:?}");
        }
    }
    // The tables stand on the shared helpers only.
    for table in ["tcp", "queues", "polling"] {
        let to: Vec<&str> = graph[table].iter().map(String::as_str).collect();
        assert!(
            to.iter().all(|t| ["record", "table"].contains(t)),
            "compare/{table}.rs uses {to:?}"
        );
    }
    assert_eq!(circle(&graph), None, "{graph:?}");
}

/// The checker itself finds what it is for: a use of mod.rs through `super::` and through
/// `crate::compare::`, grouped uses, and a circle.
#[test]
fn the_checker_sees_uses_of_mod_rs_and_circles() {
    let files: BTreeMap<String, String> = [
        (
            "mod",
            "pub mod a;\npub mod b;\nuse a::X;\nfn f() { b::g() }",
        ),
        ("a", "use super::{b::Y, PLAN};\n"),
        (
            "b",
            "fn g() { crate::compare::a::X; }\n// super::mod_item in a comment\n",
        ),
    ]
    .into_iter()
    .map(|(n, c)| (n.to_string(), code_before_tests(c)))
    .collect();
    let graph = uses(&files);
    assert_eq!(
        graph["a"],
        BTreeSet::from(["b".to_string(), "mod".to_string()])
    );
    assert_eq!(graph["b"], BTreeSet::from(["a".to_string()]));
    assert_eq!(
        graph["mod"],
        BTreeSet::from(["a".to_string(), "b".to_string()])
    );
    assert!(circle(&graph).is_some());
    assert_eq!(
        code_before_tests("use x;\n#[cfg(test)]\nmod tests { use super::*; }"),
        "use x;"
    );
}
