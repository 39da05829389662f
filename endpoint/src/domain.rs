//! Protection domains the caller owns. A connection placed in a domain reaches only that
//! domain's regions: its STag table checks PD, rights, bounds and wrap on every tagged access,
//! and its memory holds the bytes. The endpoint locks a domain once per received frame and once
//! per connection round (lock order: endpoint, then domain); the lock is a guard type of the
//! caller's, so locking allocates nothing.

use ddp::{Memory, PdId, StagTable};

/// A protection domain as a connection holds it (cheap to clone: a shared handle).
pub trait Domain: Clone {
    /// The lock on the domain's table and memory, held for a round.
    type Guard<'a>: DomainGuard
    where
        Self: 'a;

    /// The domain's id (RDMAP checks tagged accesses against it).
    fn id(&self) -> PdId;

    /// Locks the table and the memory together.
    fn lock(&self) -> Self::Guard<'_>;
}

/// A locked domain.
pub trait DomainGuard {
    /// The STag table and the memory behind its regions.
    fn parts(&mut self) -> (&mut StagTable, &mut dyn Memory);
}

/// No caller-owned domains: every connection uses the endpoint's own table and memory
/// ([`crate::Endpoint::register`]). Uninhabited.
#[derive(Clone, Copy, Debug)]
pub enum NoDomain {}

impl Domain for NoDomain {
    type Guard<'a> = NoDomain;

    fn id(&self) -> PdId {
        match *self {}
    }

    fn lock(&self) -> NoDomain {
        match *self {}
    }
}

impl DomainGuard for NoDomain {
    fn parts(&mut self) -> (&mut StagTable, &mut dyn Memory) {
        match *self {}
    }
}
