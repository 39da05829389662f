//! Connections on MPA: `rdma_connect` (an MPA Request carrying the private data raw, IRD and
//! ORD in Revision 2's block), `rdma_listen` (a thread accepting on the device's listener,
//! reporting CONNECT_REQUEST), `rdma_accept` / `rdma_reject` (the MPA Reply), and
//! `rdma_disconnect`. Events as Linux delivers them for iWARP: ESTABLISHED on both sides
//! (the passive one right after its Reply is sent), REJECTED for a Reject or a refused or
//! reset connection (with the peer's private data), UNREACHABLE for a timeout, DISCONNECTED
//! on both sides (also on the side that disconnected) once, found by a watcher thread when
//! the peer closes.

use std::io::ErrorKind;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::channel::ConnInfo;
use super::connection_events::Phase;
use super::id::{cm_context, device_for, XwCmId};
use crate::abi::cm::*;
use crate::handle::CObject;
use crate::verbs::device::{registry, MAX_RD_ATOM};
use crate::{errno, log};
use dataplane::{AcceptError, ConnectError, ConnectionConfig};

/// How often an accepting thread looks whether its listener was destroyed.
const ACCEPT_SLICE: Duration = Duration::from_millis(20);
/// How often the watcher looks for connections the peer ended.
const WATCH_EVERY: Duration = Duration::from_millis(5);
/// How long a refused connection waits before its next try. `rdma_connect` tries again up
/// to `retry_count` times (at most 7, as rdma_cm's connection retries): a peer that is about
/// to listen (perftest's server listens again after a handshake, while its client resolves
/// at once here) is not reported REJECTED at the first refusal.
const REFUSED_RETRY: Duration = Duration::from_millis(100);
/// The IRD and ORD a Revision 1 peer is taken to offer (it sends none).
const REV1_DEPTH: u8 = 16;

