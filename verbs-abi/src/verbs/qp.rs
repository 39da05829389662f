//! Queue pairs. A queue pair exists before its connection (the verbs model): receives posted
//! then wait here and are handed to the connection when it is made (`connect_with` /
//! `accept_with`'s closure), before the peer's first message can arrive. States follow
//! `ibv_modify_qp` (IB attributes are accepted and ignored); ERR closes the connection and
//! completes what is posted as flushed.

use std::cell::UnsafeCell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::cq::XwCq;
use super::device::{MAX_QP_WR, MAX_SGE};
use super::pd_mr::XwPd;
use super::post::{self, RecvReq};
use crate::abi::verbs::*;
use crate::handle::CObject;
use crate::{errno, log};

/// A queue pair.
#[repr(C)]
pub(crate) struct XwQp {
    c: UnsafeCell<IbvQp>,
    magic: AtomicU64,
    pub(crate) pd: Arc<XwPd>,
    pub(crate) send_cq: Arc<XwCq>,
    pub(crate) recv_cq: Arc<XwCq>,
    /// Every send request is signaled.
    pub(crate) sq_sig_all: bool,
    cap: IbvQpCap,
    pub(crate) num: u32,
    /// Where inline data is copied (queue pairs created with `max_inline_data`).
    pub(crate) inline: Option<InlineSlots>,
    conn: Mutex<Conn>,
}

/// Most inline data per work request.
pub(crate) const MAX_INLINE: u32 = 1024;

/// Inline data's memory: a region of the queue pair's domain with a slot per send queue entry,
/// used in turn. A slot is reused `max_send_wr` posts later; by then its request completed,
/// since an application keeps at most `max_send_wr` requests outstanding (the verbs contract).
pub(crate) struct InlineSlots {
    pub(crate) mr: dataplane::MemoryRegion,
    slot: usize,
    slots: usize,
    next: std::sync::atomic::AtomicUsize,
}

impl InlineSlots {
    fn new(pd: &XwPd, slot: usize, slots: usize) -> Result<Self, c_int> {
        let mr = pd
            .pd
            .register(slot * slots, dataplane::Access::LOCAL_WRITE)
            .map_err(|_| libc::ENOMEM)?;
        Ok(InlineSlots {
            mr,
            slot,
            slots,
            next: Default::default(),
        })
    }

    /// The size of a slot (the queue pair's `max_inline_data`).
    pub(crate) fn slot_len(&self) -> usize {
        self.slot
    }

    /// The offset of the next slot in the region.
    pub(crate) fn take(&self) -> usize {
        (self.next.fetch_add(1, Ordering::Relaxed) % self.slots) * self.slot
    }
}

/// Where a queue pair's connection stands.
pub(crate) enum Conn {
    /// No connection yet: receives wait here.
    Waiting(Vec<RecvReq>),
    /// Being connected: the receives went to the connection being made; later ones wait here
    /// and follow it.
    Connecting(Vec<RecvReq>),
    /// Connected.
    Connected(dataplane::QueuePair),
    /// Error (failed, closed or moved to ERR): every post completes flushed.
    Error,
}

// Safety: the C structure is written by the library under the `conn` lock (state) or before
// the queue pair is shared; the application only reads it.
unsafe impl Sync for XwQp {}
// Safety: as above.
unsafe impl Send for XwQp {}

// Safety: `c` is the first field of a repr(C) struct; `magic` is the field below.
unsafe impl CObject for XwQp {
    type C = IbvQp;
    const C_OFFSET: usize = 0;
    const MAGIC: u64 = 0x7877_7170_0000_0001;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

static NEXT_QP_NUM: AtomicU32 = AtomicU32::new(1);

/// Every queue pair made, for closing the connected ones when the process exits.
static LIVE: Mutex<Vec<Weak<XwQp>>> = Mutex::new(Vec::new());

/// Closes every connection still open (gracefully: what was posted goes out, then FIN);
/// for the process's exit. Queue pairs another thread holds locked are left alone.
pub(crate) fn close_all() {
    let live: Vec<Arc<XwQp>> = {
        let mut l = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        l.retain(|w| w.strong_count() > 0);
        l.iter().filter_map(Weak::upgrade).collect()
    };
    for q in live {
        if let Ok(mut conn) = q.conn.try_lock() {
            if let Conn::Connected(_) = &*conn {
                q.to_error(&mut conn);
            }
        }
    }
}

impl XwQp {
    /// The connection state, locked.
    pub(crate) fn conn(&self) -> MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the state the application reads in `qp->state`.
    pub(crate) fn set_c_state(&self, state: c_int) {
        // Safety: the library's own write of the state field (under the `conn` lock, or
        // before sharing); the application only reads it.
        unsafe { (*self.c.get()).state = state };
    }

