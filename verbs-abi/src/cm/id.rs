//! Connection identifiers (`rdma_cm_id`): creation, binding, address and route resolution,
//! their queue pair, options and addresses. The connection itself is in `connect.rs`.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::addr;
use super::channel::{ConnInfo, XwEvent, XwEventChannel};
use super::connect::ListenTask;
use super::connection_events::{ConnectionEvents, Phase};
use super::event_acks::EventAcks;
use crate::abi::cm::*;
use crate::abi::verbs::*;
use crate::handle::CObject;
use crate::verbs::context::XwContext;
use crate::verbs::device::{registry, XwDevice};
use crate::verbs::pd_mr::XwPd;
use crate::verbs::qp::{self, XwQp};
use crate::{errno, log};

/// A connection identifier.
#[repr(C)]
pub(crate) struct XwCmId {
    c: UnsafeCell<RdmaCmId>,
    magic: AtomicU64,
    pub(crate) channel: Arc<XwEventChannel>,
    st: Mutex<IdState>,
    /// Its connection's phase, moved with the events that report it.
    pub(crate) conn: ConnectionEvents,
    /// The events about it the application holds.
    pub(crate) acks: Arc<EventAcks>,
}

/// What an identifier is bound to and doing.
#[derive(Default)]
pub(crate) struct IdState {
    /// Its device's context (rdma_cm's own, one per device).
    pub(crate) ctx: Option<Arc<XwContext>>,
    pub(crate) src: Option<SocketAddr>,
    pub(crate) dst: Option<SocketAddr>,
    pub(crate) qp: Option<Arc<XwQp>>,
    /// Listening: the accepting thread.
    pub(crate) listener: Option<ListenTask>,
    /// A connection request not yet accepted or rejected, and the IRD and ORD it offered.
    pub(crate) incoming: Option<(dataplane::Incoming, u8, u8)>,
}

// Safety: the C structure is written under `st`'s lock (or before sharing); the application
// reads it after the events that announce the changes (ordered by the channel's lock).
unsafe impl Sync for XwCmId {}
// Safety: as above.
unsafe impl Send for XwCmId {}

// Safety: `c` is the first field of a repr(C) struct; `magic` is the field below.
unsafe impl CObject for XwCmId {
    type C = RdmaCmId;
    const C_OFFSET: usize = 0;
    const MAGIC: u64 = 0x7877_6964_0000_0001;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// rdma_cm's contexts, one per device, opened on first use and kept (as librdmacm keeps
/// its own).
pub(crate) fn cm_context(dev: &'static XwDevice) -> Result<Arc<XwContext>, String> {
    static CONTEXTS: OnceLock<Mutex<HashMap<usize, Arc<XwContext>>>> = OnceLock::new();
    let mut map = CONTEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    let key = dev as *const XwDevice as usize;
    if let Some(c) = map.get(&key) {
        return Ok(c.clone());
    }
    let c = XwContext::open(dev)?;
    // The application sees it as id->verbs and never closes it: rdma_cm's count.
    let _ = XwContext::into_c(c.clone());
    map.insert(key, c.clone());
    Ok(c)
}

/// The device serving local address `ip`: the one whose interface has it, else the first
/// (the kernel transport serves any local address).
pub(crate) fn device_for(ip: IpAddr) -> Option<&'static XwDevice> {
    let devs = &registry().devices;
    devs.iter()
        .find(|d| d.iface.addrs.contains(&ip))
        .or_else(|| devs.first())
}

impl XwCmId {
    /// A new identifier on `channel` with the application's `context`.
    pub(crate) fn new(
        channel: Arc<XwEventChannel>,
        context: *mut c_void,
        ps: c_int,
    ) -> Arc<XwCmId> {
        let c = RdmaCmId {
            verbs: std::ptr::null_mut(),
            channel: channel.c_ptr(),
            context,
            qp: std::ptr::null_mut(),
            route: RdmaRoute {
                addr: RdmaAddr::default(),
                path_rec: std::ptr::null_mut(),
                num_paths: 0,
            },
            ps,
            port_num: 0,
            event: std::ptr::null_mut(),
            send_cq_channel: std::ptr::null_mut(),
            send_cq: std::ptr::null_mut(),
            recv_cq_channel: std::ptr::null_mut(),
            recv_cq: std::ptr::null_mut(),
            srq: std::ptr::null_mut(),
            pd: std::ptr::null_mut(),
            qp_type: IBV_QPT_RC,
        };
        Arc::new(XwCmId {
            c: UnsafeCell::new(c),
            magic: AtomicU64::new(Self::MAGIC),
            channel,
            st: Mutex::new(IdState::default()),
            conn: ConnectionEvents::default(),
            acks: Arc::default(),
        })
    }

