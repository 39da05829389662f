//! Posting: `ops.post_send` and `ops.post_recv` translate each work request into xwarp's
//! (each scatter-gather element is its region by lkey, from `addr - iova`) and post it.
//! Unsignaled sends complete silently unless they fail. What the hardware would report as a
//! completion, the library reports as one too: a bad lkey or an element outside its region
//! completes with `IBV_WC_LOC_PROT_ERR` and moves the queue pair to ERR; a post on a queue
//! pair in ERR completes with `IBV_WC_WR_FLUSH_ERR`. Inline data (`IBV_SEND_INLINE`, up to
//! the queue pair's `max_inline_data`) is copied at post time into the queue pair's inline
//! slots. Requests iWARP has no wire form for (immediate data, atomics) are refused with
//! EINVAL and one log line.

use std::os::raw::c_int;

use smallvec::SmallVec;

use super::device::MAX_SGE;
use super::qp::{Conn, XwQp};
use crate::abi::verbs::*;
use crate::handle::CObject;
use crate::log;
use dataplane::{PostError, PostKind, RemoteAddr};

/// A receive waiting for its queue pair's connection.
#[derive(Debug, Clone)]
pub(crate) struct RecvReq {
    pub(crate) wr_id: u64,
    sges: SmallVec<[IbvSge; 2]>,
}

impl RecvReq {
    /// The receive as a work request.
    fn req(&self) -> Req<'_> {
        Req::recv(self.wr_id, &self.sges)
    }
}

/// A completion of the library's own.
fn local_wc(q: &XwQp, wr_id: u64, opcode: c_int, status: c_int) -> IbvWc {
    IbvWc {
        wr_id,
        status,
        opcode,
        qp_num: q.num(),
        ..IbvWc::default()
    }
}

/// Completes receive `wr_id` as flushed.
pub(crate) fn flush_recv(q: &XwQp, wr_id: u64) {
    q.recv_cq
        .push_local(local_wc(q, wr_id, wc_opcode::RECV, wc_status::WR_FLUSH_ERR));
}

/// What posting one request came to.
enum Outcome {
    Posted,
    /// Completes with this status; the queue pair moves to ERR.
    Completes(c_int),
    /// Refused with this errno; nothing posted.
    Refused(c_int),
}

/// The completion status of a refusal by xwarp's queue pair.
fn outcome_of(e: PostError) -> Outcome {
    match e {
        PostError::NotConnected => Outcome::Completes(wc_status::WR_FLUSH_ERR),
        PostError::LocalBounds
        | PostError::ForeignRegion
        | PostError::Access
        | PostError::Refused(_) => Outcome::Completes(wc_status::LOC_PROT_ERR),
        PostError::SglLength | PostError::TooLong => Outcome::Refused(libc::EINVAL),
        PostError::NoStag => Outcome::Refused(libc::ENOMEM),
    }
}

/// The elements of a work request, checked for count.
///
/// # Safety
/// `list` points to `n` elements (when `n > 0`).
unsafe fn elements<'a>(list: *const IbvSge, n: c_int) -> Result<&'a [IbvSge], c_int> {
    if !(0..=MAX_SGE).contains(&n) {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(libc::EINVAL);
    }
    // Safety: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(list, n as usize) })
}

/// Posts `r` on `qp` with the local memory `sgl`; the outcome.
fn post_sgl(qp: &dataplane::QueuePair, r: Req<'_>, sgl: &[dataplane::Sge<'_>]) -> Outcome {
    let mut wr = dataplane::WorkRequest::new(r.wr_id, r.kind, sgl);
    if !r.signaled {
        wr = wr.unsignaled();
    }
    match qp.post_list(&[wr]) {
        Ok(()) => Outcome::Posted,
        Err(e) => outcome_of(e.error),
    }
}

/// One work request as the application posted it.
#[derive(Clone, Copy)]
struct Req<'a> {
    wr_id: u64,
    kind: PostKind,
    sges: &'a [IbvSge],
    signaled: bool,
}

impl<'a> Req<'a> {
    /// A receive (receives are always signaled).
    fn recv(wr_id: u64, sges: &'a [IbvSge]) -> Self {
        Req {
            wr_id,
            kind: PostKind::Recv,
            sges,
            signaled: true,
        }
    }
}

