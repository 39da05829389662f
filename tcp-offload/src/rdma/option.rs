//! The TCP RDMA option (draft-csapuntz-tcprdma-00 §3.1): a checked
//! decode of the option's octets and the emit side, one [`RdmaOption`] value per form.
//!
//! Wire layout (kind 25, big-endian fields):
//!
//! ```text
//!  0: kind 25 | length (2, 4, 16, 20) | A U RID[45:40] | RID[39:32]
//!  4: RID[31:0]
//!  8: buffer offset
//! 12: data offset (16) | data length (16)
//! 16: total RDMA length (length 20 only)
//! ```

/// The option kind of the draft (TCPRDMA-01). IANA lists 25 as unassigned (released 2000); a
/// peer that does not negotiate the option may still send kind 25 for something else, so a
/// connection acts on it only after the handshake agreed (TCPRDMA-14).
pub const KIND: u8 = 25;
/// Largest valid RDMA ID plus one: the RID is 46 bits (TCPRDMA-03).
pub const RID_LIMIT: u64 = 1 << 46;
/// Length of the negotiation form (§3.2).
pub const LEN_NEGOTIATE: u8 = 2;
/// Length of the A-only form (§3.1.6).
pub const LEN_ALIGNED: u8 = 4;
/// Length of the form without the total (§3.1.4: total unknown).
pub const LEN_NO_TOTAL: u8 = 16;
/// Length of the full form.
pub const LEN_FULL: u8 = 20;

const A_BIT: u8 = 0x80;
const U_BIT: u8 = 0x40;
const RID_HIGH_MASK: u8 = 0x3F;

/// An option as it goes into a TCP header ([`RdmaOption::encoded`]): its octets with NOPs after
/// them, and how many of the 20 that is (the option's padded length).
pub type EncodedOption = ([u8; LEN_FULL as usize], usize);

/// The option `e` encodes ([`RdmaOption::encoded`] undone), `None` when it is empty.
pub fn decode_encoded(e: &EncodedOption) -> Option<RdmaOption> {
    let len = usize::from(*e.0.get(1)?);
    let raw = e.0.get(..len).filter(|_| e.1 > 0)?;
    RdmaOption::parse(raw, 0).ok()
}

/// One annotated run: which transfer, where its bytes go and where they sit in the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RdmaAnnotation {
    /// A: payload byte 0 starts an application message (§3.1.6, TCPRDMA-09).
    pub aligned: bool,
    /// U: the receiver did not solicit this transfer (§3.1.7, TCPRDMA-10).
    pub unsolicited: bool,
    /// RDMA ID, below [`RID_LIMIT`] (§3.1.1).
    pub rid: u64,
    /// Offset of the run in the receiver's buffer (§3.1.5).
    pub buffer_offset: u32,
    /// Octets from the payload start to the run (§3.1.2, TCPRDMA-04).
    pub data_offset: u16,
    /// Octets of the run (§3.1.3, TCPRDMA-05); 0 is valid.
    pub data_len: u16,
    /// Total RDMA length when known (§3.1.4, TCPRDMA-06/07): `Some` selects the 20-octet form.
    pub total: Option<u32>,
}

impl RdmaAnnotation {
    /// The fields of a 16- or 20-octet option whose first 16 octets (kind and length
    /// included) are `raw`, its total `total` (read by the caller from octets 16..20, or none).
    #[inline]
    pub fn read(raw: &[u8; 16], total: Option<u32>) -> Self {
        // TCPRDMA-03: RID[45:40] in byte 2 bits 5..0, RID[39:32] in byte 3, RID[31:0] in 4..8.
        let rid = (u64::from(raw[2] & RID_HIGH_MASK) << 40)
            | (u64::from(raw[3]) << 32)
            | u64::from(be32(raw, 4));
        RdmaAnnotation {
            aligned: raw[2] & A_BIT != 0,
            unsolicited: raw[2] & U_BIT != 0,
            rid,
            buffer_offset: be32(raw, 8),
            data_offset: u16::from_be_bytes([raw[12], raw[13]]),
            data_len: u16::from_be_bytes([raw[14], raw[15]]),
            total,
        }
    }

    /// True when the run lies inside a payload of `payload_len` octets (TCPRDMA-04/05).
    #[inline]
    pub fn fits_payload(&self, payload_len: usize) -> bool {
        usize::from(self.data_offset) + usize::from(self.data_len) <= payload_len
    }
}

