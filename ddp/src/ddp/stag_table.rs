//! The STag table (the PRM role of -06 §8.3): memory regions with base TO, length, access
//! rights, protection domain and optional stream association; validation of tagged access
//! (-06 §7.1, DDP-79, DDP-86..DDP-102); local and remote invalidation.
//!
//! STag = 24-bit slot index + 8-bit key. Keys come from a keyed PRF (SipHash-2-4 over a
//! counter, keyed with the caller's seed) so a peer cannot guess a valid STag from old ones; the
//! seed is an argument (the OS random source in production, a constant in tests).
//!
//! Slots are reused after deregistration, oldest free slot first, each time under a new
//! generation and a key other than the slot's last one. A [`RegionHandle`] names one
//! registration (slot and generation): every call that takes a handle refuses a stale one, so
//! work posted on a region that was deregistered never reaches the slot's next region.

use crate::ddp::error::DdpError;
use crate::ddp::memory::RegionHandle;
use crate::ddp::stag::Stag;
use crate::rdmap::term_code::{RdmapError, TermCode};
use core::fmt;
use core::hash::Hasher;
use siphasher::sip::SipHasher24;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Access rights of a region (DDP-101).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access(pub u8);

impl Access {
    /// The local side may write into it (receive buffers, Read Response sinks).
    pub const LOCAL_WRITE: Access = Access(0x1);
    /// The remote peer may RDMA Read it.
    pub const REMOTE_READ: Access = Access(0x2);
    /// The remote peer may RDMA Write it.
    pub const REMOTE_WRITE: Access = Access(0x4);
    /// Everything.
    pub const ALL: Access = Access(0x7);

    /// Whether every right of `need` is granted.
    pub const fn contains(self, need: Access) -> bool {
        self.0 & need.0 == need.0
    }
}

impl core::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// A protection domain identifier (local, never on the wire; DDP-86).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PdId(pub u32);

/// A DDP stream (queue pair) identifier (local, never on the wire; DDP-87).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StreamId(pub u32);

/// What a caller registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionSpec {
    /// The TO of the region's first octet (0 for zero-based, or a virtual address).
    pub base_to: u64,
    /// Length in octets.
    pub len: u64,
    /// Access rights.
    pub access: Access,
    /// Protection domain.
    pub pd: PdId,
    /// When set, only this stream may use the STag (stream association, DDP-87).
    pub stream: Option<StreamId>,
}

/// A region as the table holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Registration data.
    pub spec: RegionSpec,
    /// Current STag (index + key).
    pub stag: Stag,
    /// False after invalidation, until re-validated with a fresh key.
    pub valid: bool,
}

/// A tagged-access check failure, as the DDP layer numbers it (-06 §7.2) or as an RDMAP access
/// error (DDP has no access-rights code; RDMAP has one, RFC 5040 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaggedFault {
    /// A DDP error (Layer 1).
    Ddp(DdpError),
    /// The STag is fine for DDP but lacks the right (RDMAP 0x1/0x02).
    AccessRights,
}

impl TaggedFault {
    /// The DDP triple, or the RDMAP access-rights triple.
    pub const fn term_code(self) -> TermCode {
        match self {
            TaggedFault::Ddp(e) => e.term_code(),
            TaggedFault::AccessRights => RdmapError::AccessRights.term_code(),
        }
    }
}

/// Why a local request cannot use a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalFault {
    /// No such handle, or it is invalidated.
    InvalidRegion,
    /// Offset/length outside the region.
    Bounds,
    /// The region lacks the right.
    Access,
}

/// Why an invalidation failed (RDMAP "STag cannot be Invalidated" 0x1/0x09 or 0x2/0x09).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidateFault {
    /// Unknown or already invalid STag.
    Invalid,
    /// The STag belongs to another PD or stream.
    NotAssociated,
}

/// Registration failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegisterFault {
    /// All 2^24 - 1 indexes are in use.
    TableFull,
}

/// What a tagged access resolves to in the table: the region, the offset in it, and the length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionRange {
    /// Target region.
    pub region: RegionHandle,
    /// Offset from the region start.
    pub offset: u64,
    /// Octets.
    pub len: u64,
}

