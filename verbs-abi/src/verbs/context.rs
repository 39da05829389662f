//! Device contexts (`ibv_open_device`): a `verbs_context` whose operations are xwarp's, the
//! device's engine, and the asynchronous event queue behind `async_fd`; the device, port and
//! GID queries.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::mem::{offset_of, size_of};
use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use super::device::XwDevice;
use super::fd::EventCounter;
use crate::abi::verbs::*;
use crate::handle::CObject;
use crate::{errno, log};

/// An open device context.
#[repr(C)]
pub(crate) struct XwContext {
    vctx: UnsafeCell<VerbsContext>,
    magic: AtomicU64,
    pub(crate) dev: &'static XwDevice,
    pub(crate) engine: dataplane::Device,
    /// `async_fd` and the events behind it.
    pub(crate) async_events: AsyncEvents,
    /// The protection domain of `rdma_create_qp` calls without one (allocated on first use).
    pub(crate) default_pd: OnceLock<usize>,
}

// Safety: the verbs_context is written before the context is shared; afterwards C reads it and
// only the application writes its mutex; the rest is Sync.
unsafe impl Sync for XwContext {}
// Safety: as above.
unsafe impl Send for XwContext {}

// Safety: the C structure is `vctx.context`, at this offset; `magic` is the field below.
unsafe impl CObject for XwContext {
    type C = IbvContext;
    const C_OFFSET: usize = offset_of!(XwContext, vctx) + offset_of!(VerbsContext, context);
    const MAGIC: u64 = 0x7877_6374_7800_0001;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// The asynchronous events of a context: `async_fd` is readable while some wait.
pub(crate) struct AsyncEvents {
    fd: EventCounter,
    queue: Mutex<VecDeque<IbvAsyncEvent>>,
}

impl AsyncEvents {
    /// Queues `event_type` about `element` (a CQ or QP pointer).
    pub(crate) fn push(&self, element: *mut c_void, event_type: c_int) {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(IbvAsyncEvent {
                element,
                event_type,
            });
        self.fd.add_one();
    }
}

// Safety: the queued pointers are only handed back to the application, never dereferenced.
unsafe impl Send for AsyncEvents {}
// Safety: as above.
unsafe impl Sync for AsyncEvents {}

impl XwContext {
    /// Opens a context on `dev` (its engine opened if it is not yet).
    pub(crate) fn open(dev: &'static XwDevice) -> Result<Arc<XwContext>, String> {
        let engine = dev.engine()?;
        let async_events = AsyncEvents {
            fd: EventCounter::new().map_err(|e| format!("async_fd: {e}"))?,
            queue: Mutex::new(VecDeque::new()),
        };
        let ops = IbvContextOps {
            compat_early: [0; 7],
            alloc_mw: 0,
            bind_mw: 0,
            dealloc_mw: 0,
            compat_create_cq: 0,
            poll_cq: Some(super::cq::poll_cq),
            req_notify_cq: Some(super::cq::req_notify_cq),
            compat_mid: [0; 7],
            post_srq_recv: Some(super::unsupported::post_srq_recv),
            compat_qp: [0; 4],
            post_send: Some(super::post::post_send),
            post_recv: Some(super::post::post_recv),
            compat_late: [0; 5],
        };
        let vctx = VerbsContext {
            newer: [0; 6],
            query_port: Some(query_port_op),
            reserved_a: [0; 24],
            create_cq_ex: 0,
            priv_: std::ptr::null_mut(),
            query_device_ex: 0,
            reserved_b: [0; 5],
            create_qp_ex: 0,
            reserved_c: [0; 4],
            placeholder3: 0,
            sz: size_of::<VerbsContext>(),
            context: IbvContext {
                device: dev.c_ptr(),
                ops,
                cmd_fd: -1,
                async_fd: async_events.fd.raw(),
                num_comp_vectors: 1,
                mutex: libc::PTHREAD_MUTEX_INITIALIZER,
                // __VERBS_ABI_IS_EXTENDED: the verbs_context operations above are there.
                abi_compat: usize::MAX as *mut c_void,
            },
        };
        Ok(Arc::new(XwContext {
            vctx: UnsafeCell::new(vctx),
            magic: AtomicU64::new(Self::MAGIC),
            dev,
            engine,
            async_events,
            default_pd: OnceLock::new(),
        }))
    }