    /// Its state, locked.
    pub(crate) fn state(&self) -> MutexGuard<'_, IdState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The C structure, for the library's writes (under the state lock).
    ///
    /// # Safety
    /// The caller holds the state lock and keeps no other reference to the structure.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn c_mut(&self) -> &mut RdmaCmId {
        // Safety: the caller's promise.
        unsafe { &mut *self.c.get() }
    }

    /// The application's `context`.
    pub(crate) fn app_context(&self) -> *mut c_void {
        // Safety: a read of a field the application set at creation.
        unsafe { (*self.c.get()).context }
    }

    /// Queues an event about this identifier on its channel.
    pub(crate) fn report(
        &self,
        listen: *mut RdmaCmId,
        event: c_int,
        status: c_int,
        conn: ConnInfo,
    ) {
        log::debug(format_args!(
            "cm id {:p}: event {event} status {status}",
            self.c_ptr()
        ));
        self.channel.push(XwEvent::new(
            self.c_ptr(),
            listen,
            event,
            status,
            conn,
            self.acks.clone(),
        ));
    }

    /// Records its device context, and the addresses (their GIDs too), in `st` and in C.
    pub(crate) fn set_addresses(
        &self,
        st: &mut IdState,
        ctx: Option<Arc<XwContext>>,
        src: Option<SocketAddr>,
        dst: Option<SocketAddr>,
    ) {
        // Safety: under the state lock (`st` is its guard's).
        let c = unsafe { self.c_mut() };
        if let Some(ctx) = ctx {
            c.verbs = ctx.c_ptr();
            c.port_num = 1;
            st.ctx = Some(ctx);
        }
        if let Some(s) = src {
            c.route.addr.src = addr::to_storage(s).0;
            c.route.addr.ibaddr.sgid.raw = addr::gid_of(s.ip());
            st.src = Some(s);
        }
        if let Some(d) = dst {
            c.route.addr.dst = addr::to_storage(d).0;
            c.route.addr.ibaddr.dgid.raw = addr::gid_of(d.ip());
            st.dst = Some(d);
        }
    }
}

/// `rdma_create_id`: reliable connections (RDMA_PS_TCP, or RDMA_PS_IB) only.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_create_id(
    channel: *mut RdmaEventChannel,
    id: *mut *mut RdmaCmId,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    if id.is_null() {
        return errno::fail(libc::EINVAL);
    }
    if ps != RDMA_PS_TCP && ps != RDMA_PS_IB {
        log::unsupported(
            "an rdma_cm port space other than RDMA_PS_TCP",
            "iWARP carries reliable connections only",
        );
        return errno::fail(libc::EOPNOTSUPP);
    }
    let ch = if channel.is_null() {
        log::unsupported(
            "rdma_create_id without an event channel (synchronous mode)",
            "create one with rdma_create_event_channel",
        );
        return errno::fail(libc::EINVAL);
    } else {
        // Safety: the application passes its channel.
        match unsafe { XwEventChannel::clone_arc(channel) } {
            Some(c) => c,
            None => return errno::fail(libc::EINVAL),
        }
    };
    // Safety: the caller's out-pointer.
    unsafe { *id = XwCmId::into_c(XwCmId::new(ch, context, ps)) };
    0
}

