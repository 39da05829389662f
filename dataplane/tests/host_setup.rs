//! `deploy/host-setup`: argument validation, `--help`, `--check`, `--dry-run`, and a real run
//! with undo inside a network namespace this test creates (veth pair with 4 queues).
//!
//! Safety: the script runs for real only inside our own namespace (`ip netns exec`), where
//! `ip_local_reserved_ports` and the veth's channels are per-namespace and bpffs is mounted in
//! `ip netns exec`'s private mount namespace. Global settings (hugepages) are exercised only
//! with `--dry-run`. The namespace is removed by a Drop guard, even on failure.

use std::path::PathBuf;
use std::process::{Command, Output};

use testkit::or_skip;
use testkit::privileged::{have_tool, is_root};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/host-setup")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether a root-only test may run: the workspace's one rule (`testkit::or_skip`: under CI it
/// must, elsewhere it skips with the reason).
fn may_run_as_root(test: &str) -> bool {
    let missing: Vec<&str> = ["ip", "ethtool"]
        .into_iter()
        .filter(|t| !have_tool(t))
        .collect();
    let ready = if !is_root() {
        Err("needs root (network namespaces)".to_string())
    } else if !missing.is_empty() {
        Err(format!("missing tools: {}", missing.join(" ")))
    } else {
        Ok(())
    };
    or_skip(test, ready).is_some()
}

/// Runs the script (in the root namespace: only for --help, --check, --dry-run and bad
/// arguments).
fn run_here(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .expect("run deploy/host-setup")
}