    fn c_state(&self) -> c_int {
        // Safety: read of the state field.
        unsafe { (*self.c.get()).state }
    }

    /// The queue pair's protection domain, completion queues and the receives waiting:
    /// the connection is being made now (rdma_connect, rdma_accept). `None` unless it waits
    /// for one.
    pub(crate) fn begin_connect(&self) -> Option<(dataplane::QpInit, Vec<RecvReq>)> {
        let mut conn = self.conn();
        let Conn::Waiting(recvs) = &mut *conn else {
            return None;
        };
        let recvs = std::mem::take(recvs);
        *conn = Conn::Connecting(Vec::new());
        Some((
            dataplane::QpInit {
                pd: self.pd.pd.clone(),
                send_cq: self.send_cq.cq.clone(),
                recv_cq: self.recv_cq.cq.clone(),
            },
            recvs,
        ))
    }

    /// Posts `recvs` on `qp` (the connection being made); a receive that cannot be posted
    /// completes with its error status.
    pub(crate) fn hand_over(&self, qp: &dataplane::QueuePair, recvs: &[RecvReq]) {
        for r in recvs {
            post::post_recv_on(self, qp, r);
        }
    }

    /// The connection is made: receives posted meanwhile follow it; the state is RTS.
    pub(crate) fn connected(&self, qp: dataplane::QueuePair) {
        self.send_cq.map_qp(qp.num(), self.num);
        self.recv_cq.map_qp(qp.num(), self.num);
        let mut conn = self.conn();
        if let Conn::Connecting(late) = &*conn {
            for r in late {
                post::post_recv_on(self, &qp, r);
            }
        }
        *conn = Conn::Connected(qp);
        self.set_c_state(qp_state::RTS);
    }

    /// The connection could not be made, or is gone: ERR, what waits completes flushed.
    pub(crate) fn fail(&self) {
        let mut conn = self.conn();
        self.to_error(&mut conn);
    }

    /// Moves to ERR under the lock: closes the connection (posted receives and Reads complete
    /// flushed), and flushes the receives that waited for one.
    pub(crate) fn to_error(&self, conn: &mut Conn) {
        match conn {
            Conn::Connected(qp) => match qp.error() {
                None | Some(dataplane::QpError::PeerClosed) => log::debug(format_args!(
                    "qp {}: to ERR (connection: {:?})",
                    self.num,
                    qp.error()
                )),
                Some(e) => log::always(format_args!(
                    "qp {}: the connection failed ({e}); its work completes flushed",
                    self.num
                )),
            },
            Conn::Error => {}
            _ => log::debug(format_args!("qp {}: to ERR", self.num)),
        }
        match std::mem::replace(conn, Conn::Error) {
            Conn::Waiting(recvs) | Conn::Connecting(recvs) => {
                for r in recvs {
                    post::flush_recv(self, r.wr_id);
                }
            }
            Conn::Connected(qp) => qp.close(),
            Conn::Error => {}
        }
        self.set_c_state(qp_state::ERR);
    }

    /// True once a connection made for this queue pair is no longer whole (the peer closed or
    /// failed it): rdma_cm reports DISCONNECTED.
    pub(crate) fn connection_ended(&self) -> bool {
        match &*self.conn() {
            Conn::Connected(qp) => !qp.is_connected(),
            Conn::Error => true,
            _ => false,
        }
    }

