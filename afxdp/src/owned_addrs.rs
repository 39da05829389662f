//! The destination addresses the steering program treats as the engine's (`xwarp_addrs4`,
//! `xwarp_addrs6`): rule 6 of the table in `bpf/xwarp_maps.h`, the program's side of
//! `endpoint::OwnedAddrs`.

use std::net::IpAddr;
use std::os::fd::RawFd;

use libbpf_sys as bpf;

use super::maps::ADDRS_MAX;
use super::{XdpError, XdpProgram};

impl XdpProgram {
    /// Makes `addrs` the destination addresses the program steers, replacing the set: IPv4
    /// ones into `xwarp_addrs4`, IPv6 ones into `xwarp_addrs6`. At most [`ADDRS_MAX`] of each family. New addresses are
    /// added before old ones go, so an address in both sets is never missing.
    pub fn set_owned_addrs(&self, addrs: &[IpAddr]) -> Result<(), XdpError> {
        let (mut v4, mut v6): (Vec<[u8; 4]>, Vec<[u8; 16]>) = (Vec::new(), Vec::new());
        for a in addrs {
            match a {
                IpAddr::V4(a) => v4.push(a.octets()),
                IpAddr::V6(a) => v6.push(a.octets()),
            }
        }
        if v4.len() > ADDRS_MAX as usize || v6.len() > ADDRS_MAX as usize {
            return Err(XdpError::Invalid("more owned addresses than the map holds"));
        }
        replace_keys(self.addrs4_fd, &v4)?;
        replace_keys(self.addrs6_fd, &v6)
    }

    /// The destination addresses the program steers, IPv4 first.
    pub fn owned_addrs(&self) -> Result<Vec<IpAddr>, XdpError> {
        let v4 = keys::<4>(self.addrs4_fd)?.into_iter().map(IpAddr::from);
        let v6 = keys::<16>(self.addrs6_fd)?.into_iter().map(IpAddr::from);
        Ok(v4.chain(v6).collect())
    }
}

/// Makes `want` the keys of the hash map `fd` (value 1 each): adds, then removes the rest.
fn replace_keys<const N: usize>(fd: RawFd, want: &[[u8; N]]) -> Result<(), XdpError> {
    let one = 1u8;
    for key in want {
        // Safety: the key points at N live octets (the map's key size), the value at one octet
        // (its value size).
        let ret = unsafe {
            bpf::bpf_map_update_elem(
                fd,
                key.as_ptr().cast(),
                (&one as *const u8).cast(),
                bpf::BPF_ANY as u64,
            )
        };
        if ret < 0 {
            return Err(XdpError::from_neg("own address (map update)", ret));
        }
    }
    for key in keys::<N>(fd)?.iter().filter(|k| !want.contains(k)) {
        // Safety: the key points at N live octets, the map's key size.
        let ret = unsafe { bpf::bpf_map_delete_elem(fd, key.as_ptr().cast()) };
        if ret < 0 && ret != -libc::ENOENT {
            return Err(XdpError::from_neg("disown address (map delete)", ret));
        }
    }
    Ok(())
}

/// The keys of the hash map `fd`, whose keys are N octets (at most [`ADDRS_MAX`] of them).
fn keys<const N: usize>(fd: RawFd) -> Result<Vec<[u8; N]>, XdpError> {
    let mut keys: Vec<[u8; N]> = Vec::new();
    while keys.len() < ADDRS_MAX as usize {
        let mut next = [0u8; N];
        let prev = keys.last().map_or(std::ptr::null(), |k| k.as_ptr().cast());
        // Safety: `prev` is null (first key) or points at N live octets; `next` is writable for
        // N octets, the map's key size.
        let ret = unsafe { bpf::bpf_map_get_next_key(fd, prev, next.as_mut_ptr().cast()) };
        match ret {
            0 => keys.push(next),
            r if r == -libc::ENOENT => break,
            r => return Err(XdpError::from_neg("list owned addresses", r)),
        }
    }
    Ok(keys)
}
