//! librdmacm's structures as `<rdma/rdma_cma.h>` lays them out on x86_64 (rdma-core v44).
//! Sizes and the offsets applications use are asserted here; `tests/layout_probe.rs` compares
//! them with the C headers.

use std::mem::{offset_of, size_of};
use std::os::raw::{c_char, c_int, c_void};

use super::verbs::{IbvAhAttr, IbvCompChannel, IbvContext, IbvCq, IbvGid, IbvPd, IbvQp, IbvSrq};

/// `enum rdma_cm_event_type`.
pub mod event {
    use std::os::raw::c_int;
    pub const ADDR_RESOLVED: c_int = 0;
    pub const ADDR_ERROR: c_int = 1;
    pub const ROUTE_RESOLVED: c_int = 2;
    pub const ROUTE_ERROR: c_int = 3;
    pub const CONNECT_REQUEST: c_int = 4;
    pub const CONNECT_RESPONSE: c_int = 5;
    pub const CONNECT_ERROR: c_int = 6;
    pub const UNREACHABLE: c_int = 7;
    pub const REJECTED: c_int = 8;
    pub const ESTABLISHED: c_int = 9;
    pub const DISCONNECTED: c_int = 10;
    pub const DEVICE_REMOVAL: c_int = 11;
    pub const MULTICAST_JOIN: c_int = 12;
    pub const MULTICAST_ERROR: c_int = 13;
    pub const ADDR_CHANGE: c_int = 14;
    pub const TIMEWAIT_EXIT: c_int = 15;
}

/// `RDMA_PS_TCP`: the port space of reliable connections.
pub const RDMA_PS_TCP: c_int = 0x0106;
/// `RDMA_PS_IB`.
pub const RDMA_PS_IB: c_int = 0x013f;
/// `RAI_PASSIVE`.
pub const RAI_PASSIVE: c_int = 1;
/// `RAI_NUMERICHOST`.
pub const RAI_NUMERICHOST: c_int = 2;
/// `RAI_FAMILY`.
pub const RAI_FAMILY: c_int = 8;
/// `RDMA_OPTION_ID`.
pub const RDMA_OPTION_ID: c_int = 0;

/// `struct sockaddr_storage`'s place in `rdma_addr` (128 octets).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct SockaddrStorage {
    pub bytes: [u8; 128],
}

impl Default for SockaddrStorage {
    fn default() -> Self {
        SockaddrStorage { bytes: [0; 128] }
    }
}

/// `struct rdma_ib_addr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct RdmaIbAddr {
    pub sgid: IbvGid,
    pub dgid: IbvGid,
    pub pkey: u16,
}

/// `struct rdma_addr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct RdmaAddr {
    pub src: SockaddrStorage,
    pub dst: SockaddrStorage,
    pub ibaddr: RdmaIbAddr,
}

/// `struct rdma_route`.
#[repr(C)]
pub struct RdmaRoute {
    pub addr: RdmaAddr,
    pub path_rec: *mut c_void,
    pub num_paths: c_int,
}

/// `struct rdma_event_channel`.
#[repr(C)]
#[derive(Debug)]
pub struct RdmaEventChannel {
    pub fd: c_int,
}

/// `struct rdma_cm_id`.
#[repr(C)]
pub struct RdmaCmId {
    pub verbs: *mut IbvContext,
    pub channel: *mut RdmaEventChannel,
    pub context: *mut c_void,
    pub qp: *mut IbvQp,
    pub route: RdmaRoute,
    pub ps: c_int,
    pub port_num: u8,
    pub event: *mut RdmaCmEvent,
    pub send_cq_channel: *mut IbvCompChannel,
    pub send_cq: *mut IbvCq,
    pub recv_cq_channel: *mut IbvCompChannel,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub pd: *mut IbvPd,
    pub qp_type: c_int,
}

/// `struct rdma_conn_param`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RdmaConnParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RdmaUdParam {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: IbvAhAttr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// The `param` union of `struct rdma_cm_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union RdmaEventParam {
    pub conn: RdmaConnParam,
    pub ud: RdmaUdParam,
}

/// `struct rdma_cm_event`.
#[repr(C)]
pub struct RdmaCmEvent {
    pub id: *mut RdmaCmId,
    pub listen_id: *mut RdmaCmId,
    pub event: c_int,
    pub status: c_int,
    pub param: RdmaEventParam,
}

/// `struct rdma_addrinfo`.
#[repr(C)]
pub struct RdmaAddrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: libc::socklen_t,
    pub ai_dst_len: libc::socklen_t,
    pub ai_src_addr: *mut libc::sockaddr,
    pub ai_dst_addr: *mut libc::sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut RdmaAddrinfo,
}

const _: () = {
    assert!(size_of::<RdmaAddr>() == 296);
    assert!(size_of::<RdmaRoute>() == 312);
    assert!(size_of::<RdmaCmId>() == 416);
    assert!(offset_of!(RdmaCmId, route) == 32);
    assert!(offset_of!(RdmaCmId, ps) == 344);
    assert!(offset_of!(RdmaCmId, event) == 352);
    assert!(offset_of!(RdmaCmId, pd) == 400);
    assert!(offset_of!(RdmaCmId, qp_type) == 408);
    assert!(size_of::<RdmaConnParam>() == 24);
    assert!(offset_of!(RdmaConnParam, private_data_len) == 8);
    assert!(offset_of!(RdmaConnParam, responder_resources) == 9);
    assert!(offset_of!(RdmaConnParam, initiator_depth) == 10);
    assert!(offset_of!(RdmaConnParam, qp_num) == 16);
    assert!(size_of::<RdmaUdParam>() == 56);
    assert!(size_of::<RdmaCmEvent>() == 80);
    assert!(offset_of!(RdmaCmEvent, event) == 16);
    assert!(offset_of!(RdmaCmEvent, param) == 24);
    assert!(size_of::<RdmaEventChannel>() == 4);
    assert!(size_of::<RdmaAddrinfo>() == 96);
    assert!(offset_of!(RdmaAddrinfo, ai_connect) == 80);
};
