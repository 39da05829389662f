//! Builds the XDP steering program (`bpf/xwarp_steer.bpf.c`) with `clang -target bpf`
//! into `$OUT_DIR/xwarp_steer.bpf.o`, which `src/program.rs` embeds with `include_bytes!`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("..").join("bpf");
    for file in ["xwarp_steer.bpf.c", "xwarp_maps.h"] {
        println!("cargo:rerun-if-changed={}", bpf_dir.join(file).display());
    }
    println!("cargo:rerun-if-env-changed=CLANG");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return; // XDP exists on Linux only; the crate is compiled out elsewhere.
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR")).join("xwarp_steer.bpf.o");
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_owned());
    check_clang(&clang);

    let mut cmd = Command::new(&clang);
    cmd.args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"]);
    cmd.arg("-I").arg(&bpf_dir);
    // bpf/bpf_helpers.h: from the libbpf that libbpf-sys builds, else the system's.
    if let Some(inc) = env::var_os("DEP_BPF_INCLUDE") {
        cmd.arg("-I").arg(inc);
    }
    // <asm/types.h> lives in the multiarch directory, which clang -target bpf does not search.
    if let Ok(arch) = env::var("CARGO_CFG_TARGET_ARCH") {
        let multiarch = Path::new("/usr/include").join(format!("{arch}-linux-gnu"));
        if multiarch.is_dir() {
            cmd.arg("-I").arg(multiarch);
        }
    }
    cmd.arg("-c")
        .arg(bpf_dir.join("xwarp_steer.bpf.c"))
        .arg("-o")
        .arg(&out);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("xwarp: could not run {clang}: {e}"));
    if !status.success() {
        panic!(
            "xwarp: `{cmd:?}` failed ({status}). The XDP program needs the kernel UAPI headers \
             (Debian: linux-libc-dev) and clang with the BPF target."
        );
    }
}

/// Fails the build with a message that says what to install when clang is missing.
fn check_clang(clang: &str) {
    match Command::new(clang).arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => panic!(
            "xwarp: building the XDP program (bpf/xwarp_steer.bpf.c) needs clang with the BPF \
             target, and `{clang}` could not be run. Install it (Debian: apt-get install clang \
             llvm) or point the CLANG environment variable at a clang binary."
        ),
    }
}