    /// True when the connection failed (a Terminate, a framing or socket error), not merely
    /// closed by the peer.
    pub(crate) fn failed(&self) -> bool {
        match &*self.conn() {
            Conn::Connected(qp) => {
                !matches!(qp.error(), None | Some(dataplane::QpError::PeerClosed))
            }
            _ => false,
        }
    }

    /// Reports an asynchronous event about this queue pair on its context's `async_fd`.
    pub(crate) fn async_event(&self, event_type: c_int) {
        self.pd
            .ctx
            .async_events
            .push(self.c_ptr().cast(), event_type);
    }

    /// Reports its completion queues' overruns (IBV_EVENT_CQ_ERR), once each.
    pub(crate) fn report_overruns(&self) {
        self.send_cq.report_overrun();
        self.recv_cq.report_overrun();
    }

    /// The queue pair's number.
    pub(crate) fn num(&self) -> u32 {
        self.num
    }
}

/// `ibv_create_qp`: reliable connected queue pairs only, without SRQ; inline data up to
/// [`MAX_INLINE`] octets.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> *mut IbvQp {
    // Safety: the application passes its domain.
    let Some(p) = (unsafe { XwPd::clone_arc(pd) }) else {
        return errno::null(libc::EINVAL);
    };
    if attr.is_null() {
        return errno::null(libc::EINVAL);
    }
    // Safety: attr points to the caller's struct ibv_qp_init_attr.
    let a = unsafe { &mut *attr };
    match create(p, a) {
        Ok(q) => XwQp::into_c(q),
        Err(e) => errno::null(e),
    }
}

/// Makes a queue pair of `pd` from `a` and writes the capabilities granted back into it.
pub(crate) fn create(pd: Arc<XwPd>, a: &mut IbvQpInitAttr) -> Result<Arc<XwQp>, c_int> {
    if a.qp_type != IBV_QPT_RC {
        log::unsupported(
            "a queue pair other than reliable connected (RC)",
            "iWARP carries reliable connections only (no UD, UC, XRC or raw packet QPs)",
        );
        return Err(libc::EOPNOTSUPP);
    }
    if !a.srq.is_null() {
        log::unsupported(
            "shared receive queues (SRQ)",
            "post receives on each queue pair",
        );
        return Err(libc::EOPNOTSUPP);
    }
    let cap = a.cap;
    if cap.max_send_wr as c_int > MAX_QP_WR
        || cap.max_recv_wr as c_int > MAX_QP_WR
        || cap.max_send_sge as c_int > MAX_SGE
        || cap.max_recv_sge as c_int > MAX_SGE
    {
        return Err(libc::EINVAL);
    }
    if cap.max_inline_data > MAX_INLINE {
        return Err(libc::EINVAL);
    }
    // Safety: the application passes its completion queues.
    let send_cq = unsafe { XwCq::clone_arc(a.send_cq) }.ok_or(libc::EINVAL)?;
    // Safety: as above.
    let recv_cq = unsafe { XwCq::clone_arc(a.recv_cq) }.ok_or(libc::EINVAL)?;
    if !Arc::ptr_eq(&send_cq.ctx, &pd.ctx) || !Arc::ptr_eq(&recv_cq.ctx, &pd.ctx) {
        return Err(libc::EINVAL);
    }
    let num = NEXT_QP_NUM.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
    let granted = IbvQpCap {
        max_send_wr: cap.max_send_wr.max(1),
        max_recv_wr: cap.max_recv_wr.max(1),
        max_send_sge: cap.max_send_sge.max(1),
        max_recv_sge: cap.max_recv_sge.max(1),
        max_inline_data: cap.max_inline_data,
    };
    let inline = match granted.max_inline_data {
        0 => None,
        n => Some(InlineSlots::new(
            &pd,
            n as usize,
            granted.max_send_wr as usize,
        )?),
    };
    a.cap = granted;
    let q = Arc::new(XwQp {
        c: UnsafeCell::new(IbvQp {
            context: pd.ctx.c_ptr(),
            qp_context: a.qp_context,
            pd: pd.c_ptr(),
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: std::ptr::null_mut(),
            handle: num,
            qp_num: num,
            state: qp_state::RESET,
            qp_type: IBV_QPT_RC,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            events_completed: 0,
        }),
        magic: AtomicU64::new(XwQp::MAGIC),
        pd,
        send_cq,
        recv_cq,
        sq_sig_all: a.sq_sig_all != 0,
        cap: granted,
        num,
        inline,
        conn: Mutex::new(Conn::Waiting(Vec::new())),
    });
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    live.retain(|w| w.strong_count() > 0);
    live.push(Arc::downgrade(&q));
    Ok(q)
}

