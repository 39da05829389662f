//! The wire oracle for live captures of one iWARP connection: what Wireshark's MPA and
//! DDP/RDMAP dissectors must find in them.

use std::collections::BTreeSet;
use std::path::Path;

use crate::tshark::Tshark;

/// tshark over a live iWARP capture: MPA heuristics first, and the RPC-over-RDMA heuristic off
/// (these captures carry no RPC).
pub fn iwarp_tshark(path: &Path) -> Tshark {
    Tshark::read(path).disable_heuristic("rpcrdma_iwarp")
}

/// One captured TCP segment as the dissectors saw it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Sent from the listening port (the port the capture is about).
    pub from_listener: bool,
    /// TCP relative sequence number.
    pub seq: u64,
    /// TCP payload length.
    pub len: u64,
    /// Wireshark marked it a retransmission (and does not dissect it again).
    pub retransmission: bool,
    /// Holds an MPA Request.
    pub request: bool,
    /// Holds an MPA Reply.
    pub reply: bool,
    /// FPDUs the MPA dissector found in the segment.
    pub fpdus: usize,
    /// Holds MPA markers.
    pub markers: bool,
    /// RDMAP opcodes (as tshark prints them, e.g. "0x03").
    pub opcodes: Vec<String>,
    /// Flagged malformed.
    pub malformed: bool,
    /// Highest expert-info severity (0x00800000 = error), 0 when none.
    pub severity: u32,
}

const SEEN_FIELDS: [&str; 11] = [
    "tcp.srcport",
    "tcp.seq",
    "tcp.len",
    "tcp.analysis.retransmission",
    "iwarp_mpa.req",
    "iwarp_mpa.rep",
    "iwarp_mpa.fpdu",
    "iwarp_mpa.markers",
    "iwarp_rdma.opcode",
    "_ws.malformed",
    "_ws.expert.severity",
];

/// Every segment of the connection on TCP port `port` in `path`, in one tshark pass
/// (`-T fields`: FT_NONE fields print "1" when present, repeated fields are comma-separated).
pub fn dissect(path: &Path, port: u16) -> Vec<Seen> {
    let list = |f: &str| -> Vec<String> {
        f.split(',')
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    };
    let num = |x: &str| {
        x.strip_prefix("0x")
            .map_or_else(|| x.parse().ok(), |h| u32::from_str_radix(h, 16).ok())
            .unwrap_or(0)
    };
    iwarp_tshark(path)
        .fields(&format!("tcp.port == {port}"), &SEEN_FIELDS)
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let get = |i: usize| f.get(i).copied().unwrap_or("");
            Seen {
                from_listener: get(0) == port.to_string(),
                seq: get(1).parse().unwrap_or(0),
                len: get(2).parse().unwrap_or(0),
                retransmission: !get(3).is_empty(),
                request: !get(4).is_empty(),
                reply: !get(5).is_empty(),
                fpdus: list(get(6)).len(),
                markers: !get(7).is_empty(),
                opcodes: list(get(8)),
                malformed: !get(9).is_empty(),
                severity: list(get(10)).iter().map(|x| num(x)).max().unwrap_or(0),
            }
        })
        .collect()
}

/// The segments with payload, retransmissions left out.
pub fn payload(seen: &[Seen]) -> Vec<&Seen> {
    seen.iter()
        .filter(|s| s.len > 0 && !s.retransmission)
        .collect()
}

/// Where a segment ends exactly on an MPA marker position (a multiple of 512 counted from
/// SeqStart, the first octet after that direction's startup frame, MPA-34), as
/// (from_listener, stream offset). One FPDU per segment is assumed; the first payload segment
/// of each direction is its startup frame. tshark 4.0 loses the stream after such an FPDU
/// (design brief, "Wire oracle").
pub fn fpdu_ends_on_markers(seen: &[Seen]) -> Vec<(bool, u64)> {
    let payload = payload(seen);
    let mut hits = Vec::new();
    for side in [false, true] {
        let mut dir = payload.iter().filter(|s| s.from_listener == side);
        if let Some(first) = dir.next() {
            let start = first.seq + first.len;
            hits.extend(
                dir.map(|s| s.seq + s.len - start)
                    .filter(|end| end % 512 == 0)
                    .map(|end| (side, end)),
            );
        }
    }
    hits
}

/// What a capture of one connection must show.
#[derive(Debug, Clone, Copy)]
pub struct Expect<'a> {
    /// Markers negotiated on.
    pub markers: bool,
    /// CRC negotiated on.
    pub crc: bool,
    /// More FPDUs than this must be decoded (so the run was not trivially short).
    pub min_fpdus: usize,
    /// The exact set of RDMAP opcodes the connecting side sent.
    pub connecting_ops: &'a [&'a str],
    /// The exact set of RDMAP opcodes the listening side sent.
    pub listening_ops: &'a [&'a str],
}

