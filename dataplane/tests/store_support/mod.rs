//! Fixtures of the in-process store tests: a temporary store file, a server over it on
//! loopback (kernel transport), deterministic data.
#![allow(dead_code)]

use std::path::PathBuf;

use dataplane::store::{MappedFile, ServerOptions, StoreServer};
use dataplane::{Device, Transport};

/// A file in the temp directory (unique per process and name), removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("xwarp-store-{}-{name}.img", std::process::id()));
        let _ = std::fs::remove_file(&p);
        Self(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A store of `size` bytes over `file`, served on 127.0.0.1 (any port) with `opts`.
pub fn server_with(file: &TempFile, size: u64, opts: ServerOptions) -> (Device, StoreServer) {
    let dev = Device::open(Transport::Kernel).unwrap();
    let f = MappedFile::open(&file.0, Some(size)).unwrap();
    let s = StoreServer::start(&dev, "127.0.0.1:0".parse().unwrap(), f, opts).unwrap();
    (dev, s)
}

/// [`server_with`] default options.
pub fn server(file: &TempFile, size: u64) -> (Device, StoreServer) {
    server_with(file, size, ServerOptions::default())
}

/// Deterministic bytes (xorshift) so a mismatch is reproducible.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
