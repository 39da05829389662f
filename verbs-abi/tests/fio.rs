//! fio's rdma engine over xwarp between two network namespaces, on the kernel transport and on
//! the xdp transport: a server (`--rw=read`, fio's rdma server role) in A, a client
//! (`--rw=write`) in B moving 64 MiB in 64 KiB blocks at depth 16 with RDMA Write, then with
//! RDMA Read; both exit 0 with no job error and the client reports the whole size done.
//! Not run: `--verb=send`, which outruns the receiver's posted receives (InfiniBand's RNR retry
//! covers that, iWARP has none: the receiver sends a Terminate, as with qperf's `rc_bw`).
//! Privileged: skipped without root outside CI.

mod support;

use support::programs::{Tools, FIO_PORT};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

/// fio's options for one side: `role` is fio's rdma role (`read` serves, `write` connects).
fn fio_args(role: &str, verb: &str, server: Option<&str>) -> Vec<String> {
    let mut v = vec![
        format!("--name=xwarp-{verb}"),
        "--ioengine=rdma".into(),
        format!("--port={FIO_PORT}"),
        format!("--rw={role}"),
        format!("--verb={verb}"),
        "--bs=64k".into(),
        "--size=64m".into(),
        "--iodepth=16".into(),
    ];
    if let Some(ip) = server {
        v.push(format!("--hostname={ip}"));
    }
    v
}

/// One fio server/client pair with `verb` on `transport`.
fn fio_pair(tools: &Tools, tb: &VethTestbed, transport: &str, verb: &str) {
    let ip = tb.ip(Side::A).to_string();
    let server = fio_args("read", verb, None);
    let client = fio_args("write", verb, Some(&ip));
    let (s, c) = tools.pair(
        tb,
        (transport, transport),
        "fio",
        &server.iter().map(String::as_str).collect::<Vec<_>>(),
        &client.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for (who, r) in [("server", &s), ("client", &c)] {
        assert!(r.ok(), "fio {verb} {who} on {transport}: {r:?}");
        assert!(
            r.stdout.contains("err= 0"),
            "fio {verb} {who}: a job error\n{}",
            r.stdout
        );
    }
    assert!(
        c.stdout.contains("io=64.0MiB"),
        "fio {verb} client: not the whole 64 MiB\n{}",
        c.stdout
    );
}

fn fio_over(tag: &str, transport: &str) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    let Some(tools) = Tools::get() else {
        return;
    };
    for verb in ["write", "read"] {
        fio_pair(&tools, &tb, transport, verb);
    }
}

#[test]
fn fio_rdma_engine_over_the_kernel_transport() {
    fio_over("fik", "kernel");
}

#[test]
fn fio_rdma_engine_over_the_xdp_transport() {
    fio_over("fix", "xdp");
}
