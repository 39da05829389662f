//! xwarp-bench: filled by the bench issue.
fn main() {
    eprintln!("xwarp-bench: not built yet (see the bench issue)");
    std::process::exit(2);
}