/// `rdma_destroy_id`: stops listening, rejects a request not answered, disconnects; returns
/// once the events about it the application took are acknowledged.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_destroy_id(id: *mut RdmaCmId) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::release(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    // No event about it is queued from here on (the connecting thread and the watcher may
    // still hold it).
    me.conn.destroy();
    let (listener, incoming, qp) = {
        let mut st = me.state();
        (st.listener.take(), st.incoming.take(), st.qp.clone())
    };
    if let Some(l) = listener {
        l.stop();
    }
    if let Some((inc, _, _)) = incoming {
        let _ = inc.reject(&[]);
    }
    if let Some(q) = qp {
        if !q.connection_ended() {
            q.fail();
        }
    }
    let held = me.acks.destroy(ACK_WAIT);
    if held > 0 {
        log::always(format_args!(
            "rdma_destroy_id: {held} event(s) about this identifier not acknowledged \
             (rdma_ack_cm_event) after {} s; destroyed anyway",
            ACK_WAIT.as_secs()
        ));
    }
    0
}

/// How long `rdma_destroy_id` waits for the events about the identifier to be acknowledged
/// (librdmacm waits without end).
const ACK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `rdma_bind_addr`: a specific address picks its device (its context becomes `verbs`); the
/// wildcard leaves the choice to the connection request. Port 0 gets a free port now.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_bind_addr(id: *mut RdmaCmId, sa: *mut libc::sockaddr) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::borrow(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    // Safety: the application's socket address.
    let Some(a) = (unsafe { addr::from_c(sa) }) else {
        return errno::fail(libc::EAFNOSUPPORT);
    };
    let mut st = me.state();
    if st.listener.is_some() || st.src.is_some() {
        return errno::fail(libc::EINVAL);
    }
    let ctx = if a.ip().is_unspecified() {
        None
    } else {
        let local = std::net::UdpSocket::bind(SocketAddr::new(a.ip(), 0)).is_ok();
        let Some(dev) = device_for(a.ip()).filter(|_| local) else {
            return errno::fail(libc::EADDRNOTAVAIL);
        };
        match cm_context(dev) {
            Ok(c) => Some(c),
            Err(why) => {
                log::always(why);
                return errno::fail(libc::ENODEV);
            }
        }
    };
    // The port is chosen now, as the kernel chooses it at bind: applications read it with
    // rdma_get_src_port before they listen (qperf does).
    let a = if a.port() == 0 {
        match std::net::TcpListener::bind(a).and_then(|l| l.local_addr()) {
            Ok(chosen) => SocketAddr::new(a.ip(), chosen.port()),
            Err(e) => return errno::fail(e.raw_os_error().unwrap_or(libc::EADDRINUSE)),
        }
    } else {
        a
    };
    me.set_addresses(&mut st, ctx, Some(a), None);
    0
}

/// `rdma_resolve_addr`: the source address (given, or the kernel's route to `dst`) picks the
/// device; ADDR_RESOLVED (or ADDR_ERROR) follows on the channel.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_resolve_addr(
    id: *mut RdmaCmId,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    _timeout_ms: c_int,
) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::borrow(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    // Safety: the application's socket addresses.
    let (src, dst) = unsafe { (addr::from_c(src), addr::from_c(dst)) };
    let Some(dst) = dst else {
        return errno::fail(libc::EINVAL);
    };
    let mut st = me.state();
    let src_ip = match src
        .or(st.src)
        .map(|s| s.ip())
        .filter(|ip| !ip.is_unspecified())
    {
        Some(ip) => Ok(ip),
        None => addr::route_source(dst),
    };
    let resolved = src_ip
        .map_err(|e| -e.raw_os_error().unwrap_or(libc::EHOSTUNREACH))
        .and_then(|ip| {
            let dev = device_for(ip).ok_or(-libc::ENODEV)?;
            let ctx = cm_context(dev).map_err(|why| {
                log::always(why);
                -libc::ENODEV
            })?;
            Ok((ip, ctx))
        });
    match resolved {
        Ok((ip, ctx)) => {
            let port = st.src.map_or(0, |s| s.port());
            me.set_addresses(
                &mut st,
                Some(ctx),
                Some(SocketAddr::new(ip, port)),
                Some(dst),
            );
            drop(st);
            me.report(
                std::ptr::null_mut(),
                event::ADDR_RESOLVED,
                0,
                ConnInfo::default(),
            );
        }
        Err(status) => {
            drop(st);
            me.report(
                std::ptr::null_mut(),
                event::ADDR_ERROR,
                status,
                ConnInfo::default(),
            );
        }
    }
    0
}

