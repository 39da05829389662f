//! A device's lanes: one engine per receive queue behind one XDP program. Queue pairs live on
//! the lane that owns their flow; the device spreads active opens over the lanes and listens
//! on all of them.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{XdpDevice, XdpListener};
use crate::counters::DeviceCounters;
use crate::cq::Drive;
use crate::engine::{HandOff, HandOffCounters};
use crate::{ConnectError, ConnectionConfig, DeviceError, QpInit, XdpConfig};

/// The lanes of an AF_XDP device (at least one).
#[derive(Debug)]
pub(crate) struct XdpLanes {
    lanes: Vec<Arc<XdpDevice>>,
    handoff: Arc<HandOff>,
    /// The lane the next active open goes to.
    next: AtomicUsize,
}

impl XdpLanes {
    /// Opens the lanes of `cfg` ([`XdpDevice::open_lanes`]).
    pub(crate) fn open(
        cfg: &XdpConfig,
        counters: Arc<DeviceCounters>,
    ) -> Result<Self, DeviceError> {
        let (lanes, handoff) = XdpDevice::open_lanes(cfg, counters)?;
        Ok(XdpLanes {
            lanes: lanes.into_iter().map(Arc::new).collect(),
            handoff,
            next: AtomicUsize::new(0),
        })
    }

    /// The first lane: what every lane shares (address, namespace, settings) is read here.
    pub(crate) fn first(&self) -> &Arc<XdpDevice> {
        &self.lanes[0]
    }

    /// All lanes, in queue order.
    pub(crate) fn all(&self) -> &[Arc<XdpDevice>] {
        &self.lanes
    }

    /// The only lane of a one-queue device.
    pub(crate) fn single(&self) -> Option<&Arc<XdpDevice>> {
        match self.lanes.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Packets handed between lanes so far.
    pub(crate) fn handoff_counters(&self) -> HandOffCounters {
        self.handoff.counters()
    }

    /// Active open on the next lane in turn (it takes a local port whose flow it owns).
    pub(crate) fn connect(
        &self,
        addr: SocketAddr,
        init: QpInit,
        config: &ConnectionConfig,
        private_data: &[u8],
    ) -> Result<(super::XdpQp, crate::qp::Established), ConnectError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        self.lanes[i].connect(addr, init, config, private_data)
    }

    /// Listens on `addr` on every lane.
    pub(crate) fn listen(
        &self,
        addr: SocketAddr,
        config: ConnectionConfig,
    ) -> Result<XdpListener, ConnectError> {
        XdpListener::on_lanes(&self.lanes, addr, config)
    }
}

impl Drive for XdpLanes {
    /// One round of every inline lane; with several lanes, a lane another thread is driving
    /// right now is skipped rather than waited for.
    fn drive(&self) {
        match self.lanes.as_slice() {
            [one] => one.shared.drive(),
            lanes => {
                for lane in lanes {
                    lane.shared.try_drive();
                }
            }
        }
    }
}