fn be32(raw: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(crate::wire::octets(raw, i..i + 4))
}

/// A decoded RDMA option, one variant per length (TCPRDMA-01).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RdmaOption {
    /// Length 2: offered in SYN and SYN-ACK only; never causes a transfer (§3.2, TCPRDMA-14).
    Negotiate,
    /// Length 4: the A bit alone (§3.1.6). U and the RID bits are sent as 0 and ignored.
    Aligned {
        /// A.
        aligned: bool,
    },
    /// Length 16 (`total: None`) or 20: a run of transfer bytes.
    Transfer(RdmaAnnotation),
}

/// Why the first RDMA option of a segment is ignored (the segment then counts as unannotated:
/// never a reset; the connection counts it in `TcpCounters::rdma_options_ignored`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmaOptionError {
    /// A length other than 2, 4, 16 or 20 (TCPRDMA-01).
    BadLength,
    /// A form with fields that does not start on a 4-octet boundary of the TCP header (§3.1.8,
    /// TCPRDMA-12).
    Misaligned,
    /// The run reaches past the payload (TCPRDMA-04/05; checked against the segment).
    PastSegmentEnd,
}

impl RdmaOption {
    /// Encoded length of the option itself (without alignment padding).
    pub fn len(&self) -> usize {
        usize::from(match self {
            RdmaOption::Negotiate => LEN_NEGOTIATE,
            RdmaOption::Aligned { .. } => LEN_ALIGNED,
            RdmaOption::Transfer(t) if t.total.is_some() => LEN_FULL,
            RdmaOption::Transfer(_) => LEN_NO_TOTAL,
        })
    }

    /// Never empty (kind and length are always there); for clippy's `len` convention.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Octets this option takes in our option layout, where it starts 4-aligned (§3.1.8): the
    /// negotiation form is followed by two NOPs so that everything after it stays 4-aligned;
    /// the other forms are multiples of 4.
    pub fn padded_len(&self) -> usize {
        self.len().next_multiple_of(4)
    }

    /// The A bit, if this form carries it.
    pub fn aligned(&self) -> bool {
        match self {
            RdmaOption::Negotiate => false,
            RdmaOption::Aligned { aligned } => *aligned,
            RdmaOption::Transfer(t) => t.aligned,
        }
    }

    /// Decodes one option: `raw` is the whole option (kind, length, body) and `at` its offset in
    /// the TCP option area (20 octets into the header, so alignment is `at % 4`). The caller
    /// has checked that `raw[1] as usize == raw.len()`.
    pub fn parse(raw: &[u8], at: usize) -> Result<Self, RdmaOptionError> {
        let len = raw.len();
        if len == usize::from(LEN_NEGOTIATE) {
            return Ok(RdmaOption::Negotiate);
        }
        if ![LEN_ALIGNED, LEN_NO_TOTAL, LEN_FULL]
            .iter()
            .any(|&l| usize::from(l) == len)
        {
            return Err(RdmaOptionError::BadLength);
        }
        // §3.1.8: the sender MUST align the option; a misaligned one was not built by a
        // conforming sender (or was moved by a middlebox): do not trust its fields.
        if !at.is_multiple_of(4) {
            return Err(RdmaOptionError::Misaligned);
        }
        let aligned = raw[2] & A_BIT != 0;
        if len == usize::from(LEN_ALIGNED) {
            return Ok(RdmaOption::Aligned { aligned });
        }
        let total = (len == usize::from(LEN_FULL)).then(|| be32(raw, 16));
        let fields = raw.first_chunk::<16>().ok_or(RdmaOptionError::BadLength)?;
        Ok(RdmaOption::Transfer(RdmaAnnotation::read(fields, total)))
    }

    /// Writes the option into `out`, which is exactly [`Self::len`] long. RID bits above 45 are
    /// dropped (the API refuses such RIDs before they get here).
    pub fn emit(&self, out: &mut [u8]) {
        let (bytes, _) = self.encoded();
        out.copy_from_slice(&bytes[..self.len()]);
    }

