//! xwarp data plane: the verbs-like API over the kernel and AF_XDP transports.

pub mod xdp;
