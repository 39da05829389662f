//! The real programs over xwarp between two network namespaces, on the kernel transport and
//! on the xdp transport (AF_XDP, our TCP): `ibv_devinfo -v`; perftest's `ib_write_bw`,
//! `ib_read_bw`, `ib_send_bw`, `ib_write_lat` and `ib_send_lat` with `-R` (rdma_cm) and a
//! bounded `-n`, each exiting 0 on both sides with its result row; `rping` with 20 pings whose
//! data both sides verify (`-V`). Privileged: skipped without root outside CI.

mod support;

use support::programs::{devinfo, perftest, rping, Tools};
use testbed::for_test;
use testkit::or_skip;

/// Every program in turn on one testbed and transport.
fn all_programs(tag: &str, transport: &str) {
    let Some(tb) = or_skip(tag, for_test(tag)) else {
        return;
    };
    let Some(tools) = Tools::get() else {
        return;
    };
    devinfo(&tools, &tb, transport);
    let both = (transport, transport);
    for program in [
        "ib_write_bw",
        "ib_read_bw",
        "ib_send_bw",
        "ib_write_lat",
        "ib_send_lat",
    ] {
        perftest(&tools, &tb, both, program, "2000");
    }
    rping(&tools, &tb, both);
}

#[test]
fn programs_over_the_kernel_transport() {
    all_programs("pgk", "kernel");
}

#[test]
fn programs_over_the_xdp_transport() {
    all_programs("pgx", "xdp");
}