/// A network namespace holding a veth pair with 4 rx/tx queues, removed on drop.
struct Netns {
    name: String,
    iface: String,
    tmp: PathBuf,
}

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("xwhs{}{tag}", std::process::id());
        let ns = Netns {
            iface: format!("{name}a"),
            tmp: std::env::temp_dir().join(format!("{name}-hostsetup")),
            name,
        };
        assert!(
            ns.iface.len() <= 15,
            "interface name too long: {}",
            ns.iface
        );
        let _ = Command::new("ip").args(["netns", "del", &ns.name]).output();
        ns.sh(&format!(
            "ip netns add {n} && ip -n {n} link add {a} numtxqueues 4 numrxqueues 4 type veth \
             peer name {n}b numtxqueues 4 numrxqueues 4 && ip -n {n} link set lo up && \
             ip -n {n} addr add 198.18.0.1/24 dev {a} && ip -n {n} link set {a} up && \
             ip -n {n} link set {n}b up",
            n = ns.name,
            a = ns.iface
        ));
        std::fs::create_dir_all(&ns.tmp).expect("temp dir");
        ns
    }

    /// Runs a root-namespace shell command that must succeed (namespace management only).
    fn sh(&self, cmd: &str) {
        let out = Command::new("sh").args(["-c", cmd]).output().expect("sh");
        assert!(out.status.success(), "{cmd}: {}", text(&out).1);
    }

    /// Runs a command inside the namespace and returns its stdout.
    fn read(&self, cmd: &str) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "sh", "-c", cmd])
            .output()
            .expect("ip netns exec");
        assert!(out.status.success(), "{cmd}: {}", text(&out).1);
        text(&out).0
    }

    /// Runs deploy/host-setup inside the namespace.
    fn host_setup(&self, args: &[&str]) -> Output {
        self.host_setup_env(args, &[])
    }

    /// Runs deploy/host-setup inside the namespace with extra environment variables.
    fn host_setup_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name, "bash"])
            .arg(script())
            .args(args)
            .envs(env.iter().copied())
            .output()
            .expect("ip netns exec deploy/host-setup")
    }

    /// Puts a fake `ethtool` (see [`fake_ethtool`]) into `tmp/bin`; returns that directory and
    /// a PATH that finds it first.
    fn fake_ethtool_path(&self) -> (PathBuf, String) {
        let bin = self.tmp.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        fake_ethtool(&bin);
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        (bin, path)
    }

    fn reserved_ports(&self) -> String {
        self.read("cat /proc/sys/net/ipv4/ip_local_reserved_ports")
            .trim()
            .to_string()
    }

    /// The current rx/tx channel counts (`ethtool -l`'s second block).
    fn channels(&self) -> String {
        let out = self.read(&format!("ethtool -l {}", self.iface));
        let current = out.split("Current hardware settings:").nth(1).unwrap_or("");
        current.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn undo_file(&self) -> String {
        self.tmp.join("undo.sh").display().to_string()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// Whether `port` is in the reserved list `list` ("8080,9000-9100").
fn reserved_covers(list: &str, port: u32) -> bool {
    list.split(',').any(|item| {
        let mut ends = item.trim().splitn(2, '-').map(|p| p.parse::<u32>().ok());
        match (ends.next().flatten(), ends.next()) {
            (Some(a), None) => a == port,
            (Some(a), Some(Some(b))) => (a..=b).contains(&port),
            _ => false,
        }
    })
}

#[test]
fn script_passes_bash_n_and_shellcheck() {
    let out = Command::new("bash")
        .arg("-n")
        .arg(script())
        .output()
        .expect("bash -n");
    assert!(out.status.success(), "bash -n: {}", text(&out).1);
    if have_tool("shellcheck") {
        let out = Command::new("shellcheck")
            .arg(script())
            .output()
            .expect("shellcheck");
        let (o, e) = text(&out);
        assert!(out.status.success(), "shellcheck:\n{o}{e}");
    } else {
        eprintln!("shellcheck not installed (apt-get install -y shellcheck): lint skipped");
    }
}

#[test]
fn help_explains_every_flag() {
    let out = run_here(&["--help"]);
    assert!(out.status.success());
    let (help, _) = text(&out);
    for flag in [
        "--iface",
        "--queues",
        "--cores",
        "--ports",
        "--local-ports",
        "--hugepages",
        "--no-steer",
        "--no-irq",
        "--dry-run",
        "--check",
        "--strict",
        "--undo-file",
        "--print-undo",
        "--undo",
        "--help",
    ] {
        assert!(help.contains(flag), "--help does not explain {flag}");
    }
}

/// Every bad argument: exit status 2, exactly one line on stderr naming the problem, nothing
/// on stdout (so nothing was checked or changed). All cases carry --dry-run against `lo`, so
/// even a validation bug could not change anything.
#[test]
fn bad_arguments_fail_with_one_line_error() {
    let cases: &[(&[&str], &str)] = &[
        (&["--dry-run"], "--iface"),
        (&["--dry-run", "--iface"], "--iface needs a value"),
        (&["--dry-run", "--iface", "xwnosuch0"], "no interface"),
        (
            &["--dry-run", "--iface", "bad/name"],
            "not an interface name",
        ),
        (&["--dry-run", "--iface", "lo", "--queues", "0"], "--queues"),
        (&["--dry-run", "--iface", "lo", "--queues", "x"], "--queues"),
        (
            &["--dry-run", "--iface", "lo", "--cores", "99999"],
            "--cores",
        ),
        (
            &["--dry-run", "--iface", "lo", "--cores", "3-1"],
            "first > last",
        ),
        (&["--dry-run", "--iface", "lo", "--ports", "0"], "--ports"),
        (
            &["--dry-run", "--iface", "lo", "--ports", "70000"],
            "--ports",
        ),
        (
            &["--dry-run", "--iface", "lo", "--ports", "1-5000"],
            "more than",
        ),
        (
            &["--dry-run", "--iface", "lo", "--local-ports", "61000"],
            "--local-ports",
        ),
        (
            &["--dry-run", "--iface", "lo", "--local-ports", "100-200"],
            "--local-ports",
        ),
        (
            &["--dry-run", "--iface", "lo", "--local-ports", "62000-61000"],
            "first > last",
        ),
        (
            &[
                "--dry-run",
                "--iface",
                "lo",
                "--queues",
                "8",
                "--local-ports",
                "61000-61003",
            ],
            "fewer ports",
        ),
        (
            &[
                "--dry-run",
                "--iface",
                "lo",
                "--ports",
                "61001",
                "--local-ports",
                "61000-61999",
            ],
            "inside",
        ),
        (
            &["--dry-run", "--iface", "lo", "--hugepages", "-1"],
            "--hugepages",
        ),
        (&["--dry-run", "--check", "--iface", "lo"], "exclude"),
        (&["--dry-run", "--frobnicate"], "unknown argument"),
    ];
    for (args, needle) in cases {
        let out = run_here(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stdout}{stderr}");
        assert!(stdout.is_empty(), "{args:?} printed {stdout}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("host-setup: "), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr} lacks {needle}");
    }
}

/// --dry-run of the global settings (hugepages) and the root namespace's reserved ports: it
/// prints the change with its undo, and nothing changes, and no undo script is written.
#[test]
fn dry_run_prints_changes_and_changes_nothing() {
    if !may_run_as_root("dry_run_prints_changes_and_changes_nothing") {
        return;
    }
    let hp = "/proc/sys/vm/nr_hugepages";
    let rp = "/proc/sys/net/ipv4/ip_local_reserved_ports";
    let hp_before = std::fs::read_to_string(hp).unwrap();
    let rp_before = std::fs::read_to_string(rp).unwrap();
    let want: u64 = hp_before.trim().parse::<u64>().unwrap() + 64;
    let undo = std::env::temp_dir().join(format!("xwhs{}-dry.undo.sh", std::process::id()));
    let want_s = want.to_string();
    let out = run_here(&[
        "--dry-run",
        "--iface",
        "lo",
        "--hugepages",
        &want_s,
        "--ports",
        "18515",
        "--local-ports",
        "61000-61999",
        "--undo-file",
        undo.to_str().unwrap(),
        "--print-undo",
    ]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    assert!(o.contains(&format!("would: echo '{want}' > {hp}")), "{o}");
    assert!(
        o.contains(&format!("undo: echo {} > {hp}", hp_before.trim())),
        "{o}"
    );
    assert!(o.contains("18515,61000-61999"), "{o}");
    assert!(o.contains("----- undo script -----"), "{o}");
    assert!(!o.contains("change:"), "dry run changed something:\n{o}");
    assert_eq!(std::fs::read_to_string(hp).unwrap(), hp_before);
    assert_eq!(std::fs::read_to_string(rp).unwrap(), rp_before);
    assert!(!undo.exists(), "dry run wrote {}", undo.display());
}

/// The real run inside our namespace: channels set with ethtool -L, ports reserved, ntuple on
/// veth reported as a warning with its meaning (fallback to RSS + XDP program) and a failure
/// only under --strict; a second run changes nothing; --undo restores the namespace's
/// reserved ports and channels exactly.
#[test]
fn applies_in_a_namespace_and_undo_restores() {
    if !may_run_as_root("applies_in_a_namespace_and_undo_restores") {
        return;
    }
    let root_rp = "/proc/sys/net/ipv4/ip_local_reserved_ports";
    let root_before = std::fs::read_to_string(root_rp).unwrap();
    let ns = Netns::new("r");
    let iface = ns.iface.clone();
    let undo = ns.undo_file();
    let ports_before = ns.reserved_ports();
    let channels_before = ns.channels();
    assert!(
        channels_before.starts_with("RX: 4 TX: 4"),
        "{channels_before}"
    );

    // --check: passes with warnings; --strict turns the ntuple warning into a failure.
    let out = ns.host_setup(&["--check", "--iface", &iface, "--local-ports", "61000-61999"]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "--check: {o}{e}");
    assert!(o.contains("AF_XDP socket can be created"), "{o}");
    assert!(o.contains("warn:") && o.contains("ntuple"), "{o}");
    assert!(o.contains("not reserved"), "{o}");
    let out = ns.host_setup(&["--check", "--strict", "--iface", &iface]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "--check --strict: {}",
        text(&out).0
    );

    let args = [
        "--iface",
        &iface,
        "--queues",
        "2",
        "--cores",
        "0",
        "--ports",
        "18515,18516",
        "--local-ports",
        "61000-61999",
        "--undo-file",
        &undo,
    ];
    let out = ns.host_setup(&args);
    let (o, e) = text(&out);
    assert!(out.status.success(), "apply: {o}{e}");
    assert!(
        o.contains(&format!("change: ethtool -L {iface} rx 2 tx 2")),
        "{o}"
    );
    assert!(
        o.contains(&format!("undo: ethtool -L {iface} rx 4 tx 4")),
        "{o}"
    );
    assert!(o.contains("falls back to RSS + the XDP program"), "{o}");
    assert!(o.contains("undo: echo '"), "{o}");
    assert!(
        ns.channels().starts_with("RX: 2 TX: 2"),
        "{}",
        ns.channels()
    );
    let reserved = ns.reserved_ports();
    // the kernel merges adjacent ranges ("18515,18516" reads back as "18515-18516")
    for want in [18515, 18516, 61000, 61500, 61999] {
        assert!(reserved_covers(&reserved, want), "{want} not in {reserved}");
    }
    assert!(!reserved_covers(&reserved, 60999), "{reserved}");
    assert!(!reserved_covers(&reserved, 62000), "{reserved}");
    assert!(
        std::path::Path::new(&undo).exists(),
        "no undo script at {undo}"
    );

    // The same settings again: nothing left to change on the interface or the ports.
    let out = ns.host_setup(&args);
    let (o, e) = text(&out);
    assert!(out.status.success(), "second apply: {o}{e}");
    assert!(
        !o.contains("change: ethtool"),
        "second run changed channels:\n{o}"
    );
    assert!(
        !o.contains("ip_local_reserved_ports #"),
        "second run changed ports:\n{o}"
    );

    // --strict: the ntuple warning makes the run fail.
    let mut strict = args.to_vec();
    strict.push("--strict");
    let out = ns.host_setup(&strict);
    assert_eq!(out.status.code(), Some(1), "--strict: {}", text(&out).0);

    let out = ns.host_setup(&["--undo", "--undo-file", &undo]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "undo: {o}{e}");
    assert_eq!(ns.reserved_ports(), ports_before);
    assert_eq!(ns.channels(), channels_before);
    assert!(
        !std::path::Path::new(&undo).exists(),
        "undo script left behind"
    );
    assert_eq!(std::fs::read_to_string(root_rp).unwrap(), root_before);
}

/// IRQ affinity by the interface's IRQ names: queue i's IRQ goes to core LIST[i mod len],
/// queues beyond --queues, IRQs without a queue number and another interface whose name merely
/// starts with ours are left alone; undo restores every affinity. /proc/interrupts and
/// /proc/irq are replaced by files of the test (the script's test hooks), inside our namespace.
#[test]
fn irq_affinity_follows_queue_names_and_undo_restores() {
    if !may_run_as_root("irq_affinity_follows_queue_names_and_undo_restores") {
        return;
    }
    let ns = Netns::new("i");
    let iface = ns.iface.clone();
    let interrupts = ns.tmp.join("interrupts");
    let irq_dir = ns.tmp.join("irq");
    std::fs::write(
        &interrupts,
        format!(
            "           CPU0       CPU1\n\
             \x20 0:         10          0   IO-APIC   2-edge      timer\n\
             \x2040:          0          0   PCI-MSI 1-edge      {iface}-TxRx-0\n\
             \x2041:          0          0   PCI-MSI 2-edge      {iface}-TxRx-1\n\
             \x2042:          0          0   PCI-MSI 3-edge      {iface}-TxRx-2\n\
             \x2043:          0          0   PCI-MSI 4-edge      {iface}\n\
             \x2044:          0          0   PCI-MSI 5-edge      {iface}9-TxRx-0\n"
        ),
    )
    .unwrap();
    let irqs = ["0", "40", "41", "42", "43", "44"];
    for irq in irqs {
        std::fs::create_dir_all(irq_dir.join(irq)).unwrap();
        std::fs::write(irq_dir.join(irq).join("smp_affinity_list"), "0-1\n").unwrap();
    }
    let affinity = |irq: &str| {
        std::fs::read_to_string(irq_dir.join(irq).join("smp_affinity_list"))
            .unwrap()
            .trim()
            .to_string()
    };
    let undo = ns.undo_file();
    let out = ns.host_setup_env(
        &[
            "--iface",
            &iface,
            "--queues",
            "2",
            "--cores",
            "1,0",
            "--undo-file",
            &undo,
        ],
        &[
            ("XWARP_HOST_SETUP_INTERRUPTS", interrupts.to_str().unwrap()),
            ("XWARP_HOST_SETUP_IRQ_DIR", irq_dir.to_str().unwrap()),
        ],
    );
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    assert!(o.contains("IRQ 40 (queue 0"), "{o}");
    let got: Vec<String> = irqs.iter().map(|i| affinity(i)).collect();
    assert_eq!(got, ["0-1", "1", "0", "0-1", "0-1", "0-1"], "{o}");

    let out = ns.host_setup(&["--undo", "--undo-file", &undo]);
    assert!(out.status.success(), "{:?}", text(&out));
    for irq in irqs {
        assert_eq!(affinity(irq), "0-1", "IRQ {irq} not restored");
    }
}

/// Writes a fake `ethtool` into `dir` (a NIC with 8 combined channels and ntuple filters off)
/// that logs its arguments to `dir/ethtool.log`, answers rule insertions with IDs 1000, ...,
/// and keeps its state (channels, ntuple, rules) so that `-l`, `-k` and `-n` report it.
fn fake_ethtool(dir: &std::path::Path) {
    let d = dir.display();
    let fake = format!(
        r#"#!/bin/bash
echo "$*" >> {d}/ethtool.log
case "$1" in
    -i) echo "driver: fakenic" ;;
    -l) c=$(cat {d}/combined); printf 'Channel parameters for %s:\nPre-set maximums:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\t1\nCombined:\t8\nCurrent hardware settings:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\t1\nCombined:\t%s\n' "$2" "$c" ;;
    -L) echo "$4" > {d}/combined ;;
    -k) echo "ntuple-filters: $(cat {d}/ntuple)" ;;
    -K) echo "$4" > {d}/ntuple ;;
    -n) while read -r id port mask q; do
            printf 'Filter: %s\n\tRule Type: TCP over IPv4\n\tSrc IP addr: 0.0.0.0 mask: 255.255.255.255\n\tDest IP addr: 0.0.0.0 mask: 255.255.255.255\n\tTOS: 0x0 mask: 0xff\n\tSrc port: 0 mask: 0xffff\n\tDest port: %s mask: 0x%x\n\tAction: Direct to queue %s\n\n' "$id" "$port" "$mask" "$q"
        done < {d}/rules ;;
    -N) if [[ "$3" != delete ]]; then
            n=$(wc -l < {d}/ids); echo x >> {d}/ids; id=$((1000 + n))
            mask=0; [[ "$7" == m ]] && mask=$8
            echo "$id $6 $mask ${{@: -1}}" >> {d}/rules
            echo "Added rule with ID $id"
        else
            sed -i "/^$4 /d" {d}/rules
        fi ;;