/// Posts `r` on `qp`, its elements named by lkey; the outcome.
fn post_on(q: &XwQp, qp: &dataplane::QueuePair, r: Req<'_>) -> Outcome {
    let regions = q.pd.regions();
    let mut sgl: SmallVec<[dataplane::Sge<'_>; 4]> = SmallVec::new();
    for s in r.sges.iter().filter(|s| s.length > 0) {
        let Some((mr, off)) = regions
            .get(&s.lkey)
            .and_then(|m| Some((m, m.offset_of(s.addr, s.length)?)))
        else {
            return Outcome::Completes(wc_status::LOC_PROT_ERR);
        };
        sgl.push(dataplane::Sge::new(
            &mr.region,
            off..off + s.length as usize,
        ));
    }
    if sgl.is_empty() {
        // A zero-length message: an empty element of the domain's own region.
        match q.pd.zero_region() {
            Some(z) => sgl.push(dataplane::Sge::new(z, 0..0)),
            None => return Outcome::Refused(libc::ENOMEM),
        }
    }
    post_sgl(qp, r, &sgl)
}

/// Posts a Send or Write whose data is copied now from `sges` (no lkeys: inline data) into
/// the queue pair's next inline slot.
///
/// # Safety
/// Each element's `[addr, addr + length)` is readable memory of the application's.
unsafe fn post_inline(q: &XwQp, qp: &dataplane::QueuePair, r: Req<'_>) -> Outcome {
    let Some(slots) = &q.inline else {
        log::unsupported(
            "IBV_SEND_INLINE on a queue pair created without max_inline_data",
            "create the queue pair with cap.max_inline_data (EINVAL)",
        );
        return Outcome::Refused(libc::EINVAL);
    };
    let total: usize = r.sges.iter().map(|s| s.length as usize).sum();
    if total > slots.slot_len() {
        return Outcome::Refused(libc::EINVAL);
    }
    let at = slots.take();
    let mut off = at;
    for s in r.sges.iter().filter(|s| s.length > 0) {
        // Safety: the caller's promise on the element.
        let data = unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.length as usize) };
        if slots.mr.write(off, data).is_none() {
            return Outcome::Refused(libc::EINVAL);
        }
        off += data.len();
    }
    let sgl = [dataplane::Sge::new(&slots.mr, at..at + total)];
    post_sgl(qp, r, &sgl)
}

/// Posts receive `r` on the connection `qp` (being made, or made); a failure completes it
/// with its status (the caller moves the queue pair to ERR if it holds its state).
pub(crate) fn post_recv_on(q: &XwQp, qp: &dataplane::QueuePair, r: &RecvReq) -> bool {
    match post_on(q, qp, r.req()) {
        Outcome::Posted => true,
        Outcome::Completes(status) | Outcome::Refused(status) => {
            let status = if status == libc::EINVAL || status == libc::ENOMEM {
                wc_status::LOC_LEN_ERR
            } else {
                status
            };
            q.recv_cq
                .push_local(local_wc(q, r.wr_id, wc_opcode::RECV, status));
            false
        }
    }
}

/// Ends a request that completes with `status` (under the state lock): its completion, and
/// ERR for the queue pair.
fn complete_failed(q: &XwQp, conn: &mut Conn, wr_id: u64, opcode: c_int, status: c_int) {
    let cq = if opcode == wc_opcode::RECV {
        &q.recv_cq
    } else {
        &q.send_cq
    };
    cq.push_local(local_wc(q, wr_id, opcode, status));
    if !matches!(conn, Conn::Error) {
        if status == wc_status::LOC_PROT_ERR {
            log::once(
                "loc prot",
                "a work request named a bad lkey or memory outside its region: completed with \
                 IBV_WC_LOC_PROT_ERR, its queue pair is in error",
            );
        }
        q.to_error(conn);
    }
}

