//! The objects handed to C: each lives in an `Arc`, and C holds a pointer to the C structure
//! at a fixed offset inside it (its first field, or `verbs_context.context` for a device
//! context). The application's handle is one strong count, taken back by the destroy call;
//! threads of the library (a connecting queue pair, a listener) hold their own counts, so an
//! object destroyed under them stays valid until they let go. A magic number beside the C
//! structure turns a NULL, foreign or already destroyed pointer into an error instead of a
//! crash where it can.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An object handed to C.
///
/// # Safety
/// `C_OFFSET` must be the offset of the C structure inside `Self`, and `magic` must return
/// the same `AtomicU64` field for the life of the object.
pub(crate) unsafe trait CObject: Sized + Send + Sync + 'static {
    /// The C structure C code sees.
    type C;
    /// Where it lies in `Self`.
    const C_OFFSET: usize;
    /// The value of a live object's magic field.
    const MAGIC: u64;
    /// The magic field.
    fn magic(&self) -> &AtomicU64;

    /// The pointer C gets for `obj`, which keeps one strong count.
    fn into_c(obj: Arc<Self>) -> *mut Self::C {
        // Safety: C_OFFSET lies inside the allocation (the trait's contract).
        unsafe { Arc::into_raw(obj).cast::<u8>().add(Self::C_OFFSET) as *mut Self::C }
    }

    /// The C structure of `self`.
    fn c_ptr(&self) -> *mut Self::C {
        // Safety: C_OFFSET lies inside `self` (the trait's contract).
        unsafe { (self as *const Self).cast::<u8>().add(Self::C_OFFSET) as *mut Self::C }
    }

    /// The object behind a pointer C holds, if it is a live one of this kind.
    ///
    /// # Safety
    /// `p` is NULL or was returned by [`CObject::into_c`] for this type (the libibverbs
    /// contract: the application passes back what it was given), and its object has not been
    /// freed; the reference must not outlive the application's handle.
    unsafe fn borrow<'a>(p: *mut Self::C) -> Option<&'a Self> {
        if p.is_null() {
            return None;
        }
        // Safety: the caller's promise: p points C_OFFSET into a live Self.
        let obj = unsafe { &*(p.cast::<u8>().sub(Self::C_OFFSET) as *const Self) };
        (obj.magic().load(Ordering::Acquire) == Self::MAGIC).then_some(obj)
    }

    /// A strong count on the object behind `p`.
    ///
    /// # Safety
    /// As [`CObject::borrow`].
    unsafe fn clone_arc(p: *mut Self::C) -> Option<Arc<Self>> {
        // Safety: the caller's promise.
        let obj = unsafe { Self::borrow(p) }?;
        let raw = obj as *const Self;
        // Safety: raw came from Arc::into_raw (into_c) and the object is alive: the
        // application's count is still held.
        unsafe {
            Arc::increment_strong_count(raw);
            Some(Arc::from_raw(raw))
        }
    }

    /// Takes the application's strong count back (a destroy call): `None` when `p` is not a
    /// live object of this kind (destroyed twice, or foreign). The magic is cleared, so later
    /// calls with the same pointer fail cleanly while another count keeps the memory.
    ///
    /// # Safety
    /// As [`CObject::borrow`].
    unsafe fn release(p: *mut Self::C) -> Option<Arc<Self>> {
        // Safety: the caller's promise.
        let obj = unsafe { Self::borrow(p) }?;
        obj.magic()
            .compare_exchange(Self::MAGIC, 0, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        // Safety: the application's count, taken back once (the magic exchange above is
        // the only way here).
        Some(unsafe { Arc::from_raw(obj as *const Self) })
    }
}