esac
"#
    );
    let path = dir.join("ethtool");
    std::fs::write(&path, fake).unwrap();
    for (f, v) in [
        ("ids", ""),
        ("ethtool.log", ""),
        ("rules", ""),
        ("combined", "8\n"),
        ("ntuple", "off\n"),
    ] {
        std::fs::write(dir.join(f), v).unwrap();
    }
    let ok = Command::new("chmod")
        .args(["755", path.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// ntuple steering on a NIC that has it (a fake ethtool first in PATH, inside our namespace):
/// channels set to --queues with `combined`, ntuple switched on, listening port i to queue
/// i mod N, the active-open range split in N slices as aligned masked rules, each rule's ID
/// deleted again by the undo script, which also restores channels and the ntuple feature.
#[test]
fn ntuple_rules_steer_ports_to_queues_and_undo_deletes_them() {
    if !may_run_as_root("ntuple_rules_steer_ports_to_queues_and_undo_deletes_them") {
        return;
    }
    let ns = Netns::new("n");
    let iface = ns.iface.clone();
    let (bin, path) = ns.fake_ethtool_path();
    let undo = ns.undo_file();
    let run = |args: &[&str]| ns.host_setup_env(args, &[("PATH", &path)]);
    let out = run(&[
        "--iface",
        &iface,
        "--queues",
        "4",
        "--ports",
        "18515,18516",
        "--local-ports",
        "61440-62463",
        "--undo-file",
        &undo,
    ]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    let log = |p: &std::path::Path| std::fs::read_to_string(p.join("ethtool.log")).unwrap();
    let changes: Vec<String> = log(&bin)
        .lines()
        .filter(|l| l.starts_with("-L") || l.starts_with("-K") || l.starts_with("-N"))
        .map(str::to_string)
        .collect();
    let want: Vec<String> = [
        "-L {i} combined 4",
        "-K {i} ntuple on",
        "-N {i} flow-type tcp4 dst-port 18515 action 0",
        "-N {i} flow-type tcp4 dst-port 18516 action 1",
        "-N {i} flow-type tcp4 dst-port 61440 m 255 action 0",
        "-N {i} flow-type tcp4 dst-port 61696 m 255 action 1",
        "-N {i} flow-type tcp4 dst-port 61952 m 255 action 2",
        "-N {i} flow-type tcp4 dst-port 62208 m 255 action 3",
    ]
    .iter()
    .map(|l| l.replace("{i}", &iface))
    .collect();
    assert_eq!(changes, want, "{o}");
    assert!(
        o.contains(&format!("undo: ethtool -N {iface} delete 1005")),
        "{o}"
    );

    std::fs::write(bin.join("ethtool.log"), "").unwrap();
    let out = run(&["--undo", "--undo-file", &undo]);
    assert!(out.status.success(), "{:?}", text(&out));
    let undone: Vec<String> = log(&bin).lines().map(str::to_string).collect();
    let mut want: Vec<String> = (1000..1006)
        .rev()
        .map(|id| format!("-N {iface} delete {id}"))
        .collect();
    want.push(format!("-K {iface} ntuple off"));
    want.push(format!("-L {iface} combined 8"));
    assert_eq!(undone, want);
}

/// A second run with the same settings changes nothing: no channel change, no second ntuple
/// rule (the rules `ethtool -n` lists are kept), no new undo command; `--persist` writes the
/// boot unit (into a DESTDIR) that replays the same arguments, once.
#[test]
fn a_second_run_changes_nothing_and_persist_writes_a_boot_unit() {
    if !may_run_as_root("a_second_run_changes_nothing_and_persist_writes_a_boot_unit") {
        return;
    }
    let ns = Netns::new("i");
    let iface = ns.iface.clone();
    let (bin, path) = ns.fake_ethtool_path();
    let undo = ns.undo_file();
    let destdir = bin.parent().unwrap().join("destdir");
    let args = [
        "--iface",
        &iface,
        "--queues",
        "2",
        "--ports",
        "18515",
        "--local-ports",
        "61440-61951",
        "--undo-file",
        &undo,
        "--persist",
        "--destdir",
        destdir.to_str().unwrap(),
    ];
    let run = || ns.host_setup_env(&args, &[("PATH", &path)]);
    let out = run();
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    let rules = std::fs::read_to_string(bin.join("rules")).unwrap();
    assert_eq!(rules.lines().count(), 3, "{rules}");
    let undo_first = std::fs::read_to_string(&undo).unwrap();
    let unit_path = destdir.join("etc/systemd/system/xwarp-host-setup.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(
        unit.contains("Type=oneshot") && unit.contains("Before=xwarpd.service"),
        "{unit}"
    );
    assert!(
        unit.contains(&format!(
            "ExecStart=/usr/local/lib/xwarp/host-setup --iface {iface} --queues 2"
        )),
        "{unit}"
    );
    assert!(!unit.contains("--persist"), "{unit}");
    assert!(destdir.join("usr/local/lib/xwarp/host-setup").is_file());

    std::fs::write(bin.join("ethtool.log"), "").unwrap();
    let out = run();
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    let log = std::fs::read_to_string(bin.join("ethtool.log")).unwrap();
    let changes: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("-L") || l.starts_with("-K") || l.starts_with("-N"))
        .collect();
    assert_eq!(changes, Vec::<&str>::new(), "{o}");
    assert_eq!(std::fs::read_to_string(bin.join("rules")).unwrap(), rules);
    assert!(o.contains("is there already (rule 1000)"), "{o}");
    // bpffs aside: `ip netns exec` gives every run a fresh /sys, so it is mounted each time.
    let changed: Vec<&str> = o
        .lines()
        .filter(|l| l.starts_with("change:") && !l.contains("mount -t bpf"))
        .collect();
    assert_eq!(changed, Vec::<&str>::new(), "{o}");
    let ethtool_undos = |u: &str| u.lines().filter(|l| l.contains("ethtool")).count();
    assert_eq!(
        ethtool_undos(&std::fs::read_to_string(&undo).unwrap()),
        ethtool_undos(&undo_first),
        "no new undo command"
    );
    assert_eq!(std::fs::read_to_string(&unit_path).unwrap(), unit);
}

/// A local port range that is not aligned: the masked rules of --dry-run are aligned
/// power-of-two blocks that cover the range exactly, each queue one contiguous slice.
#[test]
fn unaligned_local_range_is_covered_exactly_by_masked_rules() {
    if !may_run_as_root("unaligned_local_range_is_covered_exactly_by_masked_rules") {
        return;
    }
    let ns = Netns::new("u");
    let (_, path) = ns.fake_ethtool_path();
    let args = [
        "--dry-run",
        "--iface",
        &ns.iface,
        "--queues",
        "3",
        "--ports",
        "18515",
    ];
    let range = ["--local-ports", "61000-61999"];
    let out = ns.host_setup_env(&[&args[..], &range[..]].concat(), &[("PATH", &path)]);
    let (o, e) = text(&out);
    assert!(out.status.success(), "{o}{e}");
    // (first, last, queue) of every masked or single-port rule above the listening port
    let mut blocks: Vec<(u32, u32, u32)> = Vec::new();
    for line in o.lines().filter(|l| l.starts_with("would: ethtool -N")) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let at = |k: &str| w.iter().position(|x| *x == k).map(|i| w[i + 1]);
        let port: u32 = at("dst-port").unwrap().parse().unwrap();
        let mask: u32 = at("m").map(|m| m.parse().unwrap()).unwrap_or(0);
        let queue: u32 = at("action").unwrap().parse().unwrap();
        if port == 18515 {
            continue;
        }
        assert!(
            (mask + 1).is_power_of_two() && port & mask == 0,
            "unaligned: {line}"
        );
        blocks.push((port, port + mask, queue));
    }
    blocks.sort();
    assert_eq!(blocks.first().map(|b| b.0), Some(61000), "{o}");
    assert_eq!(blocks.last().map(|b| b.1), Some(61999), "{o}");
    for pair in blocks.windows(2) {
        assert_eq!(pair[0].1 + 1, pair[1].0, "gap or overlap: {pair:?}");
        assert!(
            pair[0].2 <= pair[1].2,
            "queue slices not contiguous: {pair:?}"
        );
    }
    let queues: std::collections::BTreeSet<u32> = blocks.iter().map(|b| b.2).collect();
    assert_eq!(queues.into_iter().collect::<Vec<_>>(), [0, 1, 2]);
    assert!(!o.contains("change:"), "dry run changed something:\n{o}");
}
