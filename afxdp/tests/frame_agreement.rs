//! One definition of "our frames": the XDP program,
//! loaded in the kernel and run frame by frame with `BPF_PROG_TEST_RUN`, and the endpoint's
//! classifier (`endpoint::classify`) get the same corpus and must agree on every frame:
//! redirect = Ours, pass = NotOurs, drop counted in `malformed` = Malformed, drop counted in
//! `fragments` = Fragment. The corpus (`testkit::frame_corpus`) has a frame per row of the
//! table in `bpf/xwarp_maps.h` with the verdict the table gives, and mutations of good frames
//! (every header octet changed, every truncation) on which only agreement is required.
//!
//! Documented differences (the only ones):
//! - A frame shorter than an Ethernet header (14 octets) cannot be test-run: the kernel refuses
//!   it (EINVAL). The classifier's verdict (Malformed) is checked alone, and the refusal too.
//!
//! Root (loading BPF, a veth in a fresh namespace for the program and its AF_XDP socket);
//! under `CI=true` it must run.
#![cfg(target_os = "linux")]

use std::net::IpAddr;

use afxdp::{
    steered_queue, AttachPolicy, PortKind, SteerCounters, XdpAction, XdpProgram, XskConfig,
};
use endpoint::{classify, FrameVerdict, OwnedAddrs};
use testbed::{for_test, Side};
use testkit::frame_corpus::{frame_corpus, header_mutations, named, CorpusAddrs, Expect};
use testkit::or_skip;

const STEERED: u16 = 4791;
const UNSTEERED: u16 = 5001;

/// What the program did with one frame, in the classifier's terms (None: something no rule
/// gives, described).
fn xdp_verdict(prog: &XdpProgram, frame: &[u8]) -> Result<FrameVerdict, String> {
    let before = prog.counters().unwrap();
    let action = prog.test_run(frame).map_err(|e| format!("test run: {e}"))?;
    let moved: SteerCounters = prog.counters().unwrap().since(&before);
    // Only drops need the counters (they are per interface: the kernel's own traffic on the
    // veth may move `passed` meanwhile, never `malformed` or `fragments`).
    match (action, moved.malformed, moved.fragments) {
        (XdpAction::Redirect, ..) if moved.redirected >= 1 => Ok(FrameVerdict::Ours),
        (XdpAction::Pass, ..) if moved.steered_no_socket == 0 => Ok(FrameVerdict::NotOurs),
        (XdpAction::Drop, 1, 0) => Ok(FrameVerdict::Malformed),
        (XdpAction::Drop, 0, 1) => Ok(FrameVerdict::Fragment),
        _ => Err(format!("{action:?} with counters {moved:?}")),
    }
}

fn expected(e: Expect) -> FrameVerdict {
    match e {
        Expect::Ours => FrameVerdict::Ours,
        Expect::NotOurs => FrameVerdict::NotOurs,
        Expect::Malformed => FrameVerdict::Malformed,
        Expect::Fragment => FrameVerdict::Fragment,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The frame-agreement test. Every corpus frame gets
/// the verdict of its row from both the program and the classifier; every mutation of six
/// good frames (four IPv4, two IPv6) gets the same verdict from both.
#[test]
fn xdp_program_and_endpoint_classifier_agree_frame_by_frame() {
    let Some(tb) = or_skip("agree", for_test("agree")) else {
        return;
    };
    let _ns = tb.enter(Side::B).unwrap();
    let ifb = tb.ifname(Side::B);
    let small = XskConfig {
        frame_count: 64,
        ring_size: 32,
        ..XskConfig::default()
    };
    // A socket on queue 0 (the queue BPF_PROG_TEST_RUN reports), so that Ours redirects.
    let (prog, _q) = steered_queue(
        ifb,
        0,
        AttachPolicy::NativeOnly,
        small,
        &[(STEERED, PortKind::Listen)],
    )
    .unwrap();
    let ours = tb.ip(Side::B);
    assert_eq!(
        prog.owned_addrs().unwrap(),
        vec![IpAddr::V4(ours)],
        "the loader owns the interface's address"
    );
    let addrs = CorpusAddrs {
        mac: tb.mac(Side::B).unwrap(),
        ip: ours.octets(),
        peer_ip: tb.ip(Side::A).octets(),
        steered: STEERED,
        unsteered: UNSTEERED,
        ..CorpusAddrs::default()
    };
    // The corpus's IPv6 address is owned too (the interface need not have it for test runs).
    let owned = [IpAddr::V4(ours), IpAddr::from(addrs.ip6)];
    prog.set_owned_addrs(&owned).unwrap();
    let endpoint_verdict = |f: &[u8]| classify(f, OwnedAddrs(&owned), |p| p == STEERED);

    // The corpus: both sides give each frame the verdict of its row.
    let corpus = frame_corpus(&addrs);
    let mut wrong: Vec<String> = Vec::new();
    let mut run = 0;
    for f in &corpus {
        let want = expected(f.expect);
        let ep = endpoint_verdict(&f.bytes);
        if ep != want {
            wrong.push(format!("{}: classifier {ep:?}, want {want:?}", f.name));
        }
        if f.bytes.len() < 14 {
            // The documented difference: the kernel refuses to test-run it.
            if prog.test_run(&f.bytes).is_ok() {
                wrong.push(format!(
                    "{}: test-run accepted {} octets",
                    f.name,
                    f.bytes.len()
                ));
            }
            continue;
        }
        run += 1;
        match xdp_verdict(&prog, &f.bytes) {
            Ok(x) if x == want => {}
            Ok(x) => wrong.push(format!("{}: XDP {x:?}, want {want:?}", f.name)),
            Err(e) => wrong.push(format!("{}: XDP {e}", f.name)),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} disagreements:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        run >= corpus.len() - 2,
        "only two frames are too short to run"
    );

    // Mutations: every header octet changed, every truncation, of six good frames; the two
    // sides must agree on each.
    let pick = |name: &str| named(&corpus, name).to_vec();
    let bases = [
        pick("TCP to us, steered port"),
        pick("first fragment (MF set), steered port"),
        pick("SYN padded to 60 octets (total length < frame)"),
        pick("TCP to us, unsteered port"),
        pick("IPv6: TCP to us, steered port"),
        pick("IPv6: first fragment (M set), steered port"),
    ];
    let mut seen = [0usize; 4];
    let mut mutations = 0;
    for m in bases.iter().flat_map(|b| header_mutations(b)) {
        let ep = endpoint_verdict(&m);
        seen[ep as usize] += 1;
        mutations += 1;
        match xdp_verdict(&prog, &m) {
            Ok(x) if x == ep => {}
            Ok(x) => wrong.push(format!("{}: XDP {x:?}, classifier {ep:?}", hex(&m))),
            Err(e) => wrong.push(format!("{}: XDP {e}, classifier {ep:?}", hex(&m))),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {mutations} mutations disagree:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        seen.iter().all(|&n| n > 0),
        "the mutations reach every verdict: {seen:?} (Ours, NotOurs, Malformed, Fragment)"
    );
    println!(
        "{} corpus frames ({run} test-run), {mutations} mutations: agreed; verdicts {seen:?}",
        corpus.len()
    );
}
