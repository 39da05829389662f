//! Attaching, detaching and replacing the XDP program, and binding AF_XDP sockets, on a veth in
//! a fresh network namespace. Root; under `CI=true` these must run.
#![cfg(target_os = "linux")]

use afxdp::program::{attached, ifindex};
use afxdp::{
    AttachMode, AttachPolicy, BindMode, IfName, XdpError, XdpProgram, XskConfig, XskQueue,
};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

/// Detached on clean exit; dropping leaves no program on the interface.
#[test]
fn drop_detaches_and_leaves_no_program() {
    let Some(tb) = or_skip("drop", for_test("drop")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let ifb = tb.ifname(Side::B);
    assert!(attached(ifb).unwrap().is_empty());
    let prog = XdpProgram::attach(ifb, AttachPolicy::NativeOnly).unwrap();
    let now = attached(ifb).unwrap();
    assert_eq!(now.native.as_ref().map(|p| p.id), Some(prog.prog_id()));
    assert_eq!(
        now.native.as_ref().map(|p| p.name.as_str()),
        Some("xwarp_steer")
    );
    drop(prog);
    assert!(attached(ifb).unwrap().is_empty(), "{:?}", attached(ifb));
}

/// Regression: dropping the program on a thread in another namespace still detaches it from
/// the interface it was attached to (and touches nothing in the dropping thread's namespace).
#[test]
fn drop_from_another_namespace_detaches_the_right_interface() {
    let Some(tb) = or_skip("xns", for_test("xns")) else {
        return;
    };
    let ifb = tb.ifname(Side::B).to_owned();
    let prog = {
        let _ns = tb.enter(Side::B).unwrap();
        XdpProgram::attach(&ifb, AttachPolicy::NativeOnly).unwrap()
    };
    {
        let _ns = tb.enter(Side::A).unwrap();
        drop(prog);
    }
    let _ns = tb.enter(Side::B).unwrap();
    assert!(attached(&ifb).unwrap().is_empty());
}

/// A second program in one process is refused while the first
/// lives (its object holds the program: the loader sees a live holder, our own pid), and the
/// first keeps its attachment. (Forgetting a program in-process no longer models a crash: the
/// leaked object still holds it. A real crash is a killed process, below.)
#[test]
fn second_program_in_one_process_is_refused_and_the_first_stays() {
    let Some(tb) = or_skip("twice", for_test("twice")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let ifb = tb.ifname(Side::B);
    let first = XdpProgram::attach(ifb, AttachPolicy::NativeOnly).unwrap();
    let err = XdpProgram::attach(ifb, AttachPolicy::NativeOrGeneric).unwrap_err();
    assert_eq!(
        err,
        XdpError::ProgramInUse {
            ifname: IfName::new(ifb),
            id: first.prog_id(),
            pid: std::process::id(),
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains(ifb) && msg.contains("Stop that process"),
        "{msg}"
    );
    let now = attached(ifb).unwrap();
    assert_eq!(now.native.map(|p| p.id), Some(first.prog_id()));
    assert!(
        now.generic.is_none(),
        "no generic copy beside it: {:?}",
        now.generic
    );
    drop(first);
    assert!(attached(ifb).unwrap().is_empty());
}

/// A second engine on an interface whose program belongs to a
/// live process refuses to start, naming the interface and the process, and never detaches
/// the live program; once that process is killed, its program is stale and replaced.
#[test]
fn live_program_of_another_process_is_refused_then_replaced_after_its_death() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return child_attach_and_hang(&spec);
    }
    let Some(tb) = or_skip("live", for_test("live")) else {
        return;
    };
    let ifb = tb.ifname(Side::B).to_owned();
    let (mut child, live_id) = spawn_attached(
        &tb,
        "live_program_of_another_process_is_refused_then_replaced_after_its_death",
        "native",
    );
    let _ns = tb.enter(Side::B).unwrap();
    let refused = XdpProgram::attach(&ifb, AttachPolicy::NativeOrGeneric);
    assert_eq!(
        refused.err(),
        Some(XdpError::ProgramInUse {
            ifname: IfName::new(&ifb),
            id: live_id,
            pid: child.id(),
        })
    );
    assert_eq!(
        attached(&ifb).unwrap().native.map(|p| p.id),
        Some(live_id),
        "the live program stays attached"
    );
    child.kill();
    let restarted = XdpProgram::attach(&ifb, AttachPolicy::NativeOnly).expect("stale: replaced");
    assert_ne!(restarted.prog_id(), live_id);
    drop(restarted);
    assert!(attached(&ifb).unwrap().is_empty());
}

/// A stale program in generic mode (its process killed) blocks a native attach until removed:
/// it is replaced too.
#[test]
fn stale_generic_program_is_replaced_by_a_native_attach() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return child_attach_and_hang(&spec);
    }
    let Some(tb) = or_skip("stgen", for_test("stgen")) else {
        return;
    };
    let ifb = tb.ifname(Side::B).to_owned();
    let (mut child, stale_id) = spawn_attached(
        &tb,
        "stale_generic_program_is_replaced_by_a_native_attach",
        "generic",
    );
    child.kill();
    let _ns = tb.enter(Side::B).unwrap();
    assert_eq!(
        attached(&ifb).unwrap().generic.map(|p| p.id),
        Some(stale_id)
    );
    let fresh = XdpProgram::attach(&ifb, AttachPolicy::NativeOrGeneric).unwrap();
    assert_eq!(fresh.mode(), AttachMode::Native);
    let now = attached(&ifb).unwrap();
    assert!(now.generic.is_none(), "{now:?}");
    drop(fresh);
    assert!(attached(&ifb).unwrap().is_empty());
}