/// Translates and posts one send-queue request.
///
/// # Safety
/// `w` is the application's work request, its list valid for `w.num_sge` elements.
unsafe fn send_one(q: &XwQp, w: &IbvSendWr) -> Result<(), c_int> {
    let solicited = w.send_flags & send_flags::SOLICITED != 0;
    let remote = RemoteAddr {
        stag: w.rdma_rkey,
        to: w.rdma_remote_addr,
    };
    let (kind, opcode) = match w.opcode {
        wr_opcode::RDMA_WRITE => (PostKind::Write(remote), wc_opcode::RDMA_WRITE),
        wr_opcode::RDMA_READ => (PostKind::Read(remote), wc_opcode::RDMA_READ),
        wr_opcode::SEND => (
            PostKind::Send {
                solicited,
                invalidate: None,
            },
            wc_opcode::SEND,
        ),
        wr_opcode::SEND_WITH_INV => (
            PostKind::Send {
                solicited,
                invalidate: Some(w.imm_data),
            },
            wc_opcode::SEND,
        ),
        wr_opcode::RDMA_WRITE_WITH_IMM | wr_opcode::SEND_WITH_IMM => {
            log::unsupported("immediate data", "iWARP's RDMAP carries none (EINVAL)");
            return Err(libc::EINVAL);
        }
        op => {
            log::once(
                format_args!("opcode {op}"),
                format_args!(
                    "work request opcode {op} is not supported (atomics, memory windows, TSO \
                     and the rest have no iWARP form here): EINVAL"
                ),
            );
            return Err(libc::EINVAL);
        }
    };
    // Safety: the caller's promise on the list.
    let sges = unsafe { elements(w.sg_list, w.num_sge) }?;
    let inline = w.send_flags & send_flags::INLINE != 0;
    if inline && !matches!(kind, PostKind::Send { .. } | PostKind::Write(_)) {
        return Err(libc::EINVAL);
    }
    let signaled = q.sq_sig_all || w.send_flags & send_flags::SIGNALED != 0;
    let req = Req {
        wr_id: w.wr_id,
        kind,
        sges,
        signaled,
    };
    let mut conn = q.conn();
    let outcome = match &*conn {
        // Safety: inline elements name the application's readable memory (the verbs
        // contract for IBV_SEND_INLINE), read now.
        Conn::Connected(qp) if inline => unsafe { post_inline(q, qp, req) },
        Conn::Connected(qp) => post_on(q, qp, req),
        Conn::Error => Outcome::Completes(wc_status::WR_FLUSH_ERR),
        // RESET, INIT, RTR: nothing to send on yet.
        Conn::Waiting(_) | Conn::Connecting(_) => Outcome::Refused(libc::EINVAL),
    };
    match outcome {
        Outcome::Posted => Ok(()),
        Outcome::Refused(e) => Err(e),
        Outcome::Completes(status) => {
            complete_failed(q, &mut conn, w.wr_id, opcode, status);
            Ok(())
        }
    }
}

/// Translates and posts one receive.
///
/// # Safety
/// `w` is the application's work request, its list valid for `w.num_sge` elements.
unsafe fn recv_one(q: &XwQp, w: &IbvRecvWr) -> Result<(), c_int> {
    // Safety: the caller's promise on the list.
    let sges = unsafe { elements(w.sg_list, w.num_sge) }?;
    let mut conn = q.conn();
    let outcome = match &mut *conn {
        Conn::Waiting(list) | Conn::Connecting(list) => {
            // Kept until the connection exists: the elements are copied.
            list.push(RecvReq {
                wr_id: w.wr_id,
                sges: sges.iter().copied().collect(),
            });
            return Ok(());
        }
        Conn::Connected(qp) => post_on(q, qp, Req::recv(w.wr_id, sges)),
        Conn::Error => Outcome::Completes(wc_status::WR_FLUSH_ERR),
    };
    match outcome {
        Outcome::Posted => Ok(()),
        Outcome::Refused(e) => Err(e),
        Outcome::Completes(status) => {
            complete_failed(q, &mut conn, w.wr_id, wc_opcode::RECV, status);
            Ok(())
        }
    }
}

/// A work request of a linked list the application posts.
trait Linked {
    /// The next request of the list.
    fn next(&self) -> *mut Self;
}

impl Linked for IbvSendWr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

impl Linked for IbvRecvWr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

/// Posts the list at `head` on `qp` with `one`, in order; at the first refusal `*bad` names
/// it and its errno is returned (those before it are posted).
///
/// # Safety
/// `qp` is the application's queue pair, `head` its list of requests, `bad` NULL or its
/// out-pointer; `one` gets each request with its elements valid.
unsafe fn post_list<W: Linked>(
    qp: *mut IbvQp,
    head: *mut W,
    bad: *mut *mut W,
    one: unsafe fn(&XwQp, &W) -> Result<(), c_int>,
) -> c_int {
    // Safety: the caller's promise on qp.
    let q = unsafe { XwQp::borrow(qp) };
    let mut cur = head;
    while !cur.is_null() {
        // Safety: the caller's promise on the list.
        let w = unsafe { &*cur };
        let r = match q {
            // Safety: the caller's promise on the request and its elements.
            Some(q) => unsafe { one(q, w) },
            None => Err(libc::EINVAL),
        };
        if let Err(e) = r {
            if !bad.is_null() {
                // Safety: the caller's out-pointer.
                unsafe { *bad = cur };
            }
            return e;
        }
        cur = w.next();
    }
    0
}

/// `ops.post_send` (the inline `ibv_post_send`): posts the list in order; at the first
/// refusal, `*bad_wr` names it and its errno is returned (those before it are posted).
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad_wr: *mut *mut IbvSendWr,
) -> c_int {
    // Safety: the application's queue pair and list (the inline verb's contract).
    unsafe { post_list(qp, wr, bad_wr, send_one) }
}

/// `ops.post_recv` (the inline `ibv_post_recv`): as `post_send`, for receives; before the
/// connection exists they wait for it.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    // Safety: the application's queue pair and list (the inline verb's contract).
    unsafe { post_list(qp, wr, bad_wr, recv_one) }
}