/// A listening identifier's accepting thread.
pub(crate) struct ListenTask {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl ListenTask {
    /// Stops the thread and waits for it: the port is free for a new listener afterwards.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}

/// The private data of `param` (empty when none).
///
/// # Safety
/// `param` is NULL or the application's `rdma_conn_param`, its private data valid for its
/// length.
unsafe fn private_data(param: *const RdmaConnParam) -> Vec<u8> {
    if param.is_null() {
        return Vec::new();
    }
    // Safety: the caller's promise.
    let p = unsafe { &*param };
    if p.private_data.is_null() || p.private_data_len == 0 {
        return Vec::new();
    }
    // Safety: the caller's promise on the private data.
    unsafe {
        std::slice::from_raw_parts(p.private_data.cast::<u8>(), usize::from(p.private_data_len))
    }
    .to_vec()
}

/// True when the peer refused the TCP connection (no listener yet): worth another try.
fn refused(e: &ConnectError) -> bool {
    match e {
        ConnectError::Io(io) => io.kind() == ErrorKind::ConnectionRefused,
        _ => false,
    }
}

/// The event, status and private data a failed connect reports.
fn failure(e: &ConnectError) -> (c_int, c_int, Vec<u8>) {
    match e {
        ConnectError::Rejected { private_data } => {
            (event::REJECTED, -libc::ECONNREFUSED, private_data.clone())
        }
        ConnectError::Io(io) => match io.kind() {
            ErrorKind::ConnectionRefused => (event::REJECTED, -libc::ECONNREFUSED, Vec::new()),
            ErrorKind::ConnectionReset => (event::REJECTED, -libc::ECONNRESET, Vec::new()),
            ErrorKind::TimedOut => (event::UNREACHABLE, -libc::ETIMEDOUT, Vec::new()),
            ErrorKind::HostUnreachable | ErrorKind::NetworkUnreachable => {
                (event::UNREACHABLE, -libc::EHOSTUNREACH, Vec::new())
            }
            _ => (
                event::CONNECT_ERROR,
                -io.raw_os_error().unwrap_or(libc::ECONNABORTED),
                Vec::new(),
            ),
        },
        ConnectError::Startup(mpa::StartupError::Timeout) => {
            (event::UNREACHABLE, -libc::ETIMEDOUT, Vec::new())
        }
        ConnectError::Startup(mpa::StartupError::ConnectionClosed) => {
            (event::REJECTED, -libc::ECONNRESET, Vec::new())
        }
        _ => (event::CONNECT_ERROR, -libc::EPROTO, Vec::new()),
    }
}

/// `rdma_connect`: the MPA Request leaves from a thread; ESTABLISHED, REJECTED, UNREACHABLE
/// or CONNECT_ERROR follows on the channel. The identifier needs its queue pair
/// (`rdma_create_qp`); its receives are handed to the connection before the Reply arrives.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_connect(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::clone_arc(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    // Safety: the application's parameters.
    let pdata = unsafe { private_data(param) };
    let (ird, ord, retries) = if param.is_null() {
        (0, 0, 0)
    } else {
        // Safety: as above.
        let p = unsafe { &*param };
        (
            p.responder_resources,
            p.initiator_depth,
            p.retry_count.min(7),
        )
    };
    if c_int::from(ird) > MAX_RD_ATOM || c_int::from(ord) > MAX_RD_ATOM {
        return errno::fail(libc::EINVAL);
    }
    let (qp, dst, ctx) = {
        let st = me.state();
        match (st.qp.clone(), st.dst, st.ctx.clone()) {
            (Some(q), Some(d), Some(c)) => (q, d, c),
            (None, ..) => {
                log::unsupported(
                    "rdma_connect without a queue pair",
                    "create one with rdma_create_qp first",
                );
                return errno::fail(libc::EINVAL);
            }
            _ => return errno::fail(libc::EINVAL),
        }
    };
    let Some((init, recvs)) = qp.begin_connect() else {
        return errno::fail(libc::EISCONN);
    };
    let mut cfg = ConnectionConfig::default()
        .with_ird(u32::from(ird))
        .with_ord(u32::from(ord));
    // Peer-to-peer mode with a zero-length RDMA Write as the ready-to-receive message: the
    // passive side may then send first (ib_write_lat's server does), which MPA otherwise
    // forbids until the active side's first FPDU.
    cfg.mpa.p2p_offer = mpa::RtrTypes::only(mpa::RtrType::Write);
    let spawned = dataplane::library_thread::spawn("xwarp-cm-connect", move || {
        let mut attempt = 0;
        let r = loop {
            let r = ctx
                .engine
                .connect_with(dst, init.clone(), &cfg, &pdata, |dq| {
                    qp.hand_over(dq, &recvs);
                    Ok(())
                });
            match r {
                Err(e) if refused(&e) && attempt < retries => {
                    attempt += 1;
                    std::thread::sleep(REFUSED_RETRY);
                }
                r => break r,
            }
        };
        match r {
            Ok(dq) => {
                let peer = dq.peer_private_data().to_vec();
                established(&me, &qp, dq, peer);
            }
            Err(e) => {
                qp.fail();
                let (ev, status, pd) = failure(&e);
                let info = ConnInfo {
                    private_data: pd,
                    ..ConnInfo::default()
                };
                me.conn
                    .fail(|| me.report(std::ptr::null_mut(), ev, status, info));
            }
        }
    });
    match spawned {
        Ok(_) => 0,
        Err(_) => errno::fail(libc::EAGAIN),
    }
}

/// The connection `dq` of `id`'s queue pair is made: the queue pair takes it, ESTABLISHED
/// reports the IRD (as initiator_depth) and ORD (as responder_resources) in force and the
/// peer's private data (the active side's), then the watcher looks after it (so its
/// DISCONNECTED comes after). An identifier destroyed meanwhile reports nothing: its queue
/// pair goes to error.
fn established(
    id: &Arc<XwCmId>,
    qp: &crate::verbs::qp::XwQp,
    dq: dataplane::QueuePair,
    private_data: Vec<u8>,
) {
    let neg = dq.negotiated();
    let info = ConnInfo {
        private_data,
        initiator_depth: neg.ird.min(255) as u8,
        responder_resources: neg.ord.min(255) as u8,
    };
    qp.connected(dq);
    if id
        .conn
        .establish(|| id.report(std::ptr::null_mut(), event::ESTABLISHED, 0, info))
    {
        watch(id);
    } else {
        qp.fail();
    }
}

/// `rdma_listen`: listens on the bound address (the wildcard on the first device) and
/// reports each valid MPA Request as CONNECT_REQUEST with a new identifier.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_listen(id: *mut RdmaCmId, _backlog: c_int) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::clone_arc(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    let mut st = me.state();
    if st.listener.is_some() {
        return errno::fail(libc::EINVAL);
    }
    let src = st
        .src
        .unwrap_or_else(|| "0.0.0.0:0".parse().expect("an address"));
    let ctx = match st.ctx.clone() {
        Some(c) => c,
        None => {
            let dev = if src.ip().is_unspecified() {
                registry().devices.first()
            } else {
                device_for(src.ip())
            };
            let Some(dev) = dev else {
                return errno::fail(libc::ENODEV);
            };
            match cm_context(dev) {
                Ok(c) => c,
                Err(why) => {
                    log::always(why);
                    return errno::fail(libc::ENODEV);
                }
            }
        }
    };
    let listener = match ctx.engine.listen(src, ConnectionConfig::default()) {
        Ok(l) => l,
        Err(e) => {
            log::always(format_args!("rdma_listen on {src}: {e}"));
            return errno::fail(match &e {
                ConnectError::Io(io) if io.kind() == ErrorKind::AddrInUse => libc::EADDRINUSE,
                ConnectError::Io(io) => io.raw_os_error().unwrap_or(libc::EADDRNOTAVAIL),
                _ => libc::EINVAL,
            });
        }
    };
    let bound = if src.port() == 0 {
        listener.local_addr()
    } else {
        src
    };
    let keep_ctx = st.ctx.is_some().then(|| ctx.clone());
    me.set_addresses(&mut st, keep_ctx, Some(bound), None);
    let stop = Arc::new(AtomicBool::new(false));
    let (stop2, me2) = (stop.clone(), Arc::downgrade(&me));
    let thread = dataplane::library_thread::spawn("xwarp-cm-listen", move || {
        while !stop2.load(Ordering::Acquire) {
            match listener.accept_timeout(ACCEPT_SLICE) {
                Ok(inc) => match me2.upgrade() {
                    Some(l) => on_request(&l, &ctx, inc),
                    None => break,
                },
                Err(AcceptError::Timeout) => {}
                Err(AcceptError::Closed) => break,
            }
        }
    });
    match thread {
        Ok(thread) => {
            st.listener = Some(ListenTask { stop, thread });
            0
        }
        Err(_) => errno::fail(libc::EAGAIN),
    }
}