/// `ibv_destroy_qp`: closes its connection.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut IbvQp) -> c_int {
    // Safety: the application passes its queue pair.
    let Some(q) = (unsafe { XwQp::release(qp) }) else {
        return libc::EINVAL;
    };
    let mut conn = q.conn();
    if let Conn::Connected(_) = &*conn {
        q.to_error(&mut conn);
    } else {
        *conn = Conn::Error;
    }
    0
}

/// `ibv_modify_qp`: the state moves as asked (RESET, INIT, RTR, RTS, SQD, ERR); every other
/// attribute (paths, timers, PSNs: InfiniBand's) is accepted and ignored, since rdma_cm makes
/// iWARP connections.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(qp: *mut IbvQp, attr: *mut IbvQpAttr, mask: c_int) -> c_int {
    // Safety: the application passes its queue pair.
    let Some(q) = (unsafe { XwQp::borrow(qp) }) else {
        return libc::EINVAL;
    };
    if attr.is_null() {
        return libc::EINVAL;
    }
    if mask & IBV_QP_STATE == 0 {
        return 0;
    }
    // Safety: attr points to the caller's struct ibv_qp_attr.
    let to = unsafe { (*attr).qp_state };
    let mut conn = q.conn();
    match to {
        qp_state::RESET => {
            if let Conn::Connected(_) = &*conn {
                q.to_error(&mut conn);
            }
            *conn = Conn::Waiting(Vec::new());
            q.set_c_state(qp_state::RESET);
        }
        qp_state::INIT | qp_state::RTR | qp_state::RTS | qp_state::SQD => {
            if matches!(*conn, Conn::Error) {
                // Out of ERR only through RESET.
                return libc::EINVAL;
            }
            if !matches!(*conn, Conn::Connected(_)) || to == qp_state::SQD {
                q.set_c_state(to);
            }
        }
        qp_state::ERR => q.to_error(&mut conn),
        _ => return libc::EINVAL,
    }
    0
}

/// `ibv_query_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    _mask: c_int,
    init_attr: *mut IbvQpInitAttr,
) -> c_int {
    // Safety: the application passes its queue pair.
    let Some(q) = (unsafe { XwQp::borrow(qp) }) else {
        return libc::EINVAL;
    };
    let state = if q.connection_ended() {
        qp_state::ERR
    } else {
        q.c_state()
    };
    let (ird, ord) = match &*q.conn() {
        Conn::Connected(c) => (c.negotiated().ird, c.negotiated().ord),
        _ => (0, 0),
    };
    if !attr.is_null() {
        let a = IbvQpAttr {
            qp_state: state,
            cur_qp_state: state,
            path_mtu: IBV_MTU_1024,
            cap: q.cap,
            max_rd_atomic: ord.min(255) as u8,
            max_dest_rd_atomic: ird.min(255) as u8,
            port_num: 1,
            ..IbvQpAttr::default()
        };
        // Safety: attr points to the caller's struct ibv_qp_attr.
        unsafe { attr.write(a) };
    }
    if !init_attr.is_null() {
        // Safety: the queue pair's C structure, written at creation.
        let c = unsafe { &*q.c.get() };
        let i = IbvQpInitAttr {
            qp_context: c.qp_context,
            send_cq: c.send_cq,
            recv_cq: c.recv_cq,
            srq: std::ptr::null_mut(),
            cap: q.cap,
            qp_type: IBV_QPT_RC,
            sq_sig_all: c_int::from(q.sq_sig_all),
        };
        // Safety: init_attr points to the caller's struct ibv_qp_init_attr.
        unsafe { init_attr.write(i) };
    }
    0
}
