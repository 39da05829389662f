//! Our libraries define every versioned symbol Debian's RDMA programs import: for each ELF
//! program of perftest, rdmacm-utils and ibverbs-utils, every import on an IBVERBS_*,
//! RDMACM_*, MLX5_* or EFA_* node (`objdump -T`: about a hundred names, the brief's 77-name
//! union among them) is a defined symbol of libibverbs.so.1, librdmacm.so.1, libmlx5.so.1 or
//! libefa.so.1 on the same version node. The private node is IBVERBS_PRIVATE_34 (rdma-core
//! v34-v56: Debian 12). And librdmacm.so.1 needs libibverbs.so.1 (one engine per process).

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// (version node, name) of each dynamic symbol of `file`, imports (`undefined`) or exports.
fn dynamic_symbols(file: &Path, undefined: bool) -> BTreeSet<(String, String)> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(file)
        .output()
        .expect("run objdump");
    assert!(out.status.success(), "objdump -T {}", file.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("*UND*") == undefined)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (name, version) = (f.last()?, f.get(f.len().checked_sub(2)?)?);
            let version = version.trim_matches(|c| c == '(' || c == ')');
            let ours = ["IBVERBS_", "RDMACM_", "MLX5_", "EFA_", "XWARP_"];
            ours.iter()
                .any(|p| version.starts_with(p))
                .then(|| (version.to_string(), name.to_string()))
        })
        .collect()
}

fn is_elf(p: &Path) -> bool {
    std::fs::read(p).is_ok_and(|b| b.starts_with(b"\x7fELF"))
}

#[test]
fn every_versioned_import_of_the_programs_is_defined() {
    let Some(tools) = support::rdma_tools() else {
        return;
    };
    let libs = support::verbs_libs();
    let mut defined = BTreeSet::new();
    for lib in [
        "libibverbs.so.1",
        "librdmacm.so.1",
        "libmlx5.so.1",
        "libefa.so.1",
    ] {
        defined.extend(dynamic_symbols(&libs.join(lib), false));
    }
    let mut wanted = BTreeSet::new();
    let mut programs = 0;
    for entry in std::fs::read_dir(tools.join("usr/bin")).unwrap() {
        let p = entry.unwrap().path();
        if is_elf(&p) {
            programs += 1;
            wanted.extend(dynamic_symbols(&p, true));
        }
    }
    assert!(programs >= 30, "only {programs} programs unpacked");
    let missing: Vec<_> = wanted.difference(&defined).collect();
    assert!(missing.is_empty(), "not defined on their node: {missing:?}");
    assert!(wanted.len() >= 77, "{} imports", wanted.len());
    for (node, name) in [
        ("IBVERBS_1.0", "ibv_create_comp_channel"),
        ("IBVERBS_1.1", "ibv_post_send"),
        ("IBVERBS_1.8", "ibv_reg_mr_iova2"),
        ("IBVERBS_1.11", "_ibv_query_gid_ex"),
        ("IBVERBS_PRIVATE_34", "ibv_query_gid_type"),
        ("RDMACM_1.2", "rdma_establish"),
    ] {
        if name == "ibv_post_send" {
            // An inline verb: libibverbs exports no such symbol.
            assert!(!defined.iter().any(|(_, n)| n == name));
            continue;
        }
        assert!(
            defined.contains(&(node.to_string(), name.to_string())),
            "{node} {name}"
        );
    }
    println!(
        "{} imports of {programs} programs, all defined on their version node",
        wanted.len()
    );
}

#[test]
fn librdmacm_needs_libibverbs_and_calls_its_private_functions() {
    let libs = support::verbs_libs();
    let out = Command::new("readelf")
        .args(["-d", "-V"])
        .arg(libs.join("librdmacm.so.1"))
        .output()
        .expect("run readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Shared library: [libibverbs.so.1]"), "{text}");
    assert!(text.contains("Library soname: [librdmacm.so.1]"), "{text}");
    assert!(text.contains("XWARP_PRIVATE_1"), "{text}");
    let imports = dynamic_symbols(&libs.join("librdmacm.so.1"), true);
    assert!(imports.contains(&("XWARP_PRIVATE_1".into(), "xwarp_rdma_connect".into())));
    let exports = dynamic_symbols(&libs.join("libibverbs.so.1"), false);
    // Only rdma-core's names and our private node: nothing of Rust's leaks.
    assert!(exports
        .iter()
        .all(|(node, _)| node.starts_with("IBVERBS_") || node == "XWARP_PRIVATE_1"));
}
