//! Completion queues and completion channels. A queue is xwarp's `CompletionQueue` plus the
//! completions the library makes itself (a bad lkey, a post on a queue pair in error). A
//! channel's descriptor is an epoll set over its queues' event descriptors: readable while an
//! armed queue has fired, as `ibv_get_cq_event` expects.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use super::context::XwContext;
use super::device::MAX_CQE;
use super::fd::{EpollSet, EventCounter};
use super::local_completions::LocalCompletions;
use crate::abi::verbs::*;
use crate::handle::CObject;
use crate::{errno, log};

/// A completion queue.
#[repr(C)]
pub(crate) struct XwCq {
    c: UnsafeCell<IbvCq>,
    magic: AtomicU64,
    pub(crate) ctx: Arc<XwContext>,
    pub(crate) cq: dataplane::CompletionQueue,
    /// Completions of the library's own (polled before `cq`'s), armed by `req_notify_cq`
    /// with `cq`.
    local: LocalCompletions<IbvWc>,
    /// Readable (in the channel's set) when a local completion fired an event.
    local_event: Option<EventCounter>,
    channel: Option<Arc<XwCompChannel>>,
    /// IBV_EVENT_CQ_ERR was reported (the queue overran).
    overrun_reported: AtomicBool,
    /// Queue pair numbers: xwarp's connection's, and the queue pair's the application knows.
    qp_nums: RwLock<Vec<(u32, u32)>>,
}

// Safety: the C structure is written before the queue is shared, then only by the
// application (its mutex, cond and counters) and by ack_cq_events; the rest is Sync.
unsafe impl Sync for XwCq {}
// Safety: as above.
unsafe impl Send for XwCq {}

// Safety: `c` is the first field of a repr(C) struct; `magic` is the field below.
unsafe impl CObject for XwCq {
    type C = IbvCq;
    const C_OFFSET: usize = 0;
    const MAGIC: u64 = 0x7877_6371_0000_0001;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// A completion channel.
#[repr(C)]
pub(crate) struct XwCompChannel {
    c: UnsafeCell<IbvCompChannel>,
    magic: AtomicU64,
    set: EpollSet,
    members: Mutex<HashMap<u64, Weak<XwCq>>>,
}

// Safety: the C structure is written before the channel is shared and only read after.
unsafe impl Sync for XwCompChannel {}
// Safety: as above.
unsafe impl Send for XwCompChannel {}

// Safety: `c` is the first field of a repr(C) struct; `magic` is the field below.
unsafe impl CObject for XwCompChannel {
    type C = IbvCompChannel;
    const C_OFFSET: usize = 0;
    const MAGIC: u64 = 0x7877_6368_0000_0001;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

impl XwCq {
    /// The queue's `cq_context`.
    fn cq_context(&self) -> *mut c_void {
        // Safety: read of a field the application set at creation.
        unsafe { (*self.c.get()).cq_context }
    }

    /// Adds a completion of the library's own (fires an armed queue's event).
    pub(crate) fn push_local(&self, wc: IbvWc) {
        if self.local.push(wc) {
            if let Some(e) = &self.local_event {
                e.add_one();
            }
        }
    }

    /// Completions of xwarp's queue pair `engine_num` are reported with `num`, the number of
    /// the application's queue pair.
    pub(crate) fn map_qp(&self, engine_num: u32, num: u32) {
        let mut m = self.qp_nums.write().unwrap_or_else(|p| p.into_inner());
        m.retain(|&(e, _)| e != engine_num);
        m.push((engine_num, num));
    }

    /// Reports IBV_EVENT_CQ_ERR on the context's `async_fd` once the queue overran (its queue
    /// pairs are in error then).
    pub(crate) fn report_overrun(&self) {
        if self.cq.error().is_some() && !self.overrun_reported.swap(true, Ordering::AcqRel) {
            log::once(
                "cq overrun",
                "a completion queue overran: its queue pairs are in error (IBV_EVENT_CQ_ERR)",
            );
            self.ctx
                .async_events
                .push(self.c_ptr().cast(), crate::abi::verbs::event_type::CQ_ERR);
        }
    }

    /// The application's number of xwarp's queue pair `engine_num`, from `nums` (the
    /// queue's [`map_qp`](Self::map_qp) pairs).
    fn qp_num(nums: &[(u32, u32)], engine_num: u32) -> u32 {
        nums.iter()
            .find(|&&(e, _)| e == engine_num)
            .map_or(engine_num, |&(_, n)| n)
    }

    /// Up to `out.len()` completions into `out`; how many.
    pub(crate) fn poll(&self, out: &mut [IbvWc]) -> usize {
        let mut n = 0;
        self.local.poll(out.len(), |wc| {
            out[n] = wc;
            n += 1;
        });
        // Locked at the first completion, once for the batch (an empty poll takes no lock).
        let mut nums = None;
        while n < out.len() {
            let Some(c) = self.cq.poll_one() else { break };
            let nums =
                nums.get_or_insert_with(|| self.qp_nums.read().unwrap_or_else(|p| p.into_inner()));
            out[n] = wc_of(&c);
            out[n].qp_num = Self::qp_num(nums, c.qp_num);
            n += 1;
        }
        n
    }