/// A valid MPA Request on `listen`'s listener: a new identifier, reported as CONNECT_REQUEST
/// with the Request's private data and the IRD (as initiator_depth) and ORD (as
/// responder_resources) it offered.
fn on_request(
    listen: &Arc<XwCmId>,
    ctx: &Arc<crate::verbs::context::XwContext>,
    inc: dataplane::Incoming,
) {
    let (ird, ord) = match inc.request().peer_read_depths {
        Some(d) => (d.ird.min(255) as u8, d.ord.min(255) as u8),
        None => (REV1_DEPTH, REV1_DEPTH),
    };
    let private_data = inc.private_data().to_vec();
    // Safety: a read of the listening identifier's port space.
    let ps = unsafe { (*listen.c_ptr()).ps };
    let child = XwCmId::new(listen.channel.clone(), listen.app_context(), ps);
    {
        let mut st = child.state();
        let src = listen.state().src;
        let peer = inc.peer_addr().ok();
        child.set_addresses(&mut st, Some(ctx.clone()), src, peer);
        st.incoming = Some((inc, ird, ord));
    }
    let child_ptr = XwCmId::into_c(child.clone());
    let info = ConnInfo {
        private_data,
        initiator_depth: ird,
        responder_resources: ord,
    };
    child.channel.push(super::channel::XwEvent::new(
        child_ptr,
        listen.c_ptr(),
        event::CONNECT_REQUEST,
        0,
        info,
        listen.acks.clone(),
    ));
}

