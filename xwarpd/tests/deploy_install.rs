//! `deploy/xwarp install` into a DESTDIR (never this machine's /etc or /usr): the binary, the
//! unit (Type=notify, pointing at the installed binary), the configuration (kept when present)
//! and the xdp drop-in; the installed binary accepts the installed configuration.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_xwarpd");

fn install(destdir: &Path, extra: &[&str]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/xwarp");
    let out = Command::new("bash")
        .arg(script)
        .args([
            "install",
            "--destdir",
            destdir.to_str().unwrap(),
            "--bin",
            BIN,
        ])
        .args(extra)
        .env_remove("DESTDIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn install_puts_binary_unit_config_and_xdp_drop_in_into_the_destdir() {
    let d = testkit::TempPath::new("destdir");
    let root = d.path();
    std::fs::create_dir_all(root).unwrap();
    install(root, &["--prefix", "/opt/xwarp", "--xdp"]);
    let bin = root.join("opt/xwarp/bin/xwarpd");
    assert!(bin.is_file());
    let unit = std::fs::read_to_string(root.join("etc/systemd/system/xwarpd.service")).unwrap();
    assert!(unit.contains("Type=notify"), "{unit}");
    assert!(unit.contains("ExecReload="), "{unit}");
    assert!(
        unit.contains("ExecStart=/opt/xwarp/bin/xwarpd --config /etc/xwarpd/xwarpd.toml"),
        "{unit}"
    );
    let drop_in =
        std::fs::read_to_string(root.join("etc/systemd/system/xwarpd.service.d/xdp.conf")).unwrap();
    assert!(
        drop_in.contains("AF_XDP") && drop_in.contains("CAP_BPF"),
        "{drop_in}"
    );
    let conf = root.join("etc/xwarpd/xwarpd.toml");
    let out = Command::new(&bin)
        .args(["check-config", "--config", conf.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A second install keeps the operator's configuration.
    std::fs::write(&conf, "transport = \"kernel\"\nlog = \"debug\"\n").unwrap();
    let said = install(root, &["--prefix", "/opt/xwarp"]);
    assert!(said.contains("kept"), "{said}");
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "transport = \"kernel\"\nlog = \"debug\"\n"
    );
    std::fs::remove_dir_all(root).unwrap();
}
