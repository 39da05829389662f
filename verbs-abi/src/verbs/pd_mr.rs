//! Protection domains and memory regions. A region is the application's own memory,
//! registered in place (locked into RAM) with its tagged offsets starting at its IO virtual
//! address (the buffer's address for `ibv_reg_mr`): peers name its bytes by the addresses the
//! application sends them, and a local scatter-gather element `(addr, length, lkey)` is the
//! region's octets from `addr - iova`. lkey and rkey are both the region's STag.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::os::raw::{c_int, c_uint, c_void};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard};

use super::context::XwContext;
use crate::abi::verbs::*;
use crate::handle::CObject;
use crate::{errno, log};

/// A protection domain and its regions by lkey.
#[repr(C)]
pub(crate) struct XwPd {
    c: UnsafeCell<IbvPd>,
    magic: AtomicU64,
    pub(crate) ctx: Arc<XwContext>,
    pub(crate) pd: dataplane::ProtectionDomain,
    mrs: RwLock<HashMap<u32, Box<XwMr>>>,
    /// A region of one octet for zero-length messages (made on first use).
    zero: OnceLock<Option<dataplane::MemoryRegion>>,
}

// Safety: the C structure is written before the domain is shared and only read after; the
// regions sit behind the lock.
unsafe impl Sync for XwPd {}
// Safety: as above.
unsafe impl Send for XwPd {}

// Safety: `c` is the first field of a repr(C) struct; `magic` is the field below.
unsafe impl CObject for XwPd {
    type C = IbvPd;
    const C_OFFSET: usize = 0;
    const MAGIC: u64 = 0x7877_7064_0000_0001;
    fn magic(&self) -> &AtomicU64 {
        &self.magic
    }
}

/// A registered region.
#[repr(C)]
pub(crate) struct XwMr {
    c: UnsafeCell<IbvMr>,
    magic: u64,
    /// Registered with tagged offsets from the IO virtual address of its first octet
    /// (`base_to`): local SGE addresses and peers' TOs count from it.
    pub(crate) region: dataplane::MemoryRegion,
}

const MR_MAGIC: u64 = 0x7877_6d72_0000_0001;

/// The regions of a domain, locked for reading while a work request is translated.
pub(crate) type Regions<'a> = RwLockReadGuard<'a, HashMap<u32, Box<XwMr>>>;

impl XwMr {
    /// Octets `[addr, addr + len)` of the IO virtual address space as an offset into the
    /// region, if they lie inside it.
    pub(crate) fn offset_of(&self, addr: u64, len: u32) -> Option<usize> {
        let off = addr.checked_sub(self.region.base_to())?;
        let end = off.checked_add(u64::from(len))?;
        (end <= self.region.len() as u64).then_some(off as usize)
    }
}

impl XwPd {
    /// The region zero-length messages name (`None` when it could not be registered).
    pub(crate) fn zero_region(&self) -> Option<&dataplane::MemoryRegion> {
        self.zero
            .get_or_init(|| self.pd.register(1, dataplane::Access::LOCAL_WRITE).ok())
            .as_ref()
    }

    /// The regions, for translating work requests.
    pub(crate) fn regions(&self) -> Regions<'_> {
        self.mrs.read().unwrap_or_else(|p| p.into_inner())
    }

    /// A new domain of `ctx`.
    pub(crate) fn new(ctx: Arc<XwContext>) -> Arc<XwPd> {
        let pd = ctx.engine.alloc_pd();
        let mut this = Arc::new(XwPd {
            c: UnsafeCell::new(IbvPd {
                context: ctx.c_ptr(),
                handle: 0,
            }),
            magic: AtomicU64::new(Self::MAGIC),
            ctx,
            pd,
            mrs: RwLock::new(HashMap::new()),
            zero: OnceLock::new(),
        });
        let handle = (Arc::as_ptr(&this) as usize & 0xffff_ffff) as u32;
        if let Some(p) = Arc::get_mut(&mut this) {
            p.c.get_mut().handle = handle;
        }
        this
    }
}

/// `ibv_alloc_pd`.
#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut IbvContext) -> *mut IbvPd {
    // Safety: the application passes its context.
    match unsafe { XwContext::clone_arc(ctx) } {
        Some(c) => XwPd::into_c(XwPd::new(c)),
        None => errno::null(libc::EINVAL),
    }
}

/// `ibv_dealloc_pd`: EBUSY while regions are registered in it.
#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut IbvPd) -> c_int {
    // Safety: the application passes its domain.
    let Some(p) = (unsafe { XwPd::borrow(pd) }) else {
        return libc::EINVAL;
    };
    if !p.regions().is_empty() {
        return libc::EBUSY;
    }
    // Safety: as above.
    match unsafe { XwPd::release(pd) } {
        Some(_) => 0,
        None => libc::EINVAL,
    }
}

