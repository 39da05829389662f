//! Opening an AF_XDP device: interface facts from rtnetlink, the XDP program, the AF_XDP
//! socket, the engine.

use std::net::IpAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::shared_program::{LaneProgram, SharedProgram, MAX_LANES};
use super::{Shared, State, XdpLane};
use crate::counters::DeviceCounters;
use endpoint::{EndpointConfig, FastMap, Lane, RssLanes, Secrets};

use crate::engine::{Engine, HandOff, LaneLink, XskIo};
use crate::pd::os_random;
use crate::{DeviceError, EngineMode, LaneSteering, XdpConfig};
use afxdp::netlink::RtNetlink;
use afxdp::netns::NetNs;
use afxdp::xsk::UMEM_HEADROOM;
use afxdp::{program, LocalPortRange, XdpError, XdpProgram, XskConfig, XskQueue};

/// Ethernet + IP + TCP headers without options: IPv4's 20-octet header or IPv6's 40.
fn headers(ip: IpAddr) -> u32 {
    14 + if ip.is_ipv4() { 20 } else { 40 } + 20
}

fn xdp_err(error: XdpError) -> DeviceError {
    DeviceError::Xdp {
        interface: "interface",
        error,
    }
}

use afxdp::xsk::{frame_size_for_mtu as frame_size_for, multi_buffer_for_mtu};

/// What every lane of a device shares, from the interface and the program.
struct Common {
    mac: endpoint::ethernet::Mac,
    ip: IpAddr,
    mtu: u32,
    program: Arc<SharedProgram>,
    handoff: Arc<HandOff>,
    counters: Arc<DeviceCounters>,
}

