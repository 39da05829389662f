//! libibverbs' structures as `<infiniband/verbs.h>` lays them out on x86_64 (rdma-core v44, the
//! Debian 12 headers; `verbs_context` as rdma-core's master lays it out). Each size and the
//! offsets the inline verbs and the applications use are asserted here; `tests/layout_probe.rs`
//! compares them with a C program compiled against the headers.
//!
//! Slots libibverbs has and xwarp never fills are reserved arrays of pointers (`Slot`): they
//! stay NULL, which the inline verbs read as "not supported".

use std::mem::{offset_of, size_of};
use std::os::raw::{c_char, c_int, c_uint, c_void};

/// A function-pointer slot left NULL.
pub type Slot = usize;

/// `ibv_post_send` / `ibv_post_recv` as `ibv_context_ops` holds them.
pub type PostSendFn =
    unsafe extern "C" fn(*mut IbvQp, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int;
/// `ops.post_recv`.
pub type PostRecvFn =
    unsafe extern "C" fn(*mut IbvQp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int;
/// `ops.post_srq_recv`.
pub type PostSrqRecvFn =
    unsafe extern "C" fn(*mut c_void, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int;
/// `ops.poll_cq`.
pub type PollCqFn = unsafe extern "C" fn(*mut IbvCq, c_int, *mut IbvWc) -> c_int;
/// `ops.req_notify_cq`.
pub type ReqNotifyCqFn = unsafe extern "C" fn(*mut IbvCq, c_int) -> c_int;
/// `verbs_context.query_port`.
pub type QueryPortFn = unsafe extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr, usize) -> c_int;

/// `enum ibv_node_type`: RNIC.
pub const IBV_NODE_RNIC: c_int = 4;
/// `enum ibv_transport_type`: iWARP.
pub const IBV_TRANSPORT_IWARP: c_int = 1;
/// `enum ibv_port_state`: ACTIVE.
pub const IBV_PORT_ACTIVE: c_int = 4;
/// `IBV_LINK_LAYER_ETHERNET`.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `enum ibv_mtu` values 1..5 are 256..4096.
pub const IBV_MTU_1024: c_int = 3;
/// `IBV_MTU_4096`.
pub const IBV_MTU_4096: c_int = 5;
/// `IBV_GID_TYPE_ROCE_V2` is what an IP-based GID is closest to; iWARP devices report IB (0).
pub const IBV_GID_TYPE_IB: c_uint = 0;

/// `enum ibv_qp_type`: reliable connected.
pub const IBV_QPT_RC: c_int = 2;

/// `enum ibv_qp_state`.
pub mod qp_state {
    use std::os::raw::c_int;
    /// RESET.
    pub const RESET: c_int = 0;
    /// INIT.
    pub const INIT: c_int = 1;
    /// RTR.
    pub const RTR: c_int = 2;
    /// RTS.
    pub const RTS: c_int = 3;
    /// SQD.
    pub const SQD: c_int = 4;
    /// SQE.
    pub const SQE: c_int = 5;
    /// ERR.
    pub const ERR: c_int = 6;
}

/// `IBV_QP_STATE` in `enum ibv_qp_attr_mask` (the other bits are accepted and ignored).
pub const IBV_QP_STATE: c_int = 1;
/// `IBV_QP_CUR_STATE`.
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;

/// `enum ibv_wr_opcode`.
pub mod wr_opcode {
    use std::os::raw::c_uint;
    /// RDMA Write.
    pub const RDMA_WRITE: c_uint = 0;
    /// RDMA Write with immediate (not in iWARP's RDMAP).
    pub const RDMA_WRITE_WITH_IMM: c_uint = 1;
    /// Send.
    pub const SEND: c_uint = 2;
    /// Send with immediate (not in iWARP's RDMAP).
    pub const SEND_WITH_IMM: c_uint = 3;
    /// RDMA Read.
    pub const RDMA_READ: c_uint = 4;
    /// Send with Invalidate.
    pub const SEND_WITH_INV: c_uint = 9;
}

/// `enum ibv_send_flags`.
pub mod send_flags {
    use std::os::raw::c_uint;
    /// Fence.
    pub const FENCE: c_uint = 1;
    /// Signaled: a completion on success.
    pub const SIGNALED: c_uint = 1 << 1;
    /// Solicited event.
    pub const SOLICITED: c_uint = 1 << 2;
    /// Inline data.
    pub const INLINE: c_uint = 1 << 3;
}

/// `enum ibv_wc_status`.
pub mod wc_status {
    use std::os::raw::c_int;
    /// Success.
    pub const SUCCESS: c_int = 0;
    /// Local length error.
    pub const LOC_LEN_ERR: c_int = 1;
    /// Local QP operation error.
    pub const LOC_QP_OP_ERR: c_int = 2;
    /// Local protection error (a bad lkey).
    pub const LOC_PROT_ERR: c_int = 4;
    /// Flushed by an errored QP.
    pub const WR_FLUSH_ERR: c_int = 5;
    /// Remote access error.
    pub const REM_ACCESS_ERR: c_int = 10;
    /// Remote operation error.
    pub const REM_OP_ERR: c_int = 11;
    /// Fatal error.
    pub const FATAL_ERR: c_int = 19;
    /// General error.
    pub const GENERAL_ERR: c_int = 21;
}

/// `enum ibv_wc_opcode`.
pub mod wc_opcode {
    use std::os::raw::c_int;
    /// Send.
    pub const SEND: c_int = 0;
    /// RDMA Write.
    pub const RDMA_WRITE: c_int = 1;
    /// RDMA Read.
    pub const RDMA_READ: c_int = 2;
    /// Receive.
    pub const RECV: c_int = 128;
}

/// `IBV_WC_WITH_INV` in `enum ibv_wc_flags`.
pub const IBV_WC_WITH_INV: c_uint = 1 << 3;

/// `enum ibv_access_flags`.
pub mod access {
    use std::os::raw::c_int;
    /// Local write.
    pub const LOCAL_WRITE: c_int = 1;
    /// Remote write.
    pub const REMOTE_WRITE: c_int = 1 << 1;
    /// Remote read.
    pub const REMOTE_READ: c_int = 1 << 2;
    /// Remote atomic (not in iWARP).
    pub const REMOTE_ATOMIC: c_int = 1 << 3;
    /// Memory-window bind.
    pub const MW_BIND: c_int = 1 << 4;
    /// Zero-based addressing.
    pub const ZERO_BASED: c_int = 1 << 5;
    /// On-demand paging.
    pub const ON_DEMAND: c_int = 1 << 6;
    /// Huge pages hint.
    pub const HUGETLB: c_int = 1 << 7;
    /// The optional range: flags from bit 20 to bit 29 a provider may ignore
    /// (`IBV_ACCESS_OPTIONAL_RANGE`, relaxed ordering among them).
    pub const OPTIONAL_RANGE: c_int = 0x3ff0_0000;
}

/// `struct _ibv_device_ops`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvDeviceOps {
    /// Unused by applications.
    pub dummy: [Slot; 2],
}

/// `struct ibv_device`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvDevice {
    /// `_ops`.
    pub ops: IbvDeviceOps,
    /// `node_type`.
    pub node_type: c_int,
    /// `transport_type`.
    pub transport_type: c_int,
    /// `name`.
    pub name: [c_char; 64],
    /// `dev_name`.
    pub dev_name: [c_char; 64],
    /// `dev_path`.
    pub dev_path: [c_char; 256],
    /// `ibdev_path`.
    pub ibdev_path: [c_char; 256],
}

