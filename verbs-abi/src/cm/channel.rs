//! Event channels and events. A channel's descriptor is a counting eventfd: readable while
//! events wait, so applications may poll it or make it non-blocking; `rdma_get_cm_event`
//! takes one event per call. An event's memory (and its private data) is the application's
//! until `rdma_ack_cm_event`.

use std::cell::UnsafeCell;
use std::os::raw::c_int;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::event_acks::EventAcks;
use super::event_queue::EventQueue;
use crate::abi::cm::*;
use crate::abi::verbs::IbvAhAttr;
use crate::errno;
use crate::handle::CObject;
use crate::verbs::fd::EventCounter;

/// An event channel.
#[repr(C)]
pub(crate) struct XwEventChannel {
    c: UnsafeCell<RdmaEventChannel>,
    magic: AtomicU64,
    events: EventQueue<Box<XwEvent>, EventCounter>,
}

// Safety: the C structure (the descriptor) is written once before the channel is shared.
unsafe impl Sync for XwEventChannel {}
// Safety: as above.
unsafe impl Send for XwEventChannel {}

// Safety: `c` is the first field of a repr(C) struct; `magic` is the field below.
unsafe impl CObject for XwEventChannel {
    type C = RdmaEventChannel;
    const C_OFFSET: usize = 0;
    const MAGIC: u64 = 0x7877_6563_0000_0001;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// An event as the application gets it, with its private data.
#[repr(C)]
pub(crate) struct XwEvent {
    c: RdmaCmEvent,
    magic: u64,
    private_data: Vec<u8>,
    /// The identifier it counts against until acknowledged (the listening one for
    /// CONNECT_REQUEST, as librdmacm counts it).
    acks: Arc<EventAcks>,
}

const EVENT_MAGIC: u64 = 0x7877_6576_0000_0001;

// Safety: the ids an event names are only handed to the application.
unsafe impl Send for XwEvent {}

/// The connection parameters an event reports.
#[derive(Debug, Default, Clone)]
pub(crate) struct ConnInfo {
    pub(crate) private_data: Vec<u8>,
    pub(crate) initiator_depth: u8,
    pub(crate) responder_resources: u8,
}

impl XwEvent {
    /// An event of type `event` about `id` (and `listen_id`), with `status` (0 or a negative
    /// errno) and the connection parameters `conn`, counted against `acks` while the
    /// application holds it.
    pub(crate) fn new(
        id: *mut RdmaCmId,
        listen_id: *mut RdmaCmId,
        event: c_int,
        status: c_int,
        conn: ConnInfo,
        acks: Arc<EventAcks>,
    ) -> Box<XwEvent> {
        let mut e = Box::new(XwEvent {
            c: RdmaCmEvent {
                id,
                listen_id,
                event,
                status,
                param: RdmaEventParam {
                    ud: RdmaUdParam {
                        private_data: std::ptr::null(),
                        private_data_len: 0,
                        ah_attr: IbvAhAttr::default(),
                        qp_num: 0,
                        qkey: 0,
                    },
                },
            },
            magic: EVENT_MAGIC,
            private_data: conn.private_data,
            acks,
        });
        let len = e.private_data.len().min(255);
        e.c.param.conn = RdmaConnParam {
            private_data: if len == 0 {
                std::ptr::null()
            } else {
                e.private_data.as_ptr().cast()
            },
            private_data_len: len as u8,
            responder_resources: conn.responder_resources,
            initiator_depth: conn.initiator_depth,
            flow_control: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            srq: 0,
            qp_num: 0,
        };
        e
    }
}

impl XwEventChannel {
    /// Queues `event` (the descriptor becomes readable).
    pub(crate) fn push(&self, event: Box<XwEvent>) {
        self.events.push(event);
    }

