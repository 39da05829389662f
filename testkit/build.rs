//! Tells the crate whether its target is built with AddressSanitizer (`-Zsanitizer=address`
//! in RUSTFLAGS on a nightly toolchain): cargo hands a build script the target's `sanitize`
//! cfg as `CARGO_CFG_SANITIZE`.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(address_sanitizer)");
    println!("cargo::rerun-if-changed=build.rs");
    let sanitizers = std::env::var("CARGO_CFG_SANITIZE").unwrap_or_default();
    if sanitizers.split(',').any(|s| s == "address") {
        println!("cargo::rustc-cfg=address_sanitizer");
    }
}