/// Checks the capture at `path` of the connection whose listener has TCP port `port`: no FPDU
/// ends on a marker position when markers are on (tshark could not follow it); MPA Request and
/// Reply decode once each (MPA-77, MPA-81); Wireshark follows every FPDU, exactly one per
/// payload segment after the two startup frames (MPA-57); no "Bad CRC32", and with CRC every
/// FPDU shows "Good CRC32" (MPA-51); markers decode when on and are absent when off (MPA-32);
/// the RDMAP opcodes per direction are exactly those expected; nothing malformed, no
/// error-level expert info. Panics naming `test` and the capture's path on the first failure
/// (the file is then kept); on success removes the file unless `XW_KEEP` is set. Returns the
/// number of FPDUs decoded.
pub fn check_decode(test: &str, path: &Path, port: u16, expect: &Expect<'_>) -> usize {
    let keep = format!("(capture kept at {})", path.display());
    let seen = dissect(path, port);
    let payload = payload(&seen);
    let on_marker = fpdu_ends_on_markers(&seen);
    assert!(
        !expect.markers || on_marker.is_empty(),
        "{test}: FPDUs end on marker positions {on_marker:?}; tshark cannot follow those {keep}"
    );
    let count = |f: fn(&Seen) -> bool| seen.iter().filter(|s| f(s)).count();
    assert_eq!(count(|s| s.request), 1, "{test}: MPA Request {keep}");
    assert_eq!(count(|s| s.reply), 1, "{test}: MPA Reply {keep}");
    let fpdus: usize = seen.iter().map(|s| s.fpdus).sum();
    assert!(
        fpdus > expect.min_fpdus,
        "{test}: only {fpdus} FPDUs decoded {keep}"
    );
    assert_eq!(
        fpdus,
        payload.len() - 2,
        "{test}: tshark lost the MPA stream {keep}"
    );
    assert!(
        payload.iter().skip(2).all(|s| s.fpdus == 1),
        "{test}: a segment without exactly one FPDU {keep}"
    );
    let verbose = iwarp_tshark(path).verbose(&format!("tcp.port == {port} && iwarp_mpa.fpdu"));
    assert_eq!(
        verbose.matches("Bad CRC32").count(),
        0,
        "{test}: Bad CRC32 {keep}"
    );
    if expect.crc {
        assert_eq!(
            verbose.matches("Good CRC32").count(),
            fpdus,
            "{test}: not every FPDU shows Good CRC32 {keep}"
        );
    }
    let with_markers = count(|s| s.markers);
    assert_eq!(
        with_markers > 0,
        expect.markers,
        "{test}: {with_markers} FPDUs with markers {keep}"
    );
    let opcodes = |from_listener: bool| -> BTreeSet<String> {
        seen.iter()
            .filter(|s| s.from_listener == from_listener)
            .flat_map(|s| s.opcodes.iter().cloned())
            .collect()
    };
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        opcodes(false),
        set(expect.connecting_ops),
        "{test}: connecting side's opcodes {keep}"
    );
    assert_eq!(
        opcodes(true),
        set(expect.listening_ops),
        "{test}: listening side's opcodes {keep}"
    );
    assert_eq!(
        count(|s| s.malformed),
        0,
        "{test}: malformed packets {keep}"
    );
    assert_eq!(
        count(|s| s.severity >= 0x0080_0000),
        0,
        "{test}: error-level expert info {keep}"
    );
    if std::env::var_os("XW_KEEP").is_none() {
        let _ = std::fs::remove_file(path);
    }
    fpdus
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(from_listener: bool, seq: u64, len: u64) -> Seen {
        Seen {
            from_listener,
            seq,
            len,
            ..Seen::default()
        }
    }

    #[test]
    fn marker_positions_count_from_each_directions_seq_start() {
        // Client: startup frame 1..21, then FPDUs ending at 512 and 700 past SeqStart 21.
        // Server: startup frame 1..25, then one ending at 1024; a retransmission and an ACK are
        // ignored.
        let mut re = seg(true, 25, 512);
        re.retransmission = true;
        let seen = [
            seg(false, 1, 20),
            seg(true, 1, 24),
            seg(false, 21, 512),
            seg(false, 533, 188),
            seg(true, 25, 1024),
            re,
            seg(true, 1049, 0),
        ];
        assert_eq!(
            fpdu_ends_on_markers(&seen),
            vec![(false, 512), (true, 1024)]
        );
    }
}