impl XdpLane {
    /// Opens `cfg.interface` in the calling thread's network namespace: the XDP program once,
    /// then one lane (AF_XDP socket and engine) per queue of `cfg.queue..cfg.queue +
    /// cfg.queues`. Returns the lanes (at least one) and their hand-off.
    pub(crate) fn open_lanes(
        cfg: &XdpConfig,
        counters: Arc<DeviceCounters>,
    ) -> Result<(Vec<Self>, Arc<HandOff>), DeviceError> {
        let count = u16::try_from(cfg.queues)
            .ok()
            .filter(|n| (1..=MAX_LANES).contains(n))
            .ok_or(DeviceError::Queues(cfg.queues))?;
        let ifindex = program::ifindex(&cfg.interface).map_err(xdp_err)?;
        let mut nl = RtNetlink::new().map_err(xdp_err)?;
        let mac = nl.link_mac(ifindex).map_err(xdp_err)?;
        let ip = serving_address(&nl.addresses(ifindex).map_err(xdp_err)?, cfg.address)
            .ok_or(DeviceError::NoAddress)?;
        let mtu = nl.link_mtu(ifindex).map_err(xdp_err)?;
        let ports = LocalPortRange::new(*cfg.local_ports.start(), *cfg.local_ports.end())
            .map_err(xdp_err)?;

        let prog = XdpProgram::attach(&cfg.interface, cfg.attach).map_err(xdp_err)?;
        // The program owns what the endpoint owns (endpoint::classify's rule): its address.
        prog.set_owned_addrs(&[ip]).map_err(xdp_err)?;
        prog.steer_range(ports).map_err(xdp_err)?;
        let common = Common {
            mac,
            ip,
            mtu,
            program: Arc::new(SharedProgram::new(prog)),
            handoff: HandOff::new(count),
            counters,
        };
        let rss = (count > 1 && cfg.lane_steering == LaneSteering::Auto)
            .then(|| lanes_rss(cfg))
            .flatten();
        let lanes = (0..count)
            .map(|i| {
                let lane = Lane::new(i, count).expect("i < count");
                let lane = match &rss {
                    Some(r) => lane.following(r.clone()),
                    None => lane,
                };
                Self::open_lane(cfg, &common, lane)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((lanes, common.handoff))
    }

    /// One lane: the AF_XDP socket on its queue, registered with the program, and its engine.
    fn open_lane(cfg: &XdpConfig, common: &Common, lane: Lane) -> Result<Self, DeviceError> {
        // The engine's ISN key and STag seed.
        let mut secrets = [0u8; 24];
        os_random(&mut secrets).map_err(|e| DeviceError::Random(e.kind()))?;
        let netns = NetNs::current().map_err(|e| xdp_err(XdpError::from_io("netns", &e)))?;
        let (ip, mtu) = (common.ip, common.mtu);
        let queue_id = cfg.queue + u32::from(lane.index());
        let frame_size = frame_size_for(mtu);
        let multi_buffer = multi_buffer_for_mtu(mtu);
        let queue = XskQueue::new(
            &cfg.interface,
            queue_id,
            XskConfig {
                bind_mode: cfg.bind,
                frame_size,
                huge_pages: cfg.huge_pages,
                busy_poll: cfg.busy_poll,
                multi_buffer,
                tx_checksum: cfg.tx_checksum,
                // A slab holds the largest Ethernet frame behind the headroom.
                slab_frames: (mtu + 14 + UMEM_HEADROOM).div_ceil(frame_size),
                // Received chains are read in place from the strip.
                rx_strip: multi_buffer,
                ..XskConfig::default()
            },
        )
        .map_err(xdp_err)?;
        let prog = common.program.program();
        prog.register_socket(queue_id, queue.fd())
            .map_err(xdp_err)?;
        tracing::info!(
            interface = %cfg.interface,
            queue = queue_id,
            lane = lane.index(),
            %ip,
            mtu,
            xdp_mode = ?prog.mode(),
            zero_copy = queue.is_zero_copy(),
            multi_buffer,
            tx_checksum = ?queue.tx_checksum(),
            "AF_XDP device open"
        );

        let mut ecfg = EndpointConfig::new(common.mac, ip, Secrets::from_random(secrets));
        ecfg.local_ports = cfg.local_ports.clone();
        ecfg.lane = lane.clone();
        ecfg.limits = cfg.limits.clone();
        ecfg.listener = cfg.listener.clone();
        if queue.offloads_tcp_checksum() {
            // The queue asks the device (or kernel) to finish every TCP checksum.
            ecfg.tcp.tx_checksum = tcp_offload::TxChecksum::Offloaded;
        }
        // One frame, or a chain of them on a multi-buffer socket: the MTU is the limit.
        let max_frame = (mtu as usize + 14).min(queue.max_packet());
        // The MSS we announce excludes TCP options (RFC 9293 §3.7.1, RFC 6691): each sender
        // subtracts the options it puts on a segment (our EMSS takes off the 12 octets of
        // timestamps). Announcing 12 less, as before, made peers send 12 octets short.
        let room = max_frame as u32 - headers(ip);
        ecfg.tcp.mss = u16::try_from(room).unwrap_or(u16::MAX);
        // The path MTU our segments are sized by (EMSS, MPA §3.1.1): the link's, not TCP's
        // default 1500 (which had kept segments at 1448 octets on any MTU).
        ecfg.tcp.mtu = u16::try_from(max_frame - 14).unwrap_or(u16::MAX);
        let info = crate::XdpInfo {
            interface: cfg.interface.clone(),
            queue: cfg.queue,
            queues: u32::from(lane.count()),
            lanes_follow_rss: lane.rss().is_some(),
            attach_mode: prog.mode(),
            zero_copy: queue.is_zero_copy(),
            mtu,
            mss: ecfg.tcp.mss,
            tx_checksum: queue.tx_checksum(),
            mode: cfg.mode,
        };
        let io = XskIo::with_max_frame(queue, max_frame)
            .with_lane(LaneLink::new(lane.clone(), common.handoff.clone()));
        let engine = Engine::with_faults(ecfg, io, cfg.fault, Instant::now())
            .map_err(DeviceError::Engine)?;

        let (inline, core) = match cfg.mode {
            EngineMode::Inline => (true, None),
            EngineMode::Threaded => (false, None),
            // Lane i on the i-th core after the one asked for.
            EngineMode::Pinned(c) => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                (false, Some(lane_core(c, lane.index(), cores)))
            }
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                engine,
                program: LaneProgram::new(common.program.clone(), lane.index()),
                routes: FastMap::default(),
                pending: FastMap::default(),
                listeners: FastMap::default(),
                counters: common.counters.clone(),
                unsteer_later: Vec::new(),
                streams: Default::default(),
                early_work: Default::default(),
            }),
            waiters: AtomicUsize::new(0),
            inline,
            assisted: cfg.assist && !inline,
            assist: Default::default(),
            lane: lane.index(),
            siblings: Default::default(),
            netns,
            ip,
            info,
        });
        Ok(XdpLane::start(shared, core))
    }
}