    /// The option as it goes into a TCP header: its octets, NOPs after them up to
    /// [`Self::padded_len`], which is returned with them (a fixed-size write, no bounds to check).
    #[inline]
    pub fn encoded(&self) -> EncodedOption {
        let nops = u32::from_ne_bytes([crate::wire::field::opt::NOP; 4]);
        // Five words as they lie in the header: kind, length and the octets 2..4; the fields.
        let word = |v: u32| u32::from_ne_bytes(v.to_be_bytes());
        let (len, w) = match self {
            RdmaOption::Negotiate => (LEN_NEGOTIATE, [0, nops, nops, nops, nops]),
            RdmaOption::Aligned { aligned } => (
                LEN_ALIGNED,
                [
                    word(u32::from(if *aligned { A_BIT } else { 0 }) << 8),
                    nops,
                    nops,
                    nops,
                    nops,
                ],
            ),
            RdmaOption::Transfer(t) => {
                let high = (if t.aligned { A_BIT } else { 0 })
                    | (if t.unsolicited { U_BIT } else { 0 })
                    | ((t.rid >> 40) as u8 & RID_HIGH_MASK);
                let len = if t.total.is_some() {
                    LEN_FULL
                } else {
                    LEN_NO_TOTAL
                };
                let fields = [
                    word(u32::from(high) << 8 | u32::from((t.rid >> 32) as u8)),
                    word(t.rid as u32),
                    word(t.buffer_offset),
                    word(u32::from(t.data_offset) << 16 | u32::from(t.data_len)),
                    t.total.map_or(nops, word),
                ];
                (len, fields)
            }
        };
        let mut out = [0u8; LEN_FULL as usize];
        for (o, v) in out.chunks_exact_mut(4).zip(w) {
            o.copy_from_slice(&v.to_ne_bytes());
        }
        out[0] = KIND;
        out[1] = len;
        if len == LEN_NEGOTIATE {
            // Two NOPs keep what follows 4-aligned.
            out[2] = crate::wire::field::opt::NOP;
            out[3] = crate::wire::field::opt::NOP;
        }
        (out, usize::from(len).next_multiple_of(4))
    }

