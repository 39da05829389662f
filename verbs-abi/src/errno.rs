//! errno, as the C callers read it.

use std::os::raw::c_int;

/// Sets the calling thread's errno.
pub(crate) fn set(e: c_int) {
    // Safety: __errno_location returns the calling thread's errno slot, valid for the thread's
    // life.
    unsafe { *libc::__errno_location() = e };
}

/// Sets errno to `e` and returns -1 (the convention of the `int`-returning calls that report
/// through errno: librdmacm's).
pub(crate) fn fail(e: c_int) -> c_int {
    set(e);
    -1
}

/// Sets errno to `e` and returns NULL.
pub(crate) fn null<T>(e: c_int) -> *mut T {
    set(e);
    std::ptr::null_mut()
}
