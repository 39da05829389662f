//! Helpers shared by the integration tests.
#![allow(dead_code)]

use mpa::{Decoded, FpduRef, FramingConfig};

/// Parses whitespace-separated hex octets.
pub fn hex(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).expect("hex octet"))
        .collect()
}

pub const MARKERS_CRC: FramingConfig = FramingConfig {
    markers: true,
    crc: true,
};
pub const PLAIN_CRC: FramingConfig = FramingConfig {
    markers: false,
    crc: true,
};

/// The 18-octet untagged DDP/RDMAP Send header of Figures 5/6 (control 40 03, QN 0, MO 0).
pub fn send_header(control: [u8; 2], msn: u32) -> Vec<u8> {
    let mut h = vec![control[0], control[1], 0, 0, 0, 0, 0, 0, 0, 0];
    h.extend_from_slice(&msn.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 0]);
    h
}

/// Expects a complete FPDU.
pub fn complete<'a>(d: Result<Decoded<'a>, mpa::FramingError>) -> FpduRef<'a> {
    match d {
        Ok(Decoded::Complete(f)) => f,
        other => panic!("expected a complete FPDU, got {other:?}"),
    }
}