/// `rdma_accept`: the MPA Reply with the private data and, in Revision 2, the IRD
/// (`responder_resources`) and ORD (`initiator_depth`); NULL parameters take the Request's
/// offer. The identifier's queue pair gets its receives before the Reply leaves; ESTABLISHED
/// follows on the channel.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_accept(id: *mut RdmaCmId, param: *mut RdmaConnParam) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::clone_arc(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    // Safety: the application's parameters.
    let pdata = unsafe { private_data(param) };
    let (inc, qp, req_ird, req_ord) = {
        let mut st = me.state();
        let Some(qp) = st.qp.clone() else {
            log::unsupported(
                "rdma_accept without a queue pair",
                "create one with rdma_create_qp first",
            );
            return errno::fail(libc::EINVAL);
        };
        let Some((inc, ird, ord)) = st.incoming.take() else {
            return errno::fail(libc::EINVAL);
        };
        (inc, qp, ird, ord)
    };
    let (ird, ord) = if param.is_null() {
        // The Request's offer: serve as many Reads as it keeps outstanding, keep as many
        // outstanding as it serves.
        (req_ord, req_ird)
    } else {
        // Safety: as above.
        let p = unsafe { &*param };
        (p.responder_resources, p.initiator_depth)
    };
    let cap = |v: u8| u32::from(v).min(MAX_RD_ATOM as u32);
    if !param.is_null() && (c_int::from(ird) > MAX_RD_ATOM || c_int::from(ord) > MAX_RD_ATOM) {
        me.state().incoming = Some((inc, req_ird, req_ord));
        return errno::fail(libc::EINVAL);
    }
    let Some((init, recvs)) = qp.begin_connect() else {
        me.state().incoming = Some((inc, req_ird, req_ord));
        return errno::fail(libc::EISCONN);
    };
    let r = inc
        .with_read_depths(cap(ird), cap(ord))
        .accept_with(init, &pdata, |dq| {
            qp.hand_over(dq, &recvs);
            Ok(())
        });
    match r {
        Ok(dq) => {
            established(&me, &qp, dq, Vec::new());
            0
        }
        Err(e) => {
            log::always(format_args!("rdma_accept: {e}"));
            qp.fail();
            errno::fail(libc::ECONNABORTED)
        }
    }
}

/// `rdma_reject`: an MPA Reply with the Reject bit and the private data; the connection then
/// closes.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_reject(
    id: *mut RdmaCmId,
    private: *const c_void,
    len: u8,
) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::borrow(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    let pdata = if private.is_null() || len == 0 {
        Vec::new()
    } else {
        // Safety: the application's private data of `len` octets.
        unsafe { std::slice::from_raw_parts(private.cast::<u8>(), usize::from(len)) }.to_vec()
    };
    let Some((inc, _, _)) = me.state().incoming.take() else {
        return errno::fail(libc::EINVAL);
    };
    match inc.reject(&pdata) {
        Ok(_stream) => 0,
        Err(_) => errno::fail(libc::ECONNRESET),
    }
}

/// `rdma_disconnect`: closes the connection gracefully (the queue pair moves to ERR: posted
/// receives complete flushed; Sends and Writes already posted still go out); DISCONNECTED
/// follows on this side too.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_disconnect(id: *mut RdmaCmId) -> c_int {
    // Safety: the application passes its identifier.
    let Some(me) = (unsafe { XwCmId::borrow(id) }) else {
        return errno::fail(libc::EINVAL);
    };
    if !matches!(me.conn.phase(), Phase::Established | Phase::Disconnected) {
        return errno::fail(libc::EINVAL);
    }
    if let Some(q) = &me.state().qp {
        q.fail();
    }
    me.conn.disconnect(|| {
        me.report(
            std::ptr::null_mut(),
            event::DISCONNECTED,
            0,
            ConnInfo::default(),
        )
    });
    0
}

/// The identifiers whose connections the watcher looks at.
static WATCHED: Mutex<Vec<Weak<XwCmId>>> = Mutex::new(Vec::new());

/// Adds `id` (just connected) to the watcher's list; starts the watcher on first use.
fn watch(id: &Arc<XwCmId>) {
    static STARTED: OnceLock<()> = OnceLock::new();
    WATCHED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Arc::downgrade(id));
    STARTED.get_or_init(|| {
        let _ = dataplane::library_thread::spawn("xwarp-cm-watch", || loop {
            std::thread::sleep(WATCH_EVERY);
            look_at_connections();
        });
    });
}

/// Reports DISCONNECTED (once) for each watched connection the peer ended, and closes our
/// side of it.
fn look_at_connections() {
    let ids: Vec<Arc<XwCmId>> = {
        let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
        w.retain(|i| i.strong_count() > 0);
        w.iter().filter_map(Weak::upgrade).collect()
    };
    for id in ids {
        if id.conn.phase() != Phase::Established {
            continue;
        }
        let st = id.state();
        if let Some(q) = &st.qp {
            q.report_overruns();
        }
        let ended = st.qp.as_ref().is_some_and(|q| q.connection_ended());
        if !ended {
            continue;
        }
        if let Some(q) = &st.qp {
            if q.failed() {
                q.async_event(crate::abi::verbs::event_type::QP_FATAL);
            }
            q.fail();
        }
        drop(st);
        id.conn.disconnect(|| {
            id.report(
                std::ptr::null_mut(),
                event::DISCONNECTED,
                0,
                ConnInfo::default(),
            )
        });
    }
    WATCHED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|i| {
            i.upgrade()
                .is_some_and(|id| id.conn.phase() == Phase::Established)
        });
}
