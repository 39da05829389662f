//! The layout facts of [`super::verbs`] and [`super::cm`] as a table: for each, a C expression
//! over the rdma-core headers and the value the Rust type has. `tests/layout_probe.rs`
//! compiles a C program printing every expression and compares.

use std::mem::{offset_of, size_of};

use super::cm::*;
use super::verbs::*;

/// One fact: its name, the C expression that computes it, and the Rust value.
#[derive(Debug, Clone, Copy)]
pub struct Fact {
    /// What it is ("ibv_qp.qp_num").
    pub name: &'static str,
    /// A C expression of type `long` over `<infiniband/verbs.h>` and `<rdma/rdma_cma.h>`.
    pub c_expr: &'static str,
    /// The Rust layout's value.
    pub rust: i64,
}

macro_rules! size {
    ($rust:ty, $c:literal) => {
        Fact {
            name: concat!("sizeof ", $c),
            c_expr: concat!("(long)sizeof(struct ", $c, ")"),
            rust: size_of::<$rust>() as i64,
        }
    };
}

macro_rules! off {
    ($rust:ty, $($rf:ident).+ ; $c:literal, $cf:literal) => {
        Fact {
            name: concat!($c, ".", $cf),
            c_expr: concat!("(long)offsetof(struct ", $c, ", ", $cf, ")"),
            rust: offset_of!($rust, $($rf).+) as i64,
        }
    };
}

/// An offset from `verbs_context.context` (negative: above it), the distance the inline verbs
/// use.
macro_rules! vctx {
    ($rf:ident ; $cf:literal) => {
        Fact {
            name: concat!("verbs_context.", $cf, " - context"),
            c_expr: concat!(
                "(long)offsetof(struct verbs_context, ",
                $cf,
                ") - (long)offsetof(struct verbs_context, context)"
            ),
            rust: offset_of!(VerbsContext, $rf) as i64 - offset_of!(VerbsContext, context) as i64,
        }
    };
}

