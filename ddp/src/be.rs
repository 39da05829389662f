//! Big-endian field access for the header views. Callers check lengths first (`new_checked`).
//! Each field is read as one slice of its width (one bounds check, one load), not octet by
//! octet.

/// The `N` octets at `at`.
fn octets<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut o = [0u8; N];
    o.copy_from_slice(&b[at..at + N]);
    o
}

pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(octets(b, at))
}

pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(octets(b, at))
}

pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(octets(b, at))
}

pub(crate) fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