/// Native mode with a fallback to generic when the driver refuses;
/// loopback has no native XDP (the namespace's own `lo`).
#[test]
fn native_refused_falls_back_to_generic() {
    let Some(tb) = or_skip("gen", for_test("gen")) else {
        return;
    };
    let _ns = tb.enter(Side::A).unwrap();
    assert!(XdpProgram::attach("lo", AttachPolicy::NativeOnly).is_err());
    let prog = XdpProgram::attach("lo", AttachPolicy::NativeOrGeneric).unwrap();
    assert_eq!(prog.mode(), AttachMode::Generic);
    assert_eq!(
        attached("lo").unwrap().generic.map(|p| p.id),
        Some(prog.prog_id())
    );
    drop(prog);
    assert!(attached("lo").unwrap().is_empty());
}

/// A missing interface is reported as such, not as a generic OS error.
#[test]
fn unknown_interface_is_reported() {
    let Some(tb) = or_skip("noif", for_test("noif")) else {
        return;
    };
    let _ns = tb.enter(Side::A).unwrap();
    // The other side's interface lives in the other namespace.
    assert_eq!(
        XdpProgram::attach(tb.ifname(Side::B), AttachPolicy::NativeOrGeneric).err(),
        Some(XdpError::NoSuchInterface)
    );
    assert_eq!(ifindex("xw-none").err(), Some(XdpError::NoSuchInterface));
}