/// `rdma_resolve_route`: iWARP's route is the IP route; ROUTE_RESOLVED follows at once.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_resolve_route(id: *mut RdmaCmId, _timeout_ms: c_int) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::borrow(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    if me.state().dst.is_none() {
        return errno::fail(libc::EINVAL);
    }
    me.report(
        std::ptr::null_mut(),
        event::ROUTE_RESOLVED,
        0,
        ConnInfo::default(),
    );
    0
}

/// `rdma_create_qp`: a queue pair on the identifier's device (in `pd`, or the context's own
/// domain when NULL), in INIT.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_create_qp(
    id: *mut RdmaCmId,
    pd: *mut IbvPd,
    attr: *mut IbvQpInitAttr,
) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::borrow(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    if attr.is_null() {
        return errno::fail(libc::EINVAL);
    }
    let mut st = me.state();
    let Some(ctx) = st.ctx.clone() else {
        return errno::fail(libc::EINVAL);
    };
    if st.qp.is_some() {
        return errno::fail(libc::EINVAL);
    }
    let pd = if pd.is_null() {
        let p = *ctx
            .default_pd
            .get_or_init(|| XwPd::into_c(XwPd::new(ctx.clone())) as usize);
        p as *mut IbvPd
    } else {
        pd
    };
    // Safety: the application's domain (or the context's own).
    let Some(p) = (unsafe { XwPd::clone_arc(pd) }) else {
        return errno::fail(libc::EINVAL);
    };
    if !Arc::ptr_eq(&p.ctx, &ctx) {
        return errno::fail(libc::EINVAL);
    }
    // Safety: attr points to the caller's struct ibv_qp_init_attr.
    let q = match qp::create(p, unsafe { &mut *attr }) {
        Ok(q) => q,
        Err(e) => return errno::fail(e),
    };
    q.set_c_state(qp_state::INIT);
    st.qp = Some(q.clone());
    // Safety: under the state lock.
    let c = unsafe { me.c_mut() };
    c.qp = XwQp::into_c(q);
    c.pd = pd;
    0
}

/// `rdma_create_qp_ex`: as `rdma_create_qp` when only the domain is given (comp_mask
/// IBV_QP_INIT_ATTR_PD); other extended attributes are not supported.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_create_qp_ex(id: *mut RdmaCmId, attr: *mut c_void) -> c_int {
    if attr.is_null() {
        return errno::fail(libc::EINVAL);
    }
    // Safety: attr points to a struct ibv_qp_init_attr_ex, which begins with the fields of
    // ibv_qp_init_attr, then comp_mask (at 64) and pd (at 72).
    let (mask, pd) = unsafe {
        let b = attr.cast::<u8>();
        (
            b.add(64).cast::<u32>().read(),
            b.add(72).cast::<*mut IbvPd>().read(),
        )
    };
    if mask & !1 != 0 {
        log::unsupported(
            "rdma_create_qp_ex with attributes beyond the protection domain",
            "use rdma_create_qp",
        );
        return errno::fail(libc::EOPNOTSUPP);
    }
    // Safety: as above; the first 64 octets are an ibv_qp_init_attr.
    unsafe { xwarp_rdma_create_qp(id, pd, attr.cast()) }
}

/// `rdma_destroy_qp`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_destroy_qp(id: *mut RdmaCmId) {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::borrow(id) }) else {
        return;
    };
    let mut st = me.state();
    st.qp = None;
    // Safety: under the state lock.
    let c = unsafe { me.c_mut() };
    let qp = std::mem::replace(&mut c.qp, std::ptr::null_mut());
    if !qp.is_null() {
        // Safety: the queue pair rdma_create_qp made (the application's count).
        unsafe { crate::verbs::qp::ibv_destroy_qp(qp) };
    }
}

/// `rdma_set_option`: the RDMA_OPTION_ID options (TOS, REUSEADDR, AFONLY, ACK_TIMEOUT) are
/// accepted and have no effect; others are not supported.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_set_option(
    id: *mut RdmaCmId,
    level: c_int,
    optname: c_int,
    _optval: *mut c_void,
    _optlen: usize,
) -> c_int {
    // Safety: the application passes its identifier.
    if unsafe { XwCmId::borrow(id) }.is_none() {
        return errno::fail(libc::EINVAL);
    }
    if level == RDMA_OPTION_ID && (0..=3).contains(&optname) {
        return 0;
    }
    log::unsupported(
        "this rdma_set_option option",
        "only RDMA_OPTION_ID options are known",
    );
    errno::fail(libc::ENOSYS)
}

