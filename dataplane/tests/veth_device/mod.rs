//! An xdp device on one side of a [`VethTestbed`]: copy mode, as veth needs.
#![allow(dead_code)]

use dataplane::{BindMode, Device, EngineMode, XdpConfig};
use testbed::{Side, VethTestbed};

/// An xdp device on `side`'s veth end, its engine in `mode`; panics when it cannot be opened
/// (the testbed is there).
pub fn open_xdp(tb: &VethTestbed, side: Side, mode: EngineMode) -> Device {
    open_xdp_on_queues(tb, side, mode, 1)
}

/// [`open_xdp`] serving `queues` queues from queue 0 (a testbed made by
/// [`VethTestbed::create_with_queues`]).
pub fn open_xdp_on_queues(tb: &VethTestbed, side: Side, mode: EngineMode, queues: u32) -> Device {
    let _ns = tb.enter(side).expect("enter the namespace");
    let mut cfg = XdpConfig::new(tb.ifname(side));
    cfg.bind = BindMode::Copy;
    cfg.mode = mode;
    cfg.queues = queues;
    Device::open_xdp(cfg).expect("open the xdp device")
}
