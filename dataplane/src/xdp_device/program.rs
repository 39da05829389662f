//! The XDP program of a device, shared by its lanes: one program and one port map serve every
//! queue, so a port stays steered while any lane still needs it.

use std::sync::Mutex;

use endpoint::FastMap;

use crate::xdp::{PortKind, SteerCounters, XdpError, XdpProgram};

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
    pub(crate) fn steer_port(&self, lane: u16, port: u16, kind: PortKind) -> Result<(), XdpError> {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        self.program.steer_port(port, kind)?;
        *users.entry(port).or_default() |= 1u64 << lane;
        Ok(())
    }

    /// `lane` no longer needs `port`: the program stops steering it when no lane does.
    pub(crate) fn unsteer_port(&self, lane: u16, port: u16) {
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        let mask = users.entry(port).or_default();
        *mask &= !(1u64 << lane);
        if *mask == 0 {
            users.remove(&port);
            let _ = self.program.unsteer_port(port);
        }
    }

    /// The program's counters.
    pub(crate) fn counters(&self) -> Result<SteerCounters, XdpError> {
        self.program.counters()
    }
}
