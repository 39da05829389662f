//! Spoofed TCP SYNs for flood tests: the frame, a fixed-seed source of spoofed addresses, and
//! the paced sending loop. The socket (a packet socket in the flooding namespace) and how the
//! receiver's progress is read belong to the test.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::checksum::internet_checksum;

/// An Ethernet/IPv4/TCP SYN without options from `src` to `dst`, sequence number `seq`.
/// `macs` is (source, destination). Checksums are filled.
pub fn syn_frame(
    macs: ([u8; 6], [u8; 6]),
    src: SocketAddrV4,
    dst: SocketAddrV4,
    seq: u32,
) -> [u8; 54] {
    let mut f = [0u8; 54];
    f[0..6].copy_from_slice(&macs.1);
    f[6..12].copy_from_slice(&macs.0);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&40u16.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.ip().octets());
    ip[16..20].copy_from_slice(&dst.ip().octets());
    let ck = internet_checksum(&[ip]);
    ip[10..12].copy_from_slice(&ck.to_be_bytes());
    let tcp = &mut f[34..54];
    tcp[0..2].copy_from_slice(&src.port().to_be_bytes());
    tcp[2..4].copy_from_slice(&dst.port().to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x02; // SYN
    tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&src.ip().octets());
    pseudo[4..8].copy_from_slice(&dst.ip().octets());
    pseudo[9] = 6;
    pseudo[10..12].copy_from_slice(&20u16.to_be_bytes());
    let ck = internet_checksum(&[&pseudo, tcp]);
    tcp[16..18].copy_from_slice(&ck.to_be_bytes());
    f
}

/// A fixed-seed xorshift: a flood is the same every run.
#[derive(Debug, Clone)]
pub struct SpoofRng(u64);

impl SpoofRng {
    /// The generator every flood test starts from.
    pub fn new() -> Self {
        SpoofRng(0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A source in 198.18.0.0/15 outside 198.18.0.0/24 (the testbeds' own subnets live there,
    /// and a testbed host would answer SYN-ACKs for its own address with RST), port 1024 or
    /// above.
    pub fn spoofed(&mut self) -> SocketAddrV4 {
        let r = self.next_u64();
        let host = ((r as u32) & 0x1_ffff).max(256);
        let ip = u32::from(Ipv4Addr::new(198, 18, 0, 0)) | host;
        let port = ((r >> 32) as u16).max(1024);
        SocketAddrV4::new(Ipv4Addr::from(ip), port)
    }
}

impl Default for SpoofRng {
    fn default() -> Self {
        Self::new()
    }
}

/// Spoofed SYNs a SYN flood test makes the receiver take in at least.
pub const SYNS: u64 = 100_000;

/// The SYN flood of the flood tests: until the receiver took [`SYNS`] and 5,000 frames more (more than a
/// real client's connection brings it while the flood goes on), at most 1,024 frames ahead of
/// it (an engine's receive ring holds 2,048), two minutes at most.
pub const SYN_FLOOD: Pace = Pace {
    until_received: SYNS + 5_000,
    ahead: 1024,
    limit: Duration::from_secs(120),
};

/// How a flood is paced and when it ends.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Frames the receiver must have taken in before the flood may end.
    pub until_received: u64,
    /// Most frames the flood may be ahead of the receiver (a faster sender only overflows the
    /// receive ring, whose drops hit a real client's frames as much as the flood's).
    pub ahead: u64,
    /// The flood ends after this long whatever else.
    pub limit: Duration,
}

/// Sends spoofed SYNs (from [`SpoofRng::new`]) from `macs` to `dst` through `send` (false: the
/// device queue is full, try again) until `received()` reached `pace.until_received` and `stop`
/// is set, or `pace.limit` passed; keeps `sent` current and returns how many were sent. Frames
/// lost before the receiver never arrive, so it waits for the receiver 20 ms at most.
pub fn flood(
    macs: ([u8; 6], [u8; 6]),
    dst: SocketAddrV4,
    pace: Pace,
    stop: &AtomicBool,
    sent: &AtomicU64,
    mut send: impl FnMut(&[u8]) -> bool,
    received: impl Fn() -> u64,
) -> u64 {
    let mut rng = SpoofRng::new();
    let end = Instant::now() + pace.limit;
    let (mut n, mut got) = (0u64, 0u64);
    while (got < pace.until_received || !stop.load(Ordering::Relaxed)) && Instant::now() < end {
        let f = syn_frame(macs, rng.spoofed(), dst, rng.next_u64() as u32);
        if send(&f) {
            n += 1;
        } else {
            std::thread::yield_now();
        }
        if n.is_multiple_of(256) {
            sent.store(n, Ordering::Relaxed);
            let wait_end = Instant::now() + Duration::from_millis(20);
            loop {
                got = received();
                if n <= got + pace.ahead || Instant::now() >= wait_end {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    sent.store(n, Ordering::Relaxed);
    n
}

/// The resident set of process `pid` (this process: `None`), in octets, from procfs.
pub fn rss(pid: Option<u32>) -> u64 {
    let path = pid.map_or("/proc/self/status".to_string(), |p| {
        format!("/proc/{p}/status")
    });
    let s = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in {path}"));
    kb * 1024
}

/// Raises this process's open-file limit to at least `n` (root may raise the hard limit too).
pub fn raise_nofile(n: u64) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    if soft >= n {
        return;
    }
    setrlimit(Resource::RLIMIT_NOFILE, n, hard.max(n))
        .unwrap_or_else(|e| panic!("setrlimit(RLIMIT_NOFILE, {n}): {e}"));
}

/// Waits until `f` holds, or panics with `what` after `limit` (looks every 50 ms).
pub fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < end, "{what} not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syn_checksums_verify_and_sources_stay_in_the_test_range() {
        let mut rng = SpoofRng::new();
        let dst = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 4200);
        for _ in 0..1000 {
            let src = rng.spoofed();
            let o = src.ip().octets();
            assert_eq!((o[0], o[1] & 0xfe), (198, 18), "{src}");
            assert!(!(o[1] == 18 && o[2] == 0), "{src} inside the testbed /24");
            assert!(src.port() >= 1024);
            let f = syn_frame(([2; 6], [4; 6]), src, dst, 7);
            assert_eq!(internet_checksum(&[&f[14..34]]), 0, "IPv4 header checksum");
            let mut pseudo = [0u8; 12];
            pseudo[0..4].copy_from_slice(&o);
            pseudo[4..8].copy_from_slice(&dst.ip().octets());
            pseudo[9] = 6;
            pseudo[11] = 20;
            assert_eq!(internet_checksum(&[&pseudo, &f[34..54]]), 0, "TCP checksum");
            assert_eq!(f[47], 0x02, "SYN only");
        }
    }
}