    /// Takes the fired events (0 when none).
    fn take_events(&self) -> u64 {
        let mut n = self.cq.take_events();
        if let Some(e) = &self.local_event {
            while e.take_one().is_ok() {
                n += 1;
            }
        }
        n
    }
}

/// The work completion libibverbs reports for `c`.
pub(crate) fn wc_of(c: &dataplane::Completion) -> IbvWc {
    use dataplane::{Opcode, Status};
    IbvWc {
        wr_id: c.wr_id,
        status: match c.status {
            Status::Success => wc_status::SUCCESS,
            Status::Flushed => wc_status::WR_FLUSH_ERR,
        },
        opcode: match c.opcode {
            Opcode::Send => wc_opcode::SEND,
            Opcode::Write => wc_opcode::RDMA_WRITE,
            Opcode::Read => wc_opcode::RDMA_READ,
            Opcode::Recv => wc_opcode::RECV,
        },
        vendor_err: 0,
        byte_len: c.byte_len,
        imm_data: c.invalidated.unwrap_or(0),
        qp_num: c.qp_num,
        src_qp: 0,
        wc_flags: if c.invalidated.is_some() {
            IBV_WC_WITH_INV
        } else {
            0
        },
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

/// `ops.poll_cq` (the inline `ibv_poll_cq`): up to `n` completions; how many, or -1.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut IbvCq, n: c_int, wc: *mut IbvWc) -> c_int {
    // Safety: the application passes its queue.
    let Some(q) = (unsafe { XwCq::borrow(cq) }) else {
        return -1;
    };
    if n <= 0 {
        return 0;
    }
    if wc.is_null() {
        return -1;
    }
    // Safety: wc points to n work completions of the caller's.
    let out = unsafe { std::slice::from_raw_parts_mut(wc, n as usize) };
    let got = q.poll(out);
    if got > 0 && log::debugging() {
        log::debug(format_args!("cq {cq:p}: polled {got}"));
    }
    if got == 0 && !q.cq.polls_drive() {
        // Nothing yet: the kernel transport's driver thread makes the progress; a program
        // polling in a loop gives it the CPU rather than its time slice. (An AF_XDP engine
        // ran a round in this poll.)
        std::thread::yield_now();
    }
    got as c_int
}

/// `ops.req_notify_cq`: one event at the next completion (or the next solicited one).
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int {
    // Safety: the application passes its queue.
    let Some(q) = (unsafe { XwCq::borrow(cq) }) else {
        return libc::EINVAL;
    };
    q.local.arm();
    q.cq.arm(solicited_only != 0);
    log::debug(format_args!(
        "cq {cq:p}: armed (solicited only: {solicited_only})"
    ));
    0
}

/// `ibv_create_comp_channel`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut IbvContext) -> *mut IbvCompChannel {
    // Safety: the application passes its context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return errno::null(libc::EINVAL);
    };
    let set = match EpollSet::new() {
        Ok(s) => s,
        Err(e) => return errno::null(e.raw_os_error().unwrap_or(libc::EMFILE)),
    };
    let ch = Arc::new(XwCompChannel {
        c: UnsafeCell::new(IbvCompChannel {
            context: c.c_ptr(),
            fd: set.raw(),
            refcnt: 0,
        }),
        magic: AtomicU64::new(XwCompChannel::MAGIC),
        set,
        members: Mutex::new(HashMap::new()),
    });
    XwCompChannel::into_c(ch)
}

/// `ibv_destroy_comp_channel`: EBUSY while queues use it.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut IbvCompChannel) -> c_int {
    // Safety: the application passes its channel.
    let Some(c) = (unsafe { XwCompChannel::borrow(ch) }) else {
        return errno::fail(libc::EINVAL);
    };
    let busy = c
        .members
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .any(|w| w.strong_count() > 0);
    if busy {
        return errno::fail(libc::EBUSY);
    }
    // Safety: as above.
    match unsafe { XwCompChannel::release(ch) } {
        Some(_) => 0,
        None => errno::fail(libc::EINVAL),
    }
}

