//! A small synchronous rtnetlink client: routes, neighbours and link addresses of the calling
//! thread's network namespace (netlink-packet-route for the messages, netlink-sys for the socket).

use std::net::IpAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use super::XdpError;

/// An Ethernet address: the endpoint's type (one definition in the workspace).
pub use endpoint::ethernet::Mac;

/// The kernel's answer to "how do I reach this address" (`ip route get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Output interface index.
    pub oif: u32,
    /// The gateway, when the destination is not on-link.
    pub gateway: Option<IpAddr>,
    /// The source address the kernel would use.
    pub pref_src: Option<IpAddr>,
}

impl Route {
    /// The address whose link-layer address frames must carry: the gateway or the destination.
    pub fn next_hop(&self, dst: IpAddr) -> IpAddr {
        self.gateway.unwrap_or(dst)
    }
}

/// One entry of the kernel's neighbour table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    /// Protocol address.
    pub ip: IpAddr,
    /// Interface index.
    pub ifindex: u32,
    /// Link-layer address, when known.
    pub mac: Option<Mac>,
    /// NUD state.
    pub state: NeighbourState,
}

impl Neighbour {
    /// Whether frames may be sent to `mac` now (reachable or at least not known bad).
    pub fn usable_mac(&self) -> Option<Mac> {
        match self.state {
            NeighbourState::Reachable
            | NeighbourState::Stale
            | NeighbourState::Delay
            | NeighbourState::Probe
            | NeighbourState::Permanent
            | NeighbourState::Noarp => self.mac,
            _ => None,
        }
    }
}