    /// The context behind `ctx`, or EINVAL.
    ///
    /// # Safety
    /// As [`CObject::borrow`].
    pub(crate) unsafe fn get<'a>(ctx: *mut IbvContext) -> Result<&'a XwContext, c_int> {
        // Safety: the caller's promise.
        unsafe { Self::borrow(ctx) }.ok_or(libc::EINVAL)
    }
}

/// `ibv_open_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut IbvDevice) -> *mut IbvContext {
    let Some(dev) = XwDevice::from_c(device) else {
        log::once(
            "open unknown",
            "ibv_open_device: not a device of this library",
        );
        return errno::null(libc::ENODEV);
    };
    match XwContext::open(dev) {
        Ok(c) => XwContext::into_c(c),
        Err(why) => {
            log::always(why);
            errno::null(libc::ENODEV)
        }
    }
}

/// `ibv_close_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut IbvContext) -> c_int {
    // Safety: the application passes the context it opened.
    match unsafe { XwContext::release(ctx) } {
        Some(_) => 0,
        None => libc::EINVAL,
    }
}

/// `ibv_query_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(ctx: *mut IbvContext, attr: *mut IbvDeviceAttr) -> c_int {
    // Safety: the application passes its context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return libc::EINVAL;
    };
    if attr.is_null() {
        return libc::EINVAL;
    }
    // Safety: attr points to a struct ibv_device_attr of the caller's.
    unsafe { attr.write(c.dev.attr()) };
    0
}

/// Writes port 1's attributes, `len` octets at most.
///
/// # Safety
/// `attr` points to `len` writable octets.
unsafe fn write_port(c: &XwContext, port: u8, attr: *mut u8, len: usize) -> c_int {
    if port != 1 {
        return libc::EINVAL;
    }
    if attr.is_null() {
        return libc::EINVAL;
    }
    let a = c.dev.port_attr();
    let n = len.min(size_of::<IbvPortAttr>());
    // Safety: the caller's promise on attr/len; n is at most the source's size.
    unsafe {
        std::ptr::write_bytes(attr, 0, len);
        std::ptr::copy_nonoverlapping((&a as *const IbvPortAttr).cast::<u8>(), attr, n);
    }
    0
}

/// `verbs_context.query_port`: what the inline `ibv_query_port` calls, with the caller's
/// `sizeof(struct ibv_port_attr)`.
unsafe extern "C" fn query_port_op(
    ctx: *mut IbvContext,
    port: u8,
    attr: *mut IbvPortAttr,
    len: usize,
) -> c_int {
    // Safety: the inline verb passes the application's context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return libc::EINVAL;
    };
    // Safety: attr points to the caller's structure of `len` octets.
    unsafe { write_port(c, port, attr.cast(), len) }
}

/// `ibv_query_port` as exported: the 48 octets of `_compat_ibv_port_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut IbvContext,
    port: u8,
    attr: *mut c_void,
) -> c_int {
    // Safety: the application passes its context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return libc::EINVAL;
    };
    // Safety: attr points to the caller's compat structure of 48 octets.
    unsafe { write_port(c, port, attr.cast(), PORT_ATTR_COMPAT_LEN) }
}

/// `ibv_query_gid`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut IbvContext,
    port: u8,
    index: c_int,
    gid: *mut IbvGid,
) -> c_int {
    // Safety: the application passes its context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return -1;
    };
    match (port, c.dev.gid(index), gid.is_null()) {
        (1, Some(g), false) => {
            // Safety: gid points to the caller's union ibv_gid.
            unsafe { gid.write(g) };
            0
        }
        _ => -1,
    }
}

/// `ibv_query_gid_type` (rdma-core's private node): every GID is of type IB (0), as iWARP
/// devices report.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut IbvContext,
    port: u8,
    index: u32,
    gid_type: *mut u32,
) -> c_int {
    // Safety: the application passes its context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return libc::EINVAL;
    };
    if port != 1 || c.dev.gid(index as c_int).is_none() || gid_type.is_null() {
        return libc::EINVAL;
    }
    // Safety: gid_type points to the caller's u32.
    unsafe { gid_type.write(IBV_GID_TYPE_IB) };
    0
}

