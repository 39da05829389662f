//! The real programs over xwarp between two network namespaces, on the kernel transport and
//! on the xdp transport (AF_XDP, our TCP): `ibv_devinfo -v`; perftest's `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_write_lat` and `ib_send_lat` with `-R` (rdma_cm) and a
//! bounded `-n`, each exiting 0 on both sides with its result row; `rping` with 20 pings whose
//! data both sides verify (`-V`). Privileged: skipped without root outside CI.

mod support;

use support::programs::{Ran, Tools};
use testbed::{for_test, Side, VethTestbed};
use testkit::or_skip;

/// The result row of a perftest run: the line after the column header.
fn result_row(r: &Ran) -> Option<String> {
    let mut lines = r.stdout.lines();
    lines.find(|l| l.trim_start().starts_with("#bytes"))?;
    lines.next().map(str::to_string)
}

fn perftest(tools: &Tools, tb: &VethTestbed, transport: &str, program: &str, n: &str) {
    let server_ip = tb.ip(Side::A).to_string();
    let (server, client) = tools.pair(
        tb,
        transport,
        program,
        &["-R", "-n", n],
        &["-R", "-n", n, &server_ip],
    );
    assert!(server.ok(), "{program} server: {server:?}");
    assert!(client.ok(), "{program} client: {client:?}");
    for (who, r) in [("server", &server), ("client", &client)] {
        let row = result_row(r).unwrap_or_else(|| panic!("{program} {who}: no result row"));
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert!(fields.len() >= 4, "{program} {who}: {row}");
        assert_eq!(fields[1], n, "{program} {who}: iterations in {row}");
        let figure: f64 = fields[3].parse().unwrap_or(0.0);
        assert!(figure > 0.0, "{program} {who}: {row}");
    }
    assert!(
        client.stdout.contains("Transport type : IW"),
        "{}",
        client.stdout
    );
}

fn rping(tools: &Tools, tb: &VethTestbed, transport: &str) {
    let server_ip = tb.ip(Side::A).to_string();
    let (server, client) = tools.pair(
        tb,
        transport,
        "rping",
        &["-s", "-a", &server_ip, "-C", "20", "-v", "-V"],
        &["-c", "-a", &server_ip, "-C", "20", "-v", "-V"],
    );
    assert!(server.ok(), "rping server: {server:?}");
    assert!(client.ok(), "rping client: {client:?}");
    for (who, r, prefix) in [
        ("server", &server, "server ping data: "),
        ("client", &client, "ping data: "),
    ] {
        let pings: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with(prefix)).collect();
        assert_eq!(pings.len(), 20, "rping {who}: {}", r.stdout);
        for (i, p) in pings.iter().enumerate() {
            assert!(p.contains(&format!("rdma-ping-{i}: ")), "rping {who}: {p}");
        }
        assert!(
            !r.stderr.contains("data mismatch"),
            "rping {who}: {}",
            r.stderr
        );
    }
}

fn devinfo(tools: &Tools, tb: &VethTestbed, transport: &str) {
    let r = tools
        .start(tb, Side::A, transport, "ibv_devinfo", &["-v"])
        .wait(support::programs::DEADLINE);
    println!(
        "== {transport}: xwarp-run -- ibv_devinfo -v\n{}{}",
        r.stdout, r.stderr
    );
    assert!(r.ok(), "{r:?}");
    let gid = tb.ip(Side::A).octets();
    let gid = format!(
        "ffff:{:02x}{:02x}:{:02x}{:02x}",
        gid[0], gid[1], gid[2], gid[3]
    );
    for want in [
        "transport:\t\t\tiWARP (1)",
        "PORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
        &gid,
    ] {
        assert!(r.stdout.contains(want), "{want:?} missing");
    }
}

/// Every program in turn on one testbed and transport.
fn all_programs(tag: &str, transport: &str) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    let Some(tools) = Tools::get() else {
        return;
    };
    devinfo(&tools, &tb, transport);
    perftest(&tools, &tb, transport, "ib_write_bw", "2000");
    perftest(&tools, &tb, transport, "ib_read_bw", "2000");
    perftest(&tools, &tb, transport, "ib_send_bw", "2000");
    perftest(&tools, &tb, transport, "ib_write_lat", "2000");
    perftest(&tools, &tb, transport, "ib_send_lat", "2000");
    rping(&tools, &tb, transport);
}

#[test]
fn programs_over_the_kernel_transport() {
    all_programs("pgk", "kernel");
}

#[test]
fn programs_over_the_xdp_transport() {
    all_programs("pgx", "xdp");
}
