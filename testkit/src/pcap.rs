//! Classic pcap files (microsecond timestamps, little-endian, Ethernet link type).

/// Snapshot length written in the global header.
pub const SNAPLEN: u32 = 262_144;
/// Seconds part of the first frame's timestamp.
pub const FIRST_SECOND: u32 = 1_700_000_000;
/// Microseconds between consecutive frames.
pub const FRAME_GAP_US: u32 = 10;

/// A pcap file holding `frames` (whole Ethernet frames, each under [`SNAPLEN`] octets), frame
/// `i` stamped [`FIRST_SECOND`] s + `i` x [`FRAME_GAP_US`] µs. The 24-octet global header says
/// version 2.4, time zone 0, snapshot length [`SNAPLEN`], link type 1 (Ethernet); every record
/// header gives the frame's full length as both captured and original length.
pub fn pcap_file<F: AsRef<[u8]>>(frames: impl IntoIterator<Item = F>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    for w in [0u32, 0, SNAPLEN, 1] {
        out.extend_from_slice(&w.to_le_bytes());
    }
    for (i, f) in frames.into_iter().enumerate() {
        let f = f.as_ref();
        let len = f.len() as u32;
        for w in [FIRST_SECOND, i as u32 * FRAME_GAP_US, len, len] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::pcap_file;

    #[test]
    fn global_header_bytes() {
        let out = pcap_file(Vec::<Vec<u8>>::new());
        assert_eq!(
            out,
            [
                0xd4, 0xc3, 0xb2, 0xa1, // magic, little-endian, microseconds
                2, 0, 4, 0, // version 2.4
                0, 0, 0, 0, // thiszone
                0, 0, 0, 0, // sigfigs
                0, 0, 4, 0, // snaplen 262144
                1, 0, 0, 0, // LINKTYPE_ETHERNET
            ]
        );
    }

    #[test]
    fn records_follow_with_lengths_and_timestamps() {
        let frames = [vec![0xaa; 3], vec![0xbb; 60]];
        let out = pcap_file(&frames);
        assert_eq!(out.len(), 24 + 16 + 3 + 16 + 60);
        let word = |at: usize| u32::from_le_bytes(out[at..at + 4].try_into().unwrap());
        assert_eq!(
            [word(24), word(28), word(32), word(36)],
            [1_700_000_000, 0, 3, 3]
        );
        assert_eq!(&out[40..43], &[0xaa; 3]);
        let second = 43;
        assert_eq!(
            [
                word(second),
                word(second + 4),
                word(second + 8),
                word(second + 12)
            ],
            [1_700_000_000, 10, 60, 60]
        );
        assert_eq!(&out[second + 16..], &[0xbb; 60][..]);
    }
}