/// `struct ibv_gid_entry` (`_ibv_query_gid_ex`'s answer).
#[repr(C)]
struct IbvGidEntry {
    gid: IbvGid,
    gid_index: u32,
    port_num: u32,
    gid_type: u32,
    ndev_ifindex: u32,
}

fn gid_entry(c: &XwContext) -> IbvGidEntry {
    let name = std::ffi::CString::new(c.dev.iface.name.clone()).unwrap_or_default();
    // Safety: a NUL-terminated name.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    IbvGidEntry {
        gid: IbvGid {
            raw: c.dev.iface.gid(),
        },
        gid_index: 0,
        port_num: 1,
        gid_type: IBV_GID_TYPE_IB,
        ndev_ifindex: ifindex,
    }
}

/// `_ibv_query_gid_ex` (behind the inline `ibv_query_gid_ex`).
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut IbvContext,
    port: u32,
    index: u32,
    entry: *mut c_void,
    flags: u32,
    entry_size: usize,
) -> c_int {
    // Safety: the application passes its context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return libc::EINVAL;
    };
    if port != 1 || index != 0 || flags != 0 || entry.is_null() {
        return libc::EINVAL;
    }
    if entry_size < size_of::<IbvGidEntry>() {
        return libc::EINVAL;
    }
    // Safety: entry points to the caller's struct ibv_gid_entry of entry_size octets.
    unsafe { entry.cast::<IbvGidEntry>().write(gid_entry(c)) };
    0
}

/// `_ibv_query_gid_table`: the one GID.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut IbvContext,
    entries: *mut c_void,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    // Safety: the application passes its context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return -(libc::EINVAL as isize);
    };
    if flags != 0 || entry_size < size_of::<IbvGidEntry>() || entries.is_null() {
        return -(libc::EINVAL as isize);
    }
    if max_entries == 0 {
        return -(libc::EINVAL as isize);
    }
    // Safety: entries points to max_entries >= 1 entries of entry_size octets.
    unsafe { entries.cast::<IbvGidEntry>().write(gid_entry(c)) };
    1
}

/// `ibv_query_pkey`: one default P_Key.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut IbvContext,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    // Safety: the application passes its context.
    if unsafe { XwContext::get(ctx) }.is_err() || port != 1 || index != 0 || pkey.is_null() {
        return -1;
    }
    // Safety: pkey points to the caller's u16.
    unsafe { pkey.write(0xffff_u16.to_be()) };
    0
}

/// `ibv_get_pkey_index`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_pkey_index(ctx: *mut IbvContext, port: u8, pkey: u16) -> c_int {
    // Safety: the application passes its context.
    if unsafe { XwContext::get(ctx) }.is_err() || port != 1 || pkey != 0xffff_u16.to_be() {
        return -1;
    }
    0
}

/// `ibv_read_sysfs_file`: there is no sysfs device behind xwarp's; -1.
#[no_mangle]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    _dir: *const c_char,
    _file: *const c_char,
    _buf: *mut c_char,
    _size: usize,
) -> c_int {
    errno::fail(libc::ENOENT)
}

/// `ibv_get_sysfs_path`: none; -1.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    std::ptr::null()
}

/// `ibv_get_async_event`: the next asynchronous event (blocks unless `async_fd` was made
/// non-blocking; then EAGAIN).
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut IbvContext,
    event: *mut IbvAsyncEvent,
) -> c_int {
    // Safety: the application passes its context.
    let Ok(c) = (unsafe { XwContext::get(ctx) }) else {
        return errno::fail(libc::EINVAL);
    };
    if event.is_null() {
        return errno::fail(libc::EINVAL);
    }
    if let Err(e) = c.async_events.fd.take_one() {
        return errno::fail(e);
    }
    match c
        .async_events
        .queue
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pop_front()
    {
        Some(ev) => {
            // Safety: event points to the caller's struct ibv_async_event.
            unsafe { event.write(ev) };
            0
        }
        None => errno::fail(libc::EAGAIN),
    }
}

/// `ibv_ack_async_event`: nothing waits for acknowledgements.
#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut IbvAsyncEvent) {}