/// Zero-copy when the driver offers it, copy otherwise. veth has no
/// zero-copy: Auto binds in copy mode, forcing zero-copy fails.
#[test]
fn veth_binds_in_copy_mode_and_refuses_forced_zero_copy() {
    let Some(tb) = or_skip("zc", for_test("zc")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let ifb = tb.ifname(Side::B);
    let _prog = XdpProgram::attach(ifb, AttachPolicy::NativeOnly).unwrap();
    let forced = XskQueue::new(
        ifb,
        0,
        XskConfig {
            bind_mode: BindMode::ZeroCopy,
            ..XskConfig::default()
        },
    );
    assert!(forced.is_err(), "veth cannot bind zero-copy");
    let q = XskQueue::new(ifb, 0, XskConfig::default()).unwrap();
    assert!(!q.is_zero_copy());
    let occ = q.occupancy();
    assert_eq!(occ.in_fill, XskConfig::default().fill_target());
    assert_eq!(
        occ.free + occ.in_fill,
        XskConfig::default().frame_count as usize
    );
}

/// A queue freed by a closed socket can be bound again at once, over and over (the kernel
/// releases it from deferred work: a prompt rebind may see EBUSY for a moment, which the bind
/// waits out); a queue a live socket holds stays refused.
#[test]
fn a_closed_sockets_queue_is_bound_again_at_once_and_a_live_one_is_refused() {
    let Some(tb) = or_skip("rebind", for_test("rebind")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let ifb = tb.ifname(Side::B);
    let cfg = XskConfig {
        bind_mode: BindMode::Copy,
        frame_count: 64,
        ring_size: 32,
        ..XskConfig::default()
    };
    for i in 0..20 {
        let q = XskQueue::new(ifb, 0, cfg).unwrap_or_else(|e| panic!("bind {i}: {e}"));
        drop(q);
    }
    let held = XskQueue::new(ifb, 0, cfg).unwrap();
    match XskQueue::new(ifb, 0, cfg) {
        Err(XdpError::Os { errno, .. }) => assert_eq!(errno, libc::EBUSY),
        other => panic!("a second socket on a held queue: {other:?}"),
    }
    drop(held);
}

/// Frame tokens are checked against their queue: a frame of one UMEM is refused by another.
#[test]
fn frame_of_another_queue_is_refused() {
    let Some(tb) = or_skip("own", for_test("own")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let small = XskConfig {
        frame_count: 64,
        ring_size: 32,
        ..XskConfig::default()
    };
    let mut q0 = XskQueue::new(tb.ifname(Side::B), 0, small).unwrap();
    let _a = tb.enter(Side::A).unwrap();
    let q1 = XskQueue::new(tb.ifname(Side::A), 0, small).unwrap();
    let f = q0.alloc().unwrap();
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| q1.data(&f).len()));
    assert!(refused.is_err(), "q1 must not read q0's frame");
    assert_eq!(q0.data(&f).len(), 0, "its own queue still can");
}

/// Port set and XSKMAP bounds are checked before the kernel sees them.
#[test]
fn map_bounds_are_checked() {
    let Some(tb) = or_skip("bound", for_test("bound")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let prog = XdpProgram::attach(tb.ifname(Side::B), AttachPolicy::NativeOnly).unwrap();
    assert!(matches!(
        prog.register_socket(64, 0),
        Err(XdpError::Invalid(_))
    ));
    assert!(!prog.unsteer_port(1234).unwrap());
    prog.steer_port(1234, afxdp::PortKind::Listen).unwrap();
    assert!(prog.unsteer_port(1234).unwrap());
    assert_eq!(prog.port_kind(1234).unwrap(), None);
}

const CHILD_ENV: &str = "XWARP_TEST_CHILD_ATTACH";

/// In the child process: attach in namespace `spec` = "NETNS IFNAME native|generic", report,
/// and wait to be killed.
fn child_attach_and_hang(spec: &str) {
    let mut words = spec.split(' ');
    let (ns, ifname, mode) = (
        words.next().expect("NETNS"),
        words.next().expect("IFNAME"),
        words.next().expect("MODE"),
    );
    let policy = match mode {
        "generic" => AttachPolicy::GenericOnly,
        _ => AttachPolicy::NativeOnly,
    };
    let _ns = afxdp::netns::NetNs::named(ns).unwrap().enter().unwrap();
    let prog = XdpProgram::attach(ifname, policy).unwrap();
    println!("attached {}", prog.prog_id());
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(60));
}

/// A child process that is killed (SIGKILL: no Drop runs in it) and reaped at the latest
/// when this guard drops, so a failing test leaves no process behind.
struct Attacher(std::process::Child);

impl Attacher {
    fn id(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILL and wait: the process and its fds are gone on return.
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Attacher {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `test` (which calls [`child_attach_and_hang`] under [`CHILD_ENV`]) as a child process
/// that attaches the program to B's interface in `mode` and stays alive; returns it and the
/// program's id once attached.
fn spawn_attached(tb: &VethTestbed, test: &str, mode: &str) -> (Attacher, u32) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture"])
        .env(
            CHILD_ENV,
            format!("{} {} {mode}", tb.netns_name(Side::B), tb.ifname(Side::B)),
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let child = Attacher(child);
    let id = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("attached ")
                .and_then(|id| id.trim().parse().ok())
        })
        .expect("the child attached");
    (child, id)
}

/// After a kill -9 the program stays attached (netlink attachment), and
/// the restarted process replaces it. The "crash" is a real SIGKILL of a child process.
#[test]
fn program_of_a_killed_process_is_replaced_on_restart() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return child_attach_and_hang(&spec);
    }
    let Some(tb) = or_skip("kill", for_test("kill")) else {
        return;
    };
    let ifb = tb.ifname(Side::B).to_owned();
    let (mut child, stale_id) = spawn_attached(
        &tb,
        "program_of_a_killed_process_is_replaced_on_restart",
        "native",
    );
    child.kill(); // SIGKILL: no Drop runs

    let _ns = tb.enter(Side::B).unwrap();
    assert_eq!(
        attached(&ifb).unwrap().native.map(|p| p.id),
        Some(stale_id),
        "the killed process's program is still attached"
    );
    let restarted = XdpProgram::attach(&ifb, AttachPolicy::NativeOnly).unwrap();
    assert_ne!(restarted.prog_id(), stale_id);
    assert_eq!(
        attached(&ifb).unwrap().native.map(|p| p.id),
        Some(restarted.prog_id())
    );
    drop(restarted);
    assert!(attached(&ifb).unwrap().is_empty());
}

