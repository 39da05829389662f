//! The two ends of a simulated connection: which one a transport plays, and the addresses and
//! ports each end has (the same in every run, so runs differ by their seed alone).

/// The connecting side (simulation side A).
pub const CLIENT_IP: [u8; 4] = [198, 18, 0, 1];
/// The listening side (simulation side B).
pub const SERVER_IP: [u8; 4] = [198, 18, 0, 2];
/// Server port.
pub const SERVER_PORT: u16 = 5000;
/// Client port.
pub const CLIENT_PORT: u16 = 49152;

/// Which end of the connection a transport plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimRole {
    /// Active open.
    Client,
    /// Passive open.
    Server,
}