/// `struct ibv_context_ops`: the inline verbs call through it.
#[repr(C)]
#[derive(Debug)]
pub struct IbvContextOps {
    /// `_compat_query_device` .. `_compat_dereg_mr`.
    pub compat_early: [Slot; 7],
    /// `alloc_mw` (NULL: `ibv_alloc_mw` says EOPNOTSUPP).
    pub alloc_mw: Slot,
    /// `bind_mw`.
    pub bind_mw: Slot,
    /// `dealloc_mw`.
    pub dealloc_mw: Slot,
    /// `_compat_create_cq`.
    pub compat_create_cq: Slot,
    /// `poll_cq`.
    pub poll_cq: Option<PollCqFn>,
    /// `req_notify_cq`.
    pub req_notify_cq: Option<ReqNotifyCqFn>,
    /// `_compat_cq_event` .. `_compat_destroy_srq`.
    pub compat_mid: [Slot; 7],
    /// `post_srq_recv`.
    pub post_srq_recv: Option<PostSrqRecvFn>,
    /// `_compat_create_qp` .. `_compat_destroy_qp`.
    pub compat_qp: [Slot; 4],
    /// `post_send`.
    pub post_send: Option<PostSendFn>,
    /// `post_recv`.
    pub post_recv: Option<PostRecvFn>,
    /// `_compat_create_ah` .. `_compat_async_event`.
    pub compat_late: [Slot; 5],
}