/// The core of lane `index` when lane 0 is pinned to `first` and the process may use `cores`
/// cores: lane 0 on `first` as asked, the others on the cores after it in turn, wrapping.
/// The NIC's RSS for lanes on `cfg.queue` onwards to follow, when its driver reports one they
/// can (else the lanes use the symmetric hash; the log says why).
fn lanes_rss(cfg: &XdpConfig) -> Option<Arc<RssLanes>> {
    match afxdp::rss::read_rss(&cfg.interface) {
        Ok(Ok(hash)) => {
            tracing::info!(
                interface = %cfg.interface,
                table = hash.table_len(),
                "lanes follow the NIC's RSS (Toeplitz over TCP's addresses and ports)"
            );
            Some(Arc::new(RssLanes {
                hash,
                first_queue: cfg.queue,
            }))
        }
        Ok(Err(why)) => {
            tracing::info!(interface = %cfg.interface, ?why, "lanes use the symmetric hash");
            None
        }
        Err(e) => {
            tracing::warn!(interface = %cfg.interface, error = %e, "RSS not readable; lanes use the symmetric hash");
            None
        }
    }
}

fn lane_core(first: usize, index: u16, cores: usize) -> usize {
    if index == 0 {
        return first;
    }
    (first + usize::from(index)) % cores.max(1)
}

/// The address a device serves among the interface's `addrs` (link-local IPv6 ones, fe80::/10,
/// never: they would need a scope on every peer's side): `wanted` if it is one of them; for an
/// unspecified `wanted` (0.0.0.0, ::) the first of its family; without a wish, the first IPv4
/// address, else the first IPv6 one.
fn serving_address(addrs: &[IpAddr], wanted: Option<IpAddr>) -> Option<IpAddr> {
    let link_local =
        |a: &IpAddr| matches!(a, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80);
    let first = |v6: bool| {
        addrs
            .iter()
            .find(|a| a.is_ipv6() == v6 && !link_local(a))
            .copied()
    };
    match wanted {
        Some(w) if w.is_unspecified() => first(w.is_ipv6()),
        Some(w) => addrs.contains(&w).then_some(w),
        None => first(false).or_else(|| first(true)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_address_is_the_one_asked_for_else_ipv4_else_global_ipv6() {
        let v4: IpAddr = "198.18.0.1".parse().unwrap();
        let ll: IpAddr = "fe80::1".parse().unwrap();
        let g6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(serving_address(&[ll, g6, v4], None), Some(v4));
        assert_eq!(serving_address(&[ll, g6], None), Some(g6));
        assert_eq!(serving_address(&[ll], None), None);
        assert_eq!(serving_address(&[v4, g6], Some(g6)), Some(g6));
        assert_eq!(serving_address(&[v4], Some(g6)), None);
        let (any4, any6) = ("0.0.0.0".parse().ok(), "::".parse().ok());
        assert_eq!(serving_address(&[v4, ll, g6], any6), Some(g6));
        assert_eq!(serving_address(&[g6, v4], any4), Some(v4));
        assert_eq!(serving_address(&[v4, ll], any6), None);
    }

    #[test]
    fn pinned_lanes_take_the_cores_after_the_first_in_turn() {
        assert_eq!(
            (0..4).map(|i| lane_core(2, i, 4)).collect::<Vec<_>>(),
            [2, 3, 0, 1]
        );
        assert_eq!(
            (0..3).map(|i| lane_core(1, i, 2)).collect::<Vec<_>>(),
            [1, 0, 1]
        );
        // Lane 0 keeps the core asked for, even one the process may not use (pinning then
        // fails with a warning, as for a one-queue device).
        assert_eq!(lane_core(7, 0, 2), 7);
        assert_eq!(lane_core(7, 1, 2), 0);
    }

    #[test]
    fn frames_fit_the_mtu() {
        assert_eq!(frame_size_for(1500), 2048);
        assert_eq!(frame_size_for(3000), 4096);
        assert!(!multi_buffer_for_mtu(1500));
        assert!(!multi_buffer_for_mtu(3498));
        assert!(multi_buffer_for_mtu(9000));
    }
}