/// Where an STag lets a remote access of a given kind land, once its key, validity,
/// association and access rights have passed: its region and the TOs `[base, limit)` it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteWindow {
    /// Target region.
    pub region: RegionHandle,
    /// TO of the region's first octet.
    pub base: u64,
    /// TO one past the region's last octet (saturated at 2^64 - 1).
    pub limit: u64,
}

impl RemoteWindow {
    /// The checks of [`StagTable::check_remote`] left after the window: `len > 0` octets at
    /// `to` must not wrap 2^64 (-06 §7.1 #5), then must lie inside the window (#3/#4).
    #[inline]
    pub fn range(&self, to: u64, len: u64) -> Result<RegionRange, TaggedFault> {
        // A sum of exactly 2^64 counts as a wrap.
        let end = match to.checked_add(len) {
            Some(e) => e,
            None => return Err(TaggedFault::Ddp(DdpError::ToWrap)),
        };
        if to < self.base || to >= self.limit || end > self.limit {
            return Err(TaggedFault::Ddp(DdpError::BaseBounds));
        }
        Ok(RegionRange {
            region: self.region,
            offset: to - self.base,
            len,
        })
    }
}

const MAX_INDEX: u32 = (1 << 24) - 1;

/// Source of table epochs: each value is handed out once in the process.
static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);

fn fresh_epoch() -> u64 {
    NEXT_EPOCH.fetch_add(1, Ordering::Relaxed)
}

/// One slot of the table: its current registration and how many it has had.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Generation of the current (or, when empty, the last) registration.
    generation: u32,
    /// Key of the current (or last) registration's STag.
    last_key: Option<u8>,
    region: Option<Region>,
}

/// The STag table. Index 0 is never handed out, so STag 0 is never valid.
#[derive(Debug)]
pub struct StagTable {
    slots: Vec<Slot>,
    /// Free slots, the longest free first (reuse as late as possible).
    free: VecDeque<u32>,
    keys: KeyStream,
    /// Changes with every mutation; unique across all tables (see [`StagTable::epoch`]).
    epoch: u64,
}

/// STag keys: SipHash-2-4 keyed with the seed over a counter, one key per draw. Without the
/// seed, the keys seen so far say nothing about the next one.
struct KeyStream {
    sip_key: (u64, u64),
    counter: u64,
}

impl KeyStream {
    fn new(seed: u64) -> Self {
        // The second half of the SipHash key only separates this use of the seed from others.
        const DOMAIN: u64 = 0x7374_6167_2d6b_6579; // "stag-key"
        KeyStream {
            sip_key: (seed, DOMAIN),
            counter: 0,
        }
    }

    fn next(&mut self) -> u8 {
        let mut h = SipHasher24::new_with_keys(self.sip_key.0, self.sip_key.1);
        h.write_u64(self.counter);
        self.counter = self.counter.wrapping_add(1);
        h.finish() as u8
    }
}

impl fmt::Debug for KeyStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyStream(..)")
    }
}