/// `ibv_create_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut IbvContext,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut IbvCompChannel,
    _comp_vector: c_int,
) -> *mut IbvCq {
    // Safety: the application passes its context.
    let Some(c) = (unsafe { XwContext::clone_arc(ctx) }) else {
        return errno::null(libc::EINVAL);
    };
    if cqe <= 0 || cqe > MAX_CQE {
        return errno::null(libc::EINVAL);
    }
    let ch = if channel.is_null() {
        None
    } else {
        // Safety: the application passes its channel.
        match unsafe { XwCompChannel::clone_arc(channel) } {
            Some(ch) => Some(ch),
            None => return errno::null(libc::EINVAL),
        }
    };
    // Room for what the application may leave unpolled (cqe), and more: an overrun would put
    // the queue pairs in error.
    let cq = c.engine.create_cq_with(cqe as usize * 2 + 64);
    let local_event = match &ch {
        Some(_) => match EventCounter::new_nonblocking() {
            Ok(e) => Some(e),
            Err(e) => return errno::null(e.raw_os_error().unwrap_or(libc::EMFILE)),
        },
        None => None,
    };
    let q = Arc::new(XwCq {
        c: UnsafeCell::new(IbvCq {
            context: c.c_ptr(),
            channel,
            cq_context,
            handle: 0,
            cqe,
            mutex: libc::PTHREAD_MUTEX_INITIALIZER,
            cond: libc::PTHREAD_COND_INITIALIZER,
            comp_events_completed: 0,
            async_events_completed: 0,
        }),
        magic: AtomicU64::new(XwCq::MAGIC),
        ctx: c,
        cq,
        local: LocalCompletions::default(),
        local_event,
        channel: ch,
        qp_nums: RwLock::new(Vec::new()),
        overrun_reported: AtomicBool::new(false),
    });
    if let Some(ch) = &q.channel {
        let token = Arc::as_ptr(&q) as u64;
        let fd = match q.cq.event_fd() {
            Ok(fd) => std::os::fd::AsRawFd::as_raw_fd(&fd),
            Err(e) => return errno::null(e.raw_os_error().unwrap_or(libc::EMFILE)),
        };
        let local = q.local_event.as_ref().map(EventCounter::raw);
        if let Err(e) = ch.set.add(fd, token) {
            return errno::null(e);
        }
        if let Some(l) = local {
            if let Err(e) = ch.set.add(l, token) {
                ch.set.remove(fd);
                return errno::null(e);
            }
        }
        ch.members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(token, Arc::downgrade(&q));
    }
    XwCq::into_c(q)
}

/// `ibv_destroy_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut IbvCq) -> c_int {
    // Safety: the application passes its queue.
    let Some(q) = (unsafe { XwCq::release(cq) }) else {
        return libc::EINVAL;
    };
    if let Some(ch) = &q.channel {
        if let Ok(fd) = q.cq.event_fd() {
            ch.set.remove(std::os::fd::AsRawFd::as_raw_fd(&fd));
        }
        if let Some(l) = &q.local_event {
            ch.set.remove(l.raw());
        }
        ch.members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(Arc::as_ptr(&q) as u64));
    }
    0
}

/// `ibv_resize_cq`: a queue already holds twice what it was created for; a larger size is
/// not supported.
#[no_mangle]
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut IbvCq, cqe: c_int) -> c_int {
    // Safety: the application passes its queue.
    let Some(q) = (unsafe { XwCq::borrow(cq) }) else {
        return libc::EINVAL;
    };
    if cqe <= 0 {
        return libc::EINVAL;
    }
    if cqe as usize * 2 + 64 > q.cq.capacity() {
        log::unsupported("ibv_resize_cq to a larger size", "create the queue larger");
        return libc::EOPNOTSUPP;
    }
    // Safety: the application's own queue; cqe is the size it reads back.
    unsafe { (*q.c.get()).cqe = cqe };
    0
}

/// `ibv_get_cq_event`: waits (unless the channel's descriptor is non-blocking) for an armed
/// queue of the channel to fire; returns it and its `cq_context`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut IbvCompChannel,
    cq: *mut *mut IbvCq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // Safety: the application passes its channel.
    let Some(c) = (unsafe { XwCompChannel::borrow(ch) }) else {
        return errno::fail(libc::EINVAL);
    };
    loop {
        let token = match c.set.wait_one() {
            Ok(t) => t,
            Err(e) => return errno::fail(e),
        };
        let member = c
            .members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&token)
            .and_then(Weak::upgrade);
        let Some(q) = member else { continue };
        let events = q.take_events();
        log::debug(format_args!("cq {:p}: {events} events taken", q.c_ptr()));
        if events == 0 {
            continue;
        }
        if !cq.is_null() {
            // Safety: the caller's out-pointer.
            unsafe { *cq = q.c_ptr() };
        }
        if !cq_context.is_null() {
            // Safety: the caller's out-pointer.
            unsafe { *cq_context = q.cq_context() };
        }
        return 0;
    }
}

/// `ibv_ack_cq_events`.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut IbvCq, nevents: u32) {
    // Safety: the application passes its queue.
    if let Some(q) = unsafe { XwCq::borrow(cq) } {
        // Safety: a counter of the application's queue, written here only.
        unsafe {
            let c = &mut *q.c.get();
            c.comp_events_completed = c.comp_events_completed.wrapping_add(nevents);
        }
    }
}
