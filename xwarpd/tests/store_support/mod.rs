//! Fixtures of the in-process store tests: a temporary store file, a server over it on
//! loopback (kernel transport), deterministic data.
#![allow(dead_code)]

use dataplane::{Device, MappedFile, Transport};
use xwarpd::store::{ServerOptions, StoreServer};

/// A store file in the temp directory, removed on drop.
pub use testkit::TempPath as TempFile;

/// A store of `size` bytes over `file`, served on 127.0.0.1 (any port) with `opts`.
pub fn server_with(file: &TempFile, size: u64, opts: ServerOptions) -> (Device, StoreServer) {
    let dev = Device::open(Transport::Kernel).unwrap();
    let f = MappedFile::open(file.path(), Some(size)).unwrap();
    let s = StoreServer::start(&dev, "127.0.0.1:0".parse().unwrap(), f, opts).unwrap();
    (dev, s)
}

/// [`server_with`] default options.
pub fn server(file: &TempFile, size: u64) -> (Device, StoreServer) {
    server_with(file, size, ServerOptions::default())
}

/// Deterministic bytes (testkit's pattern; this module's callers name the seed first).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    testkit::pattern(len, seed)
}