    /// The encoded octets (tests and tools).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0; self.len()];
        self.emit(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    fn golden(bytes: &str, opt: RdmaOption) {
        let raw = hex(bytes);
        assert_eq!(opt.to_bytes(), raw, "emit {opt:?}");
        assert_eq!(RdmaOption::parse(&raw, 0), Ok(opt), "parse {bytes}");
    }

    fn transfer(
        a: bool,
        u: bool,
        rid: u64,
        bo: u32,
        d: (u16, u16),
        total: Option<u32>,
    ) -> RdmaOption {
        RdmaOption::Transfer(RdmaAnnotation {
            aligned: a,
            unsolicited: u,
            rid,
            buffer_offset: bo,
            data_offset: d.0,
            data_len: d.1,
            total,
        })
    }

    /// TCPRDMA-01/14: the negotiation and A-only forms, byte for byte.
    #[test]
    fn tcprdma_01_golden_negotiate_and_aligned() {
        golden("19 02", RdmaOption::Negotiate);
        // TCPRDMA-09: the decoder reads A from `19 04 80 00`.
        golden("19 04 80 00", RdmaOption::Aligned { aligned: true });
        // U and RID bits of the A-only form are ignored on receipt.
        assert_eq!(
            RdmaOption::parse(&hex("19 04 7f ff"), 0),
            Ok(RdmaOption::Aligned { aligned: false })
        );
    }

    /// TCPRDMA-01: the NFS READ reply options of segments 1 and 2 of the draft's §4 example.
    #[test]
    fn tcprdma_01_golden_nfs_read_reply_segments() {
        golden(
            "19 14 80 00 1a 2b 3c 4d 00 00 00 00 00 64 03 84 00 00 0f a0",
            transfer(true, false, 0x1A2B_3C4D, 0, (100, 900), Some(4000)),
        );
        golden(
            "19 14 00 00 1a 2b 3c 4d 00 00 03 84 00 00 03 e8 00 00 0f a0",
            transfer(false, false, 0x1A2B_3C4D, 900, (0, 1000), Some(4000)),
        );
    }

    /// TCPRDMA-01/06: 16-octet options (a CIFS write, an HTTP GET response).
    #[test]
    fn tcprdma_06_golden_sixteen_octet_forms() {
        golden(
            "19 10 40 01 be ef 00 42 00 00 20 00 00 40 05 78",
            transfer(false, true, 0x1_BEEF_0042, 0x2000, (64, 1400), None),
        );
        golden(
            "19 10 80 00 00 00 00 07 00 00 00 00 00 b4 05 00",
            transfer(true, false, 7, 0, (180, 1280), None),
        );
    }

    /// TCPRDMA-03: RID bit placement, and an NFSv4 RID (draft §5.1.1).
    #[test]
    fn tcprdma_03_rid_bytes_in_network_order() {
        let b = transfer(false, false, 0x3F01_0203_0405, 0, (0, 0), None).to_bytes();
        assert_eq!(b[2] & 0x3F, 0x3F);
        assert_eq!(b[3], 0x01);
        assert_eq!(&b[4..8], &[2, 3, 4, 5]);
        let b = transfer(true, true, 0x2_DEAD_BEEF, 0, (0, 0), None).to_bytes();
        assert_eq!(&b[2..8], &[0xC0, 0x02, 0xde, 0xad, 0xbe, 0xef]);
    }

    /// TCPRDMA-01: lengths 3, 5, 15, 17, 21 (and others) are malformed; TCPRDMA-12: the forms
    /// with fields must be 4-aligned, the negotiation form need not.
    #[test]
    fn tcprdma_01_12_bad_lengths_and_misalignment_are_errors() {
        for len in [3usize, 5, 6, 8, 12, 15, 17, 18, 19, 21, 24, 40] {
            let mut raw = vec![0u8; len];
            raw[0] = KIND;
            raw[1] = len as u8;
            assert_eq!(
                RdmaOption::parse(&raw, 0),
                Err(RdmaOptionError::BadLength),
                "{len}"
            );
        }
        let full = transfer(true, false, 9, 1, (2, 3), Some(4)).to_bytes();
        for at in [1, 2, 3, 6] {
            assert_eq!(
                RdmaOption::parse(&full, at),
                Err(RdmaOptionError::Misaligned)
            );
        }
        assert_eq!(RdmaOption::parse(&full, 12).map(|o| o.len()), Ok(20));
        assert_eq!(RdmaOption::parse(&[25, 2], 3), Ok(RdmaOption::Negotiate));
    }

    #[test]
    fn tcprdma_05_run_must_fit_the_payload() {
        let RdmaOption::Transfer(t) = transfer(false, false, 1, 0, (100, 900), None) else {
            unreachable!()
        };
        assert!(t.fits_payload(1000));
        assert!(!t.fits_payload(999));
        let zero = RdmaAnnotation {
            data_offset: 0,
            data_len: 0,
            ..t
        };
        assert!(zero.fits_payload(0), "a data length of zero is valid");
    }
}

#[cfg(test)]
pub(crate) mod proptests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn rdma_option() -> impl Strategy<Value = RdmaOption> {
        prop_oneof![
            Just(RdmaOption::Negotiate),
            any::<bool>().prop_map(|aligned| RdmaOption::Aligned { aligned }),
            (
                any::<(bool, bool)>(),
                0..RID_LIMIT,
                any::<(u32, u16, u16)>(),
                proptest::option::of(any::<u32>())
            )
                .prop_map(|((a, u), rid, (bo, d, l), total)| {
                    RdmaOption::Transfer(RdmaAnnotation {
                        aligned: a,
                        unsolicited: u,
                        rid,
                        buffer_offset: bo,
                        data_offset: d,
                        data_len: l,
                        total,
                    })
                }),
        ]
    }

    proptest! {
        /// TCPRDMA-01/03: parse(emit(x)) == x for every form and every 46-bit RID.
        #[test]
        fn tcprdma_01_parse_emit_roundtrip(o in rdma_option(), slot in 0usize..10) {
            let raw = o.to_bytes();
            prop_assert_eq!(raw.len(), o.len());
            // The header form: the option, then NOPs to its padded length.
            let (header, n) = o.encoded();
            prop_assert_eq!(n, o.padded_len());
            prop_assert_eq!(&header[..raw.len()], &raw[..]);
            prop_assert!(header[raw.len()..n].iter().all(|&b| b == crate::wire::field::opt::NOP));
            prop_assert_eq!(decode_encoded(&(header, n)), Some(o));
            prop_assert_eq!(RdmaOption::parse(&raw, slot * 4), Ok(o));
        }

        /// Any octets after kind and length decode without panicking.
        #[test]
        fn parse_never_panics(body in proptest::collection::vec(any::<u8>(), 0..40), at in 0usize..40) {
            let mut raw = vec![KIND, (body.len() + 2) as u8];
            raw.extend_from_slice(&body);
            let _ = RdmaOption::parse(&raw, at);
        }
    }
}
