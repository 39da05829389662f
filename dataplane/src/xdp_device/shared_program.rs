//! The XDP program of a device, shared by its lanes: one program and one port map serve every
//! queue, so a port stays steered while any lane still needs it. Each lane holds a
//! [`LaneProgram`]: the shared program and its own lane bit.

use std::sync::{Arc, Mutex};

use endpoint::FastMap;

use afxdp::{PortKind, SteerCounters, XdpError, XdpProgram};

/// Most lanes a device runs (the lane mask's width; the program's socket map holds 64).
pub(crate) const MAX_LANES: u16 = 64;

/// The program and, per steered port, which lanes use it.
#[derive(Debug)]
pub(crate) struct SharedProgram {
    program: XdpProgram,
    /// Lane masks of the ports steered through [`SharedProgram::steer_port`].
    users: Mutex<FastMap<u16, u64>>,
}

impl SharedProgram {
    pub(crate) fn new(program: XdpProgram) -> Self {
        SharedProgram {
            program,
            users: Mutex::default(),
        }
    }

    /// The program.
    pub(crate) fn program(&self) -> &XdpProgram {
        &self.program
    }

    /// Steers `port` for `lane` (`lane < MAX_LANES`).
    fn steer_port(&self, lane: u16, port: u16, kind: PortKind) -> Result<(), XdpError> {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        self.program.steer_port(port, kind)?;
        *users.entry(port).or_default() |= 1u64 << lane;
        Ok(())
    }

    /// `lane` no longer needs `port`: the program stops steering it when no lane does.
    fn unsteer_port(&self, lane: u16, port: u16) {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        let mask = users.entry(port).or_default();
        *mask &= !(1u64 << lane);
        if *mask == 0 {
            users.remove(&port);
            let _ = self.program.unsteer_port(port);
        }
    }
}

/// One lane's handle on its device's program.
#[derive(Debug, Clone)]
pub(crate) struct LaneProgram {
    shared: Arc<SharedProgram>,
    lane: u16,
}

impl LaneProgram {
    /// Lane `lane`'s handle on `shared`.
    pub(crate) fn new(shared: Arc<SharedProgram>, lane: u16) -> Self {
        LaneProgram { shared, lane }
    }

    /// Steers `port` to the engines for this lane.
    pub(crate) fn steer_port(&self, port: u16, kind: PortKind) -> Result<(), XdpError> {
        self.shared.steer_port(self.lane, port, kind)
    }

    /// This lane no longer needs `port` (unsteered once no lane does).
    pub(crate) fn unsteer_port(&self, port: u16) {
        self.shared.unsteer_port(self.lane, port);
    }

    /// The program's counters.
    pub(crate) fn counters(&self) -> Result<SteerCounters, XdpError> {
        self.shared.program.counters()
    }
}