/// `struct ibv_context`.
#[repr(C)]
pub struct IbvContext {
    /// `device`.
    pub device: *mut IbvDevice,
    /// `ops`.
    pub ops: IbvContextOps,
    /// `cmd_fd`.
    pub cmd_fd: c_int,
    /// `async_fd`.
    pub async_fd: c_int,
    /// `num_comp_vectors`.
    pub num_comp_vectors: c_int,
    /// `mutex`.
    pub mutex: libc::pthread_mutex_t,
    /// `abi_compat`: `UINTPTR_MAX` marks a `verbs_context`.
    pub abi_compat: *mut c_void,
}

/// `struct verbs_context` with `context` last. New operations are added at its top, so each
/// one's distance from `context` never changes; this is master's layout (six more slots on top
/// than v44's), and `sz` says how large it is.
#[repr(C)]
pub struct VerbsContext {
    /// Operations newer than v44 (NULL).
    pub newer: [Slot; 6],
    /// `query_port`.
    pub query_port: Option<QueryPortFn>,
    /// `advise_mr` .. `query_rt_values`.
    pub reserved_a: [Slot; 24],
    /// `create_cq_ex` (NULL: `ibv_create_cq_ex` says EOPNOTSUPP).
    pub create_cq_ex: Slot,
    /// `priv`.
    pub priv_: *mut c_void,
    /// `query_device_ex` (NULL: the inline falls back to `ibv_query_device`).
    pub query_device_ex: Slot,
    /// `ibv_destroy_flow` .. `open_qp`.
    pub reserved_b: [Slot; 5],
    /// `create_qp_ex` (NULL: `ibv_create_qp_ex` falls back to `ibv_create_qp`).
    pub create_qp_ex: Slot,
    /// `get_srq_num` .. `close_xrcd`.
    pub reserved_c: [Slot; 4],
    /// `_ABI_placeholder3`.
    pub placeholder3: u64,
    /// `sz`: the size of this structure.
    pub sz: usize,
    /// `context`.
    pub context: IbvContext,
}

/// `struct ibv_device_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvDeviceAttr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` as master lays it out (v44's ends before `active_speed_ex`: 52
/// octets; the legacy `ibv_query_port` writes 48). Written up to the length the caller
/// passes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvPortAttr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
    pub active_speed_ex: u32,
}

/// The length of v44's `struct ibv_port_attr`.
pub const PORT_ATTR_V44_LEN: usize = 52;
/// The length `_compat_ibv_port_attr` (the exported `ibv_query_port`) writes.
pub const PORT_ATTR_COMPAT_LEN: usize = 48;

/// `union ibv_gid` (aligned as its `global` member's two `__be64`).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbvGid {
    pub raw: [u8; 16],
}