/// Every layout fact the probe checks.
pub fn facts() -> Vec<Fact> {
    vec![
        size!(IbvDevice, "ibv_device"),
        off!(IbvDevice, node_type; "ibv_device", "node_type"),
        off!(IbvDevice, transport_type; "ibv_device", "transport_type"),
        off!(IbvDevice, name; "ibv_device", "name"),
        off!(IbvDevice, dev_name; "ibv_device", "dev_name"),
        off!(IbvDevice, dev_path; "ibv_device", "dev_path"),
        off!(IbvDevice, ibdev_path; "ibv_device", "ibdev_path"),
        size!(IbvContext, "ibv_context"),
        off!(IbvContext, ops.poll_cq; "ibv_context", "ops.poll_cq"),
        off!(IbvContext, ops.req_notify_cq; "ibv_context", "ops.req_notify_cq"),
        off!(IbvContext, ops.alloc_mw; "ibv_context", "ops.alloc_mw"),
        off!(IbvContext, ops.bind_mw; "ibv_context", "ops.bind_mw"),
        off!(IbvContext, ops.post_srq_recv; "ibv_context", "ops.post_srq_recv"),
        off!(IbvContext, ops.post_send; "ibv_context", "ops.post_send"),
        off!(IbvContext, ops.post_recv; "ibv_context", "ops.post_recv"),
        off!(IbvContext, cmd_fd; "ibv_context", "cmd_fd"),
        off!(IbvContext, async_fd; "ibv_context", "async_fd"),
        off!(IbvContext, num_comp_vectors; "ibv_context", "num_comp_vectors"),
        off!(IbvContext, mutex; "ibv_context", "mutex"),
        off!(IbvContext, abi_compat; "ibv_context", "abi_compat"),
        vctx!(sz; "sz"),
        vctx!(query_port; "query_port"),
        vctx!(create_cq_ex; "create_cq_ex"),
        vctx!(priv_; "priv"),
        vctx!(query_device_ex; "query_device_ex"),
        vctx!(create_qp_ex; "create_qp_ex"),
        size!(IbvDeviceAttr, "ibv_device_attr"),
        off!(IbvDeviceAttr, node_guid; "ibv_device_attr", "node_guid"),
        off!(IbvDeviceAttr, max_mr_size; "ibv_device_attr", "max_mr_size"),
        off!(IbvDeviceAttr, vendor_id; "ibv_device_attr", "vendor_id"),
        off!(IbvDeviceAttr, max_qp_wr; "ibv_device_attr", "max_qp_wr"),
        off!(IbvDeviceAttr, max_sge; "ibv_device_attr", "max_sge"),
        off!(IbvDeviceAttr, max_cqe; "ibv_device_attr", "max_cqe"),
        off!(IbvDeviceAttr, max_qp_rd_atom; "ibv_device_attr", "max_qp_rd_atom"),
        off!(IbvDeviceAttr, max_qp_init_rd_atom; "ibv_device_attr", "max_qp_init_rd_atom"),
        off!(IbvDeviceAttr, atomic_cap; "ibv_device_attr", "atomic_cap"),
        off!(IbvDeviceAttr, max_srq; "ibv_device_attr", "max_srq"),
        off!(IbvDeviceAttr, max_pkeys; "ibv_device_attr", "max_pkeys"),
        off!(IbvDeviceAttr, phys_port_cnt; "ibv_device_attr", "phys_port_cnt"),
        off!(IbvPortAttr, state; "ibv_port_attr", "state"),
        off!(IbvPortAttr, active_mtu; "ibv_port_attr", "active_mtu"),
        off!(IbvPortAttr, gid_tbl_len; "ibv_port_attr", "gid_tbl_len"),
        off!(IbvPortAttr, max_msg_sz; "ibv_port_attr", "max_msg_sz"),
        off!(IbvPortAttr, pkey_tbl_len; "ibv_port_attr", "pkey_tbl_len"),
        off!(IbvPortAttr, active_width; "ibv_port_attr", "active_width"),
        off!(IbvPortAttr, active_speed; "ibv_port_attr", "active_speed"),
        off!(IbvPortAttr, phys_state; "ibv_port_attr", "phys_state"),
        off!(IbvPortAttr, link_layer; "ibv_port_attr", "link_layer"),
        off!(IbvPortAttr, flags; "ibv_port_attr", "flags"),
        off!(IbvPortAttr, port_cap_flags2; "ibv_port_attr", "port_cap_flags2"),
        Fact {
            name: "sizeof ibv_port_attr (v44)",
            c_expr: "(long)sizeof(struct ibv_port_attr)",
            rust: PORT_ATTR_V44_LEN as i64,
        },
        Fact {
            name: "IBV_ACCESS_OPTIONAL_RANGE",
            c_expr: "(long)IBV_ACCESS_OPTIONAL_RANGE",
            rust: access::OPTIONAL_RANGE as i64,
        },
        Fact {
            name: "IBV_ACCESS_RELAXED_ORDERING",
            c_expr: "(long)IBV_ACCESS_RELAXED_ORDERING",
            rust: 1 << 20,
        },
        Fact {
            name: "sizeof ibv_gid",
            c_expr: "(long)sizeof(union ibv_gid)",
            rust: size_of::<IbvGid>() as i64,
        },
        size!(IbvPd, "ibv_pd"),
        off!(IbvPd, handle; "ibv_pd", "handle"),
        size!(IbvMr, "ibv_mr"),
        off!(IbvMr, pd; "ibv_mr", "pd"),
        off!(IbvMr, addr; "ibv_mr", "addr"),
        off!(IbvMr, length; "ibv_mr", "length"),
        off!(IbvMr, lkey; "ibv_mr", "lkey"),
        off!(IbvMr, rkey; "ibv_mr", "rkey"),
        size!(IbvCompChannel, "ibv_comp_channel"),
        off!(IbvCompChannel, fd; "ibv_comp_channel", "fd"),
        off!(IbvCompChannel, refcnt; "ibv_comp_channel", "refcnt"),
        size!(IbvCq, "ibv_cq"),
        off!(IbvCq, channel; "ibv_cq", "channel"),
        off!(IbvCq, cq_context; "ibv_cq", "cq_context"),
        off!(IbvCq, cqe; "ibv_cq", "cqe"),
        off!(IbvCq, mutex; "ibv_cq", "mutex"),
        off!(IbvCq, cond; "ibv_cq", "cond"),
        off!(IbvCq, comp_events_completed; "ibv_cq", "comp_events_completed"),
        off!(IbvCq, async_events_completed; "ibv_cq", "async_events_completed"),
        size!(IbvSrq, "ibv_srq"),
        size!(IbvQp, "ibv_qp"),
        off!(IbvQp, qp_context; "ibv_qp", "qp_context"),
        off!(IbvQp, pd; "ibv_qp", "pd"),
        off!(IbvQp, send_cq; "ibv_qp", "send_cq"),
        off!(IbvQp, recv_cq; "ibv_qp", "recv_cq"),
        off!(IbvQp, srq; "ibv_qp", "srq"),
        off!(IbvQp, handle; "ibv_qp", "handle"),
        off!(IbvQp, qp_num; "ibv_qp", "qp_num"),
        off!(IbvQp, state; "ibv_qp", "state"),
        off!(IbvQp, qp_type; "ibv_qp", "qp_type"),
        off!(IbvQp, mutex; "ibv_qp", "mutex"),
        off!(IbvQp, events_completed; "ibv_qp", "events_completed"),
        size!(IbvQpCap, "ibv_qp_cap"),
        size!(IbvQpInitAttr, "ibv_qp_init_attr"),
        off!(IbvQpInitAttr, send_cq; "ibv_qp_init_attr", "send_cq"),
        off!(IbvQpInitAttr, srq; "ibv_qp_init_attr", "srq"),
        off!(IbvQpInitAttr, cap; "ibv_qp_init_attr", "cap"),
        off!(IbvQpInitAttr, qp_type; "ibv_qp_init_attr", "qp_type"),
        off!(IbvQpInitAttr, sq_sig_all; "ibv_qp_init_attr", "sq_sig_all"),
        size!(IbvGlobalRoute, "ibv_global_route"),
        size!(IbvAhAttr, "ibv_ah_attr"),
        off!(IbvAhAttr, port_num; "ibv_ah_attr", "port_num"),
        size!(IbvQpAttr, "ibv_qp_attr"),
        off!(IbvQpAttr, qp_access_flags; "ibv_qp_attr", "qp_access_flags"),
        off!(IbvQpAttr, cap; "ibv_qp_attr", "cap"),
        off!(IbvQpAttr, ah_attr; "ibv_qp_attr", "ah_attr"),
        off!(IbvQpAttr, alt_ah_attr; "ibv_qp_attr", "alt_ah_attr"),
        off!(IbvQpAttr, pkey_index; "ibv_qp_attr", "pkey_index"),
        off!(IbvQpAttr, max_rd_atomic; "ibv_qp_attr", "max_rd_atomic"),
        off!(IbvQpAttr, max_dest_rd_atomic; "ibv_qp_attr", "max_dest_rd_atomic"),
        off!(IbvQpAttr, min_rnr_timer; "ibv_qp_attr", "min_rnr_timer"),
        off!(IbvQpAttr, alt_timeout; "ibv_qp_attr", "alt_timeout"),
        off!(IbvQpAttr, rate_limit; "ibv_qp_attr", "rate_limit"),
        size!(IbvSge, "ibv_sge"),
        off!(IbvSge, length; "ibv_sge", "length"),
        off!(IbvSge, lkey; "ibv_sge", "lkey"),
        size!(IbvSendWr, "ibv_send_wr"),
        off!(IbvSendWr, next; "ibv_send_wr", "next"),
        off!(IbvSendWr, sg_list; "ibv_send_wr", "sg_list"),
        off!(IbvSendWr, num_sge; "ibv_send_wr", "num_sge"),
        off!(IbvSendWr, opcode; "ibv_send_wr", "opcode"),
        off!(IbvSendWr, send_flags; "ibv_send_wr", "send_flags"),
        off!(IbvSendWr, imm_data; "ibv_send_wr", "imm_data"),
        off!(IbvSendWr, imm_data; "ibv_send_wr", "invalidate_rkey"),
        off!(IbvSendWr, rdma_remote_addr; "ibv_send_wr", "wr.rdma.remote_addr"),
        off!(IbvSendWr, rdma_rkey; "ibv_send_wr", "wr.rdma.rkey"),
        off!(IbvSendWr, xrc_remote_srqn; "ibv_send_wr", "qp_type.xrc.remote_srqn"),
        off!(IbvSendWr, bind_mw; "ibv_send_wr", "bind_mw"),
        size!(IbvRecvWr, "ibv_recv_wr"),
        off!(IbvRecvWr, num_sge; "ibv_recv_wr", "num_sge"),
        size!(IbvWc, "ibv_wc"),
        off!(IbvWc, status; "ibv_wc", "status"),
        off!(IbvWc, opcode; "ibv_wc", "opcode"),
        off!(IbvWc, vendor_err; "ibv_wc", "vendor_err"),
        off!(IbvWc, byte_len; "ibv_wc", "byte_len"),
        off!(IbvWc, imm_data; "ibv_wc", "invalidated_rkey"),
        off!(IbvWc, qp_num; "ibv_wc", "qp_num"),
        off!(IbvWc, wc_flags; "ibv_wc", "wc_flags"),
        off!(IbvWc, sl; "ibv_wc", "sl"),
        size!(IbvAsyncEvent, "ibv_async_event"),
        off!(IbvAsyncEvent, event_type; "ibv_async_event", "event_type"),
        size!(RdmaAddr, "rdma_addr"),
        off!(RdmaAddr, dst; "rdma_addr", "dst_addr"),
        off!(RdmaAddr, ibaddr; "rdma_addr", "addr.ibaddr"),
        size!(RdmaRoute, "rdma_route"),
        off!(RdmaRoute, path_rec; "rdma_route", "path_rec"),
        off!(RdmaRoute, num_paths; "rdma_route", "num_paths"),
        size!(RdmaCmId, "rdma_cm_id"),
        off!(RdmaCmId, channel; "rdma_cm_id", "channel"),
        off!(RdmaCmId, context; "rdma_cm_id", "context"),
        off!(RdmaCmId, qp; "rdma_cm_id", "qp"),
        off!(RdmaCmId, route; "rdma_cm_id", "route"),
        off!(RdmaCmId, ps; "rdma_cm_id", "ps"),
        off!(RdmaCmId, port_num; "rdma_cm_id", "port_num"),
        off!(RdmaCmId, event; "rdma_cm_id", "event"),
        off!(RdmaCmId, send_cq_channel; "rdma_cm_id", "send_cq_channel"),
        off!(RdmaCmId, send_cq; "rdma_cm_id", "send_cq"),
        off!(RdmaCmId, recv_cq_channel; "rdma_cm_id", "recv_cq_channel"),
        off!(RdmaCmId, recv_cq; "rdma_cm_id", "recv_cq"),
        off!(RdmaCmId, srq; "rdma_cm_id", "srq"),
        off!(RdmaCmId, pd; "rdma_cm_id", "pd"),
        off!(RdmaCmId, qp_type; "rdma_cm_id", "qp_type"),
        size!(RdmaConnParam, "rdma_conn_param"),
        off!(RdmaConnParam, private_data_len; "rdma_conn_param", "private_data_len"),
        off!(RdmaConnParam, responder_resources; "rdma_conn_param", "responder_resources"),
        off!(RdmaConnParam, initiator_depth; "rdma_conn_param", "initiator_depth"),
        off!(RdmaConnParam, rnr_retry_count; "rdma_conn_param", "rnr_retry_count"),
        off!(RdmaConnParam, srq; "rdma_conn_param", "srq"),
        off!(RdmaConnParam, qp_num; "rdma_conn_param", "qp_num"),
        size!(RdmaUdParam, "rdma_ud_param"),
        off!(RdmaUdParam, ah_attr; "rdma_ud_param", "ah_attr"),
        off!(RdmaUdParam, qkey; "rdma_ud_param", "qkey"),
        size!(RdmaCmEvent, "rdma_cm_event"),
        off!(RdmaCmEvent, listen_id; "rdma_cm_event", "listen_id"),
        off!(RdmaCmEvent, event; "rdma_cm_event", "event"),
        off!(RdmaCmEvent, status; "rdma_cm_event", "status"),
        off!(RdmaCmEvent, param; "rdma_cm_event", "param"),
        size!(RdmaEventChannel, "rdma_event_channel"),
        size!(RdmaAddrinfo, "rdma_addrinfo"),
        off!(RdmaAddrinfo, ai_src_len; "rdma_addrinfo", "ai_src_len"),
        off!(RdmaAddrinfo, ai_src_addr; "rdma_addrinfo", "ai_src_addr"),
        off!(RdmaAddrinfo, ai_dst_addr; "rdma_addrinfo", "ai_dst_addr"),
        off!(RdmaAddrinfo, ai_route_len; "rdma_addrinfo", "ai_route_len"),
        off!(RdmaAddrinfo, ai_connect_len; "rdma_addrinfo", "ai_connect_len"),
        off!(RdmaAddrinfo, ai_connect; "rdma_addrinfo", "ai_connect"),
        off!(RdmaAddrinfo, ai_next; "rdma_addrinfo", "ai_next"),
    ]
}
