//! Opening an AF_XDP device: interface facts from rtnetlink, the XDP program, the AF_XDP
//! socket, the engine.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{Shared, State, XdpDevice};
use crate::counters::DeviceCounters;
use endpoint::{EndpointConfig, FastMap, Secrets};

use crate::engine::{Engine, XskIo};
use crate::pd::os_random;
use crate::xdp::netlink::RtNetlink;
use crate::xdp::netns::NetNs;
use crate::xdp::{program, LocalPortRange, XdpError, XdpProgram, XskConfig, XskQueue};
use crate::{DeviceError, EngineMode, XdpConfig};

/// Ethernet + IPv4 + TCP headers without options.
const HEADERS: u32 = 14 + 20 + 20;
/// TCP options our segments may carry (timestamps, padded).
const TCP_OPTIONS: u32 = 12;

fn xdp_err(error: XdpError) -> DeviceError {
    DeviceError::Xdp {
        interface: "interface",
        error,
    }
}

use crate::xdp::xsk::frame_size_for_mtu as frame_size_for;

impl XdpDevice {
    /// Opens `cfg.interface` in the calling thread's network namespace.
    pub(crate) fn open(
        cfg: &XdpConfig,
        counters: Arc<DeviceCounters>,
    ) -> Result<Self, DeviceError> {
        // The engine's ISN key and STag seed.
        let mut secrets = [0u8; 24];
        os_random(&mut secrets).map_err(|e| DeviceError::Random(e.kind()))?;
        let netns = NetNs::current().map_err(|e| xdp_err(XdpError::from_io("netns", &e)))?;
        let ifindex = program::ifindex(&cfg.interface).map_err(xdp_err)?;
        let mut nl = RtNetlink::new().map_err(xdp_err)?;
        let mac = nl.link_mac(ifindex).map_err(xdp_err)?;
        let ip = *nl
            .ipv4_addresses(ifindex)
            .map_err(xdp_err)?
            .first()
            .ok_or(DeviceError::NoAddress)?;
        let mtu = nl.link_mtu(ifindex).map_err(xdp_err)?;
        let ports = LocalPortRange::new(*cfg.local_ports.start(), *cfg.local_ports.end())
            .map_err(xdp_err)?;

        let prog = XdpProgram::attach(&cfg.interface, cfg.attach).map_err(xdp_err)?;
        // The program owns what the endpoint owns (endpoint::classify's rule): its address.
        prog.set_owned_addrs(&[ip.into()]).map_err(xdp_err)?;
        prog.steer_range(ports).map_err(xdp_err)?;
        let frame_size = frame_size_for(mtu);
        let queue = XskQueue::new(
            &cfg.interface,
            cfg.queue,
            XskConfig {
                bind_mode: cfg.bind,
                frame_size,
                huge_pages: cfg.huge_pages,
                busy_poll: cfg.busy_poll,
                ..XskConfig::default()
            },
        )
        .map_err(xdp_err)?;
        prog.register_socket(cfg.queue, queue.fd())
            .map_err(xdp_err)?;
        tracing::info!(
            interface = %cfg.interface,
            queue = cfg.queue,
            %ip,
            mtu,
            xdp_mode = ?prog.mode(),
            zero_copy = queue.is_zero_copy(),
            "AF_XDP device open"
        );

        let mut ecfg = EndpointConfig::new(mac, ip, Secrets::from_random(secrets));
        ecfg.local_ports = cfg.local_ports.clone();
        ecfg.limits = cfg.limits.clone();
        ecfg.listener = cfg.listener.clone();
        let room = frame_size.min(mtu + 14) - HEADERS - TCP_OPTIONS;
        ecfg.tcp.mss = u16::try_from(room).unwrap_or(u16::MAX);
        let info = crate::XdpInfo {
            interface: cfg.interface.clone(),
            queue: cfg.queue,
            attach_mode: prog.mode(),
            zero_copy: queue.is_zero_copy(),
            mtu,
            mss: ecfg.tcp.mss,
            mode: cfg.mode,
        };
        let engine = Engine::with_faults(ecfg, XskIo::new(queue), cfg.fault, Instant::now());

        let (inline, core) = match cfg.mode {
            EngineMode::Inline => (true, None),
            EngineMode::Threaded => (false, None),
            EngineMode::Pinned(c) => (false, Some(c)),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                engine,
                program: prog,
                routes: FastMap::default(),
                pending: FastMap::default(),
                listeners: FastMap::default(),
                counters,
                unsteer_later: Vec::new(),
                streams: Default::default(),
            }),
            waiters: AtomicUsize::new(0),
            inline,
            netns,
            ip,
            info,
        });
        Ok(XdpDevice::start(shared, core))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_fit_the_mtu() {
        assert_eq!(frame_size_for(1500), 2048);
        assert_eq!(frame_size_for(3000), 4096);
    }
}
