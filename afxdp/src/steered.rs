//! The usual pairing: the steering program on an interface and an AF_XDP socket registered for
//! one of its queues, with some ports steered.

use super::{AttachPolicy, PortKind, XdpError, XdpProgram, XskConfig, XskQueue};

/// Attaches the program to `ifname`, binds an [`XskQueue`] on `queue_id`, registers it in the
/// XSKMAP and steers `ports`. Drop the queue before the program or after: both work.
pub fn steered_queue(
    ifname: &str,
    queue_id: u32,
    policy: AttachPolicy,
    cfg: XskConfig,
    ports: &[(u16, PortKind)],
) -> Result<(XdpProgram, XskQueue), XdpError> {
    let prog = XdpProgram::attach(ifname, policy)?;
    let q = XskQueue::new(ifname, queue_id, cfg)?;
    prog.register_socket(queue_id, q.fd())?;
    for &(port, kind) in ports {
        prog.steer_port(port, kind)?;
    }
    Ok((prog, q))
}
