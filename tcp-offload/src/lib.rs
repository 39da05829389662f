//! xwarp's MPA-aware TCP, sans-IO (quinn-proto shape: handle_* / poll_*).
#![forbid(unsafe_code)]

pub mod sim;