fn port_of(st: &SockaddrStorage) -> u16 {
    addr::from_storage(st).map_or(0, |a| a.port()).to_be()
}

/// `rdma_get_src_port` (network order).
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_get_src_port(id: *mut RdmaCmId) -> u16 {
    // Safety: the application passes its identifier.
    unsafe { XwCmId::borrow(id) }.map_or(0, |me| {
        let _st = me.state();
        // Safety: under the state lock.
        port_of(unsafe { &me.c_mut().route.addr.src })
    })
}

/// `rdma_get_dst_port` (network order).
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_get_dst_port(id: *mut RdmaCmId) -> u16 {
    // Safety: the application passes its identifier.
    unsafe { XwCmId::borrow(id) }.map_or(0, |me| {
        let _st = me.state();
        // Safety: under the state lock.
        port_of(unsafe { &me.c_mut().route.addr.dst })
    })
}

/// `rdma_get_local_addr`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_get_local_addr(id: *mut RdmaCmId) -> *mut libc::sockaddr {
    if id.is_null() {
        return std::ptr::null_mut();
    }
    // Safety: the application's identifier; a pointer into it, not a read.
    unsafe { std::ptr::addr_of_mut!((*id).route.addr.src).cast() }
}

/// `rdma_get_peer_addr`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_get_peer_addr(id: *mut RdmaCmId) -> *mut libc::sockaddr {
    if id.is_null() {
        return std::ptr::null_mut();
    }
    // Safety: the application's identifier; a pointer into it, not a read.
    unsafe { std::ptr::addr_of_mut!((*id).route.addr.dst).cast() }
}

/// `rdma_get_devices`: rdma_cm's context of every device, NULL-terminated (free with
/// `rdma_free_devices`).
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_get_devices(num: *mut c_int) -> *mut *mut IbvContext {
    let ctxs: Vec<*mut IbvContext> = registry()
        .devices
        .iter()
        .filter_map(|d| cm_context(d).ok())
        .map(|c| c.c_ptr())
        .collect();
    // Safety: calloc of n+1 pointers; freed by rdma_free_devices.
    let list = unsafe { libc::calloc(ctxs.len() + 1, std::mem::size_of::<*mut IbvContext>()) }
        .cast::<*mut IbvContext>();
    if list.is_null() {
        return errno::null(libc::ENOMEM);
    }
    for (i, c) in ctxs.iter().enumerate() {
        // Safety: i < n + 1.
        unsafe { *list.add(i) = *c };
    }
    if !num.is_null() {
        // Safety: the caller's int.
        unsafe { *num = ctxs.len() as c_int };
    }
    list
}

/// `rdma_free_devices`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_free_devices(list: *mut *mut IbvContext) {
    // Safety: the array rdma_get_devices allocated (or NULL).
    unsafe { libc::free(list.cast()) };
}

/// `rdma_init_qp_attr`: iWARP queue pairs are moved by rdma_cm itself; the state to use is
/// reported (INIT before the connection, RTS after).
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_init_qp_attr(
    id: *mut RdmaCmId,
    attr: *mut IbvQpAttr,
    mask: *mut c_int,
) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::borrow(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    if attr.is_null() || mask.is_null() {
        return errno::fail(libc::EINVAL);
    }
    let state = if matches!(me.conn.phase(), Phase::Established | Phase::Disconnected) {
        qp_state::RTS
    } else {
        qp_state::INIT
    };
    // Safety: the caller's structures.
    unsafe {
        attr.write(IbvQpAttr {
            qp_state: state,
            port_num: 1,
            ..IbvQpAttr::default()
        });
        *mask = IBV_QP_STATE;
    }
    0
}

/// `rdma_establish`: nothing to do on iWARP.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_establish(_id: *mut RdmaCmId) -> c_int {
    0
}

/// `rdma_notify`: nothing to do on iWARP.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_notify(_id: *mut RdmaCmId, _event: c_int) -> c_int {
    0
}
