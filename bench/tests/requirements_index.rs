//! Every requirement id cited in the repository resolves inside it: each `MPA-NN`, `DDP-NN`,
//! `TCPRDMA-NN`, `RPCRDMA-NN` or `RDMAP-NN` in a `.rs` or `.md` file is defined by exactly one row
//! of `REQUIREMENTS.md` at the top of the repository. The shorthands `MPA-13/14` and `MPA-12..15`
//! cite every id they name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The document prefixes of requirement ids.
const PREFIXES: &[&str] = &["MPA", "DDP", "TCPRDMA", "RPCRDMA", "RDMAP"];

/// The index, relative to the repository root.
const INDEX: &str = "REQUIREMENTS.md";

/// Where an id is cited: file (relative to the repository root) and 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Citation {
    file: String,
    line: usize,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Reads `NN` or `NNa` at `at`: the digits, the optional lower-case suffix and the end offset.
/// `None` when there are no digits or a word character follows.
fn number_at(s: &[u8], at: usize) -> Option<(&str, Option<char>, usize)> {
    let digits_end = at + s[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits_end == at {
        return None;
    }
    let digits = std::str::from_utf8(&s[at..digits_end]).ok()?;
    let mut end = digits_end;
    let mut suffix = None;
    if s.get(end).is_some_and(u8::is_ascii_lowercase) {
        suffix = Some(s[end] as char);
        end += 1;
    }
    if s.get(end).copied().is_some_and(is_word) {
        return None;
    }
    Some((digits, suffix, end))
}

/// Every id `text` cites, in order, each with the 1-based line it is on.
fn cited_ids(text: &str) -> Vec<(String, usize)> {
    let s = text.as_bytes();
    let mut found = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\n' {
            line += 1;
        }
        let at_word_start = i == 0 || !is_word(s[i - 1]);
        let prefix = PREFIXES.iter().find(|p| {
            at_word_start && s[i..].starts_with(p.as_bytes()) && s.get(i + p.len()) == Some(&b'-')
        });
        let Some(prefix) = prefix else {
            i += 1;
            continue;
        };
        let Some((digits, suffix, mut end)) = number_at(s, i + prefix.len() + 1) else {
            i += prefix.len();
            continue;
        };
        let mut id = format!("{prefix}-{digits}");
        id.extend(suffix);
        found.push((id, line));
        // The shorthands: `/NN` names one more id, `..NN` every id up to NN.
        let mut last: u32 = digits.parse().unwrap_or(0);
        loop {
            let (range, skip) = match s.get(end..end + 2) {
                Some([b'/', _]) => (false, 1),
                Some(b"..") => (true, 2),
                _ => break,
            };
            let Some((more, suffix, next)) = number_at(s, end + skip) else {
                break;
            };
            let to: u32 = more.parse().unwrap_or(0);
            if range {
                found.extend((last + 1..=to).map(|n| (format!("{prefix}-{n:02}"), line)));
            } else {
                let mut id = format!("{prefix}-{more}");
                id.extend(suffix);
                found.push((id, line));
            }
            last = to;
            end = next;
        }
        i = end;
    }
    found
}

/// The ids the index defines: the first cell of each table row that is exactly one id, with the
/// lines that define it.
fn defined_ids(index: &str) -> BTreeMap<String, Vec<usize>> {
    let mut defined: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (n, row) in index.lines().enumerate() {
        let Some(first) = row.strip_prefix('|').and_then(|r| r.split('|').next()) else {
            continue;
        };
        let cell = first.trim();
        if let [(id, _)] = cited_ids(cell).as_slice() {
            if id == cell {
                defined.entry(id.clone()).or_default().push(n + 1);
            }
        }
    }
    defined
}

/// Every `.rs` and `.md` file under `dir`, skipping build output and hidden directories.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                source_files(&path, out);
            }
        } else if name.ends_with(".rs") || name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// What is wrong with the index against the citations: ids cited but not defined (with their
/// first citation), then ids defined more than once (with their lines).
fn index_problems(
    defined: &BTreeMap<String, Vec<usize>>,
    cited: &BTreeMap<String, Vec<Citation>>,
) -> Vec<String> {
    let mut problems: Vec<String> = cited
        .iter()
        .filter(|(id, _)| !defined.contains_key(*id))
        .map(|(id, at)| {
            format!(
                "{id} is cited ({}:{}, {} citation(s)) but {INDEX} does not define it",
                at[0].file,
                at[0].line,
                at.len()
            )
        })
        .collect();
    problems.extend(
        defined
            .iter()
            .filter(|(_, lines)| lines.len() > 1)
            .map(|(id, lines)| {
                format!(
                    "{id} is defined {} times in {INDEX} (lines {lines:?})",
                    lines.len()
                )
            }),
    );
    problems
}

#[test]
fn every_cited_requirement_id_is_defined_once_in_the_index() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let index = std::fs::read_to_string(root.join(INDEX)).expect("read REQUIREMENTS.md");
    let defined = defined_ids(&index);
    assert!(
        defined.len() > 100,
        "{INDEX} defines only {} ids",
        defined.len()
    );

    let mut files = Vec::new();
    source_files(&root, &mut files);
    let mut cited: BTreeMap<String, Vec<Citation>> = BTreeMap::new();
    for path in &files {
        let file = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        // The index defines the ids; this file's examples are not citations.
        if file == INDEX || file == file!() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        for (id, line) in cited_ids(&text) {
            let file = file.clone();
            cited.entry(id).or_default().push(Citation { file, line });
        }
    }
    assert!(
        cited.len() > 100,
        "found only {} cited ids: is the scan right?",
        cited.len()
    );

    let problems = index_problems(&defined, &cited);
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn citations_are_read_with_their_shorthands_and_nothing_else() {
    let ids = |t: &str| {
        cited_ids(t)
            .into_iter()
            .map(|(id, _)| id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids("(MPA-13/14; DDP-79a)"), ["MPA-13", "MPA-14", "DDP-79a"]);
    assert_eq!(ids("MPA-12..15."), ["MPA-12", "MPA-13", "MPA-14", "MPA-15"]);
    assert_eq!(
        ids("TCPRDMA-02/07/09\nRPCRDMA-38"),
        ["TCPRDMA-02", "TCPRDMA-07", "TCPRDMA-09", "RPCRDMA-38"]
    );
    assert_eq!(cited_ids("a\nb RPCRDMA-38")[0].1, 2);
    // Not ids: another word's tail, a prefix without a number, a number running into a word.
    assert!(ids("XMPA-12 TCPRDMA- MPA-12ab RDMA-3 draft-ietf-rddp-mpa-01").is_empty());
}

#[test]
fn the_index_check_names_undefined_and_doubly_defined_ids() {
    let index = "| Id | Rule |\n|---|---|\n| MPA-01 | a |\n| MPA-02 | b |\n| MPA-02 | c |\n";
    let defined = defined_ids(index);
    assert_eq!(defined.keys().collect::<Vec<_>>(), ["MPA-01", "MPA-02"]);
    let at = |line| Citation {
        file: "x.rs".into(),
        line,
    };
    let cited = BTreeMap::from([
        ("MPA-01".to_string(), vec![at(1)]),
        ("DDP-09".to_string(), vec![at(7), at(9)]),
    ]);
    let problems = index_problems(&defined, &cited);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("DDP-09 is cited (x.rs:7, 2 citation(s))"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("MPA-02 is defined 2 times"),
        "{problems:?}"
    );
}