    /// The next event whose identifier still exists, counted against it: waits for one unless
    /// the descriptor is non-blocking. An event about an identifier destroyed meanwhile is
    /// dropped (a connection request's new identifier with it, the request rejected).
    fn next(&self) -> Result<Box<XwEvent>, c_int> {
        loop {
            let e = self.events.next()?;
            if e.acks.take() {
                return Ok(e);
            }
            if e.c.event == event::CONNECT_REQUEST {
                // Safety: the new identifier the request made, which the application never saw.
                unsafe { super::id::xwarp_rdma_destroy_id(e.c.id) };
            }
        }
    }
}

/// `rdma_create_event_channel`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_create_event_channel() -> *mut RdmaEventChannel {
    let counter = match EventCounter::new() {
        Ok(c) => c,
        Err(e) => return errno::null(e.raw_os_error().unwrap_or(libc::EMFILE)),
    };
    let ch = Arc::new(XwEventChannel {
        c: UnsafeCell::new(RdmaEventChannel { fd: counter.raw() }),
        magic: AtomicU64::new(XwEventChannel::MAGIC),
        events: EventQueue::new(counter),
    });
    XwEventChannel::into_c(ch)
}

/// `rdma_destroy_event_channel`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_destroy_event_channel(ch: *mut RdmaEventChannel) {
    // Safety: the application passes its channel.
    drop(unsafe { XwEventChannel::release(ch) });
}

/// `rdma_get_cm_event`.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_get_cm_event(
    ch: *mut RdmaEventChannel,
    event: *mut *mut RdmaCmEvent,
) -> c_int {
    // Safety: the application passes its channel. A strong count: a thread may wait here
    // while another destroys the channel (it then waits on, as on a kernel descriptor).
    let Some(c) = (unsafe { XwEventChannel::clone_arc(ch) }) else {
        return errno::fail(libc::EINVAL);
    };
    if event.is_null() {
        return errno::fail(libc::EINVAL);
    }
    match c.next() {
        Ok(e) => {
            // Safety: the caller's out-pointer; the event is theirs until acked.
            unsafe { *event = Box::into_raw(e).cast() };
            0
        }
        Err(e) => errno::fail(e),
    }
}

/// `rdma_ack_cm_event`: frees the event.
#[no_mangle]
pub unsafe extern "C" fn xwarp_rdma_ack_cm_event(event: *mut RdmaCmEvent) -> c_int {
    if event.is_null() {
        return errno::fail(libc::EINVAL);
    }
    let e = event.cast::<XwEvent>();
    // Safety: an event from rdma_get_cm_event: an RdmaCmEvent at the start of a boxed XwEvent.
    if unsafe { (*e).magic } != EVENT_MAGIC {
        return errno::fail(libc::EINVAL);
    }
    // Safety: as above; acked once (the magic is cleared before the box is freed).
    let e = unsafe {
        (*e).magic = 0;
        Box::from_raw(e)
    };
    e.acks.ack();
    0
}

/// `rdma_event_str`.
#[no_mangle]
pub extern "C" fn xwarp_rdma_event_str(event: c_int) -> *const std::os::raw::c_char {
    match event {
        event::ADDR_RESOLVED => c"RDMA_CM_EVENT_ADDR_RESOLVED",
        event::ADDR_ERROR => c"RDMA_CM_EVENT_ADDR_ERROR",
        event::ROUTE_RESOLVED => c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        event::ROUTE_ERROR => c"RDMA_CM_EVENT_ROUTE_ERROR",
        event::CONNECT_REQUEST => c"RDMA_CM_EVENT_CONNECT_REQUEST",
        event::CONNECT_RESPONSE => c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        event::CONNECT_ERROR => c"RDMA_CM_EVENT_CONNECT_ERROR",
        event::UNREACHABLE => c"RDMA_CM_EVENT_UNREACHABLE",
        event::REJECTED => c"RDMA_CM_EVENT_REJECTED",
        event::ESTABLISHED => c"RDMA_CM_EVENT_ESTABLISHED",
        event::DISCONNECTED => c"RDMA_CM_EVENT_DISCONNECTED",
        event::DEVICE_REMOVAL => c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        event::MULTICAST_JOIN => c"RDMA_CM_EVENT_MULTICAST_JOIN",
        event::MULTICAST_ERROR => c"RDMA_CM_EVENT_MULTICAST_ERROR",
        event::ADDR_CHANGE => c"RDMA_CM_EVENT_ADDR_CHANGE",
        event::TIMEWAIT_EXIT => c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
        _ => c"UNKNOWN EVENT",
    }
    .as_ptr()
}
