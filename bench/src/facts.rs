//! The parameter block: what a test ran on (transport, XDP mode, zero-copy, engine, MTU/MSS,
//! negotiated MPA markers and CRC), from the device and the connected queue pair.

use dataplane::{AttachMode, Device, EngineMode, TxChecksumOffload};

use crate::cli::RunSpec;
use crate::report::Params;

/// The facts of a run on `device`, with what its connection's MPA negotiated (once connected:
/// `QueuePair::negotiated`).
pub fn params(
    spec: &RunSpec,
    device: &Device,
    negotiated: Option<dataplane::NegotiatedFraming>,
) -> Params {
    let mut p = Params {
        test: spec.test.name().into(),
        transport: spec.args.transport.name().into(),
        connection: "RC".into(),
        num_of_qps: spec.args.qps,
        tx_depth: spec.args.tx_depth(),
        bidirectional: spec.args.bidirectional && !spec.test.is_latency(),
        ..Params::default()
    };
    if spec.test.is_storage() {
        let rw = spec.args.rw(spec.test);
        p.tx_depth = spec.args.iodepth();
        p.num_of_qps = crate::block_client::connections_for(spec.args.iodepth()) as u32;
        p.iodepth = Some(spec.args.iodepth());
        p.rw = Some(rw.name().into());
        p.seed = rw.random().then(|| spec.args.seed());
    }
    if let Some(x) = device.xdp_info() {
        p.interface = Some(x.interface);
        p.queue = Some(x.queue);
        p.xdp_mode = Some(
            match x.attach_mode {
                AttachMode::Native => "native",
                AttachMode::Generic => "generic",
            }
            .into(),
        );
        p.zero_copy = Some(x.zero_copy);
        p.engine = Some(match x.mode {
            EngineMode::Inline => "inline".into(),
            EngineMode::Threaded => "threaded".into(),
            EngineMode::Pinned(c) => format!("pinned to CPU {c}"),
        });
        p.mtu = Some(x.mtu);
        p.mss = Some(x.mss);
        p.tx_checksum = Some(
            match x.tx_checksum {
                TxChecksumOffload::Device => "device",
                TxChecksumOffload::Kernel => "kernel",
                TxChecksumOffload::Off | TxChecksumOffload::Auto => "engine",
            }
            .into(),
        );
    }
    if device.xdp_info().is_none() {
        // The kernel transport: driver threads, or the application's polls.
        p.engine = Some(
            if device.is_inline() {
                "inline"
            } else {
                "threaded"
            }
            .into(),
        );
    }
    if let Some(n) = negotiated {
        p.tx_markers = Some(n.tx_markers);
        p.rx_markers = Some(n.rx_markers);
        p.crc = Some(n.crc);
        p.mulpdu = Some(n.mulpdu);
    }
    p
}

/// Warns on stderr about what makes figures slower than the host can do: generic XDP, copy
/// mode.
pub fn warn(p: &Params) {
    if p.xdp_mode.as_deref() == Some("generic") {
        tracing::warn!(
            "XDP runs in generic (skb) mode on {}: figures are below what native XDP gives",
            p.interface.as_deref().unwrap_or("?")
        );
    }
    if p.zero_copy == Some(false) {
        tracing::warn!(
            "AF_XDP is bound in copy mode: every frame is copied once more than with zero-copy"
        );
    }
}
