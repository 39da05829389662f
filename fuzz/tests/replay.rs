//! Replays every checked-in input of every fuzz target: the seed corpus
//! (`fuzz/corpus/<target>/`) and the crash reproducers (`fuzz/artifacts/<target>/`). A crash
//! found once stays fixed; deterministic, on the stable toolchain.

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

#[test]
fn every_checked_in_input_of_every_target_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut total = 0;
    let mut failed = Vec::new();
    for t in fuzz_targets::TARGETS {
        let corpus = inputs(&root.join("corpus").join(t.name));
        assert!(
            !corpus.is_empty(),
            "{}: no seed corpus in fuzz/corpus/{}",
            t.name,
            t.name
        );
        for p in corpus
            .iter()
            .chain(&inputs(&root.join("artifacts").join(t.name)))
        {
            let data = std::fs::read(p).expect("read input");
            if std::panic::catch_unwind(|| (t.run)(&data)).is_err() {
                failed.push(format!("{}: {}", t.name, p.display()));
            }
            total += 1;
        }
    }
    eprintln!("{total} inputs replayed");
    assert!(
        failed.is_empty(),
        "inputs that fail:\n{}",
        failed.join("\n")
    );
}

#[test]
fn every_target_has_a_libfuzzer_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("libfuzzer/Cargo.toml")).unwrap();
    for t in fuzz_targets::TARGETS {
        let src = root
            .join("libfuzzer/fuzz_targets")
            .join(format!("{}.rs", t.name));
        let text =
            std::fs::read_to_string(&src).unwrap_or_else(|_| panic!("missing {}", src.display()));
        assert!(
            text.contains(&format!("fuzz_targets::target(\"{}\")", t.name)),
            "{} does not run its own target",
            src.display()
        );
        assert!(
            manifest.contains(&format!("name = \"{}\"", t.name)),
            "libfuzzer/Cargo.toml has no [[bin]] {}",
            t.name
        );
    }
}
