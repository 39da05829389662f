//! A NIC's RSS for TCP, read from its driver: the Toeplitz key and indirection table
//! (`ETHTOOL_GRSSH`) and whether TCP ports enter the hash (`ETHTOOL_GRXFH`), so that lanes can
//! follow the NIC ([`endpoint::RssLanes`]). veth and most virtual devices have no RSS.

use endpoint::RssHash;

use super::ethtool::Ethtool;
use super::XdpError;

const ETHTOOL_GRXFH: u32 = 0x0000_0029;
const ETHTOOL_GRSSH: u32 = 0x0000_0046;
/// `ETH_RSS_HASH_TOP`: the Toeplitz function.
const HASH_TOEPLITZ: u8 = 1 << 0;
const TCP_V4_FLOW: u32 = 0x01;
const TCP_V6_FLOW: u32 = 0x05;
/// `RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1 | RXH_L4_B_2_3`: both addresses and both ports.
const FOUR_TUPLE: u64 = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7);

/// The head of `struct ethtool_rxfh` (linux/ethtool.h); `rss_config` follows it: the
/// indirection table (`indir_size` u32s), then the key (`key_size` octets).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RxfhHead {
    cmd: u32,
    rss_context: u32,
    indir_size: u32,
    key_size: u32,
    hfunc: u8,
    input_xfrm: u8,
    rsvd8: [u8; 2],
    rsvd32: u32,
}

/// The part of `struct ethtool_rxnfc` that `ETHTOOL_GRXFH` reads and writes.
#[repr(C)]
#[derive(Default)]
struct RxnfcHead {
    cmd: u32,
    flow_type: u32,
    data: u64,
}

/// Why a device's RSS cannot be followed; the lanes then use the symmetric hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRss {
    /// The driver reports no RSS (veth, most virtual devices).
    NotReported,
    /// Not the Toeplitz function, or an input transformation (symmetric XOR) on top of it.
    OtherFunction,
    /// TCP over IPv4 or IPv6 is not hashed on both addresses and both ports.
    NotFourTuple,
    /// The key is shorter than an IPv6 input needs, or the table is empty.
    Unusable,
}

/// The RSS of `ifname` in the calling thread's network namespace, or why the lanes cannot
/// follow it. An error only when the interface cannot be asked at all.
pub fn read_rss(ifname: &str) -> Result<Result<RssHash, NoRss>, XdpError> {
    let sock = Ethtool::open(ifname)?;
    // First the sizes, then the table and the key.
    let mut head = RxfhHead {
        cmd: ETHTOOL_GRSSH,
        ..Default::default()
    };
    // Safety: with both sizes zero the kernel reads and writes the head alone.
    if !unsafe { sock.call(ifname, (&mut head as *mut RxfhHead).cast(), "ETHTOOL_GRSSH")? } {
        return Ok(Err(NoRss::NotReported));
    }
    if head.hfunc != HASH_TOEPLITZ || head.input_xfrm != 0 {
        return Ok(Err(NoRss::OtherFunction));
    }
    let (indir, key_len) = (head.indir_size as usize, head.key_size as usize);
    if indir == 0 || indir > 1 << 16 || key_len > 1 << 10 {
        return Ok(Err(NoRss::Unusable));
    }
    // u32 words: the head (6), the table, the key rounded up.
    let head_words = std::mem::size_of::<RxfhHead>() / 4;
    let mut buf = vec![0u32; head_words + indir + key_len.div_ceil(4)];
    let ask = RxfhHead {
        cmd: ETHTOOL_GRSSH,
        indir_size: head.indir_size,
        key_size: head.key_size,
        ..Default::default()
    };
    // Safety: `buf` is u32-aligned and at least `size_of::<RxfhHead>()` long; RxfhHead is
    // repr(C) plain data of u32/u8 fields, so writing it there is sound.
    unsafe { buf.as_mut_ptr().cast::<RxfhHead>().write(ask) };
    // Safety: `buf` holds the head with the sizes the driver reported, then room for that
    // many table entries and key octets, which is all the kernel writes.
    if !unsafe { sock.call(ifname, buf.as_mut_ptr().cast(), "ETHTOOL_GRSSH")? } {
        return Ok(Err(NoRss::NotReported));
    }
    let table = buf[head_words..head_words + indir].to_vec();
    let key: Vec<u8> = buf[head_words + indir..]
        .iter()
        .flat_map(|w| w.to_ne_bytes())
        .take(key_len)
        .collect();
    for flow in [TCP_V4_FLOW, TCP_V6_FLOW] {
        let mut nfc = RxnfcHead {
            cmd: ETHTOOL_GRXFH,
            flow_type: flow,
            data: 0,
        };
        // Safety: ETHTOOL_GRXFH reads and writes cmd, flow_type and data only (the head).
        let answered =
            unsafe { sock.call(ifname, (&mut nfc as *mut RxnfcHead).cast(), "ETHTOOL_GRXFH")? };
        if !answered || nfc.data & FOUR_TUPLE != FOUR_TUPLE {
            return Ok(Err(NoRss::NotFourTuple));
        }
    }
    Ok(RssHash::new(key, table).ok_or(NoRss::Unusable))
}
