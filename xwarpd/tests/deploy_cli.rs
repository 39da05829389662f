//! `deploy/xwarp`'s command line: the help names every command the script dispatches, and a
//! command refuses an option it does not know before it installs or builds anything.

use std::process::{Command, Output};

fn xwarp(args: &[&str]) -> Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/xwarp");
    Command::new("bash")
        .arg(script)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn help_names_every_command() {
    let out = xwarp(&["help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for cmd in [
        "demo",
        "test",
        "fuzz",
        "soak [MINUTES]",
        "deps",
        "build [--pgo]",
        "install",
    ] {
        assert!(
            help.contains(&format!("deploy/xwarp {cmd}")),
            "{cmd} missing from:\n{help}"
        );
    }
    // The help ends where the command list does, before the script's own notes.
    assert!(!help.contains("set -euo pipefail"), "{help}");
}

#[test]
fn build_refuses_an_unknown_option_before_building() {
    let out = xwarp(&["build", "--fast"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("build: unknown option --fast (only --pgo)"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("==>"),
        "it started work"
    );
}

#[test]
fn soak_refuses_minutes_that_are_no_count_before_building() {
    for bad in ["x", "0", "-3"] {
        let out = xwarp(&["soak", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "soak: MINUTES must be a positive integer, not '{bad}'"
            )),
            "{err}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("==>"));
    }
}

#[test]
fn an_unknown_command_lists_the_known_ones() {
    let out = xwarp(&["bogus"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "unknown command 'bogus' (demo, test, fuzz, counts, soak, deps, build, install)"
        ),
        "{err}"
    );
}