impl StagTable {
    /// An empty table whose key generator is seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        StagTable {
            slots: vec![Slot::default()],
            free: VecDeque::new(),
            keys: KeyStream::new(seed),
            epoch: fresh_epoch(),
        }
    }

    /// An identifier of this table's current contents: every call that takes `&mut self`
    /// gives the table a new epoch, never used before by any table in the process. While
    /// `epoch()` returns the value seen at an earlier check, on the same table or not, that
    /// table is unchanged since and every check answers as it did then (never 0).
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    fn fresh_key(&mut self, old: Option<u8>) -> u8 {
        loop {
            let k = self.keys.next();
            if Some(k) != old {
                return k;
            }
        }
    }

    /// Register a region; it is valid at once. Returns its handle and STag. A reused slot gets
    /// a new generation and a key other than its last one, so the slot's previous STag does
    /// not reach the new region.
    pub fn register(&mut self, spec: RegionSpec) -> Result<(RegionHandle, Stag), RegisterFault> {
        self.epoch = fresh_epoch();
        let index = match self.free.pop_front() {
            Some(i) => i,
            None => {
                let i = self.slots.len() as u32;
                if i > MAX_INDEX {
                    return Err(RegisterFault::TableFull);
                }
                self.slots.push(Slot::default());
                i
            }
        };
        let last = self.slots[index as usize].last_key;
        let key = self.fresh_key(last);
        let stag = Stag::new(index, key);
        let slot = &mut self.slots[index as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.last_key = Some(key);
        slot.region = Some(Region {
            spec,
            stag,
            valid: true,
        });
        Ok((RegionHandle::new(index, slot.generation), stag))
    }

    /// Remove a region; its slot may be reused later (another generation, another key). A stale
    /// handle (the region was deregistered already) changes nothing.
    pub fn deregister(&mut self, handle: RegionHandle) -> Option<Region> {
        self.epoch = fresh_epoch();
        let slot = self.slot_mut(handle)?;
        let r = slot.region.take()?;
        self.free.push_back(handle.index());
        Some(r)
    }

    fn slot_mut(&mut self, handle: RegionHandle) -> Option<&mut Slot> {
        self.slots
            .get_mut(handle.index() as usize)
            .filter(|s| s.generation == handle.generation() && s.region.is_some())
    }

    /// The region behind a handle; `None` once it has been deregistered (even when its slot
    /// holds another region now).
    pub fn region(&self, handle: RegionHandle) -> Option<&Region> {
        let s = self.slots.get(handle.index() as usize)?;
        (s.generation == handle.generation())
            .then_some(s.region.as_ref())
            .flatten()
    }

    /// Whether `handle`'s registration is still in place.
    pub fn is_registered(&self, handle: RegionHandle) -> bool {
        self.region(handle).is_some()
    }

    fn handle_of(&self, index: u32) -> RegionHandle {
        RegionHandle::new(index, self.slots[index as usize].generation)
    }

    /// The region an STag names (index and key must both match), valid or not.
    pub fn lookup(&self, stag: Stag) -> Option<(RegionHandle, &Region)> {
        let s = self.slots.get(stag.index() as usize)?;
        let r = s.region.as_ref()?;
        (r.stag == stag).then_some((self.handle_of(stag.index()), r))
    }

    /// Local invalidation: the STag stops working at once, including for segments that arrive
    /// later out of order (DDP-91, DDP-102).
    pub fn invalidate(&mut self, stag: Stag) -> Result<RegionHandle, InvalidateFault> {
        self.epoch = fresh_epoch();
        let idx = stag.index() as usize;
        match self.slots.get_mut(idx).and_then(|s| s.region.as_mut()) {
            Some(r) if r.stag == stag && r.valid => {
                r.valid = false;
                Ok(self.handle_of(stag.index()))
            }
            _ => Err(InvalidateFault::Invalid),
        }
    }

    /// Remote invalidation (Send with Invalidate): as [`invalidate`](Self::invalidate) but the STag
    /// must belong to the receiving stream's PD and, when bound, to that stream.
    pub fn invalidate_remote(
        &mut self,
        stag: Stag,
        pd: PdId,
        stream: StreamId,
    ) -> Result<RegionHandle, InvalidateFault> {
        self.epoch = fresh_epoch();
        let (_, r) = self.lookup(stag).ok_or(InvalidateFault::Invalid)?;
        if !r.valid {
            return Err(InvalidateFault::Invalid);
        }
        if r.spec.pd != pd || r.spec.stream.is_some_and(|s| s != stream) {
            return Err(InvalidateFault::NotAssociated);
        }
        self.invalidate(stag)
    }

    /// Make an invalidated (or valid) region valid again under a fresh key; the old STag stays dead.
    pub fn revalidate(&mut self, handle: RegionHandle) -> Option<Stag> {
        self.epoch = fresh_epoch();
        let old = self.region(handle)?.stag.key();
        let key = self.fresh_key(Some(old));
        let slot = self.slot_mut(handle)?;
        slot.last_key = Some(key);
        let r = slot.region.as_mut()?;
        r.stag = Stag::new(handle.index(), key);
        r.valid = true;
        Some(r.stag)
    }

    /// Validate a remote tagged access of `len > 0` octets at `to` (-06 §7.1 tagged checks, in
    /// this order: STag, association, access, wrap, then bounds).
    pub fn check_remote(
        &self,
        stag: Stag,
        to: u64,
        len: u64,
        need: Access,
        pd: PdId,
        stream: StreamId,
    ) -> Result<RegionRange, TaggedFault> {
        self.remote_window(stag, need, pd, stream)?.range(to, len)
    }

    /// The checks of [`check_remote`](Self::check_remote) that do not depend on the TO and
    /// length (STag, association, access), and the window they leave.
    pub fn remote_window(
        &self,
        stag: Stag,
        need: Access,
        pd: PdId,
        stream: StreamId,
    ) -> Result<RemoteWindow, TaggedFault> {
        // #1/#2: the STag exists, its key matches and it has not been invalidated.
        let (handle, r) = self
            .lookup(stag)
            .ok_or(TaggedFault::Ddp(DdpError::InvalidStag))?;
        if !r.valid {
            return Err(TaggedFault::Ddp(DdpError::InvalidStag));
        }
        // §8.2: PD and stream association (DDP-86, DDP-87).
        if r.spec.pd != pd || r.spec.stream.is_some_and(|s| s != stream) {
            return Err(TaggedFault::Ddp(DdpError::StagNotAssociated));
        }
        if !r.spec.access.contains(need) {
            return Err(TaggedFault::AccessRights);
        }
        let base = r.spec.base_to;
        Ok(RemoteWindow {
            region: handle,
            base,
            limit: base.saturating_add(r.spec.len),
        })
    }

    /// Validate a local use of `offset..offset+len` of a region with the given right.
    /// Local reads need no right; pass `Access::default()`.
    pub fn check_local(
        &self,
        handle: RegionHandle,
        offset: u64,
        len: u64,
        need: Access,
    ) -> Result<&Region, LocalFault> {
        let r = self.region(handle).ok_or(LocalFault::InvalidRegion)?;
        if !r.valid {
            return Err(LocalFault::InvalidRegion);
        }
        if offset.checked_add(len).is_none_or(|end| end > r.spec.len) {
            return Err(LocalFault::Bounds);
        }
        if !r.spec.access.contains(need) {
            return Err(LocalFault::Access);
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(base_to: u64, len: u64, access: Access) -> RegionSpec {
        RegionSpec {
            base_to,
            len,
            access,
            pd: PdId(1),
            stream: None,
        }
    }

    #[test]
    fn keys_depend_on_seed_and_zero_index_unused() {
        let mut a = StagTable::new(1);
        let mut b = StagTable::new(2);
        let ka: Vec<u8> = (0..16)
            .map(|_| a.register(spec(0, 8, Access::ALL)).unwrap().1.key())
            .collect();
        let kb: Vec<u8> = (0..16)
            .map(|_| b.register(spec(0, 8, Access::ALL)).unwrap().1.key())
            .collect();
        assert_ne!(ka, kb);
        let mut c = StagTable::new(1);
        let kc: Vec<u8> = (0..16)
            .map(|_| c.register(spec(0, 8, Access::ALL)).unwrap().1.key())
            .collect();
        assert_eq!(ka, kc, "same seed, same keys (determinism in tests)");
        assert!(c.lookup(Stag(0)).is_none());
    }

    /// Keys spread over the 8-bit space across slots, and eight seeds give eight different
    /// key sequences (SipHash-2-4 over a counter, keyed with the seed).
    #[test]
    fn keys_differ_across_seeds_and_slots() {
        let keys = |seed: u64| -> Vec<u8> {
            let mut t = StagTable::new(seed);
            (0..64)
                .map(|_| t.register(spec(0, 8, Access::ALL)).unwrap().1.key())
                .collect()
        };
        let mut seen = std::collections::BTreeSet::new();
        for seed in [0, 1, 2, 3, u64::MAX, 1 << 32, 0xdead_beef, 42] {
            let k = keys(seed);
            let distinct: std::collections::BTreeSet<u8> = k.iter().copied().collect();
            assert!(
                distinct.len() >= 32,
                "seed {seed}: {} distinct keys",
                distinct.len()
            );
            assert!(seen.insert(k), "seed {seed} repeats another seed's keys");
        }
    }

    /// DDP-90: [base, base+len) exactly: base+len-1 is legal, base+len is not.
    #[test]
    fn ddp_90_exact_range() {
        let mut t = StagTable::new(0);
        let (h, s) = t.register(spec(1000, 100, Access::REMOTE_WRITE)).unwrap();
        let ok = t
            .check_remote(s, 1099, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0))
            .unwrap();
        assert_eq!(
            ok,
            RegionRange {
                region: h,
                offset: 99,
                len: 1
            }
        );
        assert_eq!(
            t.check_remote(s, 1100, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0)),
            Err(TaggedFault::Ddp(DdpError::BaseBounds))
        );
        assert_eq!(
            t.check_remote(s, 999, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0)),
            Err(TaggedFault::Ddp(DdpError::BaseBounds))
        );
        assert_eq!(
            t.check_remote(s, 1050, 51, Access::REMOTE_WRITE, PdId(1), StreamId(0)),
            Err(TaggedFault::Ddp(DdpError::BaseBounds))
        );
    }

    /// DDP-79e: TO + len wrapping 2^64 (exactly 2^64 included) is 0x1/0x03.
    #[test]
    fn ddp_79e_to_wrap() {
        let mut t = StagTable::new(0);
        let (_, s) = t
            .register(spec(u64::MAX - 100, 101, Access::REMOTE_WRITE))
            .unwrap();
        let w = t.check_remote(
            s,
            u64::MAX - 15,
            16,
            Access::REMOTE_WRITE,
            PdId(1),
            StreamId(0),
        );
        assert_eq!(w, Err(TaggedFault::Ddp(DdpError::ToWrap)));
        let w = t.check_remote(
            s,
            0xFFFF_FFFF_FFFF_FFF0,
            32,
            Access::REMOTE_WRITE,
            PdId(1),
            StreamId(0),
        );
        assert_eq!(w, Err(TaggedFault::Ddp(DdpError::ToWrap)));
    }

    /// DDP-86, DDP-87: PD and stream association.
    #[test]
    fn ddp_86_87_association() {
        let mut t = StagTable::new(0);
        let (_, s) = t.register(spec(0, 10, Access::REMOTE_WRITE)).unwrap();
        let e = t.check_remote(s, 0, 1, Access::REMOTE_WRITE, PdId(2), StreamId(0));
        assert_eq!(e, Err(TaggedFault::Ddp(DdpError::StagNotAssociated)));
        let (_, s2) = t
            .register(RegionSpec {
                stream: Some(StreamId(5)),
                ..spec(0, 10, Access::REMOTE_WRITE)
            })
            .unwrap();
        assert!(t
            .check_remote(s2, 0, 1, Access::REMOTE_WRITE, PdId(1), StreamId(5))
            .is_ok());
        let e = t.check_remote(s2, 0, 1, Access::REMOTE_WRITE, PdId(1), StreamId(6));
        assert_eq!(e, Err(TaggedFault::Ddp(DdpError::StagNotAssociated)));
    }

    /// DDP-91, DDP-102: revoke, then 0x1/0x00; re-validation gives a new key and the old STag stays dead.
    #[test]
    fn ddp_91_invalidate_and_revalidate() {
        let mut t = StagTable::new(0);
        let (h, s) = t.register(spec(0, 10, Access::REMOTE_WRITE)).unwrap();
        t.invalidate(s).unwrap();
        let e = t.check_remote(s, 0, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0));
        assert_eq!(e, Err(TaggedFault::Ddp(DdpError::InvalidStag)));
        assert_eq!(t.invalidate(s), Err(InvalidateFault::Invalid));
        let s2 = t.revalidate(h).unwrap();
        assert_ne!(s, s2);
        assert_eq!(s.index(), s2.index());
        assert!(t
            .check_remote(s2, 0, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0))
            .is_ok());
        let e = t.check_remote(s, 0, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0));
        assert_eq!(e, Err(TaggedFault::Ddp(DdpError::InvalidStag)));
    }

    /// DDP-101: a read-only STag refuses a remote write with an RDMAP access error.
    #[test]
    fn ddp_101_access_rights() {
        let mut t = StagTable::new(0);
        let (_, s) = t.register(spec(0, 10, Access::REMOTE_READ)).unwrap();
        let e = t.check_remote(s, 0, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0));
        assert_eq!(e, Err(TaggedFault::AccessRights));
        assert!(t
            .check_remote(s, 0, 1, Access::REMOTE_READ, PdId(1), StreamId(0))
            .is_ok());
    }

    #[test]
    fn remote_invalidate_checks_association() {
        let mut t = StagTable::new(0);
        let (_, s) = t.register(spec(0, 10, Access::REMOTE_WRITE)).unwrap();
        assert_eq!(
            t.invalidate_remote(s, PdId(9), StreamId(0)),
            Err(InvalidateFault::NotAssociated)
        );
        assert!(t.invalidate_remote(s, PdId(1), StreamId(0)).is_ok());
        assert_eq!(
            t.invalidate_remote(s, PdId(1), StreamId(0)),
            Err(InvalidateFault::Invalid)
        );
    }

    /// Slots are reused oldest-free first, under a new generation and a key other than the
    /// slot's last: the old handle and the old STag reach nothing, the new ones work.
    #[test]
    fn a_reused_slot_refuses_the_old_handle_and_the_old_stag() {
        let mut t = StagTable::new(3);
        let (a, sa) = t.register(spec(0, 10, Access::ALL)).unwrap();
        let (b, _) = t.register(spec(0, 10, Access::ALL)).unwrap();
        t.deregister(a).unwrap();
        t.deregister(b).unwrap();
        assert!(t.deregister(a).is_none(), "twice: nothing");
        let (c, sc) = t.register(spec(0, 20, Access::ALL)).unwrap();
        assert_eq!(c.index(), a.index(), "the longest free slot first");
        assert_ne!(c.generation(), a.generation());
        assert_ne!(sc.key(), sa.key(), "another key than the slot's last");
        assert!(t.region(a).is_none() && !t.is_registered(a));
        assert!(t.is_registered(c));
        assert_eq!(
            t.check_local(a, 0, 1, Access::default()),
            Err(LocalFault::InvalidRegion)
        );
        assert!(t.deregister(a).is_none(), "a stale handle removes nothing");
        assert!(t.is_registered(c));
        assert!(t.lookup(sa).is_none());
        assert_eq!(t.lookup(sc).map(|(h, _)| h), Some(c));
        assert!(t.revalidate(a).is_none());
        let (d, _) = t.register(spec(0, 10, Access::ALL)).unwrap();
        assert_eq!(d.index(), b.index());
    }

    /// Every mutating call moves the epoch to a value no table had before; reads keep it.
    #[test]
    fn every_mutation_gives_a_fresh_epoch() {
        let mut t = StagTable::new(0);
        let other = StagTable::new(0);
        let mut seen = vec![other.epoch(), t.epoch()];
        let fresh = |t: &StagTable, seen: &mut Vec<u64>| {
            assert!(!seen.contains(&t.epoch()), "a fresh epoch");
            seen.push(t.epoch());
        };
        let (h, s) = t.register(spec(0, 10, Access::ALL)).unwrap();
        fresh(&t, &mut seen);
        let _ = t.check_remote(s, 0, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0));
        let _ = (
            t.lookup(s),
            t.region(h),
            t.check_local(h, 0, 1, Access::default()),
        );
        assert_eq!(Some(&t.epoch()), seen.last(), "reads keep it");
        t.invalidate(s).unwrap();
        fresh(&t, &mut seen);
        let s = t.revalidate(h).unwrap();
        fresh(&t, &mut seen);
        t.invalidate_remote(s, PdId(1), StreamId(0)).unwrap();
        fresh(&t, &mut seen);
        t.deregister(h).unwrap();
        fresh(&t, &mut seen);
        assert_ne!(t.epoch(), 0);
    }

    #[test]
    fn wrong_key_is_invalid() {
        let mut t = StagTable::new(0);
        let (_, s) = t.register(spec(0, 10, Access::ALL)).unwrap();
        let forged = Stag::new(s.index(), s.key().wrapping_add(1));
        let e = t.check_remote(forged, 0, 1, Access::REMOTE_WRITE, PdId(1), StreamId(0));
        assert_eq!(e, Err(TaggedFault::Ddp(DdpError::InvalidStag)));
    }
}