/// The domain's rights from libibverbs access flags, or the errno of a refusal.
fn rights(access: c_int) -> Result<dataplane::Access, c_int> {
    use crate::abi::verbs::access as a;
    // What libibverbs drops before a provider sees it: the optional range (relaxed ordering).
    let access = access & !a::OPTIONAL_RANGE;
    if access & (a::REMOTE_WRITE | a::REMOTE_ATOMIC) != 0 && access & a::LOCAL_WRITE == 0 {
        // Remote write needs local write (verbs).
        return Err(libc::EINVAL);
    }
    if access & (a::ON_DEMAND | a::ZERO_BASED) != 0 {
        log::unsupported(
            "IBV_ACCESS_ON_DEMAND / IBV_ACCESS_ZERO_BASED",
            "xwarp registers memory in place and locked, addressed by its IO virtual address",
        );
        return Err(libc::EOPNOTSUPP);
    }
    let known = a::LOCAL_WRITE
        | a::REMOTE_WRITE
        | a::REMOTE_READ
        | a::REMOTE_ATOMIC
        | a::MW_BIND
        | a::HUGETLB;
    if access & !known != 0 {
        return Err(libc::EINVAL);
    }
    let mut r = dataplane::Access::default();
    if access & a::LOCAL_WRITE != 0 {
        r = r | dataplane::Access::LOCAL_WRITE;
    }
    if access & a::REMOTE_WRITE != 0 {
        r = r | dataplane::Access::REMOTE_WRITE;
    }
    if access & a::REMOTE_READ != 0 {
        r = r | dataplane::Access::REMOTE_READ;
    }
    Ok(r)
}

/// Registers `[addr, addr + len)` with TOs from `iova`.
///
/// # Safety
/// `pd` is the application's domain; `addr..addr+len` is its memory, valid until
/// `ibv_dereg_mr` (the verbs contract).
unsafe fn register(
    pd: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut IbvMr {
    // Safety: the caller's promise on pd.
    let Some(p) = (unsafe { XwPd::borrow(pd) }) else {
        return errno::null(libc::EINVAL);
    };
    if addr.is_null() || len == 0 {
        return errno::null(libc::EINVAL);
    }
    let r = match rights(access) {
        Ok(r) => r,
        Err(e) => return errno::null(e),
    };
    // Safety: the application's memory, valid until it deregisters it (the verbs contract,
    // this function's); the application and the engine share it as an application and a NIC
    // share registered memory.
    let region = match unsafe { p.pd.register_raw_at(addr.cast(), len, r, iova) } {
        Ok(m) => m,
        Err(e) => {
            log::once(
                format!("reg_mr {e:?}"),
                format_args!("ibv_reg_mr of {len} octets failed: {e}"),
            );
            return errno::null(match e {
                dataplane::RegisterError::TaggedOffsetWraps => libc::EINVAL,
                _ => libc::ENOMEM,
            });
        }
    };
    let key = region.stag();
    let mr = Box::new(XwMr {
        c: UnsafeCell::new(IbvMr {
            context: p.ctx.c_ptr(),
            pd,
            addr,
            length: len,
            handle: key,
            lkey: key,
            rkey: key,
        }),
        magic: MR_MAGIC,
        region,
    });
    let ptr = mr.c.get();
    p.mrs
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, mr);
    ptr
}

/// `ibv_reg_mr`: TOs are the buffer's virtual addresses.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut IbvMr {
    // Safety: the verbs contract on pd and the buffer.
    unsafe { register(pd, addr, len, addr as u64, access) }
}

/// `ibv_reg_mr_iova`.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut IbvMr {
    // Safety: the verbs contract on pd and the buffer.
    unsafe { register(pd, addr, len, iova, access) }
}

/// `ibv_reg_mr_iova2` (what the inline `ibv_reg_mr` calls with optional access flags).
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut IbvPd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_uint,
) -> *mut IbvMr {
    // Safety: the verbs contract on pd and the buffer.
    unsafe { register(pd, addr, len, iova, access as c_int) }
}

/// `ibv_dereg_mr`: the region's STag stops working at once; work still posted on it
/// completes flushed.
#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut IbvMr) -> c_int {
    if mr.is_null() {
        return libc::EINVAL;
    }
    // Safety: the application passes a region it registered: an IbvMr at the start of an
    // XwMr (repr(C)), alive while its domain holds it.
    let (pd, key, magic) = unsafe {
        let x = &*(mr as *const XwMr);
        (x.c.get().read().pd, x.c.get().read().lkey, x.magic)
    };
    if magic != MR_MAGIC {
        return libc::EINVAL;
    }
    // Safety: the region's domain, which the application still holds.
    let Some(p) = (unsafe { XwPd::borrow(pd) }) else {
        return libc::EINVAL;
    };
    let mut mrs = p.mrs.write().unwrap_or_else(|e| e.into_inner());
    match mrs.get(&key) {
        Some(m) if m.c.get() == mr => {
            mrs.remove(&key);
            0
        }
        _ => libc::EINVAL,
    }
}

/// `ibv_rereg_mr`: not supported (deregister and register again).
#[no_mangle]
pub unsafe extern "C" fn ibv_rereg_mr(
    _mr: *mut IbvMr,
    _flags: c_int,
    _pd: *mut IbvPd,
    _addr: *mut c_void,
    _len: usize,
    _access: c_int,
) -> c_int {
    log::unsupported(
        "ibv_rereg_mr",
        "deregister the region and register it again",
    );
    // IBV_REREG_MR_ERR_INPUT: the old region is still valid.
    errno::set(libc::EOPNOTSUPP);
    -1
}
