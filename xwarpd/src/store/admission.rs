//! Who may connect to the store: an allow-list of client networks and the connection cap,
//! shared fairly among sources ([`super::fair_share`]), checked when a client's MPA Request
//! arrives, before anything is allocated for it. Refusals are counted always and logged at
//! most once per peer address per interval.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use endpoint::SourceShare;

use super::fair_share::{decide, Limits, SlotState, Verdict};
use super::stats::StoreStats;

use ipnet::IpNet;

/// The client networks a store admits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AllowList {
    /// Only the subnet of the listen address: the prefix of the interface holding it, found when
    /// the server starts. A server listening on every address (0.0.0.0, ::) needs [`Nets`].
    ///
    /// [`Nets`]: AllowList::Nets
    #[default]
    ListenSubnet,
    /// Clients whose address lies in one of these networks (`0.0.0.0/0` and `::/0` admit all).
    Nets(Vec<IpNet>),
}

/// Why an allow-list cannot be resolved for a listen address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AllowError {
    /// The default needs a concrete listen address.
    #[error("the store listens on every address, so the default allow-list (the listen address's subnet) is undefined: list the client networks (store.allow / --store-allow)")]
    Unspecified,
    /// No interface of this network namespace holds the listen address.
    #[error("no interface here holds the listen address, so its subnet is unknown: listen on an address of this host or list the client networks (store.allow / --store-allow)")]
    NotLocal,
    /// The interface list could not be read.
    #[error("cannot list the interfaces' addresses (getifaddrs: {0})")]
    Interfaces(nix::errno::Errno),
}

impl AllowList {
    /// Every client, IPv4 and IPv6 (`0.0.0.0/0`, `::/0`).
    pub fn any() -> Self {
        AllowList::Nets(vec![
            IpNet::new_assert(std::net::Ipv4Addr::UNSPECIFIED.into(), 0),
            IpNet::new_assert(std::net::Ipv6Addr::UNSPECIFIED.into(), 0),
        ])
    }

    /// The networks this list admits for a server listening on `listen`.
    pub fn resolve(&self, listen: IpAddr) -> Result<Vec<IpNet>, AllowError> {
        match self {
            AllowList::Nets(n) => Ok(n.clone()),
            AllowList::ListenSubnet if listen.is_unspecified() => Err(AllowError::Unspecified),
            AllowList::ListenSubnet => interface_subnet(listen)?
                .map(|n| vec![n])
                .ok_or(AllowError::NotLocal),
        }
    }
}

/// The subnet of the interface address equal to `ip` (its prefix length from the interface's
/// netmask), if an interface of this network namespace holds `ip`.
pub fn interface_subnet(ip: IpAddr) -> Result<Option<IpNet>, AllowError> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(AllowError::Interfaces)?;
    for a in addrs {
        let (Some(addr), Some(mask)) = (a.address, a.netmask) else {
            continue;
        };
        let (found, prefix) = match (addr.as_sockaddr_in(), addr.as_sockaddr_in6()) {
            (Some(v4), _) => (
                IpAddr::V4(v4.ip()),
                mask.as_sockaddr_in().map(|m| m.ip().to_bits().count_ones()),
            ),
            (_, Some(v6)) => (
                IpAddr::V6(v6.ip()),
                mask.as_sockaddr_in6()
                    .map(|m| m.ip().to_bits().count_ones()),
            ),
            _ => continue,
        };
        if found != ip {
            continue;
        }
        // A netmask's ones are its prefix (contiguous on Linux); at most 32 or 128.
        let prefix = prefix.map_or(if ip.is_ipv4() { 32 } else { 128 }, |p| p as u8);
        return Ok(IpNet::new(ip, prefix).ok().map(|n| n.trunc()));
    }
    Ok(None)
}

/// Why a client was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its address is in no admitted network.
    NotAllowed,
    /// The server already serves its maximum of connections, none of them silent.
    Full,
    /// Its source (address, or IPv6 prefix) already holds its share of the connections.
    SourceShare,
}

