//! The C ABI's data: libibverbs' and librdmacm's structures and constants, laid out as the
//! rdma-core headers lay them out (field names are the headers').
#![allow(missing_docs)]

pub mod cm;
pub mod layout;
pub mod verbs;
