//! What xwarp's device does not do, answered as libibverbs documents (NULL with errno, or an
//! errno) with one log line per kind: shared receive queues, address handles and multicast
//! (UD), extended queue pairs. Also the harmless helpers: fork support, rate conversions and
//! the enum-to-string functions.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use crate::abi::verbs::*;
use crate::{errno, log};

/// `ops.post_srq_recv`: no SRQ can exist.
pub(crate) unsafe extern "C" fn post_srq_recv(
    _srq: *mut c_void,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> c_int {
    if !bad.is_null() {
        // Safety: the caller's out-pointer.
        unsafe { *bad = wr };
    }
    libc::EOPNOTSUPP
}

/// `ibv_create_srq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(_pd: *mut IbvPd, _attr: *mut c_void) -> *mut IbvSrq {
    log::unsupported(
        "shared receive queues (ibv_create_srq)",
        "post receives on each queue pair",
    );
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_modify_srq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_srq(
    _srq: *mut IbvSrq,
    _attr: *mut c_void,
    _mask: c_int,
) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_query_srq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_srq(_srq: *mut IbvSrq, _attr: *mut c_void) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_destroy_srq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(_srq: *mut IbvSrq) -> c_int {
    libc::EINVAL
}

/// `ibv_create_ah`: address handles serve UD queue pairs, which iWARP has not.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah(_pd: *mut IbvPd, _attr: *mut IbvAhAttr) -> *mut c_void {
    log::unsupported(
        "address handles (ibv_create_ah)",
        "iWARP has no UD queue pairs",
    );
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_create_ah_from_wc`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_ah_from_wc(
    _pd: *mut IbvPd,
    _wc: *mut IbvWc,
    _grh: *mut c_void,
    _port: u8,
) -> *mut c_void {
    log::unsupported(
        "address handles (ibv_create_ah_from_wc)",
        "iWARP has no UD queue pairs",
    );
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_init_ah_from_wc`.
#[no_mangle]
pub unsafe extern "C" fn ibv_init_ah_from_wc(
    _ctx: *mut IbvContext,
    _port: u8,
    _wc: *mut IbvWc,
    _grh: *mut c_void,
    _attr: *mut IbvAhAttr,
) -> c_int {
    errno::fail(libc::EOPNOTSUPP)
}

/// `ibv_destroy_ah`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_ah(_ah: *mut c_void) -> c_int {
    libc::EINVAL
}

/// `ibv_attach_mcast`.
#[no_mangle]
pub unsafe extern "C" fn ibv_attach_mcast(
    _qp: *mut IbvQp,
    _gid: *const IbvGid,
    _lid: u16,
) -> c_int {
    log::unsupported(
        "multicast (ibv_attach_mcast)",
        "iWARP has no UD queue pairs",
    );
    libc::EOPNOTSUPP
}

/// `ibv_detach_mcast`.
#[no_mangle]
pub unsafe extern "C" fn ibv_detach_mcast(
    _qp: *mut IbvQp,
    _gid: *const IbvGid,
    _lid: u16,
) -> c_int {
    libc::EOPNOTSUPP
}

/// `ibv_qp_to_qp_ex`: extended queue pairs (`ibv_wr_*`) are not supported.
#[no_mangle]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(_qp: *mut IbvQp) -> *mut c_void {
    log::unsupported(
        "extended queue pairs (ibv_qp_to_qp_ex, ibv_wr_*)",
        "use ibv_post_send (perftest: --use_old_post_send)",
    );
    errno::null(libc::EOPNOTSUPP)
}

/// `ibv_fork_init`: registered memory is locked in place; nothing to prepare.
#[no_mangle]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `ibv_dontfork_range`.
#[no_mangle]
pub unsafe extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `ibv_dofork_range`.
#[no_mangle]
pub unsafe extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `ibv_rate_to_mult`: the static rates of IB (2.5 Gb/s units); 0 for none.
#[no_mangle]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    match rate {
        2 => 1,
        5 => 2,
        3 => 4,
        6 => 8,
        7 => 12,
        8 => 16,
        9 => 24,
        4 => 32,
        _ => -1,
    }
}