/// A NETLINK_ROUTE socket in the namespace of the thread that opened it.
pub struct RtNetlink {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl RtNetlink {
    /// Opens a socket in the calling thread's network namespace.
    pub fn new() -> Result<Self, XdpError> {
        let mut socket =
            Socket::new(NETLINK_ROUTE).map_err(|e| XdpError::from_io("netlink socket", &e))?;
        socket
            .bind_auto()
            .map_err(|e| XdpError::from_io("netlink bind", &e))?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(|e| XdpError::from_io("netlink connect", &e))?;
        Ok(Self {
            socket,
            seq: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Sends one request and collects the replies (until `Done` for dumps, else the first).
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        dump: bool,
    ) -> Result<Vec<RouteNetlinkMessage>, XdpError> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { 0 };
        header.sequence_number = self.seq;
        let mut req = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        req.finalize();
        let mut out = vec![0; req.header.length as usize];
        req.serialize(&mut out);
        self.socket
            .send(&out, 0)
            .map_err(|e| XdpError::from_io("netlink send", &e))?;

        let mut replies = Vec::new();
        loop {
            let n = self
                .socket
                .recv(&mut &mut self.buf[..], 0)
                .map_err(|e| XdpError::from_io("netlink recv", &e))?;
            let mut offset = 0;
            while offset < n {
                let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[offset..n])
                    .map_err(|_| XdpError::Netlink)?;
                let len = msg.header.length as usize;
                if len == 0 {
                    return Err(XdpError::Netlink);
                }
                offset += len;
                if msg.header.sequence_number != self.seq {
                    continue; // a late reply to an earlier request
                }
                match msg.payload {
                    NetlinkPayload::Done(_) => return Ok(replies),
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(replies),
                            Some(code) => Err(XdpError::Os {
                                op: "netlink request",
                                errno: -code.get(),
                            }),
                        };
                    }
                    NetlinkPayload::InnerMessage(m) => {
                        replies.push(m);
                        if !dump {
                            return Ok(replies);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// The route the kernel would use to reach `dst`.
    pub fn route_get(&mut self, dst: IpAddr) -> Result<Route, XdpError> {
        let mut msg = RouteMessage::default();
        msg.header.address_family = family(dst);
        msg.header.destination_prefix_length = if dst.is_ipv4() { 32 } else { 128 };
        msg.attributes
            .push(RouteAttribute::Destination(RouteAddress::from(dst)));
        let replies = match self.request(RouteNetlinkMessage::GetRoute(msg), false) {
            Err(XdpError::Os { errno, .. })
                if errno == libc::ENETUNREACH || errno == libc::EHOSTUNREACH =>
            {
                return Err(XdpError::NoRoute)
            }
            r => r?,
        };
        let Some(RouteNetlinkMessage::NewRoute(r)) = replies.into_iter().next() else {
            return Err(XdpError::NoRoute);
        };
        let mut route = Route {
            oif: 0,
            gateway: None,
            pref_src: None,
        };
        for a in r.attributes {
            match a {
                RouteAttribute::Oif(i) => route.oif = i,
                RouteAttribute::Gateway(g) => route.gateway = ip_of_route(g),
                RouteAttribute::PrefSource(s) => route.pref_src = ip_of_route(s),
                _ => {}
            }
        }
        if route.oif == 0 {
            return Err(XdpError::NoRoute);
        }
        Ok(route)
    }

    /// The neighbour table entries of `ifindex` (all families).
    pub fn neighbours(&mut self, ifindex: u32) -> Result<Vec<Neighbour>, XdpError> {
        let replies = self.request(
            RouteNetlinkMessage::GetNeighbour(NeighbourMessage::default()),
            true,
        )?;
        Ok(replies
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewNeighbour(n) => neighbour_of(n),
                _ => None,
            })
            .filter(|n| n.ifindex == ifindex)
            .collect())
    }

    /// The neighbour entry for `ip` on `ifindex`, if the kernel has one.
    pub fn neighbour(&mut self, ifindex: u32, ip: IpAddr) -> Result<Option<Neighbour>, XdpError> {
        Ok(self.neighbours(ifindex)?.into_iter().find(|n| n.ip == ip))
    }

    /// The IPv4 addresses of interface `ifindex`.
    pub fn ipv4_addresses(&mut self, ifindex: u32) -> Result<Vec<std::net::Ipv4Addr>, XdpError> {
        Ok(self
            .addresses(ifindex)?
            .into_iter()
            .filter_map(|a| match a {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(_) => None,
            })
            .collect())
    }

    /// The addresses of interface `ifindex`: IPv4 (`IFA_LOCAL`) and IPv6 (`IFA_ADDRESS`), in
    /// the kernel's order.
    pub fn addresses(&mut self, ifindex: u32) -> Result<Vec<IpAddr>, XdpError> {
        use netlink_packet_route::address::{AddressAttribute, AddressMessage};
        let replies = self.request(
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            true,
        )?;
        let mut out = Vec::new();
        for m in replies {
            let RouteNetlinkMessage::NewAddress(a) = m else {
                continue;
            };
            if a.header.index != ifindex {
                continue;
            }
            for attr in a.attributes {
                match attr {
                    AddressAttribute::Local(IpAddr::V4(v4)) => out.push(IpAddr::V4(v4)),
                    AddressAttribute::Address(IpAddr::V6(v6)) => out.push(IpAddr::V6(v6)),
                    _ => {}
                }
            }
        }
        Ok(out)
    }

    /// The MTU of interface `ifindex`.
    pub fn link_mtu(&mut self, ifindex: u32) -> Result<u32, XdpError> {
        self.link_attribute(ifindex, |a| match a {
            LinkAttribute::Mtu(mtu) => Some(Ok(mtu)),
            _ => None,
        })
    }

    /// The first attribute of interface `ifindex` that `pick` maps to a value.
    fn link_attribute<T>(
        &mut self,
        ifindex: u32,
        pick: impl Fn(LinkAttribute) -> Option<Result<T, XdpError>>,
    ) -> Result<T, XdpError> {
        let mut msg = LinkMessage::default();
        msg.header.index = ifindex;
        let replies = self.request(RouteNetlinkMessage::GetLink(msg), false)?;
        for m in replies {
            if let RouteNetlinkMessage::NewLink(l) = m {
                if let Some(v) = l.attributes.into_iter().find_map(&pick) {
                    return v;
                }
            }
        }
        Err(XdpError::Netlink)
    }

    /// The link-layer address of interface `ifindex`.
    pub fn link_mac(&mut self, ifindex: u32) -> Result<Mac, XdpError> {
        self.link_attribute(ifindex, |a| match a {
            LinkAttribute::Address(bytes) => Some(bytes.try_into().map_err(|_| XdpError::Netlink)),
            _ => None,
        })
    }
}

fn family(ip: IpAddr) -> AddressFamily {
    if ip.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    }
}

fn ip_of_route(a: RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(v4.into()),
        RouteAddress::Inet6(v6) => Some(v6.into()),
        _ => None,
    }
}

fn neighbour_of(n: NeighbourMessage) -> Option<Neighbour> {
    let mut ip = None;
    let mut mac = None;
    for a in n.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => ip = Some(v4.into()),
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => ip = Some(v6.into()),
            NeighbourAttribute::LinkLayerAddress(b) => mac = b.try_into().ok(),
            _ => {}
        }
    }
    Some(Neighbour {
        ip: ip?,
        ifindex: n.header.ifindex,
        mac,
        state: n.header.state,
    })
}
