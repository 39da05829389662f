//! Fault injection for tests, compiled into debug builds only: with `XWARP_TEST_PANIC=PLACE`
//! in the environment, the thread that reaches [`panic_if`]`(PLACE)` panics. Places: `store`
//! (a store connection's thread, when a client connects), `echo` (an echo connection's thread).
//! The AF_XDP engine thread reads the same variable (`engine`, in `dataplane`).

/// Panics when `XWARP_TEST_PANIC` names `place`.
pub fn panic_if(place: &str) {
    if std::env::var("XWARP_TEST_PANIC").is_ok_and(|v| v == place) {
        panic!("injected by XWARP_TEST_PANIC={place}");
    }
}