/// `mult_to_ibv_rate`.
#[no_mangle]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    match mult {
        1 => 2,
        2 => 5,
        4 => 3,
        8 => 6,
        12 => 7,
        16 => 8,
        24 => 9,
        32 => 4,
        _ => 0,
    }
}

/// `ibv_rate_to_mbps`.
#[no_mangle]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    match ibv_rate_to_mult(rate) {
        m if m > 0 => m * 2500,
        _ => 0,
    }
}

/// `mbps_to_ibv_rate`.
#[no_mangle]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    mult_to_ibv_rate(mbps / 2500)
}

const WC_STATUS: [&CStr; 23] = [
    c"success",
    c"local length error",
    c"local QP operation error",
    c"local EE context operation error",
    c"local protection error",
    c"Work Request Flushed Error",
    c"memory management operation error",
    c"bad response error",
    c"local access error",
    c"remote invalid request error",
    c"remote access error",
    c"remote operation error",
    c"transport retry counter exceeded",
    c"RNR retry counter exceeded",
    c"local RDD violation error",
    c"remote invalid RD request",
    c"aborted error",
    c"invalid EE context number",
    c"invalid EE context state",
    c"fatal error",
    c"response timeout error",
    c"general error",
    c"TM error",
];

/// `ibv_wc_status_str`.
#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    usize::try_from(status)
        .ok()
        .and_then(|i| WC_STATUS.get(i))
        .copied()
        .unwrap_or(c"unknown")
        .as_ptr()
}

/// `ibv_node_type_str`.
#[no_mangle]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    match node_type {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        _ => c"unknown",
    }
    .as_ptr()
}

/// `ibv_port_state_str`.
#[no_mangle]
pub extern "C" fn ibv_port_state_str(state: c_int) -> *const c_char {
    match state {
        0 => c"PORT_NOP",
        1 => c"PORT_DOWN",
        2 => c"PORT_INIT",
        3 => c"PORT_ARMED",
        4 => c"PORT_ACTIVE",
        5 => c"PORT_ACTIVE_DEFER",
        _ => c"invalid state",
    }
    .as_ptr()
}

/// `ibv_event_type_str`.
#[no_mangle]
pub extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    match event {
        0 => c"CQ error",
        1 => c"local work queue catastrophic error",
        2 => c"invalid request local work queue error",
        3 => c"local access violation work queue error",
        4 => c"communication established",
        5 => c"send queue drained",
        6 => c"path migrated",
        7 => c"path migration request error",
        8 => c"local catastrophic error",
        9 => c"port active",
        10 => c"port error",
        11 => c"LID change",
        12 => c"P_Key change",
        13 => c"SM change",
        14 => c"SRQ catastrophic error",
        15 => c"SRQ limit reached",
        16 => c"last WQE reached",
        17 => c"client reregistration",
        18 => c"GID table change",
        19 => c"WQ fatal",
        _ => c"unknown",
    }
    .as_ptr()
}

/// librdmacm's functions that xwarp does not support jump here with their name (see
/// `link/rdmacm_forward.S`): one log line, errno ENOSYS, -1.
#[no_mangle]
pub unsafe extern "C" fn xwarp_unsupported(name: *const c_char) -> c_int {
    let name = if name.is_null() {
        "?".into()
    } else {
        // Safety: the name string of rdmacm_forward.S, NUL-terminated.
        unsafe { CStr::from_ptr(name) }.to_string_lossy()
    };
    log::once(
        format_args!("fn {name}"),
        format_args!("{name} is not supported (rsocket, multicast, SRQ, ECE, endpoints): ENOSYS"),
    );
    errno::fail(libc::ENOSYS)
}