/// Someone else's XDP program is never replaced: attach fails with ForeignProgram and the
/// program stays. The foreign program is built with clang and attached with iproute2.
#[test]
fn foreign_program_is_left_alone() {
    let Some(tb) = or_skip("foreign", for_test("foreign")) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("xwarp-foreign-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("foreign.bpf.c");
    let obj = dir.join("foreign.bpf.o");
    std::fs::write(
        &src,
        "#include <linux/bpf.h>\n\
         __attribute__((section(\"xdp\"), used)) int foreign_pass(struct xdp_md *ctx) \
         { return XDP_PASS; }\n\
         char LICENSE[] __attribute__((section(\"license\"), used)) = \"GPL\";\n",
    )
    .unwrap();
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let mut cc = std::process::Command::new(clang);
    cc.args(["-O2", "-g", "-target", "bpf", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj);
    for multiarch in [
        "/usr/include/x86_64-linux-gnu",
        "/usr/include/aarch64-linux-gnu",
    ] {
        if std::path::Path::new(multiarch).is_dir() {
            cc.arg("-I").arg(multiarch);
        }
    }
    assert!(
        cc.status().unwrap().success(),
        "clang builds the foreign program"
    );
    let ifb = tb.ifname(Side::B).to_owned();
    tb.ip_cmd(
        Side::B,
        &[
            "link",
            "set",
            "dev",
            &ifb,
            "xdp",
            "obj",
            obj.to_str().unwrap(),
            "sec",
            "xdp",
        ],
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let _ns = tb.enter(Side::B).unwrap();
    let foreign = attached(&ifb)
        .unwrap()
        .native
        .expect("the foreign program is attached");
    assert_eq!(foreign.name, "foreign_pass");
    assert_eq!(
        XdpProgram::attach(&ifb, AttachPolicy::NativeOrGeneric).err(),
        Some(XdpError::ForeignProgram { id: foreign.id })
    );
    assert_eq!(attached(&ifb).unwrap().native, Some(foreign));
}

/// One engine queue per rx queue: the count comes from the driver (ETHTOOL_GCHANNELS), and a
/// socket binds on every queue it reports.
#[test]
fn rx_queue_count_matches_the_veth_and_every_queue_binds() {
    let Some(tb) = or_skip("queues", for_test("queues")) else {
        return;
    };
    let _ns = tb.enter(Side::A).unwrap();
    let ifa = tb.ifname(Side::A);
    assert_eq!(afxdp::queues::rx_queue_count(ifa).unwrap(), 1);
    tb.ip_cmd(
        Side::A,
        &[
            "link",
            "add",
            "xwmq0",
            "numrxqueues",
            "3",
            "numtxqueues",
            "3",
            "type",
            "veth",
            "peer",
            "name",
            "xwmq1",
        ],
    )
    .unwrap();
    let n = afxdp::queues::rx_queue_count("xwmq0").unwrap();
    assert_eq!(n, 3);
    let small = XskConfig {
        frame_count: 64,
        ring_size: 32,
        ..XskConfig::default()
    };
    let prog = XdpProgram::attach("xwmq0", AttachPolicy::NativeOnly).unwrap();
    let queues: Vec<XskQueue> = (0..n)
        .map(|q| XskQueue::new("xwmq0", q, small).unwrap())
        .collect();
    for q in &queues {
        prog.register_socket(q.queue_id(), q.fd()).unwrap();
    }
    assert!(
        XskQueue::new("xwmq0", n, small).is_err(),
        "no queue beyond the count"
    );
    assert_eq!(
        afxdp::queues::rx_queue_count("xw-none").err(),
        Some(XdpError::NoSuchInterface)
    );
}