impl Refusal {
    /// The label in logs and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::NotAllowed => "not_allowed",
            Refusal::Full => "full",
            Refusal::SourceShare => "source_share",
        }
    }
}

/// How often one peer's refusals are logged.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);
/// Peers remembered by the refusal log; past this, refusals of new peers are counted but not
/// logged until old entries expire.
const REFUSAL_LOG_PEERS: usize = 1024;

/// Remembers when each peer's refusal was last logged (bounded).
#[derive(Debug, Default)]
pub(crate) struct RefusalLog {
    last: HashMap<IpAddr, Instant>,
}

impl RefusalLog {
    /// Whether a refusal of `peer` at `now` is to be logged (then remembered as logged).
    pub(crate) fn should_log(&mut self, peer: IpAddr, now: Instant) -> bool {
        let fresh = |t: &Instant| now.saturating_duration_since(*t) < REFUSAL_LOG_INTERVAL;
        if self.last.get(&peer).is_some_and(fresh) {
            return false;
        }
        if self.last.len() >= REFUSAL_LOG_PEERS && !self.last.contains_key(&peer) {
            self.last.retain(|_, t| fresh(t));
            if self.last.len() >= REFUSAL_LOG_PEERS {
                return false;
            }
        }
        self.last.insert(peer, now);
        true
    }
}

/// Whether `peer` lies in one of `nets` (an IPv4-mapped IPv6 peer counts as its IPv4 address).
pub(crate) fn admitted(nets: &[IpNet], peer: IpAddr) -> bool {
    let peer = peer.to_canonical();
    nets.iter().any(|n| n.contains(&peer))
}

/// The admission of a service's new connections: the allow-list, the connection cap and each
/// source's share of it, a silent connection giving way to a new client when the cap is
/// reached; refusals and evictions are counted in the service's stats, refusals logged at most
/// once per peer per interval. Shared by the RPC-over-RDMA and the ONC RPC over TCP services.
#[derive(Debug)]
pub(crate) struct Gate {
    allowed: Vec<IpNet>,
    limits: Limits,
    /// The connections holding a slot, oldest first.
    slots: Vec<Arc<SlotState>>,
    origin: Instant,
    log: RefusalLog,
}

