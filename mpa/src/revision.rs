//! MPA revisions and the set a peer accepts.
//!
//! - Rev 0: draft-ietf-rddp-mpa-01 (strict draft mode only).
//! - Rev 1: RFC 5044.
//! - Rev 2: RFC 6581 (enhanced connection establishment: IRD/ORD, peer-to-peer mode).
//!
//! A Responder answers a Request whose revision it accepts with a Reply of the same revision;
//! one it does not accept closes TCP (RFC 5044 §7.1.1, MPA-102). RFC 6581 §8: an Initiator whose
//! Rev 2 Request meets an RFC 5044 Responder sees TCP close, and may retry with Rev 1
//! ([`crate::StartupConfig::rev1_fallback`]); a Rev 1 Reply to a Rev 2 Request is a Responder
//! that chose Rev 1.

/// Revision of draft-ietf-rddp-mpa-01.
pub const REVISION_DRAFT: u8 = 0;
/// Revision of RFC 5044.
pub const REVISION_RFC5044: u8 = 1;
/// Revision of RFC 6581.
pub const REVISION_ENHANCED: u8 = 2;

/// A set of MPA revisions (0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Revisions(u8);

impl Revisions {
    /// Rev 1 and Rev 2: what RFC 5044 and RFC 6581 peers (Linux siw, Chelsio) send.
    pub const RFC: Revisions = Revisions(0b110);
    /// Nothing.
    pub const NONE: Revisions = Revisions(0);

    /// The set holding `rev` only (empty for a revision above 2).
    pub fn only(rev: u8) -> Self {
        Revisions::NONE.with(rev)
    }

    /// The set with `rev` added (unchanged for a revision above 2).
    pub fn with(self, rev: u8) -> Self {
        match rev {
            0..=2 => Revisions(self.0 | 1 << rev),
            _ => self,
        }
    }

    /// Whether `rev` is in the set.
    pub fn contains(self, rev: u8) -> bool {
        rev <= REVISION_ENHANCED && self.0 & (1 << rev) != 0
    }

    /// The revisions of the set not above `rev`.
    pub fn up_to(self, rev: u8) -> Self {
        let keep = if rev >= REVISION_ENHANCED {
            0b111
        } else {
            (1u8 << (rev + 1)) - 1
        };
        Revisions(self.0 & keep)
    }
}

impl Default for Revisions {
    fn default() -> Self {
        Revisions::RFC
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets() {
        assert!(Revisions::RFC.contains(1) && Revisions::RFC.contains(2));
        assert!(!Revisions::RFC.contains(0) && !Revisions::RFC.contains(3));
        assert_eq!(Revisions::only(7), Revisions::NONE);
        assert_eq!(Revisions::RFC.up_to(1), Revisions::only(1));
        assert_eq!(Revisions::RFC.up_to(0), Revisions::NONE);
        assert_eq!(Revisions::RFC.up_to(2), Revisions::RFC);
        assert_eq!(Revisions::only(0).with(2), Revisions(0b101));
    }
}
