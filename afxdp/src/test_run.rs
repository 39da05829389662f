//! Running the loaded steering program on one frame without a device (`BPF_PROG_TEST_RUN`):
//! what the program decides for a frame, for the test that it agrees with the endpoint's
//! classifier (`afxdp/tests/frame_agreement.rs`).

use libbpf_sys as bpf;

use super::{XdpError, XdpProgram};

/// An XDP program's return value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAction {
    /// `XDP_ABORTED`.
    Aborted,
    /// `XDP_DROP`.
    Drop,
    /// `XDP_PASS`.
    Pass,
    /// `XDP_TX`.
    Tx,
    /// `XDP_REDIRECT`.
    Redirect,
    /// Anything else.
    Other(u32),
}

impl XdpAction {
    fn from_retval(v: u32) -> Self {
        match v {
            bpf::XDP_ABORTED => Self::Aborted,
            bpf::XDP_DROP => Self::Drop,
            bpf::XDP_PASS => Self::Pass,
            bpf::XDP_TX => Self::Tx,
            bpf::XDP_REDIRECT => Self::Redirect,
            v => Self::Other(v),
        }
    }
}

impl XdpProgram {
    /// Runs the program once on `frame` (an Ethernet frame, 14 octets to about a page) as if
    /// it arrived on rx queue 0, and returns its action. The program's maps and counters are
    /// the live ones; nothing is redirected or sent (the kernel only reports the action).
    pub fn test_run(&self, frame: &[u8]) -> Result<XdpAction, XdpError> {
        if self.prog_fd < 0 {
            return Err(XdpError::Invalid("program detached"));
        }
        let mut opts = bpf::bpf_test_run_opts {
            sz: std::mem::size_of::<bpf::bpf_test_run_opts>() as _,
            data_in: frame.as_ptr().cast(),
            data_size_in: u32::try_from(frame.len())
                .map_err(|_| XdpError::Invalid("frame too long"))?,
            repeat: 1,
            ..Default::default()
        };
        // Safety: `opts` is a correctly sized options struct that outlives the call; the kernel
        // copies `data_size_in` octets from `data_in` (a live slice of that length) and writes
        // no output (no data_out or ctx_out given).
        let ret = unsafe { bpf::bpf_prog_test_run_opts(self.prog_fd, &mut opts) };
        if ret < 0 {
            return Err(XdpError::from_neg("BPF_PROG_TEST_RUN", ret));
        }
        Ok(XdpAction::from_retval(opts.retval))
    }
}