/// One of the capped connection slots, held while the connection is served: the connection
/// says when it serves a call and looks whether it was told to give way
/// ([`Slot::is_evicted`]).
#[derive(Debug)]
pub(crate) struct Slot(Arc<SlotState>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl std::ops::Deref for Slot {
    type Target = SlotState;
    fn deref(&self) -> &SlotState {
        &self.0
    }
}

impl Gate {
    /// A gate for `allowed` networks: `max_connections` at once, `share` of them per source, a
    /// connection with no call for `silent_after` giving way to a new client at the cap.
    pub(crate) fn new(
        allowed: Vec<IpNet>,
        max_connections: u32,
        share: SourceShare,
        silent_after: Duration,
    ) -> Self {
        Self {
            allowed,
            limits: Limits {
                cap: max_connections as usize,
                share,
                silent_after,
            },
            slots: Vec::new(),
            origin: Instant::now(),
            log: RefusalLog::default(),
        }
    }

    /// A slot for `peer`, or the refusal (counted in `stats`, logged as `service`). At the cap,
    /// the silent connection idle longest is told to close and its slot given to `peer`
    /// (counted).
    pub(crate) fn admit(
        &mut self,
        peer: Option<SocketAddr>,
        stats: &StoreStats,
        service: &'static str,
    ) -> Result<Slot, Refusal> {
        self.slots.retain(|s| s.holds_slot());
        let Some(source) = peer
            .map(|p| p.ip())
            .filter(|&ip| admitted(&self.allowed, ip))
            .map(|ip| self.limits.share.prefix.key(ip))
        else {
            return Err(self.refuse(Refusal::NotAllowed, peer, stats, service));
        };
        let now = Instant::now();
        let open: Vec<_> = self.slots.iter().map(|s| s.view(now)).collect();
        match decide(&open, source, &self.limits) {
            Verdict::Refuse(why) => return Err(self.refuse(why, peer, stats, service)),
            Verdict::Admit => {}
            Verdict::Evict(i) => {
                let victim = self.slots.remove(i);
                victim.evict();
                stats.count_evicted();
                tracing::info!(
                    peer = %peer.map_or("?".into(), |p| p.to_string()),
                    service,
                    "store full: a silent connection gives way to a new client"
                );
            }
        }
        let state = Arc::new(SlotState::new(source, self.origin));
        self.slots.push(state.clone());
        Ok(Slot(state))
    }

    /// Counts the refusal of `peer` in `stats` and logs it (as `service`) at most once per peer
    /// per interval; returns it.
    fn refuse(
        &mut self,
        why: Refusal,
        peer: Option<SocketAddr>,
        stats: &StoreStats,
        service: &'static str,
    ) -> Refusal {
        stats.count_refusal(why);
        if peer.is_none_or(|p| self.log.should_log(p.ip(), Instant::now())) {
            tracing::warn!(
                peer = %peer.map_or("?".into(), |p| p.to_string()),
                reason = why.label(),
                service,
                "store connection refused (logged once per peer per minute)"
            );
        }
        why
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn admits_only_listed_networks() {
        let nets = [net("198.18.0.0/24"), net("2001:db8::/32")];
        for (peer, ok) in [
            ("198.18.0.2", true),
            ("198.18.1.2", false),
            ("127.0.0.1", false),
            ("2001:db8::7", true),
            ("::ffff:198.18.0.9", true),
            ("2001:db9::1", false),
        ] {
            assert_eq!(admitted(&nets, peer.parse().unwrap()), ok, "{peer}");
        }
        assert!(!admitted(&[], "198.18.0.2".parse().unwrap()));
    }

    #[test]
    fn the_default_is_the_loopback_subnet_on_loopback_and_undefined_on_any_address() {
        let l = AllowList::default();
        assert_eq!(
            l.resolve("127.0.0.1".parse().unwrap()),
            Ok(vec![net("127.0.0.0/8")])
        );
        assert_eq!(
            l.resolve("0.0.0.0".parse().unwrap()),
            Err(AllowError::Unspecified)
        );
        assert_eq!(
            l.resolve("::".parse().unwrap()),
            Err(AllowError::Unspecified)
        );
        // TEST-NET-3: no interface of a test machine holds it.
        assert_eq!(
            l.resolve("203.0.113.77".parse().unwrap()),
            Err(AllowError::NotLocal)
        );
        let any = AllowList::any()
            .resolve("0.0.0.0".parse().unwrap())
            .unwrap();
        assert_eq!(any, vec![net("0.0.0.0/0"), net("::/0")]);
        assert!(admitted(&any, "203.0.113.77".parse().unwrap()));
        assert!(admitted(&any, "2001:db8::1".parse().unwrap()));
    }

    #[test]
    fn refusals_are_logged_once_per_peer_per_interval_with_a_bounded_memory() {
        let mut log = RefusalLog::default();
        let t0 = Instant::now();
        let a: IpAddr = "198.18.0.2".parse().unwrap();
        assert!(log.should_log(a, t0));
        assert!(!log.should_log(a, t0 + Duration::from_secs(1)));
        assert!(log.should_log("198.18.0.3".parse().unwrap(), t0));
        assert!(log.should_log(a, t0 + REFUSAL_LOG_INTERVAL));
        // A flood of distinct peers fills the memory; beyond it nothing more is logged until
        // the entries expire, and the memory never grows past its bound.
        let peer = |i: u32| IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
        let t1 = t0 + REFUSAL_LOG_INTERVAL;
        let logged = (0..3 * REFUSAL_LOG_PEERS as u32)
            .filter(|&i| log.should_log(peer(i), t1))
            .count();
        assert!(logged < REFUSAL_LOG_PEERS, "{logged}");
        assert!(log.last.len() <= REFUSAL_LOG_PEERS);
        assert!(log.should_log(peer(5_000), t1 + REFUSAL_LOG_INTERVAL));
    }
}
