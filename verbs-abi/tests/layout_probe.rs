//! The Rust structures of `verbs_abi::abi` have the C headers' layout: a C program compiled
//! against Debian's rdma-core headers prints every size and offset of `abi::layout::facts()`,
//! and each must equal the Rust value.

mod support;

use std::fmt::Write as _;
use std::process::Command;

#[test]
fn rust_layouts_match_the_rdma_core_headers() {
    let Some(tools) = support::rdma_tools() else {
        return;
    };
    let facts = verbs_abi::abi::layout::facts();
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n\
         #include <rdma/rdma_cma.h>\nint main(void) {\n",
    );
    for (i, f) in facts.iter().enumerate() {
        writeln!(c, "    printf(\"{i} %ld\\n\", {});", f.c_expr).unwrap();
    }
    c.push_str("    return 0;\n}\n");
    let dir = support::TempDir::new("layout-probe");
    let src = dir.0.join("probe.c");
    let exe = dir.0.join("probe");
    std::fs::write(&src, c).unwrap();
    let cc = Command::new("cc")
        .arg("-I")
        .arg(tools.join("usr/include"))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "the probe does not compile:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().expect("run the probe");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for line in text.lines() {
        let (i, v) = line.split_once(' ').expect("index value");
        let f = facts[i.parse::<usize>().unwrap()];
        let c_value: i64 = v.parse().unwrap();
        seen += 1;
        if c_value != f.rust {
            wrong.push(format!("{}: C {} Rust {}", f.name, c_value, f.rust));
        }
    }
    assert_eq!(seen, facts.len(), "the probe printed every fact");
    assert!(wrong.is_empty(), "layouts differ:\n{}", wrong.join("\n"));
    println!("{seen} sizes and offsets agree with the headers");
}