/// `struct ibv_pd`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvPd {
    pub context: *mut IbvContext,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvMr {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvCompChannel {
    pub context: *mut IbvContext,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut IbvCompChannel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_srq` (never made: SRQs are not supported).
#[repr(C)]
pub struct IbvSrq {
    pub context: *mut IbvContext,
    pub srq_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub handle: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub cap: IbvQpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvQpAttr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr` (the `wr` union as its `rdma` member; the rest reserved).
#[repr(C)]
#[derive(Debug)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    pub opcode: c_uint,
    pub send_flags: c_uint,
    /// `imm_data` or `invalidate_rkey`.
    pub imm_data: u32,
    /// `wr.rdma.remote_addr`.
    pub rdma_remote_addr: u64,
    /// `wr.rdma.rkey`.
    pub rdma_rkey: u32,
    /// The rest of the `wr` union (its `atomic` member is the largest).
    pub wr_rest: [u32; 5],
    /// `qp_type.xrc.remote_srqn`.
    pub xrc_remote_srqn: u32,
    /// The `bind_mw` / `tso` union.
    pub bind_mw: [u64; 6],
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Debug)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` or `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_async_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbvAsyncEvent {
    /// The `element` union (a CQ, QP, SRQ or WQ pointer, or the port number).
    pub element: *mut c_void,
    pub event_type: c_int,
}

/// `enum ibv_event_type`.
pub mod event_type {
    use std::os::raw::c_int;
    /// CQ error (overrun).
    pub const CQ_ERR: c_int = 0;
    /// A QP went to the error state.
    pub const QP_FATAL: c_int = 1;
    /// A QP reached its last WQE.
    pub const QP_LAST_WQE_REACHED: c_int = 16;
}

// The sizes and offsets the inline verbs and the applications rely on (x86_64).
const _: () = {
    assert!(size_of::<IbvDevice>() == 664);
    assert!(offset_of!(IbvDevice, node_type) == 16);
    assert!(offset_of!(IbvDevice, transport_type) == 20);
    assert!(offset_of!(IbvDevice, name) == 24);
    assert!(offset_of!(IbvDevice, dev_name) == 88);
    assert!(offset_of!(IbvDevice, dev_path) == 152);
    assert!(offset_of!(IbvDevice, ibdev_path) == 408);
    assert!(size_of::<IbvContext>() == 328);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, poll_cq) == 96);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, req_notify_cq) == 104);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, post_srq_recv) == 168);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, post_send) == 208);
    assert!(offset_of!(IbvContext, ops) + offset_of!(IbvContextOps, post_recv) == 216);
    assert!(offset_of!(IbvContext, cmd_fd) == 264);
    assert!(offset_of!(IbvContext, async_fd) == 268);
    assert!(offset_of!(IbvContext, num_comp_vectors) == 272);
    assert!(offset_of!(IbvContext, mutex) == 280);
    assert!(offset_of!(IbvContext, abi_compat) == 320);
    assert!(size_of::<VerbsContext>() == 696);
    assert!(offset_of!(VerbsContext, context) - offset_of!(VerbsContext, sz) == 8);
    assert!(offset_of!(VerbsContext, context) - offset_of!(VerbsContext, create_qp_ex) == 56);
    assert!(offset_of!(VerbsContext, context) - offset_of!(VerbsContext, query_device_ex) == 104);
    assert!(offset_of!(VerbsContext, context) - offset_of!(VerbsContext, create_cq_ex) == 120);
    assert!(offset_of!(VerbsContext, context) - offset_of!(VerbsContext, query_port) == 320);
    assert!(size_of::<IbvDeviceAttr>() == 232);
    assert!(offset_of!(IbvDeviceAttr, max_qp_rd_atom) == 144);
    assert!(offset_of!(IbvDeviceAttr, phys_port_cnt) == 227);
    assert!(size_of::<IbvPortAttr>() == 56);
    assert!(offset_of!(IbvPortAttr, link_layer) == 46);
    assert!(offset_of!(IbvPortAttr, port_cap_flags2) == 48);
    assert!(size_of::<IbvPd>() == 16);
    assert!(size_of::<IbvMr>() == 48);
    assert!(offset_of!(IbvMr, lkey) == 36);
    assert!(offset_of!(IbvMr, rkey) == 40);
    assert!(size_of::<IbvCompChannel>() == 16);
    assert!(offset_of!(IbvCompChannel, fd) == 8);
    assert!(size_of::<IbvCq>() == 128);
    assert!(offset_of!(IbvCq, channel) == 8);
    assert!(offset_of!(IbvCq, cq_context) == 16);
    assert!(offset_of!(IbvCq, cqe) == 28);
    assert!(offset_of!(IbvCq, comp_events_completed) == 120);
    assert!(size_of::<IbvSrq>() == 128);
    assert!(size_of::<IbvQp>() == 160);
    assert!(offset_of!(IbvQp, pd) == 16);
    assert!(offset_of!(IbvQp, send_cq) == 24);
    assert!(offset_of!(IbvQp, recv_cq) == 32);
    assert!(offset_of!(IbvQp, qp_num) == 52);
    assert!(offset_of!(IbvQp, state) == 56);
    assert!(offset_of!(IbvQp, qp_type) == 60);
    assert!(size_of::<IbvQpInitAttr>() == 64);
    assert!(offset_of!(IbvQpInitAttr, cap) == 32);
    assert!(offset_of!(IbvQpInitAttr, sq_sig_all) == 56);
    assert!(size_of::<IbvAhAttr>() == 32);
    assert!(size_of::<IbvQpAttr>() == 144);
    assert!(offset_of!(IbvQpAttr, cap) == 36);
    assert!(offset_of!(IbvQpAttr, max_rd_atomic) == 126);
    assert!(offset_of!(IbvQpAttr, rate_limit) == 136);
    assert!(size_of::<IbvSge>() == 16);
    assert!(size_of::<IbvSendWr>() == 128);
    assert!(offset_of!(IbvSendWr, rdma_remote_addr) == 40);
    assert!(offset_of!(IbvSendWr, rdma_rkey) == 48);
    assert!(size_of::<IbvRecvWr>() == 32);
    assert!(size_of::<IbvWc>() == 48);
    assert!(offset_of!(IbvWc, byte_len) == 20);
    assert!(offset_of!(IbvWc, qp_num) == 28);
    assert!(size_of::<IbvAsyncEvent>() == 16);
};
